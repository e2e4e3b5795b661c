"""The single broker's metadata file keeps KIP-253's partition counts and recorded leader
epochs across restarts."""

from __future__ import annotations

import asyncio
import json
import uuid

from pybroker.controller.local_store import METADATA_FILE, LocalStore


def test_partition_counts_survive_a_restart_and_default_for_an_older_file(tmp_path):
    async def scenario() -> None:
        store = LocalStore(str(tmp_path), "cluster")
        await store.create_topic("t", uuid.uuid4(), [[0], [0]], {})
        await store.add_partitions("t", [[0], [0], [0], [0]])
        await store.record_leader_epochs_after_creation(1, "t", {2: {0: 5, 1: 7}, 3: {0: 5, 1: 7}})
        await store.close()

        topic = (await LocalStore(str(tmp_path), "cluster").read_topics(["t"]))["t"]
        assert (topic.initial_partition_count, topic.undeleted_partition_count) == (2, 4)
        assert topic.leader_epochs_after_creation == {2: {0: 5, 1: 7}, 3: {0: 5, 1: 7}}

        # A file written before the counts existed: both are the partition count.
        path = tmp_path / METADATA_FILE
        data = json.loads(path.read_text())
        for item in data["topics"]:
            del item["initial_partition_count"], item["undeleted_partition_count"]
        path.write_text(json.dumps(data))
        topic = (await LocalStore(str(tmp_path), "cluster").read_topics(["t"]))["t"]
        assert (topic.initial_partition_count, topic.undeleted_partition_count) == (4, 4)

    asyncio.run(scenario())
