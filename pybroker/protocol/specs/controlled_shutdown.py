"""ControlledShutdown (key 7): a stopping broker asks the controller to move its leaderships away.

A broker that is shutting down sends it to the controller before closing its logs. The controller
moves leadership of every partition the broker leads to another in-sync replica, takes the broker
out of the ISRs it follows in, and answers with the partitions the broker still leads; the broker
retries until that list is empty (or it runs out of attempts), so clients fail over before the
broker goes away instead of after.

Supported: v3 only (flexible). Version 0's request header lacks the client id; the codec's header
functions know that, but v0 has no spec here.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(7, "ControlledShutdown", "3", "3+", [
    field("BrokerId", "int32", "0+"),
    field("BrokerEpoch", "int64", "2+", default=-1, ignorable=True),
])

RESPONSE = response(7, "ControlledShutdown", "3", "3+", [
    field("ErrorCode", "int16", "0+"),
    field("RemainingPartitions", "[]RemainingPartition", "0+", fields=[
        field("TopicName", "string", "0+", map_key=True),
        field("PartitionIndex", "int32", "0+", map_key=True),
    ]),
])
