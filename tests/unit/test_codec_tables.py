"""Kafka's numbering tables: API keys and error codes (with retriability and default messages)."""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import PRIVATE_API_KEY_START, ApiKey


def test_api_keys() -> None:
    expected = {
        "PRODUCE": 0, "FETCH": 1, "LIST_OFFSETS": 2, "METADATA": 3, "OFFSET_COMMIT": 8,
        "OFFSET_FETCH": 9, "FIND_COORDINATOR": 10, "JOIN_GROUP": 11, "HEARTBEAT": 12,
        "LEAVE_GROUP": 13, "SYNC_GROUP": 14, "DESCRIBE_GROUPS": 15, "LIST_GROUPS": 16,
        "SASL_HANDSHAKE": 17, "API_VERSIONS": 18, "CREATE_TOPICS": 19, "DELETE_TOPICS": 20,
        "DELETE_RECORDS": 21, "INIT_PRODUCER_ID": 22, "OFFSET_FOR_LEADER_EPOCH": 23,
        "DESCRIBE_CONFIGS": 32, "ALTER_CONFIGS": 33, "SASL_AUTHENTICATE": 36,
        "CREATE_PARTITIONS": 37, "DELETE_GROUPS": 42, "INCREMENTAL_ALTER_CONFIGS": 44,
        "OFFSET_DELETE": 47, "DESCRIBE_CLUSTER": 60, "CONSUMER_GROUP_HEARTBEAT": 68,
        "DESCRIBE_TOPIC_PARTITIONS": 75,
    }
    for name, value in expected.items():
        assert ApiKey[name] == value
    kafkas = [k.value for k in ApiKey if k < PRIVATE_API_KEY_START]
    assert kafkas == list(range(len(kafkas)))  # no gaps 0..N
    # KIP-253's two APIs are this project's, in its private block
    assert [k for k in ApiKey if k >= PRIVATE_API_KEY_START] == [
        ApiKey.CONSUMER_GROUP_POSITION, ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS]
    assert (ApiKey.CONSUMER_GROUP_POSITION, ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS) == (30001, 30002)
    assert ApiKey.OFFSET_FOR_LEADER_EPOCH.kafka_name == "OffsetForLeaderEpoch"


def test_error_codes() -> None:
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1 and ErrorCode.NONE == 0
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.MEMBER_ID_REQUIRED == 79
    assert ErrorCode.TRANSACTION_ABORTABLE == 120
    codes = {e.value for e in ErrorCode}
    assert set(range(-1, 121)) - codes == {99}  # 99 was never assigned
    assert ErrorCode.NONE.message is None
    assert ErrorCode.UNSUPPORTED_VERSION.message == "The version of API is not supported."
    assert all(e.message for e in ErrorCode if e != ErrorCode.NONE)


def test_retriable_flags() -> None:
    retriable = {
        ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NOT_CONTROLLER,
        ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED, ErrorCode.UNKNOWN_TOPIC_ID,
    }
    for e in retriable:
        assert e.retriable, e
    for e in (ErrorCode.NONE, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.OFFSET_OUT_OF_RANGE,
              ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNSUPPORTED_VERSION,
              ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_REQUEST,
              ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.MEMBER_ID_REQUIRED):
        assert not e.retriable, e
    assert ErrorCode.for_code(12345) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.for_code(3) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
