"""A consumer that measures the broker, not itself: Kafka's fetch pattern, no per-record work.

    python bench/batch_consumer.py --bootstrap 127.0.0.1:9092 --topic bench --records 1000000

Reads partition 0 from offset 0 until ``--records`` records have arrived (``--passes`` times
over, so that a fast read lasts long enough to time well), the way Kafka's consumers fetch: Fetch
requests with the defaults both Kafka's Java consumer and librdkafka use (``fetch.max.bytes``
50 MiB, ``max.partition.fetch.bytes`` 1 MiB, ``fetch.min.bytes`` 1, ``fetch.max.wait.ms`` 500),
one fetch in flight, the next sent as soon as a response is in.

Why not kcat: kcat formats and writes every record on its output thread, and on a 2-vCPU machine
its CPU (0.6-0.9 s per 10^6 records of 100 B) exceeds the broker's (~0.1 s); its msg/s is mostly
the client's. This consumer's work is per response, not per record or per byte: the socket reads
straight into one reused buffer (asyncio ``BufferedProtocol``), the response is decoded in place
(the records stay a view of that buffer), and only batch headers are read, for the record count,
the next offset and the check that offsets are contiguous. The kernel's copy from the socket is
all that scales with the bytes, as for any client. (The records' contents are checked by the
benchmark's kcat phase, record by record.)

Prints one JSON object: records and record-batch bytes read (all passes), fetches, the times (from
the first fetch sent) of the first record and of the last, and this process's CPU seconds in that
window. Exit status 1 if the records are not exactly the expected ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pybroker.client.connection import BrokerConnection  # noqa: E402
from pybroker.protocol import codec  # noqa: E402
from pybroker.protocol.api_keys import ApiKey  # noqa: E402
from pybroker.protocol.messages import FetchRequest  # noqa: E402

BATCH_HEADER = struct.Struct(">qi")  # baseOffset, batchLength
LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23 of a batch
FETCH_MAX_BYTES = 52428800  # fetch.max.bytes
PARTITION_MAX_BYTES = 1048576  # max.partition.fetch.bytes
MAX_WAIT_MS = 500  # fetch.max.wait.ms


class FrameReader(asyncio.BufferedProtocol):
    """Response frames received straight into one buffer; ``next_frame()`` is the next one, a
    view valid until the following call."""

    def __init__(self) -> None:
        self.buffer = bytearray(8 << 20)
        self.filled = 0  # bytes received of the current frame (size prefix included)
        self.waiter: asyncio.Future[memoryview] | None = None
        self.lost: Exception | None = None

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.filled >= 4:
            needed = 4 + int.from_bytes(self.buffer[:4], "big")
            if needed > len(self.buffer):
                self.buffer.extend(bytes(needed - len(self.buffer)))
            return memoryview(self.buffer)[self.filled : needed]
        return memoryview(self.buffer)[self.filled : 4]

    def buffer_updated(self, nbytes: int) -> None:
        self.filled += nbytes
        if self.filled >= 4 and self.filled == 4 + int.from_bytes(self.buffer[:4], "big"):
            self.filled = 0
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(memoryview(self.buffer)[4 : 4 + int.from_bytes(self.buffer[:4], "big")])

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionError("connection closed by the broker")
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(self.lost)

    def next_frame(self) -> asyncio.Future[memoryview]:
        self.waiter = asyncio.get_running_loop().create_future()
        if self.lost is not None:
            self.waiter.set_exception(self.lost)
        return self.waiter


def walk_batches(records: memoryview, offset: int) -> tuple[int, int, int]:
    """(records, bytes, next offset) of the complete batches of a fetched buffer, which must start
    at ``offset`` and be contiguous (a partial batch may end the buffer)."""
    position = count = 0
    while position + 61 <= len(records):
        base, length = BATCH_HEADER.unpack_from(records, position)
        if position + 12 + length > len(records):
            break
        if base != offset:
            raise SystemExit(f"expected a batch at offset {offset}, got one at {base}")
        last = base + LAST_OFFSET_DELTA.unpack_from(records, position + 23)[0]
        count += last - base + 1
        offset = last + 1
        position += 12 + length
    return count, position, offset


def fetch_request(topic: str, partition: int, offset: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=MAX_WAIT_MS, min_bytes=1, max_bytes=FETCH_MAX_BYTES, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=PARTITION_MAX_BYTES)])],
        forgotten_topics_data=[], rack_id="",
    )


async def consume(bootstrap: str, topic: str, partition: int, records: int, passes: int = 1) -> dict[str, Any]:
    host, port = bootstrap.rsplit(":", 1)
    negotiated = BrokerConnection(host, int(port), client_id="bench-batch-consumer")
    await negotiated.connect()  # ApiVersions: the Fetch version both sides speak
    version = negotiated.version_for(ApiKey.FETCH)
    await negotiated.close()
    transport, reader = await asyncio.get_running_loop().create_connection(FrameReader, host, int(port))
    correlation = 0

    async def fetch(offset: int) -> memoryview:
        nonlocal correlation
        correlation += 1
        frame = reader.next_frame()
        transport.write(codec.encode_request(ApiKey.FETCH, version, correlation, "bench-batch-consumer",
                                             fetch_request(topic, partition, offset)))
        response = codec.decode_response(ApiKey.FETCH, version, await frame)[1]
        part = response.responses[0].partitions[0]
        if response.error_code or part.error_code:
            raise SystemExit(f"fetch at offset {offset} failed: error {response.error_code or part.error_code}")
        return memoryview(part.records or b"")

    await fetch(0)  # connection warm, before timing
    cpu_before = cpu_seconds()
    received = batch_bytes = fetches = 0
    offset = 0
    started = time.perf_counter()
    first_record_s: float | None = None
    while received < records * passes:
        data = await fetch(offset)
        fetches += 1
        count, size, after = walk_batches(data, offset)
        if count and first_record_s is None:
            first_record_s = time.perf_counter() - started
        received += count
        batch_bytes += size
        offset = after if after < records else 0  # a new pass starts over
    last_record_s = time.perf_counter() - started
    cpu_s = cpu_seconds() - cpu_before
    transport.close()
    return {
        "records": received,
        "batch_bytes": batch_bytes,
        "fetches": fetches,
        "fetch_version": version,
        "first_record_s": first_record_s,
        "last_record_s": last_record_s,
        "cpu_s": cpu_s,  # this process, between the first fetch and the last record
    }


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partition", type=int, default=0)
    ap.add_argument("--records", type=int, required=True, help="records to read, from offset 0")
    ap.add_argument("--passes", type=int, default=1, help="times to read the records (default 1)")
    args = ap.parse_args(argv)
    result = asyncio.run(consume(args.bootstrap, args.topic, args.partition, args.records, args.passes))
    print(json.dumps(result))
    return 0 if result["records"] == args.records * args.passes else 1


if __name__ == "__main__":
    raise SystemExit(main())
