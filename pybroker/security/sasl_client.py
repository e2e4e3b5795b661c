"""The client side of SASL PLAIN and SCRAM-SHA-256/512, as Kafka's clients speak them.

A mechanism's client gives the first token (``initial_response``), then takes each server token
(``evaluate_challenge``) and returns the next client token, or None once the exchange is complete
(nothing more to send). It does no I/O: `BrokerConnection` carries the tokens in SaslAuthenticate
requests.

- PLAIN (RFC 4616): one token ``NUL user NUL password`` (an empty authorization id, as librdkafka
  sends); the server answers an empty token.
- SCRAM (RFC 5802/7677): client-first ``n,,n=<user>,r=<nonce>`` (``,`` and ``=`` in the name
  escaped as ``=2C``/``=3D``), client-final ``c=biws,r=<full nonce>,p=<proof>``; the server-first
  nonce must extend the client's, the iteration count must be at least the mechanism's minimum
  (4096, as Kafka's ``ScramSaslClient`` checks), and the server's final signature is verified:
  a broker that cannot prove it knows the credential fails the exchange.

Failures raise `SaslClientError` with a message for the user.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from typing import Protocol

from pybroker.security.plain import PLAIN_MECHANISM
from pybroker.security.scram import ScramMechanism, salted_password

CLIENT_MECHANISMS = (PLAIN_MECHANISM, "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslClientError(Exception):
    """The exchange cannot go on: a bad server token, or an unsupported mechanism."""


class SaslClient(Protocol):
    mechanism_name: str

    @property
    def complete(self) -> bool: ...

    def initial_response(self) -> bytes: ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """The next client token, or None when the exchange is complete."""
        ...


class PlainClient:
    mechanism_name = PLAIN_MECHANISM

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\x00" + username.encode("utf-8") + b"\x00" + password.encode("utf-8")
        self.complete = False

    def initial_response(self) -> bytes:
        return self._token

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if self.complete:
            raise SaslClientError("SASL/PLAIN: unexpected token after completion")
        if challenge:
            raise SaslClientError("SASL/PLAIN: the broker's answer should be empty")
        self.complete = True
        return None


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if len(key) != 1 or not eq:
            raise SaslClientError(f"malformed SCRAM server message {message[:200]!r}")
        out.setdefault(key, value)
    return out


class ScramClient:
    """One SCRAM exchange on the client side."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.mechanism_name = mechanism.mechanism_name
        self._password = password
        self._client_nonce = nonce if nonce is not None else secrets.token_hex(16)
        self._client_first_bare = f"n={_escape(username)},r={self._client_nonce}"
        self._server_signature: bytes | None = None
        self._step = 0
        self.complete = False

    def initial_response(self) -> bytes:
        self._step = 1
        return ("n,," + self._client_first_bare).encode("utf-8")

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        message = bytes(challenge).decode("utf-8", errors="replace")
        if self._step == 1:
            self._step = 2
            return self._client_final(message)
        if self._step == 2:
            self._step = 3
            self._verify_server_final(message)
            self.complete = True
            return None
        raise SaslClientError(f"{self.mechanism_name}: unexpected token")

    def _client_final(self, server_first: str) -> bytes:
        attributes = _attributes(server_first)
        nonce, salt_b64, iterations_text = attributes.get("r"), attributes.get("s"), attributes.get("i")
        if nonce is None or salt_b64 is None or iterations_text is None:
            raise SaslClientError(f"{self.mechanism_name}: malformed server-first message {server_first[:200]!r}")
        if not nonce.startswith(self._client_nonce) or len(nonce) <= len(self._client_nonce):
            raise SaslClientError(f"{self.mechanism_name}: the server nonce does not extend the client's")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(iterations_text)
        except (binascii.Error, ValueError):
            raise SaslClientError(f"{self.mechanism_name}: malformed server-first message "
                                  f"{server_first[:200]!r}") from None
        if iterations < self.mechanism.min_iterations:
            raise SaslClientError(f"Requested iterations {iterations} is less than the minimum "
                                  f"{self.mechanism.min_iterations} for {self.mechanism_name}")
        mech = self.mechanism
        salted = salted_password(mech, self._password, salt, iterations)
        client_key = mech.hmac(salted, b"Client Key")
        stored_key = mech.hash(client_key)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = mech.hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = mech.hmac(mech.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: str) -> None:
        attributes = _attributes(server_final)
        if "e" in attributes:
            raise SaslClientError(f"{self.mechanism_name}: the server refused: {attributes['e']}")
        try:
            signature = base64.b64decode(attributes.get("v", ""), validate=True)
        except binascii.Error:
            signature = b""
        assert self._server_signature is not None
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError(f"{self.mechanism_name}: invalid server signature in the server-final message")


def new_client(mechanism: str, username: str, password: str) -> SaslClient:
    """The client of ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."""
    if mechanism == PLAIN_MECHANISM:
        return PlainClient(username, password)
    scram = ScramMechanism.for_name(mechanism)
    if scram is None:
        raise SaslClientError(f"SASL mechanism {mechanism} is not supported by this client "
                              f"(it has {', '.join(CLIENT_MECHANISMS)})")
    return ScramClient(scram, username, password)
