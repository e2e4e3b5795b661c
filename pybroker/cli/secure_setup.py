"""``--secure``: what ``pybroker serve --secure`` and ``pybroker cluster --secure`` generate and set.

Owns the secure directory of a local broker or cluster and the broker properties that use it:

- a private CA (``ca/``), one broker certificate with the SANs ``localhost`` and ``127.0.0.1``
  (``broker.keystore.pem``, PKCS#8 key then chain) and the CA certificate as trust store
  (``ca.pem``), generated once and reused on every start;
- two users with random passwords, generated once (``users.properties``, mode 0600): ``broker``,
  the brokers' own PLAIN login on the inter-broker listener, and ``admin``, a SCRAM-SHA-512 user
  created with AlterUserScramCredentials once the brokers answer (`create_admin_user`);
- the broker properties (`broker_properties`): one SASL_SSL listener, no PLAINTEXT listener,
  mechanisms SCRAM-SHA-512 and PLAIN (PLAIN only knows ``broker``), the ACL authorizer with
  ``User:admin`` and ``User:broker`` as super users;
- the client files (`write_client_files`): ``client.properties`` (Kafka's Java client names, read by
  ``kafka-*.sh --command-config`` and ``pybroker ... --command-config``) and
  ``librdkafka.properties`` (``kcat -F``, confluent-kafka).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from pybroker.cli.command_config import load_properties
from pybroker.client.admin import Admin, UserScramCredentialUpsertion
from pybroker.client.security import ClientSecurity, security_from_properties
from pybroker.security.certificates import CertificateAuthority

DEFAULT_SECURE_DIR = "pybroker-secure"
LISTENER = "SASL_SSL"
ADMIN_USER = "admin"
BROKER_USER = "broker"
ADMIN_MECHANISM = "SCRAM-SHA-512"
USERS_FILE = "users.properties"
CLIENT_PROPERTIES = "client.properties"
LIBRDKAFKA_PROPERTIES = "librdkafka.properties"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


@dataclass(frozen=True)
class SecureSetup:
    """The generated files of a secure directory and the users' passwords."""

    directory: Path
    keystore: Path
    truststore: Path
    admin_password: str
    broker_password: str

    @classmethod
    def prepare(cls, directory: str | os.PathLike[str]) -> SecureSetup:
        """The secure directory's CA, broker certificate and users, generated if missing."""
        root = Path(directory).resolve()
        root.mkdir(parents=True, exist_ok=True)
        ca_dir = root / "ca"
        if (ca_dir / "ca.pem").exists():
            ca = CertificateAuthority.load(ca_dir)
        else:
            ca_dir.mkdir(exist_ok=True)
            ca = CertificateAuthority.create(ca_dir, "pybroker local CA")
        truststore = root / "ca.pem"
        if not truststore.exists():
            truststore.write_bytes(ca.certificate_pem)
        keystore = root / "broker.keystore.pem"
        if not keystore.exists():
            issued = ca.issue_server("broker")
            os.replace(issued.keystore, keystore)
        users = root / USERS_FILE
        if users.exists():
            passwords = load_properties(str(users))
        else:
            passwords = {ADMIN_USER: secrets.token_urlsafe(18), BROKER_USER: secrets.token_urlsafe(18)}
            _write_private(users, "# Passwords of the users `--secure` created (keep this file private)\n"
                           + "".join(f"{u}={p}\n" for u, p in passwords.items()))
        return cls(root, keystore, truststore, passwords[ADMIN_USER], passwords[BROKER_USER])

    def broker_properties(self, host: str, port: int) -> dict[str, str]:
        """A broker's listener, TLS, SASL and ACL properties, listening on ``host:port``."""
        listener = LISTENER.lower()
        return {
            "listeners": f"{LISTENER}://{host}:{port}",
            "listener.security.protocol.map": f"{LISTENER}:SASL_SSL",
            "inter.broker.listener.name": LISTENER,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.truststore),
            "sasl.enabled.mechanisms": f"{ADMIN_MECHANISM},PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            f"listener.name.{listener}.plain.sasl.jaas.config":
                f'{PLAIN_LOGIN} required username="{BROKER_USER}" password="{self.broker_password}" '
                f'user_{BROKER_USER}="{self.broker_password}";',
            f"listener.name.{listener}.{ADMIN_MECHANISM.lower()}.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
        }

    def client_properties(self) -> dict[str, str]:
        """The admin user's client properties in Kafka's Java client names."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": ADMIN_MECHANISM,
            "sasl.jaas.config": f'{SCRAM_LOGIN} required username="{ADMIN_USER}" password="{self.admin_password}";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.truststore),
        }

    def librdkafka_properties(self) -> dict[str, str]:
        """The admin user's client properties in librdkafka's names."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": ADMIN_MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": self.admin_password,
            "ssl.ca.location": str(self.truststore),
        }

    def broker_security(self) -> ClientSecurity:
        """How the command itself connects: as ``broker`` (a super user, PLAIN over TLS), which
        needs no stored credential, so it can create the admin user."""
        return security_from_properties({
            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": f'{PLAIN_LOGIN} required username="{BROKER_USER}" password="{self.broker_password}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.truststore),
        })

    def write_client_files(self, bootstrap_servers: str) -> tuple[Path, Path]:
        """``client.properties`` and ``librdkafka.properties`` (mode 0600: they hold the password)."""
        java = self.directory / CLIENT_PROPERTIES
        _write_private(java, "# The admin user of this secure pybroker (kafka-*.sh / pybroker --command-config FILE)\n"
                       + f"bootstrap.servers={bootstrap_servers}\n"
                       + "".join(f"{k}={_escape(v)}\n" for k, v in self.client_properties().items()))
        rdkafka = self.directory / LIBRDKAFKA_PROPERTIES
        _write_private(rdkafka, "# The admin user of this secure pybroker (kcat -F FILE; confluent-kafka)\n"
                       + f"bootstrap.servers={bootstrap_servers}\n"
                       + "".join(f"{k}={v}\n" for k, v in self.librdkafka_properties().items()))
        return java, rdkafka

    def usage_line(self, bootstrap_servers: str) -> str:
        java = self.directory / CLIENT_PROPERTIES
        rdkafka = self.directory / LIBRDKAFKA_PROPERTIES
        return (f"Secure (SASL_SSL, SCRAM-SHA-512 user {ADMIN_USER}, ACLs on): client settings in {java} "
                f"(pybroker topics --bootstrap-server {bootstrap_servers} --list --command-config {java}) "
                f"and {rdkafka} (kcat -F {rdkafka} -L)")


def _escape(value: str) -> str:
    """A Java properties value: backslashes doubled (the JAAS quotes stay as they are)."""
    return value.replace("\\", "\\\\")


async def create_admin_user(bootstrap_servers: str, setup: SecureSetup, retry_timeout: float = 30.0) -> None:
    """Create (or refresh) the admin's SCRAM-SHA-512 credential through AlterUserScramCredentials,
    connecting as the ``broker`` super user."""
    async with Admin(bootstrap_servers, "pybroker-secure-setup", retry_timeout=retry_timeout,
                     request_timeout=10.0, security=setup.broker_security()) as admin:
        await admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(ADMIN_USER, ADMIN_MECHANISM, setup.admin_password, iterations=8192)])
