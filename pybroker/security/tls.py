"""TLS contexts from Kafka's ``ssl.*`` configs in their PEM form.

Owns turning a broker's configuration into Python ``ssl.SSLContext`` objects:

- `server_context`: what an SSL or SASL_SSL listener accepts with: its key store (the private key
  and certificate chain), its trust store (for client certificates), ``ssl.client.auth``
  (none / requested / required; on SASL_SSL only a listener-prefixed value counts, as in Kafka)
  and ``ssl.enabled.protocols``;
- `client_context`: what the broker's own connections to other brokers use: the trust store, the
  key store if one is configured (for brokers that require client certificates) and the host
  name check of ``ssl.endpoint.identification.algorithm``;
- `client_context_from`: the same from any getter of ``ssl.*`` settings, which is how the
  project's clients and CLI build theirs from Kafka client properties.

A broker's ``ssl.*`` values are read with `ListenerSettings.listener_get`, so ``listener.name.<l>.ssl.*``
wins over the broker-wide value. Only PEM stores are read (``ssl.keystore.type=PEM`` and
``ssl.truststore.type=PEM``, as files or inline); the rules and messages are Kafka's
``DefaultSslEngineFactory``'s. Inline keys are handed to OpenSSL through a private temporary
file that is removed as soon as it is loaded.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization

from pybroker.common.cluster import Endpoint
from pybroker.common.config import ConfigError, ListenerSettings

log = logging.getLogger(__name__)

DEFAULT_PROTOCOLS = ("TLSv1.2", "TLSv1.3")  # Kafka's ssl.enabled.protocols default (Java 11+)

PEM = "PEM"
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


class SslConfigError(ConfigError):
    """An ``ssl.*`` configuration Kafka would refuse (``InvalidConfigurationException``)."""


def _pem_pattern(name: str) -> re.Pattern[str]:
    # Kafka's PemParser: BEGIN/END lines around the name (anything before it, e.g. ENCRYPTED or
    # RSA), optional header lines, base64 with any white space (inline values may be one line).
    words = r"\s+".join(name.split(" "))
    edge = r"-+{}\s*(.*?){}[^-]*-+\s+"
    headers = r"(?:\s*[^\r\n]*:[^\r\n]*[\r\n]+)*"
    return re.compile(edge.format("BEGIN", words) + headers + r"([a-zA-Z0-9/+=\s]*)" + edge.format("END", words))


_CERTIFICATE = _pem_pattern("CERTIFICATE")
_PRIVATE_KEY = _pem_pattern("PRIVATE KEY")


def _pem_blocks(pattern: re.Pattern[str], text: str, name: str) -> list[tuple[str, bytes]]:
    """(label prefix, DER) of every block; none is an error (Kafka: "No matching ... entries")."""
    blocks = [(m.group(1).strip(), base64.b64decode(re.sub(r"\s", "", m.group(2)))) for m in pattern.finditer(text + "\n")]
    if not blocks:
        raise SslConfigError(f"No matching {name} entries in PEM file")
    return blocks


def _to_pem(label: str, der: bytes) -> str:
    body = base64.encodebytes(der).decode()
    return f"-----BEGIN {label}-----\n{body}-----END {label}-----\n"


def _certificates_pem(text: str) -> str:
    """The certificates of a PEM text, normalised (at least one: Kafka's rule)."""
    blocks = _pem_blocks(_CERTIFICATE, text, "CERTIFICATE")
    return "".join(_to_pem("CERTIFICATE", der) for _, der in blocks)


def _private_key_pem(text: str, password: str | None) -> str:
    """The one PKCS#8 private key of a PEM text, normalised: unencrypted (``BEGIN PRIVATE KEY``)
    without a password, ``BEGIN ENCRYPTED PRIVATE KEY`` with one. Anything else (PKCS#1
    ``BEGIN RSA PRIVATE KEY``, a wrong password) fails as Kafka's PKCS8EncodedKeySpec does."""
    blocks = _pem_blocks(_PRIVATE_KEY, text, "PRIVATE KEY")
    if len(blocks) != 1:
        raise SslConfigError(f"Expected one private key, but found {len(blocks)}")
    prefix, der = blocks[0]
    expected = "ENCRYPTED" if password is not None else ""
    try:
        if prefix != expected:
            raise ValueError(f"a {prefix + ' ' if prefix else ''}PRIVATE KEY block is not a PKCS#8 "
                             f"{'encrypted ' if password is not None else ''}private key")
        serialization.load_der_private_key(der, password.encode() if password is not None else None)
    except (ValueError, TypeError) as e:
        raise SslConfigError(f"Private key could not be loaded: {e}") from None
    return _to_pem(f"{expected} PRIVATE KEY".strip(), der)


def _read(path: str, what: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise SslConfigError(f"Failed to load PEM SSL {what} {path}: {e}") from None


@dataclass(frozen=True)
class _KeyStore:
    key_pem: str
    chain_pem: str
    password: str | None


Getter = Callable[[str], Any]
"""Reads one ``ssl.*`` setting by name (None when unset): a broker listener's view of its
configuration (`ListenerSettings.listener_get`) or a client's Kafka properties."""


def _listener_getter(config: ListenerSettings, listener: str) -> Getter:
    return lambda name: config.listener_get(listener, name)


def _key_store(get: Getter) -> _KeyStore | None:
    """Kafka's ``createKeystore`` for PEM: a file (key + chain) or inline key and chain."""
    store_type = (get("ssl.keystore.type") or "JKS").upper()
    path, password = get("ssl.keystore.location"), get("ssl.keystore.password")
    key, chain, key_password = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain"), get("ssl.key.password")
    if key is not None:
        if store_type != PEM:
            raise SslConfigError(f"SSL private key can be specified only for PEM, but key store type is {store_type}.")
        if chain is None:
            raise SslConfigError("SSL private key is specified, but certificate chain is not specified.")
        if path is not None:
            raise SslConfigError("Both SSL key store location and separate private key are specified.")
        if password is not None:
            raise SslConfigError("SSL key store password cannot be specified with PEM format, "
                                 "only key password may be specified.")
        try:
            return _KeyStore(_private_key_pem(key, key_password), _certificates_pem(chain), key_password)
        except SslConfigError as e:
            raise SslConfigError(f"Invalid PEM keystore configs: {e}") from None
    if chain is not None:
        raise SslConfigError("SSL certificate chain is specified, but private key is not specified")
    if path is None:
        if password is not None:
            raise SslConfigError("SSL key store is not specified, but key store password is specified.")
        return None
    if store_type != PEM:
        raise SslConfigError(f"ssl.keystore.type {store_type} is not supported by pybroker: convert the key store "
                             "to PEM (ssl.keystore.type=PEM, ssl.keystore.location with the PKCS#8 key and the "
                             "certificate chain)")
    if password is not None:
        raise SslConfigError("SSL key store password cannot be specified with PEM format, "
                             "only key password may be specified")
    text = _read(path, "keystore")
    try:
        return _KeyStore(_private_key_pem(text, key_password), _certificates_pem(text), key_password)
    except SslConfigError as e:
        raise SslConfigError(f"Failed to load PEM SSL keystore {path}: {e}") from None


def _trust_store(get: Getter) -> str | None:
    """Kafka's ``createTruststore`` for PEM: the trusted certificates, or None if none configured."""
    store_type = (get("ssl.truststore.type") or "JKS").upper()
    path, password, certificates = (
        get("ssl.truststore.location"), get("ssl.truststore.password"), get("ssl.truststore.certificates"))
    if certificates is not None:
        if store_type != PEM:
            raise SslConfigError("SSL trust store certs can be specified only for PEM, "
                                 f"but trust store type is {store_type}.")
        if path is not None:
            raise SslConfigError("Both SSL trust store location and separate trust certificates are specified.")
        if password is not None:
            raise SslConfigError("SSL trust store password cannot be specified for PEM format.")
        try:
            return _certificates_pem(certificates)
        except SslConfigError as e:
            raise SslConfigError(f"Invalid PEM truststore configs: {e}") from None
    if path is None:
        if password is not None:
            raise SslConfigError("SSL trust store is not specified, but trust store password is specified.")
        return None
    if store_type != PEM:
        raise SslConfigError(f"ssl.truststore.type {store_type} is not supported by pybroker: convert the trust "
                             "store to PEM (ssl.truststore.type=PEM, ssl.truststore.location with the certificates)")
    if password is not None:
        raise SslConfigError("SSL trust store password cannot be specified for PEM format.")
    try:
        return _certificates_pem(_read(path, "truststore"))
    except SslConfigError as e:
        raise SslConfigError(f"Failed to load PEM SSL keystore {path}: {e}") from None


def _load_key_store(context: ssl.SSLContext, store: _KeyStore) -> None:
    """OpenSSL reads keys from files: a private temporary file, removed once loaded."""
    fd, path = tempfile.mkstemp(prefix="pybroker-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(store.key_pem + store.chain_pem)
        context.load_cert_chain(path, password=store.password)
    except ssl.SSLError as e:
        raise SslConfigError(f"Invalid PEM keystore configs: the private key does not match the certificate ({e})") from None
    finally:
        os.unlink(path)


def _protocols(get: Getter, context: ssl.SSLContext) -> None:
    enabled = get("ssl.enabled.protocols")
    if enabled is None:
        enabled = DEFAULT_PROTOCOLS
    if isinstance(enabled, str):  # a client property: a comma-separated list
        enabled = [p.strip() for p in enabled.split(",") if p.strip()]
    versions = []
    for name in enabled:
        if name not in _PROTOCOLS:
            raise SslConfigError(f"ssl.enabled.protocols: unsupported protocol {name} "
                                 f"(pybroker knows {', '.join(_PROTOCOLS)})")
        versions.append(_PROTOCOLS[name])
    if not versions:
        raise SslConfigError("ssl.enabled.protocols: no protocol enabled")
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)


def client_auth(config: ListenerSettings, endpoint: Endpoint) -> str:
    """``ssl.client.auth`` of a listener. On SASL_SSL only ``listener.name.<l>.ssl.client.auth``
    enables it: the broker-wide value is overridden to none, with Kafka's warning."""
    prefixed = config.originals.get(f"listener.name.{endpoint.listener_name.lower()}.ssl.client.auth")
    if endpoint.security_protocol == "SASL_SSL" and prefixed is None:
        configured = config.get("ssl.client.auth")
        if configured != "none":
            log.warning("Broker configuration 'ssl.client.auth' is applied only to SSL listeners. Listener-prefixed "
                        "configuration can be used to enable SSL client authentication for SASL_SSL listeners. In "
                        "future releases, broker-wide option without listener prefix may be applied to SASL_SSL "
                        "listeners as well. All configuration options intended for specific listeners should be "
                        "listener-prefixed.")
        return "none"
    value = config.listener_get(endpoint.listener_name, "ssl.client.auth")
    return value.lower() if isinstance(value, str) else "none"


def server_context(config: ListenerSettings, endpoint: Endpoint) -> ssl.SSLContext:
    """The context an SSL or SASL_SSL listener accepts connections with."""
    listener = endpoint.listener_name
    get = _listener_getter(config, listener)
    key_store = _key_store(get)
    if key_store is None:
        raise SslConfigError(f"Listener {listener} ({endpoint.security_protocol}) has no key store: set "
                             f"ssl.keystore.type=PEM and ssl.keystore.location (or listener.name.{listener.lower()}."
                             "ssl.keystore.location), or ssl.keystore.certificate.chain and ssl.keystore.key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(get, context)
    _load_key_store(context, key_store)
    mode = client_auth(config, endpoint)
    if mode not in _CLIENT_AUTH:
        log.warning("Unrecognized client authentication configuration %s. Falling back to NONE.", mode)
        mode = "none"
    context.verify_mode = _CLIENT_AUTH[mode]
    trusted = _trust_store(get)
    if trusted is not None:
        context.load_verify_locations(cadata=trusted)
    elif mode != "none":
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    if config.listener_get(listener, "ssl.cipher.suites"):
        log.warning("Listener %s: ssl.cipher.suites is not applied (Java cipher suite names); "
                    "OpenSSL's default suites are used", listener)
    return context


def client_context(config: ListenerSettings, listener: str) -> ssl.SSLContext:
    """The context the broker connects to other brokers' ``listener`` with (`client_context_from`
    reading the listener's ``ssl.*`` configuration)."""
    return client_context_from(_listener_getter(config, listener))


def client_context_from(get: Getter) -> ssl.SSLContext:
    """A client's context from its ``ssl.*`` settings (read with ``get``): the trust store (the
    system's CAs when none is configured), the key store when one is configured (for listeners
    that require client certificates), ``ssl.enabled.protocols`` and the host name check unless
    ``ssl.endpoint.identification.algorithm`` is empty (Kafka's default is ``https``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(get, context)
    algorithm = get("ssl.endpoint.identification.algorithm")
    algorithm = "https" if algorithm is None else algorithm.strip()
    if algorithm and algorithm.lower() != "https":
        raise SslConfigError(f"ssl.endpoint.identification.algorithm: unsupported algorithm {algorithm} "
                             "(https, or empty for none)")
    context.check_hostname = bool(algorithm)
    context.verify_mode = ssl.CERT_REQUIRED
    trusted = _trust_store(get)
    if trusted is not None:
        context.load_verify_locations(cadata=trusted)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    key_store = _key_store(get)
    if key_store is not None:
        _load_key_store(context, key_store)
    return context
