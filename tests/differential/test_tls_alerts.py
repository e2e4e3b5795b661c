"""A listener with ``ssl.client.auth=required`` beside Apache Kafka 3.9.2: the TLS alert a client
with an untrusted certificate, or with none, gets.

Both brokers get the same key store, trust store and ``ssl.client.auth=required`` on an SSL
listener. ``openssl s_client`` connects with a certificate of another CA, then with no
certificate, over TLS 1.2 and TLS 1.3, and reports the alert it received ("SSL alert number N");
with TLS 1.3 the server checks the certificate after the client's Finished, so the alert is what
the client reads after a handshake it took for complete. A client with a certificate of the
trusted CA then asks both for Metadata over the same listener.

Each broker must send a fatal alert before it closes (pybroker closed without one, which clients
report as a dropped connection rather than a failed SSL handshake) and log the failure at INFO
("Failed authentication with /127.0.0.1 ... (SSL handshake failed)"). The alert numbers differ:
Kafka's come from the JDK, pybroker's from OpenSSL, which picks the alert from its verification
error and offers Python no way to choose another. `ALERTS` holds both per case, with why, as
docs/differences.md does; an alert that moves on either side fails the test.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.apache_kafka import ZOOKEEPER_VERSION, KafkaBroker
from bench.brokers import free_port
from pybroker.client.connection import BrokerConnection
from pybroker.client.security import ClientSecurity
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import MetadataRequest
from pybroker.security.certificates import CertificateAuthority, IssuedCertificate
from tests.conftest import BrokerProcess, require_kafka, wait_until
from tests.zookeeper import chroot_for

CERTIFICATE_UNKNOWN, BAD_CERTIFICATE, HANDSHAKE_FAILURE, UNKNOWN_CA, CERTIFICATE_REQUIRED = 46, 42, 40, 48, 116

# (client certificate, TLS version): (Kafka 3.9.2's alert, pybroker's alert, why they differ).
OPENSSL_UNTRUSTED = ("OpenSSL names the cause it found, no trusted issuer (unknown_ca); the JDK's server "
                     "sends certificate_unknown when its trust manager rejects the client's chain")
OPENSSL_MISSING = ("OpenSSL's alert for a missing certificate is fixed: handshake_failure before TLS 1.3, "
                   "certificate_required (RFC 8446) in TLS 1.3; the JDK sends bad_certificate in both")
ALERTS: dict[tuple[str, str], tuple[int, int, str]] = {
    ("untrusted", "TLSv1.2"): (CERTIFICATE_UNKNOWN, UNKNOWN_CA, OPENSSL_UNTRUSTED),
    ("untrusted", "TLSv1.3"): (CERTIFICATE_UNKNOWN, UNKNOWN_CA, OPENSSL_UNTRUSTED),
    ("none", "TLSv1.2"): (BAD_CERTIFICATE, HANDSHAKE_FAILURE, OPENSSL_MISSING),
    ("none", "TLSv1.3"): (BAD_CERTIFICATE, CERTIFICATE_REQUIRED, OPENSSL_MISSING),
}
_S_CLIENT_VERSION = {"TLSv1.2": "-tls1_2", "TLSv1.3": "-tls1_3"}
_VERSION = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_ALERT = re.compile(r"SSL alert number (\d+)")
# Kafka: "Failed authentication with /127.0.0.1 (channelId=...) (SSL handshake failed)"; pybroker
# adds the listener, the peer and OpenSSL's reason.
_FAILURE = re.compile(r"INFO .*Failed authentication with /127\.0\.0\.1 .*\(SSL handshake failed\)")


@dataclass(frozen=True)
class Certificates:
    ca: CertificateAuthority
    server: IssuedCertificate
    trusted: IssuedCertificate  # issued by ca
    untrusted: IssuedCertificate  # issued by another CA

    def listener(self) -> dict[str, str]:
        """The SSL settings both brokers get."""
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.server.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.certificate_path),
            "ssl.client.auth": "required",
        }


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    base = tmp_path_factory.mktemp("certificates")
    ca = CertificateAuthority.create(base / "ca")
    other = CertificateAuthority.create(base / "other", name="another CA")
    return Certificates(ca, ca.issue_server("broker"), ca.issue_client("CN=alice"), other.issue_client("CN=mallory"))


@pytest.fixture(scope="module")
def pybroker_ssl(certificates: Certificates, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    port, ssl_port = free_port(), free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("pybroker") / "data", port, **{
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
        **certificates.listener(),
    })
    process.start()
    yield process, ssl_port
    if process.alive:
        assert process.stop() == 0, process.log()
    process.kill()


@pytest.fixture(scope="module")
def kafka_ssl(zookeeper: object, certificates: Certificates,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaBroker, int]]:
    require_kafka(ZOOKEEPER_VERSION)
    port, ssl_port = free_port(), free_port()
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"), chroot_for(zookeeper, "kafka-tls-alerts"),  # type: ignore[arg-type]
                         port=port, quick_start=True, **{
                             "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
                             **certificates.listener(),
                         })
    try:
        broker.start()
        yield broker, ssl_port
    finally:
        broker.stop()
        broker.kill()


def s_client_alert(port: int, version: str, certificate: IssuedCertificate | None, ca: Path) -> int | None:
    """The alert ``openssl s_client`` reports from 127.0.0.1:``port`` (None: it got none). It
    keeps reading after the handshake (``-ign_eof``) until the server closes the connection."""
    args = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", _S_CLIENT_VERSION[version],
            "-CAfile", str(ca), "-ign_eof"]
    if certificate is not None:
        args += ["-cert", str(certificate.certificate), "-key", str(certificate.key)]
    result = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    found = _ALERT.search(result.stderr.decode(errors="replace"))
    return int(found.group(1)) if found else None


def _failures(log: str) -> int:
    return len(_FAILURE.findall(log))


async def _metadata_ports(port: int, context: ssl.SSLContext) -> list[tuple[str, int]]:
    connection = BrokerConnection("127.0.0.1", port, security=ClientSecurity("SSL", context))
    await connection.connect()
    try:
        response = await connection.send(ApiKey.METADATA, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        return [(b.host, b.port) for b in response.brokers]
    finally:
        await connection.close()


@pytest.mark.timeout(300)  # ZooKeeper and a Kafka JVM start within the first test
@pytest.mark.parametrize("version", ["TLSv1.2", "TLSv1.3"])
def test_a_rejected_client_certificate_gets_a_fatal_alert_and_a_trusted_one_connects(
        certificates: Certificates, pybroker_ssl: tuple[BrokerProcess, int], kafka_ssl: tuple[KafkaBroker, int],
        version: str) -> None:
    pybroker, pybroker_port = pybroker_ssl
    kafka, kafka_port = kafka_ssl
    before = _failures(pybroker.log()), _failures(kafka.log())
    for case, certificate in (("untrusted", certificates.untrusted), ("none", None)):
        kafkas, ours, why = ALERTS[(case, version)]
        seen = (s_client_alert(kafka_port, version, certificate, certificates.ca.certificate_path),
                s_client_alert(pybroker_port, version, certificate, certificates.ca.certificate_path))
        assert seen == (kafkas, ours), f"{case} certificate over {version} (Kafka, pybroker); expected because {why}"

    wait_until(lambda: (_failures(pybroker.log()) - before[0], _failures(kafka.log()) - before[1]) == (2, 2),
               message="both brokers logging the two failed handshakes")

    context = ssl.create_default_context(cafile=str(certificates.ca.certificate_path))
    context.minimum_version = context.maximum_version = _VERSION[version]
    context.load_cert_chain(str(certificates.trusted.certificate), str(certificates.trusted.key))
    assert asyncio.run(_metadata_ports(kafka_port, context)) == [("127.0.0.1", kafka_port)]
    assert asyncio.run(_metadata_ports(pybroker_port, context)) == [("127.0.0.1", pybroker_port)]
