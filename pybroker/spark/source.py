"""The ``pybroker`` Spark data source: Spark's Kafka source and sink, spoken from Python.

Owns the data source class Spark registers (format ``"pybroker"``): the reader schema and which
reader or writer serves a batch or streaming query. Options are parsed here, on the planning
side, so that a bad option fails the query at once with Spark's Kafka wording. Works against
pybroker and any Kafka-compatible broker: only the Kafka protocol is used.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from pybroker.spark.arrow import source_schema_ddl
from pybroker.spark.options import bool_option, lowercase_keys, sink_options, source_options
from pybroker.spark.reader import KafkaBatchReader
from pybroker.spark.stream import KafkaStreamReader
from pybroker.spark.writer import KafkaBatchWriter, KafkaStreamWriter


class KafkaDataSource(DataSource):
    """``spark.read.format("pybroker")`` / ``df.write.format("pybroker")`` and their streams."""

    @classmethod
    def name(cls) -> str:
        return "pybroker"

    def schema(self) -> str:
        return source_schema_ddl(bool_option(lowercase_keys(self.options), "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark's name)
        return KafkaStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaBatchWriter(dict(lowercase_keys(self.options)), sink_options(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        return KafkaStreamWriter(dict(lowercase_keys(self.options)), sink_options(self.options))
