"""TLS: PEM key and trust stores with Kafka's rules and messages, the server and client contexts,
client-certificate principals (Java's DN form, ssl.principal.mapping.rules) on a real listener, and
a failed handshake on one (the client gets the alert, the failure is logged, the connection goes)."""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from pybroker.common.cluster import Endpoint
from pybroker.common.config import ConfigError
from pybroker.network.listener import SocketServer
from pybroker.security.certificates import CertificateAuthority
from pybroker.security.principal import ANONYMOUS, KafkaPrincipal
from pybroker.security.ssl_principal import (
    NoMatchingRule,
    SslPrincipalBuilder,
    SslPrincipalMapper,
    distinguished_name,
)
from pybroker.security.tls import SslConfigError, client_auth, client_context, server_context
from pybroker.server.config import BrokerConfig

SSL = Endpoint("SSL", "127.0.0.1", 0, "SSL")
SASL_SSL = Endpoint("SASL_SSL", "127.0.0.1", 0, "SASL_SSL")


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("ca"))


def _pem_props(ca: CertificateAuthority, **extra: str) -> dict[str, str]:
    server = ca.issue_server("broker")
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.keystore), "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.certificate_path), **extra}


# --- DN and mapping rules -------------------------------------------------------------------------


def _self_signed(name: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                   .sign(key, hashes.SHA256()))
    return certificate.public_bytes(serialization.Encoding.DER)


def test_distinguished_name_is_javas_x500_principal_name() -> None:
    """Checked with Java 17 (security fact sheet, section 6.2): subject
    /C=US/ST=CA/O=Acme, Inc./OU=eng+UID=42/CN=alice smith/emailAddress=a@x.org."""
    a, rdn = x509.NameAttribute, x509.RelativeDistinguishedName
    name = x509.Name([
        rdn([a(NameOID.COUNTRY_NAME, "US")]),
        rdn([a(NameOID.STATE_OR_PROVINCE_NAME, "CA")]),
        rdn([a(NameOID.ORGANIZATION_NAME, "Acme, Inc.")]),
        rdn([a(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"), a(NameOID.USER_ID, "42")]),
        rdn([a(NameOID.COMMON_NAME, "alice smith")]),
        rdn([a(NameOID.EMAIL_ADDRESS, "a@x.org")]),
    ])
    assert distinguished_name(_self_signed(name)) == (
        "1.2.840.113549.1.9.1=#16076140782e6f7267,CN=alice smith,OU=eng+UID=42,O=Acme\\, Inc.,ST=CA,C=US")


def test_distinguished_name_escapes() -> None:
    a = x509.NameAttribute
    name = x509.Name([a(NameOID.ORGANIZATION_NAME, ' lead;a=b+c<d>#"\\ '), a(NameOID.COMMON_NAME, "x")])
    assert distinguished_name(name) == 'CN=x,O=\\ lead\\;a\\=b\\+c\\<d\\>\\#\\"\\\\\\ '


def test_mapping_rules() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,]*),.*$/user-$1/U,DEFAULT")
    assert mapper.name("CN=Svc1,OU=ServiceUsers,O=x") == "svc1"
    assert mapper.name("CN=bob,O=x") == "USER-BOB"
    assert mapper.name("O=only") == "O=only"
    assert SslPrincipalMapper("DEFAULT").name("CN=a,O=b") == "CN=a,O=b"
    # the regex must match the whole DN, and then replaces every match (Java's replaceAll)
    assert SslPrincipalMapper("RULE:CN=a/x/").rules and SslPrincipalMapper("RULE:CN=(a)/$1$1/").name("CN=a") == "aa"
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=a,O=b"):
        SslPrincipalMapper("RULE:CN=a/x/").name("CN=a,O=b")
    # an escaped slash in the pattern; \$ is a literal dollar in the replacement
    assert SslPrincipalMapper(r"RULE:^CN=(.*)\/x$/\$$1/").name("CN=a/x") == "$a"


def test_invalid_mapping_rule() -> None:
    with pytest.raises(ConfigError, match="Invalid rule"):
        SslPrincipalMapper("RULE:a/b/c/d,DEFAULT")


def test_principal_builder() -> None:
    builder = SslPrincipalBuilder("RULE:^CN=([^,]*).*$/$1/")
    assert builder(None) == ANONYMOUS
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "o"), x509.NameAttribute(NameOID.COMMON_NAME, "al")])
    assert builder(_self_signed(name)) == KafkaPrincipal.user("al")


# --- key and trust stores ---------------------------------------------------------------------------


def test_server_context_from_files(ca: CertificateAuthority) -> None:
    context = server_context(BrokerConfig(_pem_props(ca)), SSL)
    assert context.verify_mode == ssl.CERT_NONE
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2 and context.maximum_version == ssl.TLSVersion.TLSv1_3


def test_server_context_inline_and_encrypted(ca: CertificateAuthority) -> None:
    issued = ca.issue_server("enc", password="key-secret")
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
             "ssl.keystore.key": issued.key.read_text(), "ssl.keystore.certificate.chain": issued.certificate.read_text(),
             "ssl.key.password": "key-secret", "ssl.truststore.type": "PEM",
             "ssl.truststore.certificates": ca.certificate_pem.decode()}
    server_context(BrokerConfig(props), SSL)
    # inline values written on one line (a properties file's continuation lines) work too
    props["ssl.keystore.certificate.chain"] = " ".join(issued.certificate.read_text().splitlines())
    server_context(BrokerConfig(props), SSL)
    props["ssl.key.password"] = "wrong"
    with pytest.raises(SslConfigError, match="Private key could not be loaded"):
        server_context(BrokerConfig(props), SSL)


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("change, message", [
    ({"ssl.keystore.key": "x", "ssl.keystore.certificate.chain": "c"}, "Both SSL key store location and separate private key are specified."),
    ({"ssl.keystore.password": "p"},
     "SSL key store password cannot be specified with PEM format, only key password may be specified"),
    ({"ssl.truststore.password": "p"}, "SSL trust store password cannot be specified for PEM format."),
    ({"ssl.keystore.location": None, "ssl.keystore.certificate.chain": "c"},
     "SSL certificate chain is specified, but private key is not specified"),
    ({"ssl.keystore.location": None, "ssl.keystore.key": "k"},
     "SSL private key is specified, but certificate chain is not specified."),
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type JKS is not supported by pybroker"),
    ({"ssl.keystore.type": "PKCS12"}, "ssl.keystore.type PKCS12 is not supported by pybroker"),
    ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type JKS is not supported by pybroker"),
    ({"ssl.truststore.certificates": "x"},
     "Both SSL trust store location and separate trust certificates are specified."),
    ({"ssl.keystore.location": None}, "Listener SSL (SSL) has no key store"),
    ({"ssl.keystore.location": "/nonexistent/k.pem"}, "Failed to load PEM SSL keystore /nonexistent/k.pem"),
    ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols: unsupported protocol SSLv3"),
])
def test_store_errors(ca: CertificateAuthority, change: dict[str, str | None], message: str) -> None:
    props = _pem_props(ca)
    for key, value in change.items():
        if value is None:
            props.pop(key)
        else:
            props[key] = value
    with pytest.raises(SslConfigError) as e:
        server_context(BrokerConfig(props), SSL)
    assert message in str(e.value)
    assert isinstance(e.value, ConfigError)


def test_private_key_rules(ca: CertificateAuthority, tmp_path: Path) -> None:
    issued = ca.issue_server("keys")
    chain = issued.certificate.read_text()
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pkcs1 = rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()).decode()
    cases = {
        "pkcs1": (pkcs1 + chain, "Private key could not be loaded"),
        "two": (issued.key.read_text() * 2 + chain, "Expected one private key, but found 2"),
        "none": (chain, "No matching PRIVATE KEY entries in PEM file"),
        "nocert": (issued.key.read_text(), "No matching CERTIFICATE entries in PEM file"),
        "mismatch": (ca.issue_server("other").key.read_text() + chain, "does not match"),
    }
    for name, (text, message) in cases.items():
        props = _pem_props(ca, **{"ssl.keystore.location": _write(tmp_path / f"{name}.pem", text)})
        with pytest.raises(SslConfigError, match=message):
            server_context(BrokerConfig(props), SSL)


def test_trust_store_needs_a_certificate(ca: CertificateAuthority, tmp_path: Path) -> None:
    props = _pem_props(ca, **{"ssl.truststore.location": _write(tmp_path / "empty.pem", "nothing")})
    with pytest.raises(SslConfigError, match="No matching CERTIFICATE entries"):
        server_context(BrokerConfig(props), SSL)


# --- client authentication and the client context ------------------------------------------------------


@pytest.mark.parametrize("value, mode", [("none", ssl.CERT_NONE), ("requested", ssl.CERT_OPTIONAL),
                                         ("required", ssl.CERT_REQUIRED)])
def test_client_auth_modes(ca: CertificateAuthority, value: str, mode: ssl.VerifyMode) -> None:
    assert server_context(BrokerConfig(_pem_props(ca, **{"ssl.client.auth": value})), SSL).verify_mode == mode
    prefixed = _pem_props(ca, **{"listener.name.ssl.ssl.client.auth": value})
    assert server_context(BrokerConfig(prefixed), SSL).verify_mode == mode


def test_sasl_ssl_ignores_the_broker_wide_client_auth(ca: CertificateAuthority, caplog: pytest.LogCaptureFixture) -> None:
    props = _pem_props(ca, **{"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                              "ssl.client.auth": "required"})
    with caplog.at_level(logging.WARNING):
        assert client_auth(BrokerConfig(props), SASL_SSL) == "none"
    assert "is applied only to SSL listeners" in caplog.text
    props["listener.name.sasl_ssl.ssl.client.auth"] = "requested"
    assert client_auth(BrokerConfig(props), SASL_SSL) == "requested"


def test_client_context(ca: CertificateAuthority) -> None:
    context = client_context(BrokerConfig(_pem_props(ca)), "SSL")
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert context.get_ca_certs()  # the trust store
    off = client_context(BrokerConfig(_pem_props(ca, **{"ssl.endpoint.identification.algorithm": ""})), "SSL")
    assert not off.check_hostname and off.verify_mode == ssl.CERT_REQUIRED
    tls13 = client_context(BrokerConfig(_pem_props(ca, **{"ssl.enabled.protocols": "TLSv1.3"})), "SSL")
    assert tls13.minimum_version == ssl.TLSVersion.TLSv1_3


# --- principals on a real listener ------------------------------------------------------------------------


def _principals_over_listener(ca: CertificateAuthority, client_auth_value: str, rules: str,
                              certificate: bool) -> list[KafkaPrincipal | None]:
    """Connect once to an in-process SSL listener; the principal its connection got (None: the
    connection was closed before a request)."""
    config = BrokerConfig(_pem_props(ca, **{"ssl.client.auth": client_auth_value}))
    seen: list[KafkaPrincipal | None] = []

    def dispatch(frame: bytearray, connection):  # noqa: ANN001, ANN202
        seen.append(connection.principal)
        return None

    async def go() -> None:
        server = SocketServer([SSL], dispatch, 1 << 20, {"SSL": server_context(config, SSL)}, SslPrincipalBuilder(rules))
        await server.start()
        try:
            port = server.bound_ports["SSL"]
            context = ssl.create_default_context(cafile=str(ca.certificate_path))
            if certificate:
                alice = ca.issue_client("CN=alice,OU=eng,O=pybroker")
                context.load_cert_chain(str(alice.certificate), str(alice.key))
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
            writer.write(b"\x00\x00\x00\x04abcd")
            await writer.drain()
            try:
                async with asyncio.timeout(2):
                    while not seen and not reader.at_eof():
                        await asyncio.wait_for(reader.read(1), 0.2)
            except (TimeoutError, ConnectionError, ssl.SSLError):
                pass
            writer.close()
        finally:
            await server.stop()

    asyncio.run(go())
    return seen


def test_principal_of_a_client_certificate(ca: CertificateAuthority) -> None:
    assert _principals_over_listener(ca, "required", "DEFAULT", True) == [
        KafkaPrincipal.user("CN=alice,OU=eng,O=pybroker")]
    assert _principals_over_listener(ca, "requested", "RULE:^CN=([^,]*),.*$/$1/U", True) == [KafkaPrincipal.user("ALICE")]
    assert _principals_over_listener(ca, "requested", "DEFAULT", False) == [ANONYMOUS]
    assert _principals_over_listener(ca, "none", "DEFAULT", True) == [ANONYMOUS]  # never asked for


def test_no_matching_rule_closes_the_connection(ca: CertificateAuthority, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert _principals_over_listener(ca, "required", "RULE:^CN=bob.*$/bob/", True) == []
    assert "no principal for its client certificate: No rules apply to CN=alice,OU=eng,O=pybroker" in caplog.text


# --- a failed handshake ---------------------------------------------------------------------------


async def _alert_of(port: int, context: ssl.SSLContext) -> str:
    """The reason of the SSLError the client meets: in the handshake, or (TLS 1.3, where the
    server checks the certificate after the client's Finished) on its first read."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
        try:
            async with asyncio.timeout(5):
                await reader.read(1)
        finally:
            writer.close()
    except ssl.SSLError as e:
        return str(e.reason)
    except ConnectionError:
        pass
    return "closed without an alert"


@pytest.mark.parametrize("version, no_certificate_alert", [
    (ssl.TLSVersion.TLSv1_2, "SSLV3_ALERT_HANDSHAKE_FAILURE"),
    (ssl.TLSVersion.TLSv1_3, "TLSV13_ALERT_CERTIFICATE_REQUIRED"),
], ids=["TLSv1.2", "TLSv1.3"])
def test_a_failed_handshake_sends_the_alert_and_forgets_the_connection(
        ca: CertificateAuthority, caplog: pytest.LogCaptureFixture, tmp_path: Path,
        version: ssl.TLSVersion, no_certificate_alert: str) -> None:
    """``ssl.client.auth=required``: a client certificate from another CA, and none at all, get
    OpenSSL's fatal alert before the close (asyncio alone closes without it), each failure is one
    INFO line with Kafka's words, and the connections leave the server's set, as does one whose
    peer leaves in the middle of the handshake (logged at DEBUG only)."""
    config = BrokerConfig(_pem_props(ca, **{"ssl.client.auth": "required"}))
    other = CertificateAuthority.create(tmp_path / "other", name="another CA").issue_client("CN=mallory")

    def client(certificate: bool) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(ca.certificate_path))
        context.minimum_version = context.maximum_version = version
        if certificate:
            context.load_cert_chain(str(other.certificate), str(other.key))
        return context

    async def go() -> tuple[list[str], int]:
        server = SocketServer([SSL], lambda frame, connection: None, 1 << 20, {"SSL": server_context(config, SSL)},
                              SslPrincipalBuilder("DEFAULT"))
        await server.start()
        try:
            port = server.bound_ports["SSL"]
            alerts = [await _alert_of(port, client(True)), await _alert_of(port, client(False))]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello cut short
            await writer.drain()
            writer.close()
            for _ in range(100):
                if not server.connections:
                    break
                await asyncio.sleep(0.02)
            return alerts, len(server.connections)
        finally:
            await server.stop()

    with caplog.at_level(logging.DEBUG, logger="pybroker.network.tls_server"):
        alerts, left = asyncio.run(go())
    assert alerts == ["TLSV1_ALERT_UNKNOWN_CA", no_certificate_alert]
    assert left == 0
    failures = [r for r in caplog.records if r.name == "pybroker.network.tls_server" and r.levelno == logging.INFO]
    assert [r.getMessage().split(":")[0] for r in failures] == [
        "Failed authentication with /127.0.0.1 (SSL handshake failed) on listener SSL from 127.0.0.1"] * 2
    assert "certificate verify failed" in failures[0].getMessage()
    assert "peer did not return a certificate" in failures[1].getMessage()
    assert any("closed during the SSL handshake" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
