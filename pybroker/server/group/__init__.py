"""The group coordinator: Kafka's classic consumer-group protocol and committed offsets.

``records``           the key/value formats of ``__consumer_offsets`` and which partition owns a group
``member``            one member of a group (``MemberMetadata``)
``group_metadata``    one group: its state machine, members, protocol choice and committed offsets
``metadata_manager``  the cache of groups and its persistence in ``__consumer_offsets`` (load, store,
                      expire)
``coordinator``       the protocol: JoinGroup/SyncGroup/Heartbeat/LeaveGroup, offset commit and fetch,
                      list/describe/delete, with the delayed join and heartbeat expiry purgatories

Everything runs on the event loop thread. The coordinator may read and write group state; only the
metadata manager touches the log of ``__consumer_offsets`` (through the replica manager).
"""
