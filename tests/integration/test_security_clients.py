"""Every real client over every secure listener: one broker process with PLAINTEXT, SSL,
SASL_PLAINTEXT and SASL_SSL listeners; PLAIN users in the SASL listeners' JAAS configs, SCRAM users
created through AlterUserScramCredentials (confluent-kafka's admin API, as a user would).

- confluent-kafka, aiokafka, kafka-python and kcat produce and consume over SASL_PLAINTEXT with
  PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, and over SASL_SSL (SCRAM-SHA-512 and PLAIN), the CA from
  ``pybroker.security.certificates`` and host names checked; the project's BrokerConnection too;
- a wrong SCRAM password: each client's authentication error, 58 with Kafka's text where it shows it;
- a SCRAM user deleted through the admin API: that user's next login fails, others are unaffected.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from bench.brokers import free_port
from pybroker.client.connection import BrokerConnection, SaslAuthenticationFailedError
from pybroker.client.security import ClientSecurity
from pybroker.protocol import messages as m
from pybroker.protocol.api_keys import ApiKey
from pybroker.security.certificates import CertificateAuthority
from tests.conftest import BrokerProcess, wait_until

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-plain";')
SCRAM_USERS = {"alice": "alice-scram", "carl": "carl-scram"}


def scram_failure(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


@dataclass(frozen=True)
class Login:
    """Where and how a client connects: the listener's bootstrap and protocol, the SASL mechanism
    and the user's password (None: no SASL), the CA file (None: no TLS)."""
    bootstrap: str
    protocol: str
    mechanism: str | None = None
    user: str = "alice"
    password: str = ""
    cafile: str | None = None

    def librdkafka(self) -> dict[str, str]:
        config = {"bootstrap.servers": self.bootstrap, "security.protocol": self.protocol}
        if self.mechanism:
            config |= {"sasl.mechanism": self.mechanism, "sasl.username": self.user, "sasl.password": self.password}
        if self.cafile:
            config["ssl.ca.location"] = self.cafile
        return config

    def kcat(self) -> list[str]:
        config = {**self.librdkafka()}
        bootstrap = config.pop("bootstrap.servers")
        return ["-b", bootstrap, *[arg for k, v in config.items() for arg in ("-X", f"{k}={v}")]]

    def kafka_python(self) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap_servers": self.bootstrap, "security_protocol": self.protocol}
        if self.mechanism:
            config |= {"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                       "sasl_plain_password": self.password}
        if self.cafile:
            config["ssl_cafile"] = self.cafile
        return config

    def aiokafka(self) -> dict[str, Any]:
        from aiokafka.helpers import create_ssl_context

        config: dict[str, Any] = {"bootstrap_servers": self.bootstrap, "security_protocol": self.protocol}
        if self.mechanism:
            config |= {"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                       "sasl_plain_password": self.password}
        if self.cafile:
            config["ssl_context"] = create_ssl_context(cafile=self.cafile)
        return config


class SecureListeners:
    def __init__(self, process: BrokerProcess, ports: dict[str, int], cafile: str) -> None:
        self.process, self.ports, self.cafile = process, ports, cafile

    def login(self, protocol: str, mechanism: str | None = None, user: str = "alice",
              password: str | None = None) -> Login:
        if password is None:
            password = "alice-plain" if mechanism == "PLAIN" else SCRAM_USERS.get(user, "")
        cafile = self.cafile if "SSL" in protocol else None
        return Login(f"127.0.0.1:{self.ports[protocol]}", protocol, mechanism, user, password, cafile)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.process.bootstrap})


def set_scram_user(admin: AdminClient, user: str, password: str) -> None:
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
               for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(timeout=10)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureListeners]:
    base = tmp_path_factory.mktemp("secure-clients")
    ca = CertificateAuthority.create(base / "certs")
    server = ca.issue_server("broker")
    ports = {protocol: free_port() for protocol in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    process = BrokerProcess(base / "data", ports["PLAINTEXT"], **{
        "listeners": ",".join(f"{protocol}://127.0.0.1:{port}" for protocol, port in ports.items()),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.certificate_path),
        "num.partitions": 1,
    })
    process.start()
    try:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        for user, password in SCRAM_USERS.items():
            set_scram_user(admin, user, password)
        yield SecureListeners(process, ports, str(ca.certificate_path))
    finally:
        code = process.stop()
        process.kill()
    assert code == 0, process.log()
    problems = process.unexpected_log_entries([])
    assert not problems, "\n\n".join(problems[:5])


# --- round trips ---------------------------------------------------------------------------------

VALUES = [b"v%d" % i for i in range(4)]


def roundtrip_confluent(login: Login, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(login.librdkafka())
    for value in VALUES:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**login.librdkafka(), "group.id": f"{topic}-g", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(out) < len(VALUES) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                out.append(message.value())
        return out
    finally:
        consumer.close()


def roundtrip_aiokafka(login: Login, topic: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**login.aiokafka())
        await producer.start()
        try:
            for value in VALUES:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(enable_auto_commit=False, auto_offset_reset="earliest", **login.aiokafka())
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            out: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(out) < len(VALUES) and time.monotonic() < deadline:
                batch = await consumer.getmany(tp, timeout_ms=500)
                out += [message.value for message in batch.get(tp, [])]
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


def roundtrip_kafka_python(login: Login, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(**login.kafka_python())
    try:
        for value in VALUES:
            producer.send(topic, value).get(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(enable_auto_commit=False, auto_offset_reset="earliest", **login.kafka_python())
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(out) < len(VALUES) and time.monotonic() < deadline:
            out += [message.value for message in consumer.poll(timeout_ms=500).get(tp, [])]
        return out
    finally:
        consumer.close()


def roundtrip_kcat(login: Login, topic: str) -> list[bytes]:
    produced = subprocess.run(["kcat", "-P", "-t", topic, *login.kcat()], input=b"\n".join(VALUES) + b"\n",
                              capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr.decode(errors="replace")
    consumed = subprocess.run(["kcat", "-C", "-t", topic, "-o", "beginning", "-c", str(len(VALUES)), "-e",
                               *login.kcat()], capture_output=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr.decode(errors="replace")
    return consumed.stdout.splitlines()


ROUNDTRIPS = {"confluent": roundtrip_confluent, "aiokafka": roundtrip_aiokafka,
              "kafka-python": roundtrip_kafka_python, "kcat": roundtrip_kcat}

MATRIX = [
    *[(client, "SASL_PLAINTEXT", mechanism) for client in sorted(ROUNDTRIPS)
      for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")],
    *[(client, "SASL_SSL", "SCRAM-SHA-512") for client in sorted(ROUNDTRIPS)],
    ("confluent", "SASL_SSL", "PLAIN"), ("aiokafka", "SASL_SSL", "SCRAM-SHA-256"),
    *[(client, "SSL", None) for client in ("confluent", "kafka-python")],
]


@pytest.mark.parametrize(("client", "protocol", "mechanism"), MATRIX)
def test_produce_and_consume(secure: SecureListeners, topic_name: str, client: str, protocol: str,
                             mechanism: str | None) -> None:
    assert ROUNDTRIPS[client](secure.login(protocol, mechanism), topic_name) == VALUES


@pytest.mark.parametrize(("protocol", "mechanism"), [("SASL_PLAINTEXT", "SCRAM-SHA-256"),
                                                     ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN")])
def test_the_projects_connection(secure: SecureListeners, protocol: str, mechanism: str) -> None:
    login = secure.login(protocol, mechanism)

    async def run() -> list[int]:
        import ssl

        host, port = login.bootstrap.split(":")
        context = ssl.create_default_context(cafile=login.cafile) if login.cafile else None
        connection = BrokerConnection(host, int(port), security=ClientSecurity(
            protocol, context, sasl_mechanism=mechanism, sasl_username=login.user, sasl_password=login.password))
        await connection.connect()
        try:
            response = await connection.send(ApiKey.METADATA, m.MetadataRequest(topics=None))
            return [broker.port for broker in response.brokers]
        finally:
            await connection.close()

    # Metadata answers the listener the request came in on.
    assert asyncio.run(run()) == [secure.ports[protocol]]


# --- a wrong SCRAM password ----------------------------------------------------------------------


def test_wrong_scram_password_confluent(secure: SecureListeners) -> None:
    errors: list[Any] = []
    admin = AdminClient({**secure.login("SASL_PLAINTEXT", "SCRAM-SHA-256", password="wrong").librdkafka(),
                         "error_cb": errors.append})
    wait_until(lambda: errors or admin.poll(0.2) and False, 20, message="an authentication error")
    assert any(e.code() == -169 and scram_failure("SCRAM-SHA-256") in e.str() for e in errors), \
        [e.str() for e in errors]  # -169: _AUTHENTICATION


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_wrong_scram_password_kcat(secure: SecureListeners, protocol: str) -> None:
    login = secure.login(protocol, "SCRAM-SHA-512", password="wrong")
    result = subprocess.run(["kcat", "-L", "-m", "5", *login.kcat()], capture_output=True, timeout=30)
    assert result.returncode != 0
    assert f"SASL authentication error: {scram_failure('SCRAM-SHA-512')}" in result.stderr.decode(errors="replace")


def test_wrong_scram_password_aiokafka(secure: SecureListeners, caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def run() -> None:
        producer = AIOKafkaProducer(**secure.login("SASL_PLAINTEXT", "SCRAM-SHA-256", password="wrong").aiokafka())
        try:
            with pytest.raises(KafkaConnectionError):
                await producer.start()
        finally:
            await producer.stop()

    with caplog.at_level(logging.ERROR, logger="aiokafka"):
        asyncio.run(run())
    assert f"[Error 58] SaslAuthenticationFailed: {scram_failure('SCRAM-SHA-256')}" in caplog.text


def test_wrong_scram_password_kafka_python(secure: SecureListeners, caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    # The broker writes the failure response and closes, as Kafka does (after
    # connections.failed.authentication.delay.ms). kafka-python 3.0 drops a response that arrives
    # in the same read as the end of the stream (kafka/net/transport.py `_sock_recv`), so some
    # attempts report only "socket disconnected": try again until one reads the response.
    for _ in range(5):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
            KafkaProducer(bootstrap_timeout_ms=3000,
                          **secure.login("SASL_PLAINTEXT", "SCRAM-SHA-512", password="wrong").kafka_python())
        if "[Error 58] SaslAuthenticationFailedError" in caplog.text:
            break
    assert "[Error 58] SaslAuthenticationFailedError" in caplog.text
    assert scram_failure("SCRAM-SHA-512") in caplog.text


def test_wrong_scram_password_the_projects_connection(secure: SecureListeners) -> None:
    login = secure.login("SASL_PLAINTEXT", "SCRAM-SHA-256", password="wrong")

    async def run() -> SaslAuthenticationFailedError:
        host, port = login.bootstrap.split(":")
        connection = BrokerConnection(host, int(port), security=ClientSecurity(
            "SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_username="alice", sasl_password="wrong"))
        with pytest.raises(SaslAuthenticationFailedError) as raised:
            await connection.connect()
        return raised.value

    failure = asyncio.run(run())
    assert failure.error_code == 58 and scram_failure("SCRAM-SHA-256") in str(failure)


# --- a deleted SCRAM user ------------------------------------------------------------------------


def _kcat_list(login: Login) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["kcat", "-L", "-m", "5", *login.kcat()], capture_output=True, timeout=30)


def test_a_deleted_scram_user_cannot_log_in(secure: SecureListeners) -> None:
    admin = secure.admin()
    set_scram_user(admin, "temp", "temp-scram")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        login = secure.login("SASL_PLAINTEXT", mechanism, user="temp", password="temp-scram")
        assert _kcat_list(login).returncode == 0
    deletion = [UserScramCredentialDeletion("temp", ScramMechanism.SCRAM_SHA_256)]
    for future in admin.alter_user_scram_credentials(deletion).values():
        future.result(timeout=10)
    # The deleted mechanism refuses at once; the other one still logs in.
    refused = _kcat_list(secure.login("SASL_PLAINTEXT", "SCRAM-SHA-256", user="temp", password="temp-scram"))
    assert refused.returncode != 0
    assert scram_failure("SCRAM-SHA-256") in refused.stderr.decode(errors="replace")
    assert _kcat_list(secure.login("SASL_PLAINTEXT", "SCRAM-SHA-512", user="temp", password="temp-scram")) \
        .returncode == 0
    deletion = [UserScramCredentialDeletion("temp", ScramMechanism.SCRAM_SHA_512)]
    for future in admin.alter_user_scram_credentials(deletion).values():
        future.result(timeout=10)
    refused = _kcat_list(secure.login("SASL_SSL", "SCRAM-SHA-512", user="temp", password="temp-scram"))
    assert refused.returncode != 0
    assert scram_failure("SCRAM-SHA-512") in refused.stderr.decode(errors="replace")
    # Other users are unaffected.
    assert _kcat_list(secure.login("SASL_SSL", "SCRAM-SHA-512", user="carl")).returncode == 0
