"""--command-config security settings: Kafka's client property names turned into a ClientSecurity."""

from __future__ import annotations

import ssl

import pytest

from pybroker.cli.command_config import CommandConfigError, client_settings, parse_properties
from pybroker.cli.secure_setup import SecureSetup
from pybroker.client.kafka_consumer import ConsumerConfig
from pybroker.client.kafka_producer import KafkaProducerConfig
from pybroker.client.security import ClientSecurityError, security_from_properties
from pybroker.security.certificates import CertificateAuthority

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture
def ca(tmp_path):
    return CertificateAuthority.create(tmp_path / "ca")


def test_plaintext_by_default():
    settings = client_settings({"client.id": "x"})
    assert settings.security.security_protocol == "PLAINTEXT"
    assert settings.security.ssl_context is None and settings.warnings == []


def test_sasl_ssl_with_scram_and_a_pem_trust_store(ca):
    text = (f"security.protocol=sasl_ssl\nsasl.mechanism=SCRAM-SHA-512\n"
            f'sasl.jaas.config={SCRAM} required username="alice" password="a-b";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={ca.certificate_path}\n")
    security = client_settings(parse_properties(text)).security
    assert (security.security_protocol, security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (security.sasl_username, security.sasl_password) == ("alice", "a-b")
    context = security.ssl_context
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "pybroker test CA"),),)]


def test_ssl_with_inline_certificates_a_key_store_and_no_host_name_check(ca):
    client = ca.issue_client("CN=alice")
    props = {
        "security.protocol": "SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": ca.certificate_pem.decode().replace("\n", " "),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(client.keystore),
        "ssl.endpoint.identification.algorithm": "", "ssl.enabled.protocols": "TLSv1.3",
    }
    security = security_from_properties(props)
    assert security.uses_tls and not security.uses_sasl
    assert security.ssl_context is not None and not security.ssl_context.check_hostname
    assert security.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_sasl_plaintext_with_plain():
    security = security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN} required username="bob" password="pw";'})
    assert (security.sasl_mechanism, security.sasl_username, security.sasl_password) == ("PLAIN", "bob", "pw")
    assert security.ssl_context is None


@pytest.mark.parametrize(("props", "message"), [
    ({"security.protocol": "TLS"}, "security.protocol: String must be one of"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism GSSAPI is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config is required"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{SCRAM} required username="a" password="b";'}, "needs the login module"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{PLAIN} required username="a";'}, "username and password options are required"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{PLAIN} required username="a" password="b"'}, "not terminated by semi-colon"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": "/x.jks"},
     "JKS is not supported"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/nonexistent.pem"},
     "Failed to load PEM SSL truststore"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"}, "unsupported algorithm"),
])
def test_bad_settings_are_refused_with_the_reason(props, message):
    with pytest.raises(ClientSecurityError, match=message):
        security_from_properties(props)
    with pytest.raises(CommandConfigError, match=message):
        client_settings(props)


def test_unsupported_security_settings_and_unknown_names_are_warned_about():
    settings = client_settings({"security.protocol": "PLAINTEXT", "ssl.cipher.suites": "x",
                                "sasl.login.class": "y", "mystery": "1"})
    assert settings.warnings == [
        "security settings pybroker's clients do not support were ignored: ssl.cipher.suites, sasl.login.class",
        "unknown client settings were ignored: mystery",
    ]


def test_producer_and_consumer_take_the_same_properties():
    props = {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": f'{SCRAM} required username="u" password="p";'}
    for config in (KafkaProducerConfig.from_properties(props), ConsumerConfig.from_properties({**props, "group.id": "g"})):
        assert (config.security.security_protocol, config.security.sasl_mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-256")
        assert config.security.sasl_username == "u"


def test_secure_setup_is_generated_once_and_its_client_file_maps_back(tmp_path):
    first = SecureSetup.prepare(tmp_path / "sec")
    again = SecureSetup.prepare(tmp_path / "sec")
    assert first == again
    assert first.truststore.read_bytes() == again.truststore.read_bytes()
    assert (tmp_path / "sec" / "users.properties").stat().st_mode & 0o077 == 0
    java, rdkafka = first.write_client_files("127.0.0.1:9093")
    settings = client_settings(parse_properties(java.read_text()))
    assert settings.warnings == []
    assert (settings.security.security_protocol, settings.security.sasl_username) == ("SASL_SSL", "admin")
    assert settings.security.sasl_password == first.admin_password
    rd = parse_properties(rdkafka.read_text())
    assert rd["sasl.mechanisms"] == "SCRAM-SHA-512" and rd["ssl.ca.location"] == str(first.truststore)
    props = first.broker_properties("127.0.0.1", 9093)
    assert props["listeners"] == "SASL_SSL://127.0.0.1:9093" and "PLAINTEXT" not in props["listeners"]
    assert props["super.users"] == "User:admin;User:broker"
