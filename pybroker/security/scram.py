"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server's exchange.

Owns what Kafka's ``ScramMechanism``, ``ScramFormatter``, ``ScramCredentialUtils``,
``ScramMessages`` and ``ScramSaslServer`` do on a broker:

- ``ScramMechanism``: the two mechanisms, their hash, their type byte (as AlterUserScramCredentials
  and DescribeUserScramCredentials carry it) and Kafka's iteration bounds 4096..16384;
- ``ScramCredential``: what a broker stores for a user and mechanism (salt, StoredKey, ServerKey,
  iterations, never the password), with Kafka's string form
  ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N``, the value of the mechanism's key in
  ZooKeeper's ``/config/users/<user>``;
- ``credential_from_password`` (what kafka-configs does for ``--zookeeper``, with Kafka's salt: the
  UTF-8 bytes of a base-36 string of a 130-bit random number) and
  ``credential_from_salted_password`` (what the broker does with an AlterUserScramCredentials
  upsertion, whose client computed the salted password);
- ``ScramServer``: one exchange. client-first → server-first, client-final → server-final.

Messages follow Kafka 3.6's grammar (``ScramMessages``): the gs2 header must be ``n`` (no channel
binding); an ``a=`` authorization id must name the user itself; usernames escape ``,`` and ``=``
as ``=2C`` and ``=3D``; extensions are accepted and ignored except ``tokenauth``, which asks for
delegation-token authentication: pybroker has no tokens, so it fails like an unknown token. On
top of 3.6, the client-final nonce must end with the server's full nonce (Kafka added that check
in 3.9, CVE-2024-56128; librdkafka before 2.2, e.g. kcat's 2.0.2, sends the client nonce twice
in front of it, so equality would refuse it). The proof is checked in constant time.

A failure raises ``SaslAuthenticationError``. Its client-facing ``message`` is Kafka's generic
``Authentication failed during authentication due to invalid credentials with SASL mechanism
SCRAM-SHA-256`` for everything (unknown user, wrong password, malformed message, too few stored
iterations, token authentication), except an authorization id other than the user, which Kafka
names. ``reason`` tells the broker's log which it was.

The user's credential comes from a lookup callable (user → ``ScramCredential`` or None), so the
credential store plugs in without this module knowing it.

Unlike Kafka, the AuthMessage is built from the messages' bytes as received (RFC 5802) instead of
re-serialised parsed parts; the two differ only for messages no real client sends (an ``m=``
reserved part or client-final extensions). The ``a=`` authorization id is unescaped before it is
compared with the user (Kafka compares the escaped form, so a user whose name holds ``,`` or ``=``
could not name itself there). As in Kafka, ``c=`` (the channel binding) is not compared with the
gs2 header: it is inside the signed AuthMessage anyway.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from pybroker.security.sasl import (
    IllegalSaslStateError,
    SaslAuthenticationError,
    invalid_credentials_message,
)

# The login module of SCRAM client entries (Kafka's ScramLoginModule class name).
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# The client-first extension that asks for delegation-token authentication.
TOKEN_AUTH_EXTENSION = "tokenauth"


class ScramMechanism(enum.Enum):
    """A SCRAM mechanism; the value is its SASL name."""

    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"

    @property
    def mechanism_name(self) -> str:
        return self.value

    @property
    def hash_name(self) -> str:
        """The ``hashlib`` name of the hash (``sha256``/``sha512``)."""
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @property
    def type(self) -> int:
        """The mechanism byte of the SCRAM admin APIs (0 is UNKNOWN)."""
        return 1 if self is ScramMechanism.SCRAM_SHA_256 else 2

    @property
    def min_iterations(self) -> int:
        return 4096

    @property
    def max_iterations(self) -> int:
        return 16384

    @classmethod
    def for_name(cls, name: str) -> ScramMechanism | None:
        """The mechanism named ``name`` (exact, upper case), or None."""
        try:
            return cls(name)
        except ValueError:
            return None

    @classmethod
    def for_type(cls, type_: int) -> ScramMechanism | None:
        """The mechanism of an admin API's mechanism byte, or None (UNKNOWN or anything else)."""
        for mechanism in cls:
            if mechanism.type == type_:
                return mechanism
        return None

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()


class ScramCredentialFormatError(ValueError):
    """A stored credential string that is not in Kafka's format."""


def _b64decode_java(text: str) -> bytes:
    # java.util.Base64.getDecoder(): the standard alphabet only; '=' padding optional.
    if not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text):
        raise ValueError("not base64")
    stripped = text.rstrip("=")
    if len(stripped) % 4 == 1 or (text != stripped and len(text) % 4):
        raise ValueError("bad base64 length")
    return base64.b64decode(stripped + "=" * (-len(stripped) % 4), validate=True)


@dataclass(frozen=True)
class ScramCredential:
    """What a broker keeps of a user's password for one mechanism (Kafka's ``ScramCredential``)."""

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def format(self) -> str:
        """Kafka's string form (``ScramCredentialUtils.credentialToString``)."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        """Read Kafka's string form: exactly the keys salt, stored_key, server_key, iterations."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, eq, value = part.partition("=")
            if not key or not eq:
                raise ScramCredentialFormatError(f"Credentials not valid: '{part}' is not key=value")
            if key in fields:
                raise ScramCredentialFormatError(f"Credentials not valid: '{key}' given twice")
            fields[key] = value
        expected = ("salt", "stored_key", "server_key", "iterations")
        if set(fields) != set(expected):
            raise ScramCredentialFormatError(
                f"Credentials not valid: keys {sorted(fields)}, expected {list(expected)}")
        try:
            salt, stored_key, server_key = (_b64decode_java(fields[k]) for k in expected[:3])
        except (ValueError, binascii.Error):
            raise ScramCredentialFormatError("Credentials not valid: bad base64 value") from None
        if not re.fullmatch(r"[0-9]{1,10}", fields["iterations"]) or int(fields["iterations"]) > 2**31 - 1:
            raise ScramCredentialFormatError(
                f"Credentials not valid: iterations '{fields['iterations']}' is not a number")
        return cls(salt, stored_key, server_key, int(fields["iterations"]))


def secure_random_string() -> str:
    """Kafka's ``ScramFormatter.secureRandomString``: a 130-bit random number in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    while True:
        n, d = divmod(n, 36)
        out.append(digits[d])
        if n == 0:
            return "".join(reversed(out))


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """``Hi(UTF-8(password), salt, iterations)``: PBKDF2 with the mechanism's HMAC."""
    if iterations < 1:
        raise ValueError(f"iterations must be positive, got {iterations}")
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(mechanism: ScramMechanism, salt: bytes,
                                    salted_password: bytes, iterations: int) -> ScramCredential:
    """StoredKey and ServerKey from a salted password (``ScramFormatter.generateCredential``)."""
    if not salted_password:
        raise ValueError("the salted password is empty")
    client_key = mechanism.hmac(salted_password, b"Client Key")
    return ScramCredential(salt=bytes(salt), stored_key=mechanism.hash(client_key),
                           server_key=mechanism.hmac(salted_password, b"Server Key"),
                           iterations=iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, iterations: int,
                             salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password``; the salt is Kafka's kind of random one unless given.

    Iterations are not checked against the mechanism's bounds: callers do (AlterUserScramCredentials
    refuses outside 4096..16384; login refuses a stored count below 4096).
    """
    if salt is None:
        salt = secure_random_string().encode("utf-8")
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


CredentialLookup = Callable[[str], ScramCredential | None]

# ScramMessages' grammar (Java character classes spelled out: ',' is 0x2C, '=' is 0x3D).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})")
_NONCE = re.compile(_PRINTABLE)


def _unescape_saslname(name: str) -> str:
    # ScramFormatter.username; the grammar already allows '=' only in =2C and =3D.
    return re.sub(r"=2C|=3D", lambda m: "," if m.group() == "=2C" else "=", name)


def _extensions(text: str) -> dict[str, str]:
    # Utils.parseMap(text, "=", ","); text is "" or starts with ','.
    return dict(part.split("=", 1) for part in text[1:].split(",")) if text else {}


def _shown(message: str) -> str:
    return repr(message if len(message) <= 200 else message[:200] + "…")


class _State(enum.Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = "RECEIVE_CLIENT_FIRST_MESSAGE"
    RECEIVE_CLIENT_FINAL_MESSAGE = "RECEIVE_CLIENT_FINAL_MESSAGE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class ScramServer:
    """One SCRAM exchange on the server side (Kafka's ``ScramSaslServer``)."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup, *,
                 reauthentication: bool = False, server_nonce: str | None = None) -> None:
        """``lookup(user)`` gives the user's credential for this mechanism, or None.

        ``reauthentication`` only changes the generic failure text (KIP-368 re-authentication).
        ``server_nonce`` fixes the server's part of the nonce (tests; default: Kafka's random
        base-36 string).
        """
        if server_nonce is not None and not _NONCE.fullmatch(server_nonce):
            raise ValueError("a server nonce is printable ASCII without ','")
        self.mechanism = mechanism
        self._lookup = lookup
        self._reauthentication = reauthentication
        self._server_nonce = server_nonce
        self._state = _State.RECEIVE_CLIENT_FIRST_MESSAGE
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._nonce = ""
        self._server_first = ""
        self._authorization_id: str | None = None

    @property
    def mechanism_name(self) -> str:
        return self.mechanism.mechanism_name

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def authorization_id(self) -> str:
        if self._state is not _State.COMPLETE or self._authorization_id is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._authorization_id

    def evaluate_response(self, token: bytes) -> bytes:
        """client-first → server-first; client-final → server-final (then complete)."""
        state = self._state
        if state not in (_State.RECEIVE_CLIENT_FIRST_MESSAGE, _State.RECEIVE_CLIENT_FINAL_MESSAGE):
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {state.value}")
        # Java decodes with replacement characters, which no rule of the grammar accepts.
        message = bytes(token).decode("utf-8", errors="replace")
        try:
            if state is _State.RECEIVE_CLIENT_FIRST_MESSAGE:
                answer = self._client_first(message)
                self._state = _State.RECEIVE_CLIENT_FINAL_MESSAGE
            else:
                answer = self._client_final(message)
                self._state = _State.COMPLETE
            return answer
        except SaslAuthenticationError:
            self._state = _State.FAILED
            self._credential = None
            raise

    def _fail(self, reason: str) -> SaslAuthenticationError:
        return SaslAuthenticationError(
            invalid_credentials_message(self.mechanism_name, self._reauthentication), reason)

    def _client_first(self, message: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise self._fail(f"Invalid SCRAM client first message format: {_shown(message)}")
        username = _unescape_saslname(m["saslname"])
        extensions = _extensions(m["extensions"])
        if extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            raise self._fail(f"Token Authentication failed: Invalid tokenId : {username}")
        try:
            credential = self._lookup(username)
        except Exception as e:
            raise self._fail(f"Authentication failed: Credentials could not be obtained ({e!r})") from e
        if credential is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        authzid = m["authzid"]
        if authzid is not None and _unescape_saslname(authzid) != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        if credential.iterations < self.mechanism.min_iterations:
            raise self._fail(f"Iterations {credential.iterations} is less than the minimum "
                             f"{self.mechanism.min_iterations} for {self.mechanism_name}")
        server_nonce = self._server_nonce if self._server_nonce is not None else secure_random_string()
        self._credential = credential
        self._authorization_id = username
        self._client_first_bare = m["bare"]
        self._nonce = m["nonce"] + server_nonce
        self._server_first = (f"r={self._nonce},"
                              f"s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        m = _CLIENT_FINAL.fullmatch(message)
        if m is None:
            raise self._fail(f"Invalid SCRAM client final message format: {_shown(message)}")
        credential = self._credential
        assert credential is not None
        # Kafka 3.9's check (CVE-2024-56128): the client-final nonce ends with the full nonce. Not
        # equality: librdkafka before 2.2 sends the client nonce twice (c-nonce + c-nonce + s-nonce).
        if not m["nonce"].endswith(self._nonce):
            raise self._fail("Invalid client nonce in the final client message.")
        proof = base64.b64decode(m["proof"])
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 m["without_proof"])).encode()
        client_signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._fail(f"Invalid client proof: {len(proof)} bytes, expected "
                             f"{len(client_signature)}")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise self._fail("Invalid client credentials")
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._credential = None
        return b"v=" + base64.b64encode(server_signature)
