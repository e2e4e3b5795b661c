"""pybroker's benchmarks.

The stand-alone scripts (``broker_compare.py``, ``delete_records.py``, ``group_rebalance.py``,
``seqwrite.py``) are run as files; ``python -m bench`` runs the Spark-driven load replay
(``bench/spark/``). ``bench/brokers.py`` starts and stops the brokers for both. See
``bench/README.md``.
"""
