"""The log manager: flush policy (flush.messages), recovery points, checkpoints at shutdown."""

import asyncio

from pybroker.log.log_manager import LogManager
from pybroker.server.config import BrokerConfig
from pybroker.types import TopicPartition
from tests.unit.batches import build_batch


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
