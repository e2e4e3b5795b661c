"""ConsumerGroupPosition (key 30001, this project's KIP-253 API): share consumed positions within a group.

A member of a classic consumer group sends it to the group coordinator, to report how far it has
delivered the partitions it owns and to ask how far the group has delivered others: a consumer
of a partition created by an expansion waits until the group is past the epoch boundary of the
partition it split from, and a consumer of a survivor of a shrink waits until the group has
drained the deleted partitions tied to it. The coordinator answers with the group's positions
of the partitions asked about (-1 when nobody reported one and none is committed), and with the
partitions this member owns that other members wait on, which it should report next time.

The seed's single ``need_position``/``position`` pair meant different things in the request and
the response; this schema splits them into separate arrays (research kip-semantics §1.7 #2).
A report for a partition the member does not own in the current generation is refused per
partition (``ReportErrors``) and changes nothing. Flexible from v0, so the request header is v2
and the response header v1.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(30001, "ConsumerGroupPosition", "0", "0+", [
    field("GroupId", "string", "0+"),
    field("GenerationId", "int32", "0+"),
    field("MemberId", "string", "0+"),
    field("ReportedPositions", "[]ReportedTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]ReportedPartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            # the offset of the next record this member will deliver
            field("Position", "int64", "0+"),
        ]),
    ]),
    field("InterestedTopics", "[]InterestedTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("PartitionIndexes", "[]int32", "0+"),
    ]),
])

RESPONSE = response(30001, "ConsumerGroupPosition", "0", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("ErrorMessage", "string", "0+", nullable="0+", default=None),
    field("ReportErrors", "[]ReportErrorTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]ReportErrorPartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
        ]),
    ]),
    field("GroupPositions", "[]GroupPositionTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]GroupPositionPartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            # the group's delivered position: -1 while unknown (consumers treat it as "still blocked")
            field("Position", "int64", "0+", default=-1),
            field("ErrorCode", "int16", "0+"),
        ]),
    ]),
    field("PositionRequests", "[]PositionRequestTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("PartitionIndexes", "[]int32", "0+"),
    ]),
])
