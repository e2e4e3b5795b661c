"""pybroker's benchmarks.

The stand-alone scripts (``broker_compare.py``, ``delete_records.py``, ``group_rebalance.py``,
``seqwrite.py``, ``cluster_replication.py``, ``cluster_delete_records.py``,
``cluster_failover.py``, ...) are run as files; ``python -m bench`` runs the Spark-driven load
replay (``bench/spark/``). ``bench/brokers.py`` starts and stops the brokers for both;
``bench/cluster.py`` starts a local multi-broker cluster on ZooKeeper. See ``bench/README.md``.
"""
