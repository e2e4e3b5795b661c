"""DescribeLogDirs (key 35): the log directories of a broker and the replicas in each.

An administrator's client (``Admin.describeLogDirs``, ``kafka-log-dirs.sh --describe``) sends it
to each broker it asks about. A null ``Topics`` means every replica the broker holds. Each
result is one of the broker's ``log.dirs``: its error (KAFKA_STORAGE_ERROR for an offline
directory), and per partition its size on disk, its offset lag and whether it is a future log
(a copy AlterReplicaLogDirs is making). v3 adds a top-level error code, v4 the volume's total
and usable bytes.

Supported: v0-4 (v2+ flexible).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(35, "DescribeLogDirs", "0-4", "2+", [
    field("Topics", "[]DescribableLogDirTopic", "0+", nullable="0+", fields=[
        field("Topic", "string", "0+", map_key=True),
        field("Partitions", "[]int32", "0+"),
    ]),
])

RESPONSE = response(35, "DescribeLogDirs", "0-4", "2+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "3+", ignorable=True),
    field("Results", "[]DescribeLogDirsResult", "0+", fields=[
        field("ErrorCode", "int16", "0+"),
        field("LogDir", "string", "0+"),
        field("Topics", "[]DescribeLogDirsTopic", "0+", fields=[
            field("Name", "string", "0+"),
            field("Partitions", "[]DescribeLogDirsPartition", "0+", fields=[
                field("PartitionIndex", "int32", "0+"),
                field("PartitionSize", "int64", "0+"),
                field("OffsetLag", "int64", "0+"),
                field("IsFutureKey", "bool", "0+"),
            ]),
        ]),
        field("TotalBytes", "int64", "4+", ignorable=True, default=-1),
        field("UsableBytes", "int64", "4+", ignorable=True, default=-1),
    ]),
])
