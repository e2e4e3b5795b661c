"""Users' SCRAM credentials: Kafka's Sanitizer, the user-config znode JSON, the semantics of
AlterUserScramCredentials and DescribeUserScramCredentials (every row of Kafka's
ZkAdminManager checks, result order, de-duplication), their getErrorResponse, the local store's
persistence and the broker's credential cache, and kafka-configs' parsing of SCRAM configs."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from pybroker.cli.configs import CommandError, parse_add_config, scram_alterations
from pybroker.client.admin import UserScramCredentialDeletion, UserScramCredentialUpsertion
from pybroker.common.errors import ErrorCode
from pybroker.controller.local_store import LocalStore
from pybroker.controller.store import StoreListener
from pybroker.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from pybroker.security.credential_cache import CredentialCache
from pybroker.security.scram import ScramCredential, ScramMechanism, credential_from_salted_password
from pybroker.server.apis import HANDLERS
from pybroker.server.apis import alter_user_scram_credentials as alter_api
from pybroker.server.apis import describe_user_scram_credentials as describe_api
from pybroker.server.user_scram_credentials import (
    AlterResult,
    DescribeResult,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from pybroker.zookeeper.znodes import (
    decode_config_change,
    desanitize,
    encode_config_change,
    encode_entity_config,
    sanitize,
    user_config_path,
    user_entity_path,
)

SHA256, SHA512, UNKNOWN = 1, 2, 0


# --- Kafka's Sanitizer -------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "sanitized"), [
    ("alice", "alice"),
    ("User.Name_1-x", "User.Name_1-x"),      # Java's URLEncoder keeps [A-Za-z0-9.-*_]
    ("a b", "a%20b"),                         # URLEncoder's '+' for a space, then Kafka's %20
    ("a*b", "a%2Ab"),                         # '*' kept by URLEncoder, then Kafka's %2A
    ("a+b", "a%2Bb"),                         # a real '+' is encoded by URLEncoder
    ("a~b", "a%7Eb"),                         # Python's quote would keep '~'; Java does not
    ("CN=x,O=y", "CN%3Dx%2CO%3Dy"),
    ("a/b:c@d", "a%2Fb%3Ac%40d"),
    ("ü€", "%C3%BC%E2%82%AC"),                # UTF-8 bytes, upper-case hex
    ("😀", "%F0%9F%98%80"),
    ("", ""),
])
def test_sanitize_follows_javas_url_encoder_and_kafkas_replacements(name, sanitized):
    assert sanitize(name) == sanitized
    assert desanitize(sanitized) == name


def test_desanitize_is_javas_url_decoder():
    assert desanitize("a+b") == "a b"  # URLDecoder reads '+' as a space
    assert desanitize("%c3%bc") == "ü"  # any hex case


def test_user_config_znode_and_notification_are_kafkas_json():
    credential = credential_from_salted_password(ScramMechanism.SCRAM_SHA_256, b"salt", b"x" * 32, 8192)
    assert user_config_path("bob smith") == "/config/users/bob%20smith"
    data = encode_entity_config({"SCRAM-SHA-256": credential.format()})
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    assert data == (
        b'{"version":1,"config":{"SCRAM-SHA-256":"salt=' + b64(b"salt").encode() + b",stored_key="
        + b64(credential.stored_key).encode() + b",server_key=" + b64(credential.server_key).encode()
        + b',iterations=8192"}}'
    )
    assert encode_config_change(user_entity_path("a*b")) == b'{"version":2,"entity_path":"users/a%2Ab"}'
    assert decode_config_change(b'{"version":2,"entity_path":"users/a%2Ab"}') == "users/a%2Ab"


# --- the admin semantics over a store ------------------------------------------------------------

@dataclass
class Up:
    name: str
    mechanism: int = SHA256
    iterations: int = 8192
    salt: bytes = b"salt"
    salted_password: bytes = b"p" * 32


@dataclass
class Del:
    name: str
    mechanism: int = SHA256


class Changes:
    def __init__(self):
        self.calls = []
        self.listener = StoreListener(on_user_configs_changed=lambda u, c: self.calls.append((u, dict(c))))


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def store(tmp_path):
    changes = Changes()
    s = LocalStore(str(tmp_path), "cluster", changes.listener)
    s.changes = changes
    return s


def alter(store, upsertions=(), deletions=()):
    async def go():
        out = await alter_user_scram_credentials(store, list(upsertions), list(deletions))
        await store.close()
        return out
    return run(go())


def describe(store, users):
    return run(describe_user_scram_credentials(store, users))


def ok(user):
    return AlterResult(user, ErrorCode.NONE, None)


def test_an_upsertion_stores_the_credential_computed_from_the_clients_salted_password(store, tmp_path):
    assert alter(store, [Up("alice", iterations=8192, salt=b"NaCl", salted_password=b"s" * 32)]) == [ok("alice")]
    stored = store.user_configs()["alice"]
    assert list(stored) == ["SCRAM-SHA-256"]
    assert ScramCredential.parse(stored["SCRAM-SHA-256"]) == credential_from_salted_password(
        ScramMechanism.SCRAM_SHA_256, b"NaCl", b"s" * 32, 8192)
    assert store.changes.calls == [("alice", stored)]
    # Persisted, and read back by a new store (a restart).
    data = json.loads((tmp_path / "cluster-metadata.json").read_text())
    assert data["entity_configs"]["users"] == {"alice": stored}
    assert LocalStore(str(tmp_path), "cluster").user_configs() == {"alice": stored}


def test_refusals_one_result_per_user_with_kafkas_errors_and_messages(store):
    results = alter(store, [
        Up(""),                                   # empty name
        Up("u1", mechanism=UNKNOWN),              # unknown mechanism
        Up("u2", mechanism=7),
        Up("u3", iterations=4095),                # too few
        Up("u4", iterations=16385),               # too many
        Up("ok1", iterations=4096), Up("ok2", iterations=16384, mechanism=SHA512),
    ], [Del("d1", mechanism=UNKNOWN)])
    assert results == [
        AlterResult("d1", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        AlterResult("", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        AlterResult("u1", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        AlterResult("u2", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        AlterResult("u3", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        AlterResult("u4", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        ok("ok1"), ok("ok2"),
    ]
    assert sorted(store.user_configs()) == ["ok1", "ok2"]


def test_a_refused_entry_fails_the_whole_user_and_an_upsertions_reason_wins(store):
    results = alter(store, [Up("u", mechanism=SHA512), Up("u", iterations=10)], [Del("u", mechanism=UNKNOWN)])
    assert results == [AlterResult("u", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")]
    assert store.user_configs() == {}
    assert alter(store, [Up("", mechanism=UNKNOWN)], [Del("")]) == [
        AlterResult("", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")]


def test_the_same_user_and_mechanism_twice_is_a_duplicate(store):
    results = alter(store, [Up("a"), Up("a"), Up("b"), Up("c", mechanism=SHA512)],
                    [Del("b"), Del("c", mechanism=SHA256)])
    assert results == [
        AlterResult("a", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        AlterResult("b", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        # c: deleting SHA-256, which it does not have (checked against the stored configs)
        AlterResult("c", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
    ]
    assert store.user_configs() == {}


def test_deletions_and_upsertions_of_one_user_are_written_together(store):
    assert alter(store, [Up("a"), Up("a", mechanism=SHA512, iterations=4096)]) == [ok("a")]
    store.changes.calls.clear()
    assert alter(store, [Up("a", mechanism=SHA512, iterations=5000)], [Del("a")]) == [ok("a")]
    assert list(store.user_configs()["a"]) == ["SCRAM-SHA-512"]
    assert len(store.changes.calls) == 1  # one write per user
    assert alter(store, [], [Del("a", mechanism=SHA512)]) == [ok("a")]
    assert store.user_configs() == {}
    assert store.changes.calls[-1] == ("a", {})
    assert alter(store, [], [Del("a", mechanism=SHA512)]) == [
        AlterResult("a", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")]


def test_result_groups_come_in_kafkas_order(store):
    alter(store, [Up("has")])
    results = alter(store, [Up("good"), Up("dup"), Up("dup"), Up("bad", iterations=1)], [Del("missing"), Del("has")])
    assert [(r.user, r.error) for r in results] == [
        ("bad", ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ("dup", ErrorCode.DUPLICATE_RESOURCE),
        ("missing", ErrorCode.RESOURCE_NOT_FOUND),
        ("good", ErrorCode.NONE),
        ("has", ErrorCode.NONE),
    ]


def test_an_unusable_salted_password_fails_every_checked_user_as_in_kafka(store):
    results = alter(store, [Up("a"), Up("b", salted_password=b""), Up("c", iterations=1)])
    assert results == [
        AlterResult("c", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        AlterResult("a", ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR.message),
        AlterResult("b", ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR.message),
    ]
    assert store.user_configs() == {}


def test_describe_every_user_lists_those_with_credentials_in_java_order(store):
    alter(store, [Up("b", mechanism=SHA512, iterations=5000), Up("b", iterations=6000), Up("a"),
                  Up("\uff5e"), Up("😀")])
    run(store.set_user_configs("quota-only", {"producer_byte_rate": "1024"}))
    for users in (None, []):
        assert [r.user for r in describe(store, users)] == ["a", "b", "😀", "\uff5e"]  # UTF-16 order
    b = next(r for r in describe(store, None) if r.user == "b")
    assert b == DescribeResult("b", credentials=[(SHA256, 6000), (SHA512, 5000)])


def test_describe_named_users_in_request_order_deduplicated(store):
    alter(store, [Up("a"), Up("b", iterations=4096)])
    assert describe(store, ["b", "x", "", "a", "b", "", "a"]) == [
        DescribeResult("b", ErrorCode.DUPLICATE_RESOURCE,
                       "Cannot describe SCRAM credentials for the same user twice in a single request: b"),
        DescribeResult("x", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: x"),
        DescribeResult("", ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty"),
        DescribeResult("a", ErrorCode.DUPLICATE_RESOURCE,
                       "Cannot describe SCRAM credentials for the same user twice in a single request: a"),
    ]
    assert describe(store, ["b"]) == [DescribeResult("b", credentials=[(SHA256, 4096)])]


def test_describe_reports_a_damaged_credential_as_unknown_server_error(store):
    run(store.set_user_configs("broken", {"SCRAM-SHA-256": "salt=abc"}))
    assert describe(store, ["broken"]) == [DescribeResult(
        "broken", ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR.message)]


# --- handlers ------------------------------------------------------------------------------------

def test_handlers_are_registered_and_declare_their_authorization():
    from pybroker.security.authorizer import AclOperation, ResourceType

    assert HANDLERS[50] is describe_api and HANDLERS[51] is alter_api
    assert describe_api.VERSIONS == alter_api.VERSIONS == (0, 0)
    assert describe_api.AUTHORIZES == {(AclOperation.DESCRIBE, ResourceType.CLUSTER)}
    assert alter_api.AUTHORIZES == {(AclOperation.ALTER, ResourceType.CLUSTER)}


def test_alter_error_response_is_every_distinct_user_sorted():
    request = AlterUserScramCredentialsRequest(
        deletions=[AlterUserScramCredentialsRequest.ScramCredentialDeletion(name="zed", mechanism=1)],
        upsertions=[AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name=n, mechanism=1, iterations=4096, salt=b"", salted_password=b"") for n in ("bob", "zed", "Al")],
    )
    response = alter_api.error_response(request, 0, ErrorCode.NOT_CONTROLLER)
    assert [(r.user, r.error_code, r.error_message) for r in response.results] == [
        ("Al", 41, None), ("bob", 41, None), ("zed", 41, None)]


def test_describe_error_response_has_one_anonymous_result_per_requested_user():
    names = [DescribeUserScramCredentialsRequest.UserName(name=n) for n in ("a", "b")]
    response = describe_api.error_response(DescribeUserScramCredentialsRequest(users=names), 0,
                                           ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert response.error_code == 31
    assert [(r.user, r.error_code) for r in response.results] == [("", 31), ("", 31)]
    every = describe_api.error_response(DescribeUserScramCredentialsRequest(users=None), 0,
                                        ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert every.error_code == 31 and every.results == []


def context(store, *, active=True, allowed=True):
    admin = SimpleNamespace(  # the AdminManager's two SCRAM calls, over ``store``
        alter_user_scram_credentials=lambda upsertions, deletions: alter_user_scram_credentials(
            store, upsertions, deletions),
        describe_user_scram_credentials=lambda users: describe_user_scram_credentials(store, users))
    broker = SimpleNamespace(admin_manager=admin, controller=SimpleNamespace(active=active))
    ctx = SimpleNamespace(services=broker, api_version=0, asked=[])

    def authorize_cluster(operation):
        ctx.asked.append(operation)
        return allowed

    ctx.authorize_cluster = authorize_cluster
    return ctx


def test_alter_handler_not_controller_first_then_authorization(store):
    from pybroker.security.authorizer import AclOperation

    request = AlterUserScramCredentialsRequest(deletions=[], upsertions=[
        AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name="u", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p" * 32)])
    ctx = context(store, active=False, allowed=False)
    assert [r.error_code for r in run(alter_api.handle(ctx, request)).results] == [41]
    assert ctx.asked == []  # Kafka checks the controller before authorizing
    ctx = context(store, allowed=False)
    assert [r.error_code for r in run(alter_api.handle(ctx, request)).results] == [31]
    assert ctx.asked == [AclOperation.ALTER]
    assert [r.error_code for r in run(alter_api.handle(context(store), request)).results] == [0]
    assert "u" in store.user_configs()


def test_describe_handler_authorizes_describe_on_the_cluster(store):
    from pybroker.security.authorizer import AclOperation

    ctx = context(store, allowed=False)
    response = run(describe_api.handle(ctx, DescribeUserScramCredentialsRequest(users=None)))
    assert (response.error_code, response.results, ctx.asked) == (31, [], [AclOperation.DESCRIBE])


# --- the broker's credential cache ---------------------------------------------------------------

def test_the_credential_cache_follows_user_configs_for_every_scram_mechanism():
    cache = CredentialCache(m.mechanism_name for m in ScramMechanism)
    c256 = credential_from_salted_password(ScramMechanism.SCRAM_SHA_256, b"s", b"p" * 32, 4096)
    cache.update_user("a", {"SCRAM-SHA-256": c256.format(), "producer_byte_rate": "1"})
    assert cache.get(ScramMechanism.SCRAM_SHA_256, "a") == c256
    assert cache.get(ScramMechanism.SCRAM_SHA_512, "a") is None
    cache.update_user("a", {})
    assert cache.get(ScramMechanism.SCRAM_SHA_256, "a") is None


# --- kafka-configs' SCRAM configs ----------------------------------------------------------------

def test_add_config_with_scram_values_in_brackets():
    configs = parse_add_config("SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=a=b,c]")
    assert configs == {"SCRAM-SHA-256": "iterations=8192,password=secret", "SCRAM-SHA-512": "password=a=b,c"}
    alterations = scram_alterations("alice", configs, ["SCRAM-SHA-512"])
    assert alterations == [
        UserScramCredentialDeletion("alice", "SCRAM-SHA-512"),
        UserScramCredentialUpsertion("alice", "SCRAM-SHA-256", "secret", 8192),
        UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "a=b,c", 4096),  # Kafka's default iterations
    ]
    assert alterations[1].password == "secret" and alterations[2].password == "a=b,c"
    assert scram_alterations("a", {"SCRAM-SHA-256": "iterations=-1,password="}, [])[0].iterations == 4096


@pytest.mark.parametrize(("user", "to_set", "to_delete", "message"), [
    ("a", {"SCRAM-SHA-256": "iterations=4095,password=x"}, [],
     "Iterations 4095 is less than the minimum 4096 required for SCRAM-SHA-256"),
    ("a", {"SCRAM-SHA-512": "password"}, [], "Invalid credential property SCRAM_SHA_512=password"),
    ("a", {"SCRAM-SHA-512": "password=x,iterations=5000"}, [], None),  # iterations must come first: all password
    ("a", {"SCRAM-SHA-1": "password=x"}, [], "Only quota and SCRAM credential configs can be added for 'users' "
     "using --bootstrap-server. Unexpected config names: Set(SCRAM-SHA-1)"),
    ("a", {}, ["retention.ms"], "Only quota and SCRAM credential configs can be deleted for 'users' using "
     "--bootstrap-server. Unexpected config names: List(retention.ms)"),
    ("", {"SCRAM-SHA-256": "password=x"}, [], "The use of --entity-default or --user-defaults is not allowed with "
     "User SCRAM Credentials using --bootstrap-server."),
    ("a", {"SCRAM-SHA-256": "password=x"}, ["producer_byte_rate"], "Cannot alter both quota and SCRAM credential "
     "configs simultaneously for 'users' using --bootstrap-server."),
])
def test_kafka_configs_checks_of_user_configs(user, to_set, to_delete, message):
    if message is None:
        assert scram_alterations(user, to_set, to_delete)[0].password == "x,iterations=5000"
        return
    with pytest.raises(CommandError) as e:
        scram_alterations(user, to_set, to_delete)
    assert str(e.value) == message


def test_the_admin_client_salts_the_password_as_kafkas_admin():
    """Hi(password, salt, iterations) with the upsertion's own salt; a random salt is Kafka's kind."""
    from pybroker.client.admin import Admin

    sent = {}

    class Fake(Admin):
        async def controller(self):
            return "node"

        async def _send_to(self, node, api_key, make, timeout=None):
            sent["request"] = make(0)
            return SimpleNamespace(results=[]), 0

    admin = Fake("127.0.0.1:1")
    run(admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("u", "SCRAM-SHA-512", "pw", 5000, salt=b"NaCl"),
        UserScramCredentialUpsertion("v", "SCRAM-SHA-256", "pw"),
        UserScramCredentialDeletion("w", "SCRAM-SHA-256"),
    ]))
    request = sent["request"]
    u, v = request.upsertions
    assert (u.name, u.mechanism, u.iterations, u.salt) == ("u", 2, 5000, b"NaCl")
    assert u.salted_password == hashlib.pbkdf2_hmac("sha512", b"pw", b"NaCl", 5000)
    assert v.iterations == 4096 and v.salt.isalnum() and 20 <= len(v.salt) <= 26
    assert v.salted_password == hashlib.pbkdf2_hmac("sha256", b"pw", v.salt, 4096)
    assert [(d.name, d.mechanism) for d in request.deletions] == [("w", 1)]
