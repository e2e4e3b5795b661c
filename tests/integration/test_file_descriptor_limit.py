"""A broker and its open-file limit (``RLIMIT_NOFILE``, `pybroker.log.file_descriptors`).

Segments keep no descriptor at rest: their ``.log`` files are opened when used, behind a bounded
cache of half the soft limit (``rust/src/open_files.rs``). So a broker started with
``ulimit -n 4096`` hosts far more partitions than that: it creates them, serves records from a
sample spread over all of them, restarts cleanly and serves the same records again, its open
descriptors (``/proc/<pid>/fd``) staying below the limit all along. When descriptors run out
anyway (the test holds hundreds of connections to a broker with a small limit), requests that need
a file fail with an error — CreateTopics per topic, Produce with KAFKA_STORAGE_ERROR — the log dir
stays online, and once the connections are closed everything works again. At start-up the soft
limit is raised to the hard limit and both are logged; a limit too low to run is one clear line.
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pybroker._native import build_batch, read_records
from pybroker.client.admin import Admin, AdminError
from pybroker.client.connection import BrokerConnection
from pybroker.common.errors import ErrorCode
from pybroker.log.file_descriptors import MIN_OPEN_FILES
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchRequest, ProduceRequest
from tests.conftest import BrokerProcess, broker_connection, wait_until

LIMIT = 4096  # RLIMIT_NOFILE (soft and hard) of the broker hosting many partitions
# 30 topics x 1,000 partitions: 33-35 s on a shared 2-core machine (creation about 20 s, clean stop
# and load about 10 s). A smaller count still shows the point as long as it exceeds LIMIT.
TOPICS = 30
PARTITIONS_PER_TOPIC = 1000
SAMPLE = (0, 1, 333, 666, 998, 999)  # partitions of every topic written and read back

SMALL_LIMIT = 256  # RLIMIT_NOFILE of the broker whose descriptors the test exhausts
BROKER_ID = 1  # node.id's default


class DescriptorWatcher:
    """Samples the open descriptors of a broker's process (whichever process it runs as now)
    every few milliseconds in a thread; keeps the largest count seen."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fd-watcher", daemon=True)

    def count(self) -> int:
        proc = self.broker.proc
        if proc is None or proc.poll() is not None:
            return 0
        try:
            return len(os.listdir(f"/proc/{proc.pid}/fd"))
        except FileNotFoundError:  # exited between the two checks
            return 0

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.most = max(self.most, self.count())

    @contextmanager
    def watching(self) -> Iterator[DescriptorWatcher]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(10)


def topics() -> list[str]:
    return [f"many-{i:02d}" for i in range(TOPICS)]


def value(topic: str, partition: int, i: int) -> bytes:
    return f"{topic}/{partition} record {i}".encode()


async def produce(conn: BrokerConnection, topic: str, partitions: tuple[int, ...], i: int) -> dict[int, int]:
    """Record ``i`` to each of ``partitions`` of ``topic`` in one Produce (acks=all): partition ->
    error code."""
    response = await conn.send(ApiKey.PRODUCE, ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(
                index=p, records=build_batch([(None, value(topic, p, i))], int(time.time() * 1000)))
            for p in partitions])]), timeout=60)
    return {r.index: r.error_code for r in response.responses[0].partition_responses}


async def fetch_values(conn: BrokerConnection, topic: str, partitions: tuple[int, ...]) -> dict[int, list[bytes]]:
    """Every value of each of ``partitions`` from offset 0, in one Fetch: partition -> values."""
    response = await conn.send(ApiKey.FETCH, FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                                        partition_max_bytes=1 << 20) for p in partitions])],
        forgotten_topics_data=[], rack_id=""), timeout=60)
    out: dict[int, list[bytes]] = {}
    for data in response.responses[0].partitions:
        assert data.error_code == ErrorCode.NONE, (topic, data.partition_index, data.error_code)
        out[data.partition_index] = [v for _offset, _ts, _key, v in read_records(bytes(data.records or b""))]
    return out


async def assert_sample(bootstrap: str, records: int) -> None:
    """Records 0..records-1 are in every sampled partition of every topic, in order."""
    conn = await broker_connection(bootstrap)
    try:
        for topic in topics():
            got = await fetch_values(conn, topic, SAMPLE)
            want = {p: [value(topic, p, i) for i in range(records)] for p in SAMPLE}
            assert got == want, topic
    finally:
        await conn.close()


async def write_sample(bootstrap: str, i: int) -> None:
    conn = await broker_connection(bootstrap)
    try:
        for topic in topics():
            assert await produce(conn, topic, SAMPLE, i) == dict.fromkeys(SAMPLE, ErrorCode.NONE), topic
    finally:
        await conn.close()


async def create_many(bootstrap: str) -> None:
    """CreateTopics one topic at a time, each with `PARTITIONS_PER_TOPIC` partitions."""
    async with Admin(bootstrap) as admin:
        for topic in topics():
            await admin.create_topics([topic], num_partitions=PARTITIONS_PER_TOPIC, replication_factor=1,
                                      timeout_ms=120_000)


@pytest.mark.timeout(600)
def test_a_broker_under_4096_open_files_hosts_thousands_of_partitions(start_broker):
    broker = start_broker(open_files=LIMIT)
    started = time.monotonic()
    assert broker.proc is not None
    with DescriptorWatcher(broker).watching() as watcher:
        asyncio.run(create_many(broker.bootstrap))
        created = time.monotonic()
        asyncio.run(write_sample(broker.bootstrap, 0))
        asyncio.run(assert_sample(broker.bootstrap, 1))

        assert broker.stop(120) == 0
        broker.start(timeout=300)
        restarted = time.monotonic()
        asyncio.run(assert_sample(broker.bootstrap, 1))
        asyncio.run(write_sample(broker.bootstrap, 1))  # appends go on after the restart
        asyncio.run(assert_sample(broker.bootstrap, 2))
        assert broker.stop(120) == 0
    partitions = TOPICS * PARTITIONS_PER_TOPIC
    print(f"{partitions} partitions: created in {created - started:.1f}s, stopped and loaded in "
          f"{restarted - created:.1f}s; at most {watcher.most} descriptors open (limit {LIMIT})")
    assert partitions > LIMIT
    assert 0 < watcher.most < LIMIT
    log = broker.log()
    assert f"Open-file limit (RLIMIT_NOFILE): soft {LIMIT}, hard {LIMIT}" in log
    assert f"Keeping at most {LIMIT // 2} log segment files open" in log


def accept_queue(port: int) -> int:
    """Connections waiting in the kernel's accept queue of the listening socket on ``port``
    (``rx_queue`` of its /proc/net/tcp line)."""
    local = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[3] == "0A":  # LISTEN
                return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def flood(port: int, count: int) -> list[socket.socket]:
    """``count`` connections to ``port``, opened without waiting for the broker to accept them."""
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sockets.append(s)
    return sockets


@pytest.mark.timeout(180)
@pytest.mark.broker_log_allows(
    # Each failure, logged once: accepting, an append (the dir stays online), the metadata write.
    r"ERROR Cannot accept connections \(\[Errno 24\] Too many open files\)",
    r"Too many open files.*\(the process is out of a resource, the disk did not fail",
    r"ERROR Could not save \S+cluster-metadata\.json: \[Errno 24\] Too many open files",
)
def test_out_of_descriptors_fails_requests_keeps_the_log_dir_online_and_recovers(start_broker, topic_name):
    broker = start_broker(open_files=SMALL_LIMIT)
    watcher = DescriptorWatcher(broker)
    partitions = (0, 1, 2, 3)
    others = [f"{topic_name}-a", f"{topic_name}-b"]

    async def before_restart() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topics([topic_name], num_partitions=len(partitions), replication_factor=1)
            conn = await broker_connection(broker.bootstrap)
            try:
                assert await produce(conn, topic_name, partitions, 0) == dict.fromkeys(partitions, 0)
            finally:
                await conn.close()

    async def out_of_descriptors() -> None:
        async with Admin(broker.bootstrap) as admin:
            conn = await broker_connection(broker.bootstrap)
            try:
                [before] = (await admin.describe_log_dirs())[BROKER_ID]
                assert before.error == ErrorCode.NONE
                # Connections until the broker has no descriptor left, and more waiting in the
                # backlog to take any it frees. Since the restart no .log was used: none is open.
                held = flood(broker.port, 2 * SMALL_LIMIT)
                try:
                    wait_until(lambda: watcher.count() >= SMALL_LIMIT, timeout=30,
                               message=f"the broker holding {SMALL_LIMIT} descriptors")
                    # A produce needs its partition's .log: it cannot be opened.
                    errors = await produce(conn, topic_name, partitions, 1)
                    assert errors == dict.fromkeys(partitions, ErrorCode.KAFKA_STORAGE_ERROR)
                    # CreateTopics answers an error per topic (and creates nothing).
                    with pytest.raises(AdminError) as failed:
                        await admin.create_topics(others, num_partitions=2, replication_factor=1)
                    assert set(failed.value.failures) == set(others)
                    assert {e.error for e in failed.value.failures.values()} == {ErrorCode.KAFKA_STORAGE_ERROR}
                    # The log dir stays online.
                    [during] = (await admin.describe_log_dirs())[BROKER_ID]
                    assert during.error == ErrorCode.NONE
                finally:
                    for s in held:
                        s.close()
                wait_until(lambda: accept_queue(broker.port) == 0 and watcher.count() < SMALL_LIMIT // 2,
                           timeout=30, message="the broker accepting and closing every connection")

                # Everything works again: produce, fetch, CreateTopics, the same log dir online.
                assert await produce(conn, topic_name, partitions, 1) == dict.fromkeys(partitions, 0)
                assert await fetch_values(conn, topic_name, partitions) == {
                    p: [value(topic_name, p, 0), value(topic_name, p, 1)] for p in partitions}
                await admin.create_topics(others, num_partitions=2, replication_factor=1)
                assert await produce(conn, others[0], (0, 1), 0) == {0: 0, 1: 0}
                [after] = (await admin.describe_log_dirs())[BROKER_ID]
                assert after.error == ErrorCode.NONE and after.path == before.path
            finally:
                await conn.close()

    asyncio.run(before_restart())
    assert broker.stop() == 0
    broker.start()
    asyncio.run(out_of_descriptors())
    assert broker.stop() == 0


def test_a_limit_too_low_to_run_is_one_clear_line(tmp_path):
    limit = MIN_OPEN_FILES - 28
    result = subprocess.run(
        [sys.executable, "-m", "pybroker", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'data'}"],
        capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)),
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("pybroker: ")]
    assert len(lines) == 1, result.stderr
    assert f"RLIMIT_NOFILE is {limit}" in lines[0]
    assert f"needs at least {MIN_OPEN_FILES}" in lines[0]
    assert f"ulimit -n {MIN_OPEN_FILES}" in lines[0]
    assert "Traceback" not in result.stderr


def test_the_soft_limit_is_raised_to_the_hard_limit_and_both_are_logged():
    code = (
        "import logging, resource\n"
        "logging.basicConfig(level=logging.INFO, format='%(levelname)s %(message)s')\n"
        "from pybroker.log.file_descriptors import configure_open_files\n"
        "from pybroker import _native\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "assert soft == 256, soft\n"
        "capacity = configure_open_files()\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard, capacity, _native.max_open_log_files())\n"
    )
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
    )
    assert result.returncode == 0, result.stderr
    raised, limit, capacity, native = result.stdout.split()
    assert raised == limit == str(hard)
    assert capacity == native == str(max(64, hard // 2))
    assert f"INFO Raised the open-file limit (RLIMIT_NOFILE) from 256 to the hard limit {hard}" in result.stderr
    assert f"INFO Open-file limit (RLIMIT_NOFILE): soft {hard}, hard {hard}" in result.stderr
    assert f"INFO Keeping at most {capacity} log segment files open" in result.stderr
