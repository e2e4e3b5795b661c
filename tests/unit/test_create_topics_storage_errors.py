"""CreateTopics on a single broker whose process runs out of descriptors (EMFILE): a topic whose
creation cannot be recorded, or of which a log cannot be created, answers KAFKA_STORAGE_ERROR
(per topic; the others are created), and the log dir stays online. The failures are injected
into an in-process broker; tests/integration/test_file_descriptor_limit.py exhausts real ones."""

from __future__ import annotations

import asyncio
import errno
import os
from typing import Any

from pybroker.common.errors import ErrorCode
from pybroker.controller import local_store
from pybroker.log.log_manager import LogManager
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import CreateTopicsRequest
from pybroker.types import TopicPartition
from tests.unit.test_handler_authorization import running_broker


async def create(conn: Any, *names: str) -> dict[str, tuple[int, str | None]]:
    response = await conn.send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=name, num_partitions=2, replication_factor=1, assignments=[],
                                           configs=[])
        for name in names
    ], timeout_ms=10000, validate_only=False), 7)
    return {t.name: (t.error_code, t.error_message) for t in response.topics}


def emfile(path: str) -> OSError:
    return OSError(errno.EMFILE, os.strerror(errno.EMFILE), path)


def test_a_topic_whose_log_cannot_be_created_answers_kafka_storage_error(tmp_path, monkeypatch):
    real_new_log = LogManager._new_log

    def new_log(tp: TopicPartition, *args: Any) -> Any:
        if tp == TopicPartition("doomed", 1):
            raise emfile(str(tmp_path / "logs" / str(tp)))
        return real_new_log(tp, *args)

    monkeypatch.setattr(LogManager, "_new_log", staticmethod(new_log))

    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            answers = await create(conn, "fine", "doomed")
            assert answers["fine"] == (ErrorCode.NONE, None)
            code, message = answers["doomed"]
            assert code == ErrorCode.KAFKA_STORAGE_ERROR
            assert message is not None and "doomed-1" in message and "Too many open files" in message
            assert broker.log_manager.failure_channel.offline_log_dirs == set()
            assert broker.log_manager.get_log(TopicPartition("doomed", 0)) is not None
            assert broker.log_manager.get_log(TopicPartition("doomed", 1)) is None

    asyncio.run(main())


def test_a_topic_whose_creation_cannot_be_recorded_is_not_created(tmp_path, monkeypatch):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            real_request = local_store.CoalescingFileWriter.request

            def failing(writer: Any) -> Any:
                future = asyncio.get_running_loop().create_future()
                future.set_exception(emfile(writer.path))
                return future

            monkeypatch.setattr(local_store.CoalescingFileWriter, "request", failing)
            answers = await create(conn, "a", "b")
            assert {name: code for name, (code, _message) in answers.items()} == {
                "a": ErrorCode.KAFKA_STORAGE_ERROR, "b": ErrorCode.KAFKA_STORAGE_ERROR}
            assert "Too many open files" in (answers["a"][1] or "")
            assert broker.metadata_cache.topic("a") is None
            monkeypatch.setattr(local_store.CoalescingFileWriter, "request", real_request)
            assert await create(conn, "a") == {"a": (ErrorCode.NONE, None)}

    asyncio.run(main())
