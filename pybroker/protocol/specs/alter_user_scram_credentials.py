"""AlterUserScramCredentials (key 51): an admin client upserts and deletes users' SCRAM
credentials; the client salts the password itself (KIP-554)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(51, "AlterUserScramCredentials", "0", "0+", [
    field("Deletions", "[]ScramCredentialDeletion", "0+", fields=[
        field("Name", "string", "0+"),
        field("Mechanism", "int8", "0+"),
    ]),
    field("Upsertions", "[]ScramCredentialUpsertion", "0+", fields=[
        field("Name", "string", "0+"),
        field("Mechanism", "int8", "0+"),
        field("Iterations", "int32", "0+"),
        field("Salt", "bytes", "0+"),
        field("SaltedPassword", "bytes", "0+"),
    ]),
])

RESPONSE = response(51, "AlterUserScramCredentials", "0", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Results", "[]AlterUserScramCredentialsResult", "0+", fields=[
        field("User", "string", "0+"),
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "0+", nullable="0+"),
    ]),
])
