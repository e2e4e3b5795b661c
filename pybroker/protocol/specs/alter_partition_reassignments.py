"""AlterPartitionReassignments (key 45): move partitions' replicas to other brokers (KIP-455).

An administrator's client (``Admin.alterPartitionReassignments``, ``kafka-reassign-partitions.sh
--execute``) sends it to the controller: for each partition its target replica list, or a null
list to cancel the reassignment under way. The controller answers once each reassignment is
started; the new replicas catch up in the background. Errors are per partition, and top level
(NOT_CONTROLLER, authorization).

Supported: v0 (flexible).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(45, "AlterPartitionReassignments", "0", "0+", [
    field("TimeoutMs", "int32", "0+", default=60000),
    field("Topics", "[]ReassignableTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]ReassignablePartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("Replicas", "[]int32", "0+", nullable="0+", default=None),
        ]),
    ]),
])

RESPONSE = response(45, "AlterPartitionReassignments", "0", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("ErrorMessage", "string", "0+", nullable="0+"),
    field("Responses", "[]ReassignableTopicResponse", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]ReassignablePartitionResponse", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
            field("ErrorMessage", "string", "0+", nullable="0+"),
        ]),
    ]),
])
