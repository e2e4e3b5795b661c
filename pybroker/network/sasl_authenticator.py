"""SASL authentication of one connection on a SASL_PLAINTEXT or SASL_SSL listener.

Owns what Kafka's ``SaslServerAuthenticator`` does on a broker, plus the KIP-368 checks of
``KafkaChannel`` and ``SocketServer.processCompletedReceives``:

- the state machine before authentication: ApiVersions answered normally (by the dispatcher, the
  full list), then SaslHandshake; handshake **v0** means the mechanism's tokens travel raw (a
  4-byte length and the token, both ways), **v1** means each token is a SaslAuthenticate request
  and response; anything else closes the connection (see the table below);
- running the mechanism's server (``plain.PlainServer``, ``scram.ScramServer``) and, on success,
  setting ``connection.principal`` to ``User:<authorization id>``;
- KIP-368: with ``connections.max.reauth.ms`` > 0 (per listener and mechanism) the completing
  SaslAuthenticate carries ``session_lifetime_ms`` and the session expires then. Each later frame
  is checked: a SaslHandshake (at most one re-authentication start per second) begins a
  re-authentication on the same connection (same mechanism, same principal); any other frame of
  an expired session closes the connection at once, with no response.

How it sits in front of the dispatcher: `KafkaConnection` hands every frame to its
``authenticator`` first (``pybroker.network.connection``). This object answers the frames it owns
(replies go through the connection's ordered output, so a re-authentication handshake is
answered after every earlier pipelined request, as Kafka's one-request-at-a-time channel would),
returns ``FORWARD`` for the frames the dispatcher must handle (ApiVersions before authentication,
everything after it), or raises ``CloseConnection``. Once authenticated with no session expiry it
detaches itself, so an authenticated connection costs nothing per frame.

Two kinds of close, as Kafka (``KafkaChannel.prepare``, ``Selector``):

- an authentication failure (Kafka's ``AuthenticationException``: unknown mechanism 33, illegal
  SASL state 34, failed credentials 58) reads nothing more, and after
  ``connection.failed.authentication.delay.ms`` writes its response, if Kafka builds one, and
  closes;
- a frame that cannot be parsed, an unsupported SaslHandshake/SaslAuthenticate version, a second
  ApiVersions, closes at once with no response.

=========================  =========================================  ===========================
state                      accepted                                   anything else
=========================  =========================================  ===========================
INITIAL_REQUEST            ApiVersions, SaslHandshake                 another key: 34 family, no
                                                                      response; unparsable: GSSAPI
                                                                      is not enabled, no response
HANDSHAKE_OR_VERSIONS      ApiVersions, SaslHandshake                 another key: as above;
                                                                      unparsable: close at once
HANDSHAKE_REQUEST          SaslHandshake                              ApiVersions: close at once
AUTHENTICATE (v0)          raw tokens                                 —
AUTHENTICATE (v1)          SaslAuthenticate                           another key: its error
                                                                      response with 34, then close
=========================  =========================================  ===========================

The pre-authentication frame limit is ``sasl.server.max.receive.size`` (the connection's
``max_frame_size`` while authenticating; a larger frame closes it).

`SaslListenerConfig.from_config` reads and checks a SASL listener's settings at start-up:
enabled mechanisms (``sasl.enabled.mechanisms``, per listener; pybroker has PLAIN, SCRAM-SHA-256
and SCRAM-SHA-512, not Kafka's default GSSAPI nor OAUTHBEARER), PLAIN's users from the
``PlainLoginModule`` entry of ``listener.name.<listener>.plain.sasl.jaas.config`` (its
``user_<name>="<password>"`` options; pybroker reads no static JAAS file), and the re-authentication
lifetime per mechanism. SCRAM credentials come from the broker's ``CredentialCache``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.common.config import ConfigError, ListenerSettings
from pybroker.common.errors import ErrorCode
from pybroker.network.connection import FORWARD, CloseConnection, Dispatcher, KafkaConnection
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.client_software import valid_client_software
from pybroker.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse
from pybroker.security.jaas import JaasConfigError, parse_jaas_entry
from pybroker.security.plain import (
    PLAIN_LOGIN_MODULE,
    PLAIN_MECHANISM,
    PlainServer,
    users_from_jaas_options,
)
from pybroker.security.principal import KafkaPrincipal
from pybroker.security.sasl import IllegalSaslStateError, SaslAuthenticationError, SaslServer
from pybroker.security.scram import ScramMechanism, ScramServer

if TYPE_CHECKING:
    from pybroker.scheduler import Scheduler, Time
    from pybroker.security.credential_cache import CredentialCache

log = logging.getLogger(__name__)

#: A request's error response from its handler (``server.dispatcher.handler_error_response``):
#: given the header, the frame, the body's offset and the error; None when the API answers none;
#: CloseConnection for an API or version no handler serves.
ErrorResponder = Callable[[Any, memoryview, int, ErrorCode], Any]

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = (PLAIN_MECHANISM, "SCRAM-SHA-256", "SCRAM-SHA-512")
# KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: re-authentications start at most this often.
MIN_REAUTH_INTERVAL_MS = 1000
_API_VERSIONS_VERSIONS = (0, 3)
_SASL_HANDSHAKE_VERSIONS = (0, 1)
_SASL_AUTHENTICATE_VERSIONS = (0, 2)


@dataclass(frozen=True)
class SaslListenerConfig:
    """What a SASL listener's connections authenticate with."""

    listener_name: str
    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    max_reauth_ms: Mapping[str, int]  # by mechanism; 0: sessions never expire
    max_receive_size: int  # sasl.server.max.receive.size
    failed_authentication_delay_ms: int  # connection.failed.authentication.delay.ms

    @classmethod
    def from_config(cls, config: ListenerSettings, listener_name: str) -> SaslListenerConfig:
        """Read and check the listener's SASL settings; ConfigError says what is wrong."""
        mechanisms: list[str] = []
        for name in config.listener_get(listener_name, "sasl.enabled.mechanisms") or []:
            name = name.strip()
            if name and name not in mechanisms:
                mechanisms.append(name)
        if not mechanisms:
            raise ConfigError(f"listener {listener_name} is a SASL listener but sasl.enabled.mechanisms is empty")
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported:
            hint = (" (GSSAPI is Kafka's default: set sasl.enabled.mechanisms, or "
                    f"listener.name.{listener_name.lower()}.sasl.enabled.mechanisms)"
                    if "GSSAPI" in unsupported else "")
            raise ConfigError(
                f"listener {listener_name}: SASL mechanism(s) {', '.join(unsupported)} of sasl.enabled.mechanisms "
                f"are not supported by pybroker, which has {', '.join(SUPPORTED_MECHANISMS)}{hint}")
        plain_users: dict[str, str] = {}
        if PLAIN_MECHANISM in mechanisms:
            plain_users = _plain_users(config, listener_name)
        max_reauth_ms = {m: max(0, int(config.listener_get(listener_name, "connections.max.reauth.ms", m) or 0))
                         for m in mechanisms}
        return cls(
            listener_name=listener_name,
            enabled_mechanisms=tuple(mechanisms),
            plain_users=plain_users,
            max_reauth_ms=max_reauth_ms,
            max_receive_size=config.listener_get(listener_name, "sasl.server.max.receive.size"),
            failed_authentication_delay_ms=config.get("connection.failed.authentication.delay.ms"),
        )


def _plain_users(config: ListenerSettings, listener_name: str) -> dict[str, str]:
    # JaasContext.loadServerContext: only the listener- and mechanism-prefixed key counts on a broker.
    key = f"listener.name.{listener_name.lower()}.plain.sasl.jaas.config"
    text = config.originals.get(key)
    if text is None:
        raise ConfigError(
            f"listener {listener_name} enables SASL mechanism PLAIN but {key} is not set: it must hold the "
            f"{PLAIN_LOGIN_MODULE} entry whose user_<name>=\"<password>\" options are the users "
            "(pybroker reads no static JAAS file)")
    try:
        entry = parse_jaas_entry(text)
    except JaasConfigError as e:
        raise ConfigError(f"{key}: {e}") from None
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise ConfigError(f"{key}: the login module is {entry.login_module}, expected {PLAIN_LOGIN_MODULE}")
    return users_from_jaas_options(entry.options)


class _State(enum.Enum):
    INITIAL_REQUEST = "INITIAL_REQUEST"
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    REAUTH_PROCESS_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class _AuthenticationFailed(Exception):
    """Kafka's AuthenticationException: ``reply`` (an encoded response or None) is written after
    the failed-authentication delay, then the connection closes."""

    def __init__(self, reason: str, reply: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.reply = reply


def _encode(header: Any, response: Any) -> Any:
    return codec.encode_response(header.api_key, header.api_version, header.correlation_id, response)


def _api_name(api_key: int) -> str:
    return ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else f"key {api_key}"


class SaslServerAuthenticator:
    """The authentication of one connection (see the module docstring)."""

    def __init__(
        self,
        connection: KafkaConnection,
        config: SaslListenerConfig,
        dispatch: Dispatcher,
        credentials: CredentialCache,
        time: Time,
        scheduler: Scheduler,
        error_response: ErrorResponder,
    ) -> None:
        self._connection = connection
        self._config = config
        self._dispatch = dispatch
        self._error_response = error_response
        self._credentials = credentials
        self._time = time
        self._scheduler = scheduler
        self._state = _State.INITIAL_REQUEST
        self._header_mode = False  # SaslHandshake v1+: tokens in SaslAuthenticate requests
        self._server: SaslServer | None = None
        self._mechanism: str | None = None
        self._expiry_ms: float | None = None  # monotonic; None: the session never expires
        self._last_reauth_start_ms: float | None = None
        # While re-authenticating: the mechanism and principal that must not change.
        self._previous: tuple[str, KafkaPrincipal] | None = None
        self._bad_mechanism_message = ""
        self._max_request_size = connection.max_frame_size
        connection.max_frame_size = config.max_receive_size

    @property
    def state(self) -> str:
        return self._state.value

    @property
    def session_expiry_ms(self) -> float | None:
        """When the session expires (the broker's monotonic clock), or None."""
        return self._expiry_ms

    @property
    def _reauthenticating(self) -> bool:
        return self._previous is not None

    # --- frames ------------------------------------------------------------------------------

    def frame_received(self, frame: bytearray) -> Any:
        state = self._state
        if state is _State.COMPLETE:
            return self._authenticated_frame(frame)
        if state is _State.FAILED:
            return None
        try:
            if state is _State.AUTHENTICATE:
                return self._token_frame(frame)
            if state is _State.REAUTH_BAD_MECHANISM:
                raise _AuthenticationFailed(self._bad_mechanism_message)
            return self._handshake_frame(frame)
        except _AuthenticationFailed as e:
            return self._fail(e.reason, e.reply)
        except CloseConnection:
            self._state = _State.FAILED
            raise

    def _authenticated_frame(self, frame: bytearray) -> Any:
        """KIP-368, on each frame of an authenticated session that can expire."""
        expiry = self._expiry_ms
        if expiry is None:
            return FORWARD
        now = self._time.monotonic_ms()
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if api_key == ApiKey.SASL_HANDSHAKE and (
                self._last_reauth_start_ms is None or now - self._last_reauth_start_ms >= MIN_REAUTH_INTERVAL_MS):
            assert self._mechanism is not None
            self._last_reauth_start_ms = now
            self._previous = (self._mechanism, self._connection.principal)
            self._state = _State.REAUTH_PROCESS_HANDSHAKE
            self._header_mode = False
            self._connection.max_frame_size = self._config.max_receive_size
            log.debug("Beginning re-authentication of %s (%s)", self._connection.peer, self._connection.principal)
            return self.frame_received(frame)
        if now > expiry:
            raise CloseConnection(f"its SASL session of {self._connection.principal} expired "
                                  f"{now - expiry:.0f} ms ago and it did not re-authenticate")
        return FORWARD

    def _handshake_frame(self, frame: bytearray) -> Any:
        """INITIAL_REQUEST, HANDSHAKE_OR_VERSIONS_REQUEST, HANDSHAKE_REQUEST, REAUTH_PROCESS_HANDSHAKE
        (Kafka's ``handleKafkaRequest``)."""
        view = memoryview(frame)
        try:
            header, body_offset = codec.decode_request_header(view)
            parsed = header.api_key in ApiKey._value2member_map_
        except codec.MalformedRequestError:
            parsed = False
        if not parsed:
            if self._state is _State.INITIAL_REQUEST:
                # Kafka takes it for a GSSAPI token of a 0.9 client; GSSAPI is never enabled here.
                raise _AuthenticationFailed(
                    "Exception handling first SASL packet from client, GSSAPI is not supported by server")
            raise CloseConnection("unparsable request during SASL handshake")
        if self._state is _State.INITIAL_REQUEST:
            self._state = _State.HANDSHAKE_OR_VERSIONS_REQUEST
        api_key, version = header.api_key, header.api_version
        if api_key == ApiKey.API_VERSIONS:
            return self._api_versions(frame, header, body_offset, view)
        if api_key != ApiKey.SASL_HANDSHAKE:
            raise _AuthenticationFailed(f"Unexpected Kafka request of type {_api_name(api_key)} during SASL handshake.")
        if not _SASL_HANDSHAKE_VERSIONS[0] <= version <= _SASL_HANDSHAKE_VERSIONS[1] or body_offset < 0:
            raise CloseConnection(f"unsupported SaslHandshake version {version}")
        try:
            request = codec.decode_request(api_key, version, view, body_offset)
        except codec.MalformedRequestError as e:
            raise CloseConnection(f"malformed SaslHandshake v{version} request ({e})") from None
        mechanism = request.mechanism
        enabled = list(self._config.enabled_mechanisms)
        if mechanism not in enabled:
            reply = _encode(header, SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                                          mechanisms=enabled))
            raise _AuthenticationFailed(f"Unsupported SASL mechanism {mechanism}", reply)
        reply = _encode(header, SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled))
        self._header_mode = version >= 1
        if self._previous is not None and mechanism != self._previous[0]:
            # Kafka answers the handshake, then fails on the next token (REAUTH_BAD_MECHANISM).
            self._bad_mechanism_message = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{self._previous[0]}'")
            self._state = _State.REAUTH_BAD_MECHANISM
            return reply
        self._server = self._new_server(mechanism)
        self._mechanism = mechanism
        self._state = _State.AUTHENTICATE
        return reply

    def _api_versions(self, frame: bytearray, header: Any, body_offset: int, view: memoryview) -> Any:
        if self._state is not _State.HANDSHAKE_OR_VERSIONS_REQUEST:
            raise CloseConnection(
                f"Unexpected ApiVersions request received during SASL authentication state {self._state.value}")
        reply = self._dispatch(frame, self._connection)  # the full list, or UNSUPPORTED_VERSION in v0 layout
        version = header.api_version
        if _API_VERSIONS_VERSIONS[0] <= version <= _API_VERSIONS_VERSIONS[1] and body_offset >= 0:
            request = codec.decode_request(ApiKey.API_VERSIONS, version, view, body_offset)
            valid = version < 3 or valid_client_software(request.client_software_name,
                                                         request.client_software_version)
            if valid:  # an invalid or unsupported one leaves the client free to retry
                self._state = _State.HANDSHAKE_REQUEST
        return reply

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN_MECHANISM:
            return PlainServer(self._config.plain_users.get)
        scram = ScramMechanism.for_name(mechanism)
        assert scram is not None, mechanism
        credentials = self._credentials
        return ScramServer(scram, lambda user: credentials.get(scram, user),
                           reauthentication=self._reauthenticating)

    def _token_frame(self, frame: bytearray) -> Any:
        """AUTHENTICATE (Kafka's ``handleSaslToken``)."""
        server = self._server
        assert server is not None
        if not self._header_mode:
            try:
                answer = server.evaluate_response(bytes(frame))
                principal = self._principal_if_complete(server)
            except (SaslAuthenticationError, IllegalSaslStateError) as e:
                raise _AuthenticationFailed(getattr(e, "reason", e.message)) from None
            if principal is not None:
                self._completed(principal)
            return len(answer).to_bytes(4, "big") + answer  # PLAIN's empty answer: four zero bytes
        view = memoryview(frame)
        try:
            header, body_offset = codec.decode_request_header(view)
        except codec.MalformedRequestError as e:
            raise CloseConnection(f"malformed request header during SASL authentication ({e})") from None
        api_key, version = header.api_key, header.api_version
        if api_key != ApiKey.SASL_AUTHENTICATE:
            raise _AuthenticationFailed(
                f"Unexpected Kafka request of type {_api_name(api_key)} during SASL authentication.",
                self._illegal_state_reply(header, body_offset, view))
        if not _SASL_AUTHENTICATE_VERSIONS[0] <= version <= _SASL_AUTHENTICATE_VERSIONS[1] or body_offset < 0:
            raise CloseConnection(f"Version {version} is not supported for apiKey SASL_AUTHENTICATE")
        try:
            request = codec.decode_request(api_key, version, view, body_offset)
        except codec.MalformedRequestError as e:
            raise CloseConnection(f"malformed SaslAuthenticate v{version} request ({e})") from None
        try:
            answer = server.evaluate_response(bytes(request.auth_bytes))
            principal = self._principal_if_complete(server)
        except (SaslAuthenticationError, IllegalSaslStateError) as e:
            reply = _encode(header, SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=e.message, auth_bytes=b""))
            raise _AuthenticationFailed(getattr(e, "reason", e.message), reply) from None
        lifetime_ms = 0 if principal is None else self._completed(principal)
        return _encode(header, SaslAuthenticateResponse(
            error_code=ErrorCode.NONE, error_message=None, auth_bytes=answer, session_lifetime_ms=lifetime_ms))

    def _illegal_state_reply(self, header: Any, body_offset: int, view: memoryview) -> Any:
        """Another request during SASL authentication: its own error response with
        ILLEGAL_SASL_STATE (Kafka's ``getErrorResponse``); one that cannot be parsed closes at once."""
        response = self._error_response(header, view, body_offset, ErrorCode.ILLEGAL_SASL_STATE)
        return None if response is None else _encode(header, response)

    def _principal_if_complete(self, server: SaslServer) -> KafkaPrincipal | None:
        """The authenticated principal once the exchange is complete; a re-authentication may not
        change it (``ReauthInfo.ensurePrincipalUnchanged``)."""
        if not server.complete:
            return None
        principal = KafkaPrincipal.user(server.authorization_id)
        if self._previous is not None and principal != self._previous[1]:
            before = self._previous[1]
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {before.principal_type}.{before.name}: "
                f"{principal.principal_type}.{principal.name}")
        return principal

    def _completed(self, principal: KafkaPrincipal) -> int:
        """Authentication succeeded: the session's lifetime (0: none), as KIP-368 computes it."""
        assert self._mechanism is not None
        connection = self._connection
        lifetime_ms = self._config.max_reauth_ms.get(self._mechanism, 0)
        self._expiry_ms = self._time.monotonic_ms() + lifetime_ms if lifetime_ms > 0 else None
        log.debug("%s of %s as %s with %s complete; session lifetime %d ms",
                  "Re-authentication" if self._reauthenticating else "Authentication", connection.peer,
                  principal, self._mechanism, lifetime_ms)
        connection.principal = principal
        connection.max_frame_size = self._max_request_size
        self._state = _State.COMPLETE
        self._server = None
        self._previous = None
        if self._expiry_ms is None:
            connection.authenticator = None  # nothing left to check on this connection
        return lifetime_ms

    def _fail(self, reason: str, reply: Any) -> asyncio.Future[Any]:
        """Kafka's delayed close: nothing more is read; after the delay the failure response, if
        any, is written and the connection closed."""
        log.info("Failed %s of %s on listener %s: %s",
                 "re-authentication" if self._reauthenticating else "authentication", self._connection.peer,
                 self._config.listener_name, reason)
        self._state = _State.FAILED
        self._server = None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def release() -> None:
            if not future.done():
                future.set_result(reply)

        self._scheduler.call_later(self._config.failed_authentication_delay_ms, release)
        self._connection.finish()
        return future


def authenticator_factory(
    config: SaslListenerConfig, dispatch: Dispatcher, credentials: CredentialCache, time: Time, scheduler: Scheduler,
    error_response: ErrorResponder,
) -> Callable[[KafkaConnection], SaslServerAuthenticator]:
    """What a SASL listener calls for each new connection. ``dispatch`` and ``error_response``
    come from the server (its request dispatcher and its handlers' error responses), as Kafka's
    ``ChannelBuilders`` hands its authenticator an ApiVersions supplier."""
    def create(connection: KafkaConnection) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(connection, config, dispatch, credentials, time, scheduler, error_response)
    return create
