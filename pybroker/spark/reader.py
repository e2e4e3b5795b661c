"""Reading topics into Spark: the batch reader and the task-side read of one offset range.

Owns ``read_range``, which every read (batch or streaming) runs in a task: Fetch requests from
the range's start to its end, each fetched buffer decoded into Arrow columns by
``_native.decode_record_batches`` in one call and yielded as one ``pyarrow.RecordBatch``. At
``kafka.isolation.level=read_committed`` the decoder is given the partition's aborted
transactions and leaves their records out (the range's end is below the last stable offset, see
``planning``); offsets move past them and past transaction markers. Records
that vanished while the query ran (retention, DeleteRecords) fail the task with
``failOnDataLoss=true`` and are skipped otherwise. ``KafkaBatchReader`` plans a batch query's
ranges on the driver side (see ``planning``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

import pybroker.spark.planning as planning
from pybroker import _native
from pybroker.client.fetcher import Fetcher, FetcherConfig, FetchError
from pybroker.common.errors import ErrorCode
from pybroker.spark.arrow import decoded_to_batch
from pybroker.spark.blocking import BlockingClient
from pybroker.spark.options import SourceOptions
from pybroker.types import TopicPartition


def read_range(options: SourceOptions, r: planning.OffsetRange) -> Iterator[pa.RecordBatch]:
    """Every record of ``r`` as Arrow batches, in offset order."""
    tp = TopicPartition(r.topic, r.partition)
    with BlockingClient(options.bootstrap_servers, "pybroker-spark-reader", kafka=options.kafka) as client:
        fetcher = Fetcher(client.admin, FetcherConfig.from_properties(options.kafka))
        offset = r.start
        while offset < r.end:
            try:
                fetched = client.run(fetcher.fetch(tp, offset))
            except FetchError as e:
                if e.error != ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise
                earliest = client.run(client.admin.list_offsets([tp], "earliest"))[tp].offset
                if options.fail_on_data_loss or earliest <= offset:
                    raise planning.DataLossError(planning.data_loss_message(tp, offset, earliest)) from e
                offset = earliest
                continue
            decoded = _native.decode_record_batches(fetched.records, offset, r.end, options.include_headers,
                                                    fetched.aborted_transactions)
            if decoded.count:
                yield decoded_to_batch(decoded, r.topic, r.partition, options.include_headers)
            if decoded.next_offset > offset:
                offset = decoded.next_offset
            elif fetched.high_watermark <= offset:
                # The log ends before the range does: it was truncated under the query.
                if options.fail_on_data_loss:
                    raise planning.DataLossError(
                        f"{r.topic}-{r.partition} ends at offset {fetched.high_watermark}, before the "
                        f"requested offset {r.end}; some data may have been lost. Set the source option "
                        "\"failOnDataLoss\" to \"false\" to continue despite data loss."
                    )
                return


class KafkaBatchReader(DataSourceReader):
    """Batch query: the ranges from ``startingOffsets`` to ``endingOffsets``, fixed at planning."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        with BlockingClient(o.bootstrap_servers, "pybroker-spark-planner", kafka=o.kafka) as client:
            tps = planning.topic_partitions(client, o)
            earliest, latest = planning.offset_bounds(client, tps, o.isolation_level)
            start = planning.resolve(client, o.starting, "startingOffsets", tps, earliest, latest, o.isolation_level)
            end = planning.resolve(client, o.ending, "endingOffsets", tps, earliest, latest, o.isolation_level)
        ranges = planning.offset_ranges(tps, start, end, earliest, o.fail_on_data_loss)
        return planning.split(ranges, o.min_partitions, o.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, planning.OffsetRange)
        return read_range(self.options, partition)
