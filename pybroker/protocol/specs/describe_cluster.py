"""DescribeCluster (key 60): cluster id, controller and brokers (all versions flexible)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(60, "DescribeCluster", "0-1", "0+", [
    field("IncludeClusterAuthorizedOperations", "bool", "0+"),
    field("EndpointType", "int8", "1+", default=1),
])

RESPONSE = response(60, "DescribeCluster", "0-1", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("ErrorMessage", "string", "0+", nullable="0+", default=None),
    field("EndpointType", "int8", "1+", default=1),
    field("ClusterId", "string", "0+"),
    field("ControllerId", "int32", "0+", default=-1),
    field("Brokers", "[]DescribeClusterBroker", "0+", fields=[
        field("BrokerId", "int32", "0+", map_key=True),
        field("Host", "string", "0+"),
        field("Port", "int32", "0+"),
        field("Rack", "string", "0+", nullable="0+", default=None),
    ]),
    field("ClusterAuthorizedOperations", "int32", "0+", default=-2147483648),
])
