"""What every SASL mechanism's server shares: its shape and how it fails.

A mechanism's server (Kafka's ``javax.security.sasl.SaslServer``) is fed the client's tokens one
at a time by ``evaluate_response`` and answers each with the next server token, until it is
``complete``; then ``authorization_id`` names the authenticated user (the principal is
``User:<authorization_id>``).

A failed exchange raises ``SaslAuthenticationError``, whose ``message`` is exactly the text Kafka
puts in SaslAuthenticate's ``error_message`` with SASL_AUTHENTICATION_FAILED (58), and whose
``reason`` says what really went wrong, for the broker's log only (Kafka hides the reasons behind
the generic ``invalid_credentials_message`` so that a client cannot tell an unknown user from a
wrong password). A token that arrives when the exchange is over, or a question asked before it
is, raises ``IllegalSaslStateError`` (ILLEGAL_SASL_STATE, 34).
"""

from __future__ import annotations

from typing import Protocol

from pybroker.common.errors import ErrorCode


class SaslAuthenticationError(Exception):
    """Authentication failed (Kafka's ``SaslAuthenticationException``).

    ``message`` is what the client is told; ``reason`` (defaults to ``message``) is what the
    broker logs. ``error_code`` is SASL_AUTHENTICATION_FAILED.
    """

    error_code = ErrorCode.SASL_AUTHENTICATION_FAILED

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason if reason is not None else message


class IllegalSaslStateError(Exception):
    """A token or question that the exchange's state does not allow (``IllegalSaslStateException``)."""

    error_code = ErrorCode.ILLEGAL_SASL_STATE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def invalid_credentials_message(mechanism_name: str, reauthentication: bool = False) -> str:
    """The text Kafka sends for every failure a mechanism does not describe itself.

    ``SaslServerAuthenticator`` answers any ``SaslException`` (as opposed to a
    ``SaslAuthenticationException``) with this, whatever its cause.
    """
    stage = "re-authentication" if reauthentication else "authentication"
    return (f"Authentication failed during {stage} due to invalid credentials with SASL "
            f"mechanism {mechanism_name}")


class SaslServer(Protocol):
    """One authentication exchange of one mechanism, on one connection."""

    @property
    def mechanism_name(self) -> str:
        """The mechanism as clients name it in SaslHandshake (``PLAIN``, ``SCRAM-SHA-256``, …)."""
        ...

    @property
    def complete(self) -> bool:
        """Whether the exchange ended successfully."""
        ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user; ``IllegalSaslStateError`` before the exchange is complete."""
        ...

    def evaluate_response(self, token: bytes) -> bytes:
        """Take the client's next token and return the server's answer (possibly empty)."""
        ...
