"""The SASL server authenticator in front of a real `KafkaConnection` (fake transport, fake
dispatcher, MockTime/MockScheduler): every row of Kafka's SaslServerAuthenticator state machine,
handshake v0 (raw tokens) and v1 (SaslAuthenticate), the delayed close after a failure, KIP-368
expiry and re-authentication with the clock moved by hand, and the start-up checks of a SASL
listener's configuration. Also the client mechanisms against the server ones."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.network.connection import KafkaConnection
from pybroker.network.sasl_authenticator import SaslListenerConfig, SaslServerAuthenticator
from pybroker.protocol import codec
from pybroker.protocol import messages as m
from pybroker.protocol.api_keys import ApiKey
from pybroker.security.credential_cache import CredentialCache
from pybroker.security.principal import ANONYMOUS, KafkaPrincipal
from pybroker.security.sasl_client import PlainClient, SaslClientError, ScramClient
from pybroker.security.scram import ScramMechanism, ScramServer, credential_from_password
from pybroker.server.apis import sasl_authenticate, sasl_handshake
from pybroker.server.config import BrokerConfig, ConfigError
from pybroker.server.dispatcher import handler_error_response
from tests.mock_time import MockScheduler, MockTime

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
DELAY_MS = 100
MAX_RECEIVE = 4096


class FakeTransport:
    def __init__(self, connection: KafkaConnection) -> None:
        self.connection = connection
        self.written = bytearray()
        self.closed = False
        self.reading = True

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else None

    def write(self, data: Any) -> None:
        assert not self.closed
        self.written += data

    def writelines(self, items: Any) -> None:
        for item in items:
            self.write(item)

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.connection.connection_lost(None)


class Harness:
    """A connection on a SASL listener, fed frames by the test."""

    def __init__(self, mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", reauth_ms: int = 0,
                 **overrides: str) -> None:
        props = {
            "sasl.enabled.mechanisms": mechanisms,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "connections.max.reauth.ms": str(reauth_ms),
            "sasl.server.max.receive.size": str(MAX_RECEIVE),
            "connection.failed.authentication.delay.ms": str(DELAY_MS),
            **overrides,
        }
        self.config = SaslListenerConfig.from_config(BrokerConfig(props), "SASL_PLAINTEXT")
        self.time = MockTime()
        self.scheduler = MockScheduler(self.time)
        self.credentials = CredentialCache(["SCRAM-SHA-256", "SCRAM-SHA-512"])
        for user, password in (("alice", "alice-secret"), ("bob", "bob-secret")):
            self.credentials.update_user(user, {mechanism.mechanism_name: credential_from_password(
                mechanism, password, 4096).format() for mechanism in ScramMechanism})
        self.forwarded: list[int] = []  # api keys the dispatcher got
        self.dispatch_reply: Callable[[int, Any], Any] = self._default_reply
        self.connection = KafkaConnection(self._dispatch, 1 << 20, listener_name="SASL_PLAINTEXT",
                                          security_protocol="SASL_PLAINTEXT")
        self.transport = FakeTransport(self.connection)
        self.connection.connection_made(self.transport)  # type: ignore[arg-type]
        self.authenticator = SaslServerAuthenticator(
            self.connection, self.config, self._dispatch, self.credentials, self.time, self.scheduler,
            handler_error_response)
        self.connection.authenticator = self.authenticator
        self.correlation = 0

    @staticmethod
    def _default_reply(api_key: int, header: Any) -> Any:
        return b"\x00\x00\x00\x04" + header.correlation_id.to_bytes(4, "big")

    def _dispatch(self, frame: bytearray, connection: KafkaConnection) -> Any:
        header, _ = codec.decode_request_header(memoryview(frame))
        self.forwarded.append(header.api_key)
        return self.dispatch_reply(header.api_key, header)

    # --- feeding ---

    def feed_raw(self, data: bytes) -> None:
        """Bytes as the socket delivers them (size prefixes included)."""
        while data and not self.transport.closed:
            buffer = self.connection.get_buffer(len(data))
            n = min(len(buffer), len(data))
            buffer[:n] = data[:n]
            self.connection.buffer_updated(n)
            data = data[n:]

    def send(self, api_key: int, version: int, request: Any) -> int:
        self.correlation += 1
        self.feed_raw(bytes(codec.encode_request(api_key, version, self.correlation, "test", request)))
        return self.correlation

    def take(self) -> bytes:
        out, self.transport.written = bytes(self.transport.written), bytearray()
        return out

    def take_response(self, api_key: int, version: int) -> Any:
        out = self.take()
        size = int.from_bytes(out[:4], "big")
        assert len(out) == 4 + size, f"expected one frame, got {len(out)} bytes"
        return codec.decode_response(api_key, version, memoryview(out[4:]))[1]

    def api_versions(self, version: int = 3) -> None:
        self.send(ApiKey.API_VERSIONS, version, m.ApiVersionsRequest(
            client_software_name="test", client_software_version="1.0"))
        assert self.forwarded[-1] == ApiKey.API_VERSIONS
        self.take()

    def handshake(self, mechanism: str, version: int = 1) -> Any:
        self.send(ApiKey.SASL_HANDSHAKE, version, m.SaslHandshakeRequest(mechanism=mechanism))
        return self.take_response(ApiKey.SASL_HANDSHAKE, version)

    def authenticate(self, token: bytes, version: int = 2) -> Any:
        self.send(ApiKey.SASL_AUTHENTICATE, version, m.SaslAuthenticateRequest(auth_bytes=token))
        return self.take_response(ApiKey.SASL_AUTHENTICATE, version)

    def login_plain(self, user: str = "alice", password: str = "alice-secret", version: int = 2) -> Any:
        assert self.handshake("PLAIN").error_code == 0
        return self.authenticate(PlainClient(user, password).initial_response(), version)

    def metadata(self) -> int:
        return self.send(ApiKey.METADATA, 12, m.MetadataRequest(topics=None))

    async def advance(self, ms: float) -> None:
        await self.scheduler.advance(ms)
        await asyncio.sleep(0)  # the reply future's callbacks
        await asyncio.sleep(0)


def run(test: Callable[[], Any]) -> None:
    asyncio.run(test())


# --- success -------------------------------------------------------------------------------------


def test_api_versions_then_plain_v1_authenticates_and_detaches() -> None:
    async def test() -> None:
        h = Harness()
        assert h.connection.max_frame_size == MAX_RECEIVE
        h.api_versions()
        response = h.handshake("PLAIN")
        assert response.error_code == 0 and set(response.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        done = h.authenticate(PlainClient("alice", "alice-secret").initial_response())
        assert (done.error_code, done.error_message, bytes(done.auth_bytes), done.session_lifetime_ms) == (0, None, b"", 0)
        assert h.connection.principal == KafkaPrincipal.user("alice")
        assert h.connection.authenticator is None  # no session expiry: nothing more to check
        assert h.connection.max_frame_size == 1 << 20
        h.metadata()
        assert h.forwarded[-1] == ApiKey.METADATA and not h.transport.closed
    run(test)


def test_handshake_first_without_api_versions() -> None:
    async def test() -> None:
        h = Harness()
        assert h.login_plain(version=0).error_code == 0
        assert h.connection.principal == KafkaPrincipal.user("alice")
        assert h.forwarded == []
    run(test)


def test_plain_v0_raw_tokens_end_with_four_zero_bytes() -> None:
    async def test() -> None:
        h = Harness()
        assert h.handshake("PLAIN", version=0).error_code == 0
        token = PlainClient("alice", "alice-secret").initial_response()
        h.feed_raw(len(token).to_bytes(4, "big") + token)
        assert h.take() == b"\x00\x00\x00\x00"
        assert h.connection.principal == KafkaPrincipal.user("alice")
        h.metadata()
        assert h.forwarded == [ApiKey.METADATA]
    run(test)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_v1_with_the_credential_cache(mechanism: str) -> None:
    async def test() -> None:
        h = Harness()
        h.api_versions()
        assert h.handshake(mechanism).error_code == 0
        client = ScramClient(ScramMechanism(mechanism), "alice", "alice-secret")
        first = h.authenticate(client.initial_response())
        assert first.error_code == 0 and first.session_lifetime_ms == 0
        final = h.authenticate(client.evaluate_challenge(bytes(first.auth_bytes)) or b"")
        assert final.error_code == 0
        assert client.evaluate_challenge(bytes(final.auth_bytes)) is None and client.complete  # signature verified
        assert h.connection.principal == KafkaPrincipal.user("alice")
    run(test)


def test_scram_v0_raw() -> None:
    async def test() -> None:
        h = Harness()
        assert h.handshake("SCRAM-SHA-512", version=0).error_code == 0
        client = ScramClient(ScramMechanism.SCRAM_SHA_512, "bob", "bob-secret")
        token = client.initial_response()
        h.feed_raw(len(token).to_bytes(4, "big") + token)
        server_first = h.take()[4:]
        token = client.evaluate_challenge(server_first) or b""
        h.feed_raw(len(token).to_bytes(4, "big") + token)
        assert client.evaluate_challenge(h.take()[4:]) is None
        assert h.connection.principal == KafkaPrincipal.user("bob")
    run(test)


# --- failures: delayed close ---------------------------------------------------------------------


def test_unknown_mechanism_answers_33_after_the_delay_then_closes() -> None:
    async def test() -> None:
        h = Harness(mechanisms="SCRAM-SHA-256")
        h.api_versions()
        h.send(ApiKey.SASL_HANDSHAKE, 1, m.SaslHandshakeRequest(mechanism="PLAIN"))
        assert h.take() == b"" and not h.transport.reading
        h.metadata()  # read nothing more
        await h.advance(DELAY_MS - 1)
        assert h.take() == b"" and not h.transport.closed
        await h.advance(1)
        response = codec.decode_response(ApiKey.SASL_HANDSHAKE, 1, memoryview(h.transport.written[4:]))[1]
        assert (response.error_code, response.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["SCRAM-SHA-256"])
        assert h.transport.closed and h.forwarded == [ApiKey.API_VERSIONS]
    run(test)


@pytest.mark.parametrize("api_versions_first", [False, True])
def test_a_request_before_the_handshake_closes_without_response(api_versions_first: bool) -> None:
    async def test() -> None:
        h = Harness()
        if api_versions_first:
            h.api_versions()
        h.metadata()
        assert not h.transport.closed
        await h.advance(DELAY_MS)
        assert h.transport.closed and h.take() == b""
        assert ApiKey.METADATA not in h.forwarded and h.connection.principal == ANONYMOUS
    run(test)


def test_garbage_first_frame_is_taken_for_gssapi_and_closes_after_the_delay() -> None:
    async def test() -> None:
        h = Harness()
        h.feed_raw(b"\x00\x00\x00\x05\x60\x01\x02\x03\x04")
        assert not h.transport.closed
        await h.advance(DELAY_MS)
        assert h.transport.closed and h.take() == b""
    run(test)


def test_wrong_password_v1_answers_58_with_kafka_text_after_the_delay() -> None:
    async def test() -> None:
        h = Harness()
        h.api_versions()
        assert h.handshake("PLAIN").error_code == 0
        h.send(ApiKey.SASL_AUTHENTICATE, 1, m.SaslAuthenticateRequest(
            auth_bytes=PlainClient("alice", "nope").initial_response()))
        assert h.take() == b""
        await h.advance(DELAY_MS)
        assert h.transport.closed
        response = codec.decode_response(ApiKey.SASL_AUTHENTICATE, 1, memoryview(h.transport.written[4:]))[1]
        assert (response.error_code, response.error_message) == (
            58, "Authentication failed: Invalid username or password")
        assert h.connection.principal == ANONYMOUS
    run(test)


def test_wrong_scram_password_gets_the_generic_text() -> None:
    async def test() -> None:
        h = Harness()
        assert h.handshake("SCRAM-SHA-256").error_code == 0
        client = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "wrong")
        first = h.authenticate(client.initial_response())
        h.send(ApiKey.SASL_AUTHENTICATE, 2, m.SaslAuthenticateRequest(
            auth_bytes=client.evaluate_challenge(bytes(first.auth_bytes))))
        await h.advance(DELAY_MS)
        response = codec.decode_response(ApiKey.SASL_AUTHENTICATE, 2, memoryview(h.transport.written[4:]))[1]
        assert (response.error_code, response.error_message) == (58, (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-256"))
    run(test)


def test_wrong_password_v0_closes_without_response() -> None:
    async def test() -> None:
        h = Harness()
        assert h.handshake("PLAIN", version=0).error_code == 0
        token = PlainClient("alice", "nope").initial_response()
        h.feed_raw(len(token).to_bytes(4, "big") + token)
        await h.advance(DELAY_MS)
        assert h.transport.closed and h.take() == b""
    run(test)


def test_another_request_during_v1_authentication_gets_its_34_response_then_close() -> None:
    async def test() -> None:
        h = Harness()
        assert h.handshake("PLAIN").error_code == 0
        h.send(ApiKey.LIST_GROUPS, 4, m.ListGroupsRequest())
        await h.advance(DELAY_MS)
        response = codec.decode_response(ApiKey.LIST_GROUPS, 4, memoryview(h.transport.written[4:]))[1]
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE and h.transport.closed
        assert h.forwarded == []
    run(test)


# --- failures: closed at once --------------------------------------------------------------------


def test_second_api_versions_closes_at_once() -> None:
    async def test() -> None:
        h = Harness()
        h.api_versions()
        h.send(ApiKey.API_VERSIONS, 3, m.ApiVersionsRequest(client_software_name="a", client_software_version="1"))
        assert h.transport.closed and h.take() == b""
    run(test)


def test_unsupported_api_versions_version_lets_the_client_retry() -> None:
    async def test() -> None:
        h = Harness()
        h.feed_raw(b"\x00\x00\x00\x0a\x00\x12\x00\x09\x00\x00\x00\x01\xff\xff")  # ApiVersions v9
        assert h.forwarded == [ApiKey.API_VERSIONS]  # the dispatcher answers UNSUPPORTED_VERSION
        h.take()
        h.api_versions(0)
        assert h.login_plain().error_code == 0
    run(test)


def test_garbage_after_api_versions_closes_at_once() -> None:
    async def test() -> None:
        h = Harness()
        h.api_versions()
        h.feed_raw(b"\x00\x00\x00\x03\x01\x02\x03")
        assert h.transport.closed
    run(test)


@pytest.mark.parametrize("payload", [
    b"\x00\x24\x00\x02\x00\x00\x00\x07\x00\x04test\x00\x09ab",  # SaslAuthenticate v2 cut short
    b"\x00\x24\x00\x07\x00\x00\x00\x07\x00\x04test\x00",  # SaslAuthenticate v7
    b"\xff\xff\xff",  # not even a header
])
def test_truncated_or_unsupported_sasl_authenticate_closes_at_once(payload: bytes) -> None:
    async def test() -> None:
        h = Harness()
        assert h.handshake("PLAIN").error_code == 0
        h.feed_raw(len(payload).to_bytes(4, "big") + payload)
        assert h.transport.closed and h.take() == b""
    run(test)


def test_garbage_scram_token_fails_with_58() -> None:
    async def test() -> None:
        h = Harness()
        assert h.handshake("SCRAM-SHA-256").error_code == 0
        h.send(ApiKey.SASL_AUTHENTICATE, 2, m.SaslAuthenticateRequest(auth_bytes=b"\xff\x00garbage,,,"))
        await h.advance(DELAY_MS)
        response = codec.decode_response(ApiKey.SASL_AUTHENTICATE, 2, memoryview(h.transport.written[4:]))[1]
        assert response.error_code == 58 and h.transport.closed
    run(test)


def test_a_frame_above_sasl_server_max_receive_size_closes() -> None:
    async def test() -> None:
        h = Harness()
        h.feed_raw((MAX_RECEIVE + 1).to_bytes(4, "big") + b"\x00" * 16)
        assert h.transport.closed
    run(test)


# --- after authentication ------------------------------------------------------------------------


def test_sasl_apis_after_authentication_reach_the_handlers() -> None:
    async def test() -> None:
        h = Harness()
        h.login_plain()
        h.send(ApiKey.SASL_HANDSHAKE, 1, m.SaslHandshakeRequest(mechanism="PLAIN"))
        h.send(ApiKey.SASL_AUTHENTICATE, 2, m.SaslAuthenticateRequest(auth_bytes=b"x"))
        assert h.forwarded[-2:] == [ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE]
    run(test)


def test_the_handlers_answer_34() -> None:
    ctx: Any = SimpleNamespace(api_version=1)
    handshake = sasl_handshake.handle(ctx, m.SaslHandshakeRequest(mechanism="PLAIN"))
    assert (handshake.error_code, handshake.mechanisms) == (34, [])
    authenticate = sasl_authenticate.handle(ctx, m.SaslAuthenticateRequest(auth_bytes=b""))
    assert (authenticate.error_code, authenticate.error_message) == (
        34, "SaslAuthenticate request received after successful authentication")
    assert sasl_handshake.AUTHORIZES == frozenset() and sasl_authenticate.AUTHORIZES == frozenset()


# --- KIP-368 -------------------------------------------------------------------------------------


def test_session_lifetime_and_close_on_the_first_request_after_expiry() -> None:
    async def test() -> None:
        h = Harness(reauth_ms=2000)
        assert h.login_plain().session_lifetime_ms == 2000
        assert h.connection.authenticator is not None
        await h.advance(2000)
        h.metadata()  # exactly at expiry: still served
        assert h.forwarded[-1] == ApiKey.METADATA and h.take()
        await h.advance(1)
        h.metadata()
        assert h.transport.closed and h.take() == b"" and h.forwarded.count(ApiKey.METADATA) == 1
    run(test)


def test_v0_sessions_expire_too() -> None:
    async def test() -> None:
        h = Harness(reauth_ms=2000)
        assert h.login_plain(version=0).session_lifetime_ms == 0  # v0 cannot carry it
        await h.advance(2001)
        h.metadata()
        assert h.transport.closed
    run(test)


def test_per_mechanism_override() -> None:
    async def test() -> None:
        h = Harness(reauth_ms=0, **{"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "5000"})
        assert h.config.max_reauth_ms == {"PLAIN": 5000, "SCRAM-SHA-256": 0, "SCRAM-SHA-512": 0}
        assert h.login_plain().session_lifetime_ms == 5000
    run(test)


def test_reauthentication_renews_the_session() -> None:
    async def test() -> None:
        h = Harness(reauth_ms=2000)
        h.api_versions()
        h.login_plain()
        await h.advance(1800)
        assert h.login_plain().session_lifetime_ms == 2000
        assert h.connection.principal == KafkaPrincipal.user("alice")
        await h.advance(1800)  # past the first expiry, within the second
        h.metadata()
        assert h.forwarded[-1] == ApiKey.METADATA and not h.transport.closed
        h.take()
        await h.advance(1800)  # an expired session may still re-authenticate
        assert h.login_plain().error_code == 0
        h.metadata()
        assert not h.transport.closed
    run(test)


def test_reauthentication_cannot_change_the_principal() -> None:
    async def test() -> None:
        h = Harness(reauth_ms=2000)
        h.login_plain()
        await h.advance(1500)
        assert h.handshake("PLAIN").error_code == 0
        h.send(ApiKey.SASL_AUTHENTICATE, 2, m.SaslAuthenticateRequest(
            auth_bytes=PlainClient("bob", "bob-secret").initial_response()))
        await h.advance(DELAY_MS)
        response = codec.decode_response(ApiKey.SASL_AUTHENTICATE, 2, memoryview(h.transport.written[4:]))[1]
        assert (response.error_code, response.error_message) == (
            58, "Cannot change principals during re-authentication from User.alice: User.bob")
        assert h.transport.closed and h.connection.principal == KafkaPrincipal.user("alice")
    run(test)


def test_reauthentication_failure_says_re_authentication() -> None:
    async def test() -> None:
        h = Harness(reauth_ms=2000)
        assert h.handshake("SCRAM-SHA-256").error_code == 0
        client = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "alice-secret")
        first = h.authenticate(client.initial_response())
        h.authenticate(client.evaluate_challenge(bytes(first.auth_bytes)) or b"")
        await h.advance(1500)
        assert h.handshake("SCRAM-SHA-256").error_code == 0
        h.send(ApiKey.SASL_AUTHENTICATE, 2, m.SaslAuthenticateRequest(auth_bytes=b"n,,n=nobody,r=abc"))
        await h.advance(DELAY_MS)
        response = codec.decode_response(ApiKey.SASL_AUTHENTICATE, 2, memoryview(h.transport.written[4:]))[1]
        assert response.error_message == ("Authentication failed during re-authentication due to invalid "
                                          "credentials with SASL mechanism SCRAM-SHA-256")
    run(test)


def test_reauthentication_cannot_change_the_mechanism() -> None:
    async def test() -> None:
        h = Harness(reauth_ms=2000)
        h.login_plain()
        await h.advance(1500)
        assert h.handshake("SCRAM-SHA-256").error_code == 0  # answered, as Kafka does
        h.send(ApiKey.SASL_AUTHENTICATE, 2, m.SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abc"))
        await h.advance(DELAY_MS)
        assert h.transport.closed and h.take() == b""
    run(test)


def test_at_most_one_reauthentication_start_per_second() -> None:
    async def test() -> None:
        h = Harness(reauth_ms=5000)
        h.login_plain()
        await h.advance(100)
        assert h.login_plain().error_code == 0  # the first re-authentication: any time
        await h.advance(999)
        h.send(ApiKey.SASL_HANDSHAKE, 1, m.SaslHandshakeRequest(mechanism="PLAIN"))
        assert h.forwarded[-1] == ApiKey.SASL_HANDSHAKE  # to KafkaApis: error 34
        h.take()
        await h.advance(1)
        assert h.login_plain().error_code == 0
    run(test)


def test_reauthentication_handshake_is_answered_after_earlier_pipelined_requests() -> None:
    async def test() -> None:
        h = Harness(reauth_ms=2000)
        h.login_plain()
        loop = asyncio.get_running_loop()
        produce_reply: asyncio.Future[Any] = loop.create_future()
        h.dispatch_reply = lambda api_key, header: produce_reply
        await h.advance(1500)
        h.metadata()  # waits in the dispatcher, like an acks=all produce
        h.send(ApiKey.SASL_HANDSHAKE, 1, m.SaslHandshakeRequest(mechanism="PLAIN"))
        assert h.take() == b""  # the handshake's answer waits for the earlier reply
        produce_reply.set_result(b"\x00\x00\x00\x04\x00\x00\x00\x01")
        await asyncio.sleep(0)
        out = h.take()
        assert out[:8] == b"\x00\x00\x00\x04\x00\x00\x00\x01"
        handshake = codec.decode_response(ApiKey.SASL_HANDSHAKE, 1, memoryview(out[12:]))[1]
        assert handshake.error_code == 0
        assert h.authenticate(PlainClient("alice", "alice-secret").initial_response()).session_lifetime_ms == 2000
    run(test)


# --- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize("props, message", [
    ({}, "GSSAPI"),  # Kafka's default
    ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS}, "OAUTHBEARER"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN_JAAS},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"),
    ({"sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x.Other required;"}, "expected"),
    ({"sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS[:-1]}, "semi-colon"),
])
def test_start_up_checks(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SaslListenerConfig.from_config(BrokerConfig(props), "SASL_PLAINTEXT")


def test_listener_overrides_and_plain_users() -> None:
    config = SaslListenerConfig.from_config(BrokerConfig({
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }), "SASL_PLAINTEXT")
    assert config.enabled_mechanisms == ("SCRAM-SHA-512",) and config.plain_users == {}
    config = SaslListenerConfig.from_config(BrokerConfig({
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    }), "SASL_PLAINTEXT")
    assert config.plain_users == {"alice": "alice-secret", "bob": "bob-secret"}
    assert (config.max_receive_size, config.failed_authentication_delay_ms) == (524288, 100)


# --- the client mechanisms -----------------------------------------------------------------------


def test_scram_client_rejects_a_forged_server_signature() -> None:
    credential = credential_from_password(ScramMechanism.SCRAM_SHA_256, "pw", 4096)
    server = ScramServer(ScramMechanism.SCRAM_SHA_256, {"u": credential}.get)
    client = ScramClient(ScramMechanism.SCRAM_SHA_256, "u", "pw")
    final = client.evaluate_challenge(server.evaluate_response(client.initial_response()))
    server.evaluate_response(final or b"")
    with pytest.raises(SaslClientError, match="invalid server signature"):
        client.evaluate_challenge(b"v=" + b"A" * 44)


def test_scram_client_checks_nonce_and_iterations() -> None:
    client = ScramClient(ScramMechanism.SCRAM_SHA_256, "u", "pw", nonce="abc")
    client.initial_response()
    with pytest.raises(SaslClientError, match="nonce"):
        client.evaluate_challenge(b"r=xyz123,s=c2FsdA==,i=4096")
    client = ScramClient(ScramMechanism.SCRAM_SHA_256, "u", "pw", nonce="abc")
    client.initial_response()
    with pytest.raises(SaslClientError, match="less than the minimum"):
        client.evaluate_challenge(b"r=abc123,s=c2FsdA==,i=1000")
