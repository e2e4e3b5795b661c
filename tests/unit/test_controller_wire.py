"""The controller's requests through the wire and back: KIP-253's counts in UpdateMetadata."""

from __future__ import annotations

import uuid

from pybroker.controller.requests import BrokerEndpoint, LiveBroker, PartitionState, UpdateMetadata
from pybroker.controller.wire import from_wire, to_wire
from pybroker.protocol import codec
from pybroker.types import TopicPartition


def test_update_metadata_carries_the_partition_counts_of_the_topics_it_lists():
    states = [PartitionState(TopicPartition(name, 0), 1, 1, 0, [1], 0, [1]) for name in ("grown", "plain")]
    broker = LiveBroker(1, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092),))
    request = UpdateMetadata(1, 1, 5, states, [broker], {"grown": uuid.uuid4(), "plain": uuid.uuid4()},
                             {"grown": (3, 7)})
    api_key, version, message = to_wire(request)
    view = memoryview(codec.encode_request(api_key, version, 1, "controller", message))[4:]
    _, offset = codec.decode_request_header(view)
    back = from_wire(api_key, codec.decode_request(api_key, version, view, offset))
    assert isinstance(back, UpdateMetadata)
    assert back.partition_counts == {"grown": (3, 7)}  # "plain" was sent without them
    assert back.topic_ids == request.topic_ids
