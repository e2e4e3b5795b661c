"""The controller's requests through the wire and back: KIP-253's counts and epoch boundaries."""

from __future__ import annotations

import uuid

from pybroker.common.cluster import BrokerEndpoint, LiveBroker, PartitionState
from pybroker.controller.requests import LeaderAndIsr, UpdateMetadata
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


def round_trip(request):
    api_key, version, message = to_wire(request)
    view = memoryview(codec.encode_request(api_key, version, 1, "controller", message))[4:]
    _, offset = codec.decode_request_header(view)
    return from_wire(api_key, codec.decode_request(api_key, version, view, offset))


def test_update_metadata_carries_each_partitions_epoch_boundaries():
    grown = PartitionState(TopicPartition("t", 3), 1, 1, 2, [1], 0, [1],
                           leader_epochs_after_creation={0: 1, 2: 1, 1: 1},
                           leader_epochs_before_deletion={1: 2, 0: 2})
    plain = PartitionState(TopicPartition("t", 0), 1, 1, 2, [1], 0, [1])
    broker = LiveBroker(1, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092),))
    back = round_trip(UpdateMetadata(1, 1, 5, [grown, plain], [broker], {"t": uuid.uuid4()}, {"t": (3, 2)}))
    assert back.partition_states == [grown, plain]


def test_leader_and_isr_carries_the_undeleted_count_with_the_epoch():
    states = [PartitionState(TopicPartition("t", p), 1, 1, 4, [1], 0, [1], undeleted_partition_count=5)
              for p in (0, 6)]
    states.append(PartitionState(TopicPartition("u", 0), 1, 1, 0, [1], 0, [1]))  # no count: -1
    back = round_trip(LeaderAndIsr(1, 1, 5, states, {"t": uuid.uuid4(), "u": uuid.uuid4()}, []))
    assert isinstance(back, LeaderAndIsr)
    assert [s.undeleted_partition_count for s in back.partition_states] == [5, 5, -1]
