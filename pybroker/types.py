"""Small value types shared by every layer: topic partitions, and the all-zero UUID (Kafka's
``Uuid.ZERO_UUID``: no topic id)."""

from __future__ import annotations

import uuid
from typing import NamedTuple

ZERO_UUID = uuid.UUID(int=0)


class TopicPartition(NamedTuple):
    """A partition of a topic, printed the way Kafka names its directory: ``topic-3``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse_dir_name(cls, name: str) -> TopicPartition:
        """Parse ``<topic>-<partition>``; raises ValueError when the name is not of that form."""
        topic, dash, index = name.rpartition("-")
        if not dash or not topic or not index.isdigit():
            raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
        return cls(topic, int(index))
