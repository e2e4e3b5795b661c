"""Kafka's transaction coordinator (KIP-98, with KIP-360's epoch bumps and KIP-664's admin APIs).

Split as Kafka splits it:

* ``metadata``: one transactional id's state and its transitions (``TransactionMetadata``);
* ``transaction_log``: the ``__transaction_state`` record formats and ``partition_for``;
* ``state_manager``: the cache of transactional ids per ``__transaction_state`` partition, its
  loading and unloading with the partitions' leadership, appends to the log, timed-out
  transactions and the expiry of idle transactional ids (``TransactionStateManager``);
* ``marker_channel``: sending WriteTxnMarkers to the partition leaders and completing the
  transaction once every marker is written (``TransactionMarkerChannelManager``), over
  ``marker_sender``'s connections;
* ``coordinator``: the API logic (``TransactionCoordinator``), which the handlers in
  ``server/apis`` only translate to and from messages.
"""
