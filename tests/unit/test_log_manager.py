"""The log manager: flush policy (flush.messages), recovery points, checkpoints at shutdown."""

import asyncio
import threading

from pybroker.common.cluster import PartitionState
from pybroker.log import log_manager as log_manager_module
from pybroker.log.log_manager import LogManager
from pybroker.server.config import BrokerConfig
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import Partition
from pybroker.server.replica_manager import ReplicaManager
from pybroker.types import TopicPartition
from tests.unit.batches import build_batch

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def test_flush_messages_policy_advances_recovery_point(tmp_path):
    async def run():
        config = BrokerConfig({"log.flush.interval.messages": "3"})
        manager = LogManager([str(tmp_path)], lambda topic: config.log_config(), node_id=1, cluster_id="c")
        manager.load()
        log = manager.get_or_create_log(TopicPartition("t", 0), "AAAAAAAAAAAAAAAAAAAAAA")
        points = []
        for _ in range(4):
            log.append_as_leader(memoryview(bytearray(build_batch([(None, b"x")]))), 0, 0)
            manager.maybe_flush_after_append(log)
            await asyncio.gather(*manager._pending_flushes)
            points.append(log.recovery_point)
        end = log.log_end_offset
        await manager.shutdown()
        return points, end

    points, end = asyncio.run(run())
    assert points == [0, 0, 3, 3] and end == 4
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 4\n"
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_an_append_that_forces_a_flush_is_answered_after_the_fsync(tmp_path, monkeypatch):
    """flush.messages as in Kafka, which flushes inside the append: the produce answer that
    follows the forced flush waits for the fsync; appends below the threshold answer at once."""
    release = threading.Event()
    synced: list[list[str]] = []

    def blocked_flush(paths: list[str]) -> None:
        assert release.wait(10)
        synced.append(paths)

    monkeypatch.setattr(log_manager_module, "fsync_paths", blocked_flush)

    async def run():
        config = BrokerConfig({"log.flush.interval.messages": "2"})
        manager = LogManager([str(tmp_path)], lambda topic: config.log_config(), node_id=1, cluster_id="c")
        manager.load()
        tp = TopicPartition("t", 0)
        partition = Partition(tp, TOPIC_ID, 1, manager.get_or_create_log(tp, TOPIC_ID))
        partition.make_leader(PartitionState(tp, 0, 1, 0, [1], 0, [1]), now_ms=0)
        replicas = ReplicaManager(1, manager, MetadataCache(1))
        replicas.partitions[tp] = partition

        def produce() -> object:
            return replicas.append_records(1, 1000, [(tp, memoryview(bytearray(build_batch([(None, b"x")]))))])

        first = produce()  # one unflushed message: below flush.messages, answered now
        assert isinstance(first, dict) and first[tp].base_offset == 0
        second = produce()  # the second forces a flush: the answer waits for it
        assert asyncio.isfuture(second)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not second.done() and partition.log.recovery_point == 0
        release.set()
        answered = await second
        assert answered[tp].error == 0 and answered[tp].base_offset == 1
        assert synced and partition.log.recovery_point == 2
        await manager.shutdown()

    asyncio.run(run())
