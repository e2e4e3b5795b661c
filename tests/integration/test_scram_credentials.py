"""Users' SCRAM credentials through real clients: confluent-kafka's and kafka-python's
``alter_user_scram_credentials`` / ``describe_user_scram_credentials`` upsert, describe and delete
with Kafka's errors, on one broker and on a 3-broker ZooKeeper cluster (Alter answered by the
controller only: NOT_CONTROLLER from the others); ``pybroker configs --entity-type users`` round
trip; credentials survive a restart.

That every broker's credential cache follows an alter within a second is shown against a real
ZooKeeper in tests/unit/test_zk_user_credentials.py (it becomes observable here once SASL
authenticates against the cache)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import kafka.admin as kp
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from pybroker.client.admin import Admin, AdminError
from pybroker.client.admin import UserScramCredentialUpsertion as OurUpsertion
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import AlterUserScramCredentialsRequest
from tests.conftest import REPO, broker_connection, wait_until
from tests.integration.cluster import start_cluster
from tests.zookeeper import chroot_for

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def upsert(user, mechanism, iterations, password=b"secret"):
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password)


def outcomes(futures):
    """user → None, or (error code, message) of a confluent-kafka per-user future."""
    out = {}
    for user, future in futures.items():
        try:
            future.result(timeout=10)
            out[user] = None
        except KafkaException as e:
            out[user] = (e.args[0].code(), e.args[0].str())
    return out


def described(admin, users=None):
    """user → sorted [(mechanism name, iterations)] (or the error) as confluent-kafka describes them."""
    if users is None:
        return {u: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
                for u, d in admin.describe_user_scram_credentials().result(timeout=10).items()}
    out = {}
    for user, future in admin.describe_user_scram_credentials(users).items():
        try:
            d = future.result(timeout=10)
            out[user] = sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
        except KafkaException as e:
            # librdkafka copies a user's error message as a C string from the unterminated bytes
            # of the response (rd_kafka_DescribeUserScramCredentialsResponse_parse), so the
            # next byte, the empty CredentialInfos' count (0x01), is read with it.
            out[user] = (e.args[0].code(), e.args[0].str().removesuffix("\x01"))
    return out


def configs_cli(bootstrap, *args):
    return subprocess.run([sys.executable, "-m", "pybroker", "configs", "--bootstrap-server", bootstrap, *args],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


def test_confluent_kafka_upserts_describes_and_deletes(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert outcomes(admin.alter_user_scram_credentials([
        upsert("ck-alice", SHA256, 8192), upsert("ck-alice", SHA512, 4096), upsert("ck-bob", SHA512, 16384),
    ])) == {"ck-alice": None, "ck-bob": None}
    everyone = described(admin)
    assert everyone["ck-alice"] == [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 4096)]
    assert everyone["ck-bob"] == [("SCRAM_SHA_512", 16384)]
    assert described(admin, ["ck-bob", "ck-nobody"]) == {
        "ck-bob": [("SCRAM_SHA_512", 16384)],
        "ck-nobody": (91, "Attempt to describe a user credential that does not exist: ck-nobody"),
    }
    # Errors, per user.
    assert outcomes(admin.alter_user_scram_credentials([
        upsert("ck-few", SHA256, 4095), upsert("ck-many", SHA256, 16385),
        upsert("ck-twice", SHA256, 4096), upsert("ck-twice", SHA256, 5000),
        UserScramCredentialDeletion("ck-bob", SHA256),
    ])) == {
        "ck-few": (93, "Too few iterations"),
        "ck-many": (93, "Too many iterations"),
        "ck-twice": (92, "A user credential cannot be altered twice in the same request"),
        "ck-bob": (91, "Attempt to delete a user credential that does not exist"),
    }
    # Deletion.
    assert outcomes(admin.alter_user_scram_credentials([UserScramCredentialDeletion("ck-alice", SHA256)])) == {
        "ck-alice": None}
    assert described(admin, ["ck-alice"]) == {"ck-alice": [("SCRAM_SHA_512", 4096)]}
    assert outcomes(admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("ck-alice", SHA512), UserScramCredentialDeletion("ck-bob", SHA512),
    ])) == {"ck-alice": None, "ck-bob": None}
    assert not {"ck-alice", "ck-bob"} & set(described(admin))


def test_kafka_python_upserts_describes_and_deletes(broker):
    admin = kp.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert admin.alter_user_scram_credentials([
            kp.UserScramCredentialUpsertion("kp-carol", "SCRAM-SHA-256", "pw", iterations=5000),
            kp.UserScramCredentialUpsertion("kp-carol", "SCRAM-SHA-512", "pw"),
            kp.UserScramCredentialUpsertion("kp-few", "SCRAM-SHA-512", "pw", iterations=100),
            kp.UserScramCredentialDeletion("kp-dave", "SCRAM-SHA-256"),
            kp.UserScramCredentialDeletion("", "SCRAM-SHA-256"),
        ]) == {
            "": "Username must not be empty",
            "kp-few": "Too few iterations",
            "kp-dave": "Attempt to delete a user credential that does not exist",
            "kp-carol": None,
        }
        carol = admin.describe_user_scram_credentials(["kp-carol"])["kp-carol"]
        assert carol["error"] is None
        assert [(i["mechanism"].name, i["iterations"]) for i in carol["credential_infos"]] == [
            ("SCRAM_SHA_256", 5000), ("SCRAM_SHA_512", 4096)]
        assert "kp-carol" in admin.describe_user_scram_credentials()
        assert admin.describe_user_scram_credentials(["kp-x", "kp-x"]) == {"kp-x": {
            "error": "Cannot describe SCRAM credentials for the same user twice in a single request: kp-x",
            "credential_infos": []}}
        # An unknown mechanism byte.
        assert admin.alter_user_scram_credentials([kp.UserScramCredentialDeletion("kp-carol", 0)]) == {
            "kp-carol": "Unknown SCRAM mechanism"}
        assert admin.alter_user_scram_credentials([
            kp.UserScramCredentialDeletion("kp-carol", "SCRAM-SHA-256"),
            kp.UserScramCredentialDeletion("kp-carol", "SCRAM-SHA-512"),
        ]) == {"kp-carol": None}
        assert "kp-carol" not in admin.describe_user_scram_credentials()
    finally:
        admin.close()


def test_configs_cli_round_trip(broker):
    add = "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]"
    done = configs_cli(broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", "cli-alice",
                       "--add-config", add)
    assert (done.returncode, done.stdout, done.stderr) == (0, "Completed updating config for user cli-alice.\n", "")
    shown = configs_cli(broker.bootstrap, "--describe", "--entity-type", "users", "--entity-name", "cli-alice")
    assert shown.stdout == ("SCRAM credential configs for user-principal 'cli-alice' are "
                            "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    every = configs_cli(broker.bootstrap, "--describe", "--entity-type", "users")
    assert "SCRAM credential configs for user-principal 'cli-alice' are" in every.stdout
    # The credential is the password's: check the stored keys against a locally computed one.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert described(admin, ["cli-alice"])["cli-alice"] == [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 4096)]
    done = configs_cli(broker.bootstrap, "--alter", "--user", "cli-alice", "--delete-config", "SCRAM-SHA-256")
    assert done.returncode == 0, done.stderr
    shown = configs_cli(broker.bootstrap, "--describe", "--user", "cli-alice")
    assert shown.stdout == "SCRAM credential configs for user-principal 'cli-alice' are SCRAM-SHA-512=iterations=4096\n"
    # Errors.
    few = configs_cli(broker.bootstrap, "--alter", "--user", "cli-alice", "--add-config",
                      "SCRAM-SHA-256=[iterations=1024,password=x]")
    assert (few.returncode, few.stderr) == (
        1, "Error: Iterations 1024 is less than the minimum 4096 required for SCRAM-SHA-256\n")
    missing = configs_cli(broker.bootstrap, "--alter", "--user", "cli-alice", "--delete-config", "SCRAM-SHA-256")
    assert missing.returncode == 1
    assert "RESOURCE_NOT_FOUND (Attempt to delete a user credential that does not exist)" in missing.stderr
    nobody = configs_cli(broker.bootstrap, "--describe", "--user", "cli-nobody")
    assert (nobody.returncode, nobody.stdout) == (0, "")


def test_credentials_survive_a_restart(start_broker):
    broker = start_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert outcomes(admin.alter_user_scram_credentials([upsert("kept", SHA512, 6000)])) == {"kept": None}
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert described(admin, ["kept"]) == {"kept": [("SCRAM_SHA_512", 6000)]}


def test_cluster_alter_is_for_the_controller_and_every_broker_describes(zookeeper, tmp_path, request):
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path, nodes=3)
    try:
        admin = cluster.admin()
        # librdkafka sends Alter to the controller whichever broker it bootstrapped from.
        first = AdminClient({"bootstrap.servers": cluster.broker(3).bootstrap})
        assert outcomes(first.alter_user_scram_credentials([
            upsert("zk-alice", SHA256, 8192), upsert("zk-bob", SHA512, 4096)])) == {"zk-alice": None, "zk-bob": None}
        for broker in cluster.brokers:
            one = AdminClient({"bootstrap.servers": broker.bootstrap})
            wait_until(lambda one=one: described(one, ["zk-alice"]) == {"zk-alice": [("SCRAM_SHA_256", 8192)]},
                       timeout=5, message=f"broker {broker.bootstrap} describes zk-alice")

        controller_id = admin.describe_cluster().result(timeout=10).controller.id
        other = next(b for i, b in enumerate(cluster.brokers, 1) if i != controller_id)

        async def raw_alter_on(bootstrap):
            connection = await broker_connection(bootstrap)
            try:
                return await connection.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, AlterUserScramCredentialsRequest(
                    deletions=[AlterUserScramCredentialsRequest.ScramCredentialDeletion(name="zk-bob", mechanism=2)],
                    upsertions=[AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                        name=n, mechanism=1, iterations=4096, salt=b"s", salted_password=b"p" * 32)
                        for n in ("zk-z", "zk-a", "zk-bob")]))
            finally:
                await connection.close()

        response = asyncio.run(raw_alter_on(other.bootstrap))
        assert [(r.user, r.error_code, r.error_message) for r in response.results] == [
            ("zk-a", 41, None), ("zk-bob", 41, None), ("zk-z", 41, None)]

        # The project's admin client and CLI, bootstrapped from a non-controller, reach the controller.
        async def ours():
            async with Admin(other.bootstrap) as a:
                await a.alter_user_scram_credentials([OurUpsertion("zk-carol", "SCRAM-SHA-256", "pw", 9000)])
                with pytest.raises(AdminError) as e:
                    await a.alter_user_scram_credentials([OurUpsertion("zk-carol", "SCRAM-SHA-512", "pw", 20000)])
                assert e.value.message == "Too many iterations"
                return await a.describe_user_scram_credentials(["zk-carol"])

        assert [(i.mechanism, i.iterations) for i in asyncio.run(ours())["zk-carol"]] == [("SCRAM-SHA-256", 9000)]
        done = configs_cli(other.bootstrap, "--alter", "--user", "zk-dave", "--add-config", "SCRAM-SHA-512=[password=x]")
        assert done.returncode == 0, done.stderr
        assert set(described(admin)) == {"zk-alice", "zk-bob", "zk-carol", "zk-dave"}

        # Kept in ZooKeeper: a restarted broker describes them (and loads them into its cache).
        other.restart()
        again = AdminClient({"bootstrap.servers": other.bootstrap})
        wait_until(lambda: set(described(again)) == {"zk-alice", "zk-bob", "zk-carol", "zk-dave"}, timeout=10,
                   message="the restarted broker describes every user")
    finally:
        cluster.kill()
