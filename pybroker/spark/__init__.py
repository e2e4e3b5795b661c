"""PySpark data source for Kafka topics (``pip install pybroker[spark]``).

``pybroker.spark.register(spark)`` registers format ``"pybroker"``: Spark's built-in Kafka
source and sink (same options, same schema), implemented in Python over the Kafka protocol, so it
works against pybroker and any Kafka-compatible broker where the Spark Kafka connector jar is not
available. Modules: ``source`` (the data source), ``options``, ``planning`` (offset ranges),
``reader``, ``stream``, ``writer``, ``producer`` (Arrow batches to topics), ``arrow`` (Arrow ⇄
native record codec), ``blocking`` (the asyncio clients driven from Spark's threads).
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``pybroker`` format with ``spark`` (a ``SparkSession``)."""
    from pybroker.spark.source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
