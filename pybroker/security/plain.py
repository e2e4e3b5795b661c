"""SASL/PLAIN (RFC 4616), the server side, as Kafka's ``PlainSaslServer`` does it.

The client sends one token, ``[authzid] NUL authcid NUL passwd`` in UTF-8; the server checks the
password of ``authcid`` against a credential lookup (user → password, or None for an unknown
user) in constant time and answers an empty token. The authorization id is the username; a client
may repeat it as ``authzid`` (aiokafka and kafka-python do; librdkafka leaves it empty) but may
not name anyone else. Every failure is a ``SaslAuthenticationError`` carrying Kafka's exact text.

The broker's users come from the ``PlainLoginModule`` entry of
``listener.name.<listener>.plain.sasl.jaas.config``: its options ``user_<name>="<password>"``
(``users_from_jaas_options``).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from pybroker.security.sasl import IllegalSaslStateError, SaslAuthenticationError

PLAIN_MECHANISM = "PLAIN"
# The login module whose JAAS options hold the users (Kafka's PlainLoginModule class name).
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
# JAAS option prefix of a user's password (PlainServerCallbackHandler.JAAS_USER_PREFIX).
JAAS_USER_PREFIX = "user_"

PasswordLookup = Callable[[str], str | None]


def users_from_jaas_options(options: Mapping[str, str]) -> dict[str, str]:
    """The ``user_<name>`` options of a PlainLoginModule entry, as {name: password}."""
    return {key[len(JAAS_USER_PREFIX):]: value for key, value in options.items()
            if key.startswith(JAAS_USER_PREFIX)}


def _tokens(message: str) -> list[str]:
    # PlainSaslServer.extractTokens: split on NUL into at most 4 pieces; exactly 3 are valid.
    tokens: list[str] = []
    start = 0
    for _ in range(4):
        end = message.find("\x00", start)
        if end < 0:
            tokens.append(message[start:])
            break
        tokens.append(message[start:end])
        start = end + 1
    if len(tokens) != 3:
        raise SaslAuthenticationError(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
    return tokens


class PlainServer:
    """One SASL/PLAIN exchange: a single client token, an empty answer."""

    mechanism_name = PLAIN_MECHANISM

    def __init__(self, lookup: PasswordLookup) -> None:
        """``lookup(user)`` returns the user's password, or None when there is no such user."""
        self._lookup = lookup
        self._evaluated = False
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._authorization_id

    def evaluate_response(self, token: bytes) -> bytes:
        """Check the client's token; return the (empty) answer or raise SaslAuthenticationError."""
        if self._evaluated:
            state = "COMPLETE" if self.complete else "FAILED"
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {state}")
        self._evaluated = True
        # Java decodes with replacement characters; so does this, so bad UTF-8 is just a bad name.
        authzid, username, password = _tokens(bytes(token).decode("utf-8", errors="replace"))
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        try:
            expected = self._lookup(username)
        except Exception as e:
            raise SaslAuthenticationError(
                "Authentication failed: credentials for user could not be verified",
                f"Authentication failed: credentials for user could not be verified ({e!r})") from e
        given = password.encode("utf-8")
        # An unknown user costs the same comparison as a known one.
        matches = hmac.compare_digest(given, expected.encode("utf-8") if expected is not None
                                      else given) and expected is not None
        if not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self._authorization_id = username
        return b""
