"""Metadata that auto-creates a topic answers as Kafka does: not ready yet, no partitions.

Kafka 3.9's ``AutoTopicCreationManager`` creates the topic and answers LEADER_NOT_AVAILABLE with
no partitions (and no topic id) to the request that created it; the partitions appear in later
answers. Clients and their tests rely on that: librdkafka, for one, asks again after its
``topic.metadata.refresh`` backoff. pybroker used to wait for the leaders and answer error 0 with
the partitions in the same response. Each question is asked of Apache Kafka 3.9.2 too.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import MetadataRequest
from tests.conftest import broker_connection


def auto_create_answers(bootstrap: str, version: int) -> dict[str, object]:
    """The first answer to a Metadata request (``version``) that auto-creates a new topic, the
    answer to the same request sent again at once by another client while the topic is created,
    and the answer once the partitions have leaders (polled): each as (error, topic id is zero,
    is internal, partition count)."""

    async def ask() -> dict[str, object]:
        name = f"auto-{version}-{uuid.uuid4().hex[:8]}"
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                  allow_auto_topic_creation=True)
        first_client, second_client = await broker_connection(bootstrap), await broker_connection(bootstrap)
        try:
            first = (await first_client.send(ApiKey.METADATA, request, version=version)).topics[0]
            again = (await second_client.send(ApiKey.METADATA, request, version=version)).topics[0]
            deadline = time.monotonic() + 20
            while True:
                ready = (await first_client.send(ApiKey.METADATA, request, version=version)).topics[0]
                if ready.error_code == 0 and ready.partitions and all(p.leader_id >= 0 for p in ready.partitions):
                    break
                assert time.monotonic() < deadline, "the auto-created topic never got leaders"
                await asyncio.sleep(0.05)
        finally:
            await first_client.close()
            await second_client.close()

        def summary(topic: object) -> tuple[int, bool | None, bool, int]:
            # Topic ids are in the answer from v10.
            zero_id = topic.topic_id.int == 0 if version >= 10 else None  # type: ignore[attr-defined]
            return (topic.error_code, zero_id, topic.is_internal, len(topic.partitions))  # type: ignore[attr-defined]

        return {"first": summary(first), "again": summary(again)[0], "ready": summary(ready)}

    return asyncio.run(ask())


def check(answers: dict[str, object], version: int) -> None:
    topic_ids = version >= 10
    # LEADER_NOT_AVAILABLE (5), the zero topic id, not internal, no partitions.
    assert answers["first"] == (5, True if topic_ids else None, False, 0)
    # Asked again while the leaders are elected: not ready yet (or ready, if they were quick).
    assert answers["again"] in (0, 5)
    # Later: error 0, the topic's id, the broker's num.partitions (1 by default).
    assert answers["ready"] == (0, False if topic_ids else None, False, 1)


def test_a_topic_the_request_creates_is_answered_not_ready(broker):
    for version in (4, 9, 12):
        check(auto_create_answers(broker.bootstrap, version), version)


def test_kafka_answers_the_same(kafka):
    for version in (4, 9, 12):
        check(auto_create_answers(kafka.bootstrap, version), version)
