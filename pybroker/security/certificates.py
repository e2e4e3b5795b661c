"""Test and local-cluster certificates: a private CA that issues broker and client certificates.

Owns generating keys and X.509 certificates with ``cryptography`` and writing them as PEM files
in the forms Kafka's PEM key stores read: private keys as PKCS#8 (``BEGIN PRIVATE KEY``, or
``BEGIN ENCRYPTED PRIVATE KEY`` with a password), certificates as ``BEGIN CERTIFICATE``. A key
store file (``ssl.keystore.location``) holds the key followed by the certificate chain; a trust
store file (``ssl.truststore.location``) the CA certificate.

    ca = CertificateAuthority.create(directory)
    broker = ca.issue_server("broker1")            # SAN DNS:localhost, IP:127.0.0.1, DNS:broker1
    alice = ca.issue_client("CN=alice,OU=eng")    # subject from an RFC 4514 string

Each ``issue_*`` returns an `IssuedCertificate` with the paths of the key, the certificate (leaf
then CA) and the combined key store file.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=3650)
_DEFAULT_SANS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class IssuedCertificate:
    """The files of one issued certificate."""

    key: Path  # PKCS#8 private key
    certificate: Path  # the leaf certificate followed by the CA certificate
    keystore: Path  # the key and then the chain: what ssl.keystore.location (type PEM) reads
    password: str | None = None  # the key's password (ssl.key.password), None if unencrypted


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _name(subject: str) -> x509.Name:
    """An RFC 4514 string (``CN=alice,OU=eng``) or a bare common name (``alice``)."""
    if "=" not in subject:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    return x509.Name.from_rfc4514_string(subject)


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


class CertificateAuthority:
    """A self-signed CA kept in a directory (``ca.key``, ``ca.pem``), issuing leaf certificates
    into the same directory."""

    def __init__(self, directory: Path, key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate) -> None:
        self.directory = directory
        self._key = key
        self._certificate = certificate

    @property
    def certificate_path(self) -> Path:
        """The CA certificate: the trust store (``ssl.truststore.location``, ``ssl.ca.location``)."""
        return self.directory / "ca.pem"

    @property
    def certificate_pem(self) -> bytes:
        return self._certificate.public_bytes(serialization.Encoding.PEM)

    @classmethod
    def create(cls, directory: str | os.PathLike[str], name: str = "pybroker test CA") -> CertificateAuthority:
        """A new CA written to ``directory`` (created if needed)."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        key = _key()
        subject = _name(name)
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        ca = cls(path, key, certificate)
        _write(path / "ca.key", _key_pem(key, None), private=True)
        _write(ca.certificate_path, ca.certificate_pem)
        return ca

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> CertificateAuthority:
        """The CA that `create` wrote to ``directory``."""
        path = Path(directory)
        key = serialization.load_pem_private_key((path / "ca.key").read_bytes(), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cls(path, key, x509.load_pem_x509_certificate((path / "ca.pem").read_bytes()))

    def issue_server(
        self, name: str, sans: tuple[str, ...] = (), password: str | None = None, file_name: str | None = None
    ) -> IssuedCertificate:
        """A broker certificate: subject ``CN=<name>``, SAN DNS:localhost, IP:127.0.0.1, ``name``
        and ``sans`` (DNS names or IP addresses), usable for TLS servers and clients (a broker
        is a client of the others)."""
        alt_names: list[str] = []
        for entry in (*_DEFAULT_SANS, name, *sans):
            if entry not in alt_names:
                alt_names.append(entry)
        return self._issue(_name(f"CN={name}"), file_name or name, [_san(n) for n in alt_names], password,
                           [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])

    def issue_client(self, subject: str, password: str | None = None, file_name: str | None = None) -> IssuedCertificate:
        """A client certificate with ``subject`` (an RFC 4514 string such as ``CN=alice,OU=eng``
        or a bare common name)."""
        name = _name(subject)
        if file_name is None:
            common = name.get_attributes_for_oid(NameOID.COMMON_NAME)
            file_name = str(common[0].value) if common else "client"
        return self._issue(name, file_name, [], password, [ExtendedKeyUsageOID.CLIENT_AUTH])

    def _issue(self, subject: x509.Name, file_name: str, sans: list[x509.GeneralName], password: str | None,
               usages: list[x509.ObjectIdentifier]) -> IssuedCertificate:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        key_pem = _key_pem(key, password)
        chain = certificate.public_bytes(serialization.Encoding.PEM) + self.certificate_pem
        return IssuedCertificate(
            key=_write(self.directory / f"{file_name}.key", key_pem, private=True),
            certificate=_write(self.directory / f"{file_name}.pem", chain),
            keystore=_write(self.directory / f"{file_name}.keystore.pem", key_pem + chain, private=True),
            password=password,
        )
