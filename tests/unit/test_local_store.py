"""The single broker's metadata file keeps KIP-253's partition counts and recorded leader
epochs across restarts; a topic whose creation could not be written is not created."""

from __future__ import annotations

import asyncio
import errno
import json
import uuid

import pytest

from pybroker.controller.local_store import METADATA_FILE, LocalStore
from pybroker.controller.store import StoreListener
from pybroker.log import file_sync


def test_partition_counts_survive_a_restart_and_default_for_an_older_file(tmp_path):
    async def scenario() -> None:
        store = LocalStore(str(tmp_path), "cluster")
        await store.create_topic("t", uuid.uuid4(), [[0], [0]], {})
        await store.add_partitions("t", [[0], [0], [0], [0]])
        topic = (await store.read_topics(["t"]))["t"]
        topic.leader_epochs_after_creation = {2: {0: 5, 1: 7}, 3: {0: 5, 1: 7}}
        await store.record_leader_epochs(1, topic, [2, 3])
        await store.shrink_partitions("t", 3)
        topic.leader_epochs_before_deletion = {3: {0: 6, 1: 8, 2: 0}}
        await store.record_leader_epochs(1, topic, [3])
        await store.close()

        store = LocalStore(str(tmp_path), "cluster")
        topic = (await store.read_topics(["t"]))["t"]
        assert (topic.initial_partition_count, topic.undeleted_partition_count) == (2, 3)
        assert topic.marked_for_deletion == range(3, 4)
        assert topic.leader_epochs_after_creation == {2: {0: 5, 1: 7}, 3: {0: 5, 1: 7}}
        assert topic.leader_epochs_before_deletion == {3: {0: 6, 1: 8, 2: 0}}
        await store.remove_partitions(1, "t", 3)
        await store.close()

        topic = (await LocalStore(str(tmp_path), "cluster").read_topics(["t"]))["t"]
        assert (len(topic.partitions), topic.initial_partition_count, topic.undeleted_partition_count) == (3, 2, 3)
        assert topic.leader_epochs_after_creation == {2: {0: 5, 1: 7}}
        assert topic.leader_epochs_before_deletion == {}

        # A file written before the counts existed: both are the partition count.
        path = tmp_path / METADATA_FILE
        data = json.loads(path.read_text())
        for item in data["topics"]:
            del item["initial_partition_count"], item["undeleted_partition_count"]
        path.write_text(json.dumps(data))
        topic = (await LocalStore(str(tmp_path), "cluster").read_topics(["t"]))["t"]
        assert (topic.initial_partition_count, topic.undeleted_partition_count) == (3, 3)

    asyncio.run(scenario())


def test_a_topic_whose_save_fails_is_not_created(tmp_path, monkeypatch):
    """Out of descriptors (EMFILE) the metadata file cannot be written: create_topic raises the
    OSError and leaves no topic behind, in memory or, once a save succeeds, on disk."""
    real_write = file_sync.write_atomically
    failing = True

    def write(path: str, text: str, **kwargs: bool) -> None:
        if failing:
            raise OSError(errno.EMFILE, "Too many open files", path)
        real_write(path, text, **kwargs)

    monkeypatch.setattr(file_sync, "write_atomically", write)
    created: list[str] = []

    async def scenario() -> None:
        nonlocal failing
        listener = StoreListener(on_topics_changed=lambda names: created.extend(names or []))
        store = LocalStore(str(tmp_path), "cluster", listener)
        with pytest.raises(OSError) as failed:
            await store.create_topic("t", uuid.uuid4(), [[0]], {})
        assert failed.value.errno == errno.EMFILE
        assert await store.topic_names() == set()
        assert created == []
        failing = False
        await store.create_topic("u", uuid.uuid4(), [[0]], {})
        await store.close()
        assert await LocalStore(str(tmp_path), "cluster").topic_names() == {"u"}
        assert created == ["u"]

    asyncio.run(scenario())
