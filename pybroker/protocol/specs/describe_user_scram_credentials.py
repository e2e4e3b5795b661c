"""DescribeUserScramCredentials (key 50): an admin client lists which SCRAM mechanisms (and
iteration counts) users have credentials for, never the credentials themselves (KIP-554)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(50, "DescribeUserScramCredentials", "0", "0+", [
    field("Users", "[]UserName", "0+", nullable="0+", fields=[
        field("Name", "string", "0+"),
    ]),
])

RESPONSE = response(50, "DescribeUserScramCredentials", "0", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("ErrorMessage", "string", "0+", nullable="0+"),
    field("Results", "[]DescribeUserScramCredentialsResult", "0+", fields=[
        field("User", "string", "0+"),
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "0+", nullable="0+"),
        field("CredentialInfos", "[]CredentialInfo", "0+", fields=[
            field("Mechanism", "int8", "0+"),
            field("Iterations", "int32", "0+"),
        ]),
    ]),
])
