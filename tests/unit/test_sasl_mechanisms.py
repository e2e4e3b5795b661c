"""The SASL mechanisms' server side (pybroker.security): PLAIN, SCRAM-SHA-256/512, JAAS values.

The peers are the real clients' own mechanism code (kafka-python's and aiokafka's SCRAM and PLAIN
classes), run in-process with no network; the RFC 7677 vector pins the SCRAM arithmetic.
"""

import base64
import random

import pytest
from aiokafka.conn import SaslPlainAuthenticator, ScramAuthenticator
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import SaslMechanismScram, ScramClient

from pybroker.common.errors import ErrorCode
from pybroker.security.jaas import (
    ControlFlag,
    JaasConfigError,
    JaasEntry,
    parse_jaas_config,
    parse_jaas_entry,
)
from pybroker.security.plain import PLAIN_LOGIN_MODULE, PlainServer, users_from_jaas_options
from pybroker.security.sasl import (
    IllegalSaslStateError,
    SaslAuthenticationError,
    invalid_credentials_message,
)
from pybroker.security.scram import (
    ScramCredential,
    ScramCredentialFormatError,
    ScramMechanism,
    ScramServer,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
    secure_random_string,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
MECHANISMS = [SHA256, SHA512]
GENERIC_256 = ("Authentication failed during authentication due to invalid credentials with SASL "
               "mechanism SCRAM-SHA-256")
AUTHZID_MESSAGE = ("Authentication failed: Client requested an authorization id that is "
                   "different from username")

# One credential per mechanism, computed once (PBKDF2 at 4096 iterations).
CREDENTIALS = {m: credential_from_password(m, "alice-secret", 4096) for m in MECHANISMS}


def lookup_for(mechanism, users=("alice",)):
    return lambda user: CREDENTIALS[mechanism] if user in users else None


# --- SCRAM: the RFC 7677 test vector ------------------------------------------------------------

RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential():
    return credential_from_password(SHA256, "pencil", 4096,
                                    salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))


def test_rfc7677_vector():
    credential = rfc_credential()
    server = ScramServer(SHA256, {"user": credential}.get, server_nonce=RFC_SERVER_NONCE)
    assert server.evaluate_response(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.evaluate_response(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.authorization_id == "user"
    assert server.mechanism_name == "SCRAM-SHA-256"


def test_rfc7677_vector_wrong_password():
    wrong = credential_from_password(SHA256, "pencil2", 4096, salt=rfc_credential().salt)
    server = ScramServer(SHA256, {"user": wrong}.get, server_nonce=RFC_SERVER_NONCE)
    assert server.evaluate_response(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    with pytest.raises(SaslAuthenticationError) as e:
        server.evaluate_response(RFC_CLIENT_FINAL)
    assert e.value.message == GENERIC_256 and e.value.reason == "Invalid client credentials"
    assert e.value.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED == 58
    assert not server.complete


def test_scram_sha512_round_trip_by_hand():
    credential = credential_from_password(SHA512, "pw", 4096, salt=b"NaCl")
    server = ScramServer(SHA512, {"bob": credential}.get)
    server_first = server.evaluate_response(b"n,,n=bob,r=abc").decode()
    nonce = server_first.split(",")[0][2:]
    assert nonce.startswith("abc") and len(nonce) > 3
    assert server_first.endswith(",s=TmFDbA==,i=4096")
    salted = salted_password(SHA512, "pw", b"NaCl", 4096)
    client_key = SHA512.hmac(salted, b"Client Key")
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"n=bob,r=abc,{server_first},{without_proof}".encode()
    signature = SHA512.hmac(SHA512.hash(client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = server.evaluate_response(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert final == b"v=" + base64.b64encode(SHA512.hmac(SHA512.hmac(salted, b"Server Key"),
                                                         auth_message))
    assert server.authorization_id == "bob"


# --- SCRAM with the real clients as peers -------------------------------------------------------

def kafka_python_exchange(server, user, password, mechanism):
    """Drive ``server`` with kafka-python's SCRAM mechanism; returns whether the client accepted."""
    client = SaslMechanismScram(sasl_plain_username=user, sasl_plain_password=password,
                                sasl_mechanism=mechanism.mechanism_name)
    client.receive(server.evaluate_response(client.auth_bytes()))
    done = client.receive(server.evaluate_response(client.auth_bytes()))  # raises on a bad signature
    return done and client.is_authenticated()


def aiokafka_exchange(server, user, password, mechanism):
    """Drive ``server`` with aiokafka's ScramAuthenticator (its synchronous step)."""
    client = ScramAuthenticator(loop=None, sasl_plain_username=user, sasl_plain_password=password,
                                sasl_mechanism=mechanism.mechanism_name)
    client_first, _ = client._step(None)
    client_final, _ = client._step(server.evaluate_response(client_first))
    return client._step(server.evaluate_response(client_final)) is None  # None: the client is done


CLIENTS = {"kafka-python": kafka_python_exchange, "aiokafka": aiokafka_exchange}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.value)
def test_real_client_succeeds(client, mechanism):
    server = ScramServer(mechanism, lookup_for(mechanism))
    assert CLIENTS[client](server, "alice", "alice-secret", mechanism)
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.value)
def test_real_client_wrong_password(client, mechanism):
    server = ScramServer(mechanism, lookup_for(mechanism))
    with pytest.raises(SaslAuthenticationError) as e:
        CLIENTS[client](server, "alice", "wrong", mechanism)
    assert e.value.message == invalid_credentials_message(mechanism.mechanism_name)
    assert e.value.reason == "Invalid client credentials"
    assert not server.complete


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.value)
def test_real_client_unknown_user(client, mechanism):
    server = ScramServer(mechanism, lookup_for(mechanism))
    with pytest.raises(SaslAuthenticationError) as e:
        CLIENTS[client](server, "mallory", "alice-secret", mechanism)
    assert e.value.message == invalid_credentials_message(mechanism.mechanism_name)
    assert e.value.reason == "Authentication failed: Invalid user credentials"


def test_real_client_rejects_a_wrong_server_signature():
    # The client checks the server's signature: a server holding another ServerKey is refused.
    stored = CREDENTIALS[SHA256]
    forged = ScramCredential(stored.salt, stored.stored_key, b"\x00" * 32, stored.iterations)
    server = ScramServer(SHA256, {"alice": forged}.get)
    with pytest.raises(ValueError, match="wrong signature"):
        kafka_python_exchange(server, "alice", "alice-secret", SHA256)


def test_escaped_username_from_aiokafka():
    # aiokafka escapes ',' and '=' as =2C and =3D; the lookup sees the real name.
    seen = []

    def lookup(user):
        seen.append(user)
        return CREDENTIALS[SHA256]

    server = ScramServer(SHA256, lookup)
    assert aiokafka_exchange(server, "a=b,c", "alice-secret", SHA256)
    assert seen == ["a=b,c"] and server.authorization_id == "a=b,c"


@pytest.mark.parametrize("user", ["a,b", "a=b"])
def test_kafka_python_does_not_escape_usernames(user):
    # kafka-python 3.0.12 sends the name raw, which Kafka's grammar (and so this one) refuses.
    server = ScramServer(SHA256, lambda name: CREDENTIALS[SHA256])
    with pytest.raises(SaslAuthenticationError) as e:
        kafka_python_exchange(server, user, "alice-secret", SHA256)
    assert e.value.reason.startswith("Invalid SCRAM client first message format")


def test_kafka_python_client_keys_match_the_credential():
    # What the client derives from the password is what the broker stores.
    credential = CREDENTIALS[SHA512]
    client = ScramClient("alice", "alice-secret", "SCRAM-SHA-512")
    client.create_salted_password(credential.salt, credential.iterations)
    derived = credential_from_salted_password(SHA512, credential.salt, client.salted_password,
                                              credential.iterations)
    assert derived == credential


# --- SCRAM grammar and failures -----------------------------------------------------------------

def first(server, message=b"n,,n=alice,r=cnonce"):
    return server.evaluate_response(message).decode()


def final_for(server_first, password="alice-secret", mechanism=SHA256, credential=None,
              client_first_bare="n=alice,r=cnonce", channel="biws", nonce=None, extra=""):
    """A correct client-final for ``server_first`` (optionally with another nonce or extensions)."""
    credential = credential or CREDENTIALS[mechanism]
    nonce = nonce if nonce is not None else server_first.split(",")[0][2:]
    without_proof = f"c={channel},r={nonce}{extra}"
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    client_key = mechanism.hmac(salted, b"Client Key")
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = mechanism.hmac(mechanism.hash(client_key), auth)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_server_first_format_and_kafka_nonce():
    server = ScramServer(SHA256, lookup_for(SHA256))
    server_first = first(server)
    nonce, salt, iterations = server_first.split(",")
    assert nonce.startswith("r=cnonce")
    snonce = nonce[len("r=cnonce"):]
    assert 1 <= len(snonce) <= 26 and set(snonce) <= set("0123456789abcdefghijklmnopqrstuvwxyz")
    assert salt == "s=" + base64.b64encode(CREDENTIALS[SHA256].salt).decode()
    assert iterations == "i=4096"


@pytest.mark.parametrize("client_first, bare", [
    (b"n,a=alice,n=alice,r=cnonce", "n=alice,r=cnonce"),  # authzid = the user
    (b"n,,n=alice,r=cnonce,foo=bar,x=1", "n=alice,r=cnonce,foo=bar,x=1"),  # unknown extensions
    (b"n,,n=alice,r=cnonce,tokenauth=false", "n=alice,r=cnonce,tokenauth=false"),
    (b"n,,m=ext,n=alice,r=cnonce", "m=ext,n=alice,r=cnonce"),  # a reserved m= part
])
def test_accepted_client_first_variants(client_first, bare):
    server = ScramServer(SHA256, lookup_for(SHA256))
    server_first = first(server, client_first)
    server.evaluate_response(final_for(server_first, client_first_bare=bare))
    assert server.complete and server.authorization_id == "alice"


def test_client_final_extensions_are_signed_and_accepted():
    server = ScramServer(SHA256, lookup_for(SHA256))
    server_first = first(server)
    server.evaluate_response(final_for(server_first, extra=",x=y"))
    assert server.complete


def test_authzid_other_than_user():
    server = ScramServer(SHA256, lookup_for(SHA256, users=("alice", "bob")))
    with pytest.raises(SaslAuthenticationError) as e:
        first(server, b"n,a=bob,n=alice,r=cnonce")
    assert e.value.message == AUTHZID_MESSAGE


def test_escaped_authzid_equal_to_the_user():
    server = ScramServer(SHA256, lookup_for(SHA256, users=("a,b",)))
    server_first = first(server, b"n,a=a=2Cb,n=a=2Cb,r=cnonce")
    server.evaluate_response(final_for(server_first, client_first_bare="n=a=2Cb,r=cnonce"))
    assert server.authorization_id == "a,b"


def test_unknown_user_wins_over_authzid():
    # Kafka looks the user up before it compares the authorization id.
    server = ScramServer(SHA256, lookup_for(SHA256))
    with pytest.raises(SaslAuthenticationError) as e:
        first(server, b"n,a=bob,n=mallory,r=cnonce")
    assert e.value.message == GENERIC_256


@pytest.mark.parametrize("message, reason", [
    (b"", "Invalid SCRAM client first message format"),
    (b"\x00\xff\xfe garbage", "Invalid SCRAM client first message format"),
    (b"y,,n=alice,r=cnonce", "Invalid SCRAM client first message format"),  # gs2 'y'
    (b"p=tls-unique,,n=alice,r=cnonce", "Invalid SCRAM client first message format"),
    (b"n,,n=al=ice,r=cnonce", "Invalid SCRAM client first message format"),  # bad escape
    (b"n,,n=al\xc3\xa9,r=cnonce", "Invalid SCRAM client first message format"),  # non-ASCII
    (b"n,,n=al\xff,r=cnonce", "Invalid SCRAM client first message format"),  # non-UTF-8
    (b"n,,n=alice,r=", "Invalid SCRAM client first message format"),
    (b"n,,n=alice,r=a b", "Invalid SCRAM client first message format"),
    (b"n,,n=,r=abc", "Invalid SCRAM client first message format"),
    (b"n,,n=alice,r=abc,1x=2", "Invalid SCRAM client first message format"),
    (b"n,,r=abc,n=alice", "Invalid SCRAM client first message format"),
    (b"c=biws,r=abc,p=dGVzdA==", "Invalid SCRAM client first message format"),  # final first
    (b"n,,n=alice,r=cnonce,tokenauth=true", "Token Authentication failed: Invalid tokenId : alice"),
    (b"n,,n=alice,r=cnonce,tokenauth=TRUE", "Token Authentication failed: Invalid tokenId : alice"),
    (b"n,,n=bob,r=cnonce", "Authentication failed: Invalid user credentials"),
])
def test_bad_client_first(message, reason):
    server = ScramServer(SHA256, lookup_for(SHA256))
    with pytest.raises(SaslAuthenticationError) as e:
        server.evaluate_response(message)
    assert e.value.message == GENERIC_256
    assert e.value.reason.startswith(reason)
    with pytest.raises(IllegalSaslStateError) as e2:
        server.evaluate_response(b"n,,n=alice,r=cnonce")
    assert e2.value.message == "Unexpected challenge in Sasl server state FAILED"
    assert e2.value.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_stored_iterations_below_the_minimum():
    weak = credential_from_password(SHA256, "alice-secret", 4095, salt=b"s")
    with pytest.raises(SaslAuthenticationError) as e:
        first(ScramServer(SHA256, {"alice": weak}.get))
    assert e.value.message == GENERIC_256
    assert e.value.reason == "Iterations 4095 is less than the minimum 4096 for SCRAM-SHA-256"


def test_lookup_that_raises():
    def lookup(user):
        raise OSError("store down")

    with pytest.raises(SaslAuthenticationError) as e:
        first(ScramServer(SHA512, lookup))
    assert e.value.message == invalid_credentials_message("SCRAM-SHA-512")
    assert e.value.reason.startswith("Authentication failed: Credentials could not be obtained")


def test_reauthentication_text():
    server = ScramServer(SHA256, lookup_for(SHA256), reauthentication=True)
    with pytest.raises(SaslAuthenticationError) as e:
        first(server, b"n,,n=bob,r=x")
    assert e.value.message == ("Authentication failed during re-authentication due to invalid "
                               "credentials with SASL mechanism SCRAM-SHA-256")


def _final_cases():
    proof32 = base64.b64encode(b"\x00" * 32).decode()
    return [
        (lambda sf: b"", "Invalid SCRAM client final message format"),
        (lambda sf: b"\xff\xfe\x00", "Invalid SCRAM client final message format"),
        (lambda sf: b"n,,n=alice,r=cnonce", "Invalid SCRAM client final message format"),  # first twice
        (lambda sf: final_for(sf)[:-5], "Invalid SCRAM client final message format"),  # truncated
        (lambda sf: final_for(sf).replace(b",p=", b",q="), "Invalid SCRAM client final message format"),
        (lambda sf: final_for(sf, nonce="cnonce"), "Invalid client nonce in the final client message."),
        (lambda sf: final_for(sf, nonce=sf.split(",")[0][2:] + "x"),
         "Invalid client nonce in the final client message."),
        (lambda sf: final_for(sf, password="wrong"), "Invalid client credentials"),
        (lambda sf: final_for(sf, client_first_bare="n=alice,r=other"), "Invalid client credentials"),
        (lambda sf: f"c=biws,r={sf.split(',')[0][2:]},p=".encode(), "Invalid client proof: 0 bytes"),
        (lambda sf: f"c=biws,r={sf.split(',')[0][2:]},p=AAAA".encode(), "Invalid client proof: 3 bytes"),
        (lambda sf: f"c=biws,r={sf.split(',')[0][2:]},p={proof32}".encode(), "Invalid client credentials"),
    ]


@pytest.mark.parametrize("make_final, reason", _final_cases())
def test_bad_client_final(make_final, reason):
    server = ScramServer(SHA256, lookup_for(SHA256))
    server_first = first(server)
    with pytest.raises(SaslAuthenticationError) as e:
        server.evaluate_response(make_final(server_first))
    assert e.value.message == GENERIC_256
    assert e.value.reason.startswith(reason)
    assert not server.complete
    with pytest.raises(IllegalSaslStateError):
        _ = server.authorization_id


def test_no_token_after_completion():
    server = ScramServer(SHA256, lookup_for(SHA256))
    server.evaluate_response(final_for(first(server)))
    with pytest.raises(IllegalSaslStateError) as e:
        server.evaluate_response(b"c=biws,r=x,p=AAAA")
    assert e.value.message == "Unexpected challenge in Sasl server state COMPLETE"
    assert server.authorization_id == "alice"  # still complete


def test_authorization_id_before_completion():
    server = ScramServer(SHA256, lookup_for(SHA256))
    first(server)
    with pytest.raises(IllegalSaslStateError, match="has not completed"):
        _ = server.authorization_id


def test_server_nonce_must_be_printable():
    with pytest.raises(ValueError):
        ScramServer(SHA256, lookup_for(SHA256), server_nonce="a,b")


def _same_proof(mutated: bytes, original: bytes) -> bool:
    """A change to the proof's last base64 character that only touches its unused low bits
    decodes to the same proof: still a valid message."""
    head, _, proof = mutated.rpartition(b",p=")
    if head != original.rpartition(b",p=")[0]:
        return False
    try:
        return base64.b64decode(proof, validate=True) == base64.b64decode(original.rpartition(b",p=")[2])
    except ValueError:
        return False


def test_random_garbage_only_fails_as_authentication_errors():
    rng = random.Random(17)
    samples = [bytes(rng.randrange(256) for _ in range(rng.randrange(64))) for _ in range(150)]
    # Also near-misses of valid messages: one byte changed.
    valid_first = b"n,a=alice,n=alice,r=cnonce,ext=v"
    for _ in range(150):
        i = rng.randrange(len(valid_first))
        samples.append(valid_first[:i] + bytes([rng.randrange(256)]) + valid_first[i + 1:])
    for sample in samples:
        server = ScramServer(SHA256, lookup_for(SHA256))
        try:
            server.evaluate_response(sample)
        except SaslAuthenticationError:
            continue
        # A mutation that is still valid: then the final message gets garbage too.
        with pytest.raises(SaslAuthenticationError):
            server.evaluate_response(sample)
    server_first = first(ScramServer(SHA256, lookup_for(SHA256)))
    valid_final = final_for(server_first)
    for _ in range(300):
        server = ScramServer(SHA256, lookup_for(SHA256),
                             server_nonce=server_first.split(",")[0][len("r=cnonce"):])
        first(server)
        i = rng.randrange(len(valid_final))
        mutated = valid_final[:i] + bytes([rng.randrange(256)]) + valid_final[i + 1:]
        if mutated == valid_final or _same_proof(mutated, valid_final):
            continue
        with pytest.raises(SaslAuthenticationError):
            server.evaluate_response(mutated)


# --- SCRAM credentials --------------------------------------------------------------------------

def test_credential_string_is_kafkas():
    credential = ScramCredential(b"salt", b"\x01" * 32, b"\x02" * 32, 8192)
    text = credential.format()
    assert text == ("salt=c2FsdA==,stored_key=AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=,"
                    "server_key=AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=,iterations=8192")
    assert ScramCredential.parse(text) == credential
    assert "stored_key" not in repr(credential) and "server_key" not in repr(credential)


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.value)
def test_credential_round_trip(mechanism):
    credential = CREDENTIALS[mechanism]
    assert ScramCredential.parse(credential.format()) == credential
    assert len(credential.stored_key) == len(credential.server_key) == (
        32 if mechanism is SHA256 else 64)


def test_credential_parse_accepts_any_key_order_and_unpadded_base64():
    parsed = ScramCredential.parse("iterations=4096,server_key=AgI,stored_key=AQ==,salt=c2FsdA")
    assert parsed == ScramCredential(b"salt", b"\x01", b"\x02\x02", 4096)


@pytest.mark.parametrize("text", [
    "",
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==",  # no iterations
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,iterations=4096,extra=1",
    "salt=c2FsdA==,salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,iterations=4096",
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,iterations=4096,",
    "salt,stored_key=AQ==,server_key=Ag==,iterations=4096",
    "=x,stored_key=AQ==,server_key=Ag==,iterations=4096",
    "salt=c2F*dA==,stored_key=AQ==,server_key=Ag==,iterations=4096",  # not base64
    "salt=c2FsdA=,stored_key=AQ==,server_key=Ag==,iterations=4096",  # bad padding
    "salt=c,stored_key=AQ==,server_key=Ag==,iterations=4096",  # bad length
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,iterations=many",
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,iterations=-1",
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,iterations=99999999999",
])
def test_credential_parse_errors(text):
    with pytest.raises(ScramCredentialFormatError, match="^Credentials not valid"):
        ScramCredential.parse(text)


def test_kafka_salt_and_random_string():
    for _ in range(20):
        s = secure_random_string()
        assert 1 <= len(s) <= 26 and s == s.lstrip("0") or s == "0"
        assert int(s, 36) < 2**130
    a = credential_from_password(SHA256, "p", 4096)
    b = credential_from_password(SHA256, "p", 4096)
    assert a.salt != b.salt and a.stored_key != b.stored_key
    assert int(a.salt.decode("ascii"), 36) < 2**130


def test_credential_from_salted_password_matches_from_password():
    salt = b"0123456789abcdef"
    for mechanism in MECHANISMS:
        salted = salted_password(mechanism, "secret", salt, 4096)
        assert credential_from_salted_password(mechanism, salt, salted, 4096) == \
            credential_from_password(mechanism, "secret", 4096, salt=salt)
    with pytest.raises(ValueError):
        credential_from_salted_password(SHA256, salt, b"", 4096)
    with pytest.raises(ValueError):
        credential_from_password(SHA256, "p", 0)


def test_mechanisms():
    assert ScramMechanism.for_name("SCRAM-SHA-256") is SHA256
    assert ScramMechanism.for_name("SCRAM-SHA-512") is SHA512
    assert ScramMechanism.for_name("scram-sha-256") is None
    assert ScramMechanism.for_name("PLAIN") is None
    assert (SHA256.type, SHA512.type) == (1, 2)
    assert ScramMechanism.for_type(2) is SHA512 and ScramMechanism.for_type(0) is None
    assert (SHA256.min_iterations, SHA256.max_iterations) == (4096, 16384)
    assert (SHA512.min_iterations, SHA512.max_iterations) == (4096, 16384)


# --- PLAIN --------------------------------------------------------------------------------------

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def plain_server(users=USERS):
    return PlainServer(users.get)


def test_plain_librdkafka_style():
    server = plain_server()
    assert server.evaluate_response(b"\x00alice\x00alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.mechanism_name == "PLAIN"


def test_plain_kafka_python_client():
    client = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    token = client.auth_bytes()
    assert token == b"alice\x00alice\x00alice-secret"
    server = plain_server()
    client.receive(server.evaluate_response(token))
    assert client.is_authenticated() and server.authorization_id == "alice"


def test_plain_aiokafka_client():
    client = SaslPlainAuthenticator(loop=None, sasl_plain_username="admin",
                                    sasl_plain_password="admin-secret")
    token, _ = client._step(None)
    server = plain_server()
    assert client._step(server.evaluate_response(token)) is None  # asserts an empty answer
    assert server.authorization_id == "admin"


def test_plain_unicode_credentials():
    server = PlainServer({"zoë": "pässwörd"}.get)
    server.evaluate_response("\x00zoë\x00pässwörd".encode())
    assert server.authorization_id == "zoë"


def raising_lookup(user):
    raise KeyError(user)


@pytest.mark.parametrize("token, message", [
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"alice\x00alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"a\x00alice\x00alice-secret\x00", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"a\x00b\x00c\x00d\x00e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\x00\x00alice-secret", "Authentication failed: username not specified"),
    (b"\x00\x00", "Authentication failed: username not specified"),
    (b"\x00alice\x00", "Authentication failed: password not specified"),
    (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
    (b"\x00alice\x00alice-secreT", "Authentication failed: Invalid username or password"),
    (b"\x00mallory\x00alice-secret", "Authentication failed: Invalid username or password"),
    (b"bob\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
    (b"admin\x00alice\x00alice-secret", AUTHZID_MESSAGE),
    (b"\x00al\xffice\x00alice-secret", "Authentication failed: Invalid username or password"),
    (b"\xff\xfe\x00\x00\x00", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
])
def test_plain_failures(token, message):
    server = plain_server()
    with pytest.raises(SaslAuthenticationError) as e:
        server.evaluate_response(token)
    assert e.value.message == message
    assert e.value.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not server.complete
    with pytest.raises(IllegalSaslStateError, match="Unexpected challenge in Sasl server state FAILED"):
        server.evaluate_response(b"\x00alice\x00alice-secret")


def test_plain_lookup_that_raises():
    with pytest.raises(SaslAuthenticationError) as e:
        PlainServer(raising_lookup).evaluate_response(b"\x00alice\x00alice-secret")
    assert e.value.message == "Authentication failed: credentials for user could not be verified"


def test_plain_state():
    server = plain_server()
    with pytest.raises(IllegalSaslStateError, match="has not completed"):
        _ = server.authorization_id
    server.evaluate_response(b"\x00alice\x00alice-secret")
    with pytest.raises(IllegalSaslStateError, match="state COMPLETE"):
        server.evaluate_response(b"\x00alice\x00alice-secret")


def test_plain_random_garbage_only_fails_as_authentication_errors():
    rng = random.Random(4616)
    for _ in range(300):
        token = bytes(rng.choice(b"\x00\xffab") for _ in range(rng.randrange(12)))
        with pytest.raises(SaslAuthenticationError):
            plain_server().evaluate_response(token)


# --- JAAS ---------------------------------------------------------------------------------------

BROKER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="admin" password="admin-secret" user_admin="admin-secret" '
               'user_alice="alice-secret";')


def test_jaas_broker_entry_and_plain_users():
    entry = parse_jaas_entry(BROKER_JAAS)
    assert entry == JaasEntry(PLAIN_LOGIN_MODULE, ControlFlag.REQUIRED,
                              {"username": "admin", "password": "admin-secret",
                               "user_admin": "admin-secret", "user_alice": "alice-secret"})
    login_module, flag, options = entry
    users = users_from_jaas_options(options)
    assert users == {"admin": "admin-secret", "alice": "alice-secret"}
    PlainServer(users.get).evaluate_response(b"\x00alice\x00alice-secret")


@pytest.mark.parametrize("text, options", [
    ("m required;", {}),
    ("m required a=b c=d;", {"a": "b", "c": "d"}),  # unquoted words
    ("m required k=alice-secret_2.x$;", {"k": "alice-secret_2.x$"}),
    ("m required k='single \"q\"';", {"k": 'single "q"'}),
    ('m required k="back\\\\slash \\"q\\" \\n \\101";', {"k": 'back\\slash "q" \n A'}),
    ('m required k="";', {"k": ""}),
    ('m required k="a;b=c // not a comment";', {"k": "a;b=c // not a comment"}),
    ('m required k="x" k="y";', {"k": "y"}),  # the last one wins, as in Java's HashMap
    ('m required "quoted key"="v";', {"quoted key": "v"}),
    ('m  \t\n required\n  a = "b"\n ;', {"a": "b"}),
])
def test_jaas_values(text, options):
    assert parse_jaas_entry(text) == JaasEntry("m", ControlFlag.REQUIRED, options)


@pytest.mark.parametrize("flag", ["required", "REQUIRED", "Requisite", "sufficient", "optional"])
def test_jaas_control_flags(flag):
    assert parse_jaas_entry(f"m {flag};").control_flag is ControlFlag(flag.lower())


def test_jaas_comments():
    text = ("// the broker's users\n"
            "org.apache.kafka.common.security.plain.PlainLoginModule /* flag: */ required\n"
            "   user_alice=\"alice-secret\" // alice\n"
            "   / a lone slash is a comment too\n"
            "   user_bob=\"bob-secret\";  /* unclosed trailing comment")
    assert parse_jaas_entry(text).options == {"user_alice": "alice-secret", "user_bob": "bob-secret"}


def test_jaas_several_entries():
    entries = parse_jaas_config('a required x="1"; b optional;')
    assert [(e.login_module, e.control_flag) for e in entries] == [
        ("a", ControlFlag.REQUIRED), ("b", ControlFlag.OPTIONAL)]
    with pytest.raises(JaasConfigError,
                       match="^JAAS config property contains 2 login modules, should be 1 module$"):
        parse_jaas_entry('a required x="1"; b optional;')


@pytest.mark.parametrize("text, message", [
    ("", "Login module not specified in JAAS config"),
    ("  // only a comment", "Login module not specified in JAAS config"),
    ("m", "Login module control flag not specified in JAAS config"),
    ("m ;", "Login module control flag is not available in the JAAS config"),
    ("m bogus;", "Invalid login module control flag 'bogus' in JAAS config"),
    ('m required username="admin"', "JAAS config entry not terminated by semi-colon"),
    ("m required", "JAAS config entry not terminated by semi-colon"),
    ('m required a="b" /* ; */', "JAAS config entry not terminated by semi-colon"),
    ('m required k;', "Value not specified for key 'k' in JAAS config"),
    ('m required k=;', "Value not specified for key 'k' in JAAS config"),
    ('m required k=', "Value not specified for key 'k' in JAAS config"),
    ('m required k=123;', "Value not specified for key 'k' in JAAS config"),  # a number: no value
    ('m required k=@x;', "Value not specified for key 'k' in JAAS config"),
    ('m required k:"v";', "Value not specified for key 'k' in JAAS config"),
    ('m required username="admin;', "Quoted value not terminated by a closing quote in JAAS config"),
    ("m required k='v\n';", "Quoted value not terminated by a closing quote in JAAS config"),
    ('m required k="v\\', "Quoted value not terminated by a closing quote in JAAS config"),
    ('m required 12="v";', "Option name expected in JAAS config, found a number"),
    ('m required ="v";', "Option name expected in JAAS config, found '='"),
    ("; required;", "Login module class name expected in JAAS config, found ';'"),
])
def test_jaas_errors(text, message):
    with pytest.raises(JaasConfigError) as e:
        parse_jaas_config(text)
    assert str(e.value) == message


def test_final_nonce_may_repeat_the_client_nonce_in_front():
    """librdkafka before 2.2 (kcat's 2.0.2) sends c-nonce + full nonce; Kafka 3.9 checks endsWith."""
    server = ScramServer(SHA256, lookup_for(SHA256))
    server_first = first(server)
    full = server_first.split(",")[0][2:]
    assert server.evaluate_response(final_for(server_first, nonce="cnonce" + full)).startswith(b"v=")
