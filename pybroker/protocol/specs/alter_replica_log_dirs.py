"""AlterReplicaLogDirs (key 34): move replicas of a broker to other log directories (KIP-113).

An administrator's client (``Admin.alterReplicaLogDirs``, ``kafka-reassign-partitions.sh`` with
``log_dirs``) sends it to the broker holding the replicas. Each ``Dirs`` entry names a
destination directory (one of the broker's ``log.dirs``, absolute) and the partitions to move
there. The answer has an error per partition: NONE once the move has started (the replica is
copied to a ``-future`` log there, which replaces the current one when it has caught up),
LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR for an offline directory, REPLICA_NOT_AVAILABLE for a
partition the broker does not hold yet (the directory is remembered for when it is created).

Supported: v0-2 (v2 flexible).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(34, "AlterReplicaLogDirs", "0-2", "2+", [
    field("Dirs", "[]AlterReplicaLogDir", "0+", fields=[
        field("Path", "string", "0+", map_key=True),
        field("Topics", "[]AlterReplicaLogDirTopic", "0+", fields=[
            field("Name", "string", "0+", map_key=True),
            field("Partitions", "[]int32", "0+"),
        ]),
    ]),
])

RESPONSE = response(34, "AlterReplicaLogDirs", "0-2", "2+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Results", "[]AlterReplicaLogDirTopicResult", "0+", fields=[
        field("TopicName", "string", "0+"),
        field("Partitions", "[]AlterReplicaLogDirPartitionResult", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
        ]),
    ]),
])
