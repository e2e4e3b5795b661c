"""A broker as clients address it: its id and the endpoint it advertises (Kafka's ``Node``). The
admin client, the producer, the consumer and the topic layout all route by it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """A broker: its id and the endpoint it advertises."""

    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port} (id: {self.node_id})"
