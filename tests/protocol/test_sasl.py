"""SASL mechanisms and the handshake plan (kafkawire.protocol.sasl), with no broker.

Proven against published vectors (RFC 7677's SCRAM-SHA-256 exchange, RFC 4013's SASLprep
examples), against SCRAM-SHA-512 values computed here from RFC 5802's formulas with
hashlib/hmac alone, and against another implementation: the ``scramp`` package plays the
broker in full exchanges (both mechanisms, special and non-ASCII names and passwords,
wrong passwords).  Kafka-side answers are built as response objects or, for the wire
checks, as hand-packed bytes (tests/protocol/wirebytes.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import struct

import pytest

try:  # the test extra: an independent SCRAM implementation that plays the broker
    import scramp
    from scramp import utils as scramp_utils
except ImportError:  # a test environment without the test extra (free-threaded wheel tests)
    scramp = None

# Only the interoperability tests need scramp; the vectors and everything else run without.
needs_scramp = pytest.mark.skipif(scramp is None, reason="needs the scramp package (the test extra)")

from kafkawire import errors
from kafkawire.protocol.apis.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kafkawire.protocol.connection import Connection
from kafkawire.protocol.headers import decode_request_header
from kafkawire.protocol.sasl import (
    MECHANISMS,
    SCRAM_MIN_ITERATIONS,
    OAuthBearerMechanism,
    OAuthBearerServerError,
    OAuthBearerToken,
    OAuthBearerTokenError,
    PlainMechanism,
    RawTokenReader,
    SaslAuthenticationError,
    SaslError,
    SaslExchange,
    SaslIllegalStateError,
    SaslPrepError,
    SaslProtocolError,
    SaslUnsupportedMechanismError,
    ScramIterationCountError,
    ScramMechanism,
    ScramServerError,
    ScramServerSignatureError,
    create_mechanism,
    frame_raw_token,
    reauthentication_at_ms,
    saslprep,
    scram_escape_username,
    token_refresh_at_ms,
)
from wirebytes import NO_TAGS, b, cb, cs, i16, i32, i64, s


HsResponse = SASL_HANDSHAKE.Response
AuthResponse = SASL_AUTHENTICATE.Response


def auth_ok(data: bytes = b"", lifetime: int = 0) -> object:
    return AuthResponse(error_code=0, error_message=None, auth_bytes=data, session_lifetime_ms=lifetime)


# -- PLAIN -------------------------------------------------------------------------------


def test_plain_message_bytes() -> None:
    m = PlainMechanism("alice", "s3cret")
    assert m.name == "PLAIN"
    assert m.initial_response() == b"\x00alice\x00s3cret"  # empty authzid (RFC 4616)
    assert not m.done
    assert m.respond(b"") is None
    assert m.done


def test_plain_non_ascii_is_utf8_as_given() -> None:
    m = PlainMechanism("jos\u00e9", "p\u00e4ss\u00adword")
    # No SASLprep for PLAIN: the soft hyphen stays (Kafka's PLAIN server compares as is).
    assert m.initial_response() == b"\x00jos\xc3\xa9\x00p\xc3\xa4ss\xc2\xadword"


def test_plain_errors() -> None:
    with pytest.raises(ValueError, match="NUL"):
        PlainMechanism("a\0b", "pw")
    with pytest.raises(ValueError, match="empty"):
        PlainMechanism("user", "")
    with pytest.raises(TypeError):
        PlainMechanism(b"user", "pw")  # type: ignore[arg-type]
    m = PlainMechanism("u", "p")
    with pytest.raises(SaslIllegalStateError, match="before initial_response"):
        m.respond(b"")
    m.initial_response()
    with pytest.raises(SaslIllegalStateError, match="twice"):
        m.initial_response()
    with pytest.raises(SaslProtocolError, match="unexpected"):
        m.respond(b"surprise")
    fresh = m.fresh()
    assert fresh.initial_response() == b"\x00u\x00p"


# -- SCRAM-SHA-256: RFC 7677 section 3 ---------------------------------------------------

RFC7677_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_client() -> ScramMechanism:
    return ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=lambda: RFC7677_CLIENT_NONCE)


def test_scram_sha256_rfc7677_vector() -> None:
    m = rfc7677_client()
    assert m.name == "SCRAM-SHA-256"
    assert m.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert m.respond(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert not m.done
    assert m.respond(RFC7677_SERVER_FINAL) is None
    assert m.done


def test_scram_complete_accepts_server_final_directly() -> None:
    m = rfc7677_client()
    m.initial_response()
    m.respond(RFC7677_SERVER_FIRST)
    m.complete(RFC7677_SERVER_FINAL)
    assert m.done


def test_scram_bad_server_signature_is_refused() -> None:
    m = rfc7677_client()
    m.initial_response()
    m.respond(RFC7677_SERVER_FIRST)
    forged = b"v=" + base64.b64encode(b"\x00" * 32)
    with pytest.raises(ScramServerSignatureError, match="could not prove it knows the password") as info:
        m.respond(forged)
    assert isinstance(info.value, SaslError) and isinstance(info.value, errors.KafkaWireError)
    assert not m.done


# -- SCRAM-SHA-512: RFC 5802's formulas computed independently --------------------------


def reference_scram(hash_name: str, user: str, password: str, cnonce: str, snonce: str,
                    salt: bytes, iterations: int) -> tuple[bytes, bytes, bytes, bytes]:
    """(client-first, server-first, client-final, server-final) from RFC 5802 section 3,
    written out with hashlib/hmac only (ASCII credentials, no escaping needed)."""
    client_first_bare = f"n={user},r={cnonce}"
    server_first = f"r={cnonce}{snonce},s={base64.b64encode(salt).decode()},i={iterations}"
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={cnonce}{snonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    client_signature = hmac.new(stored_key, auth_message, hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    server_signature = hmac.new(server_key, auth_message, hash_name).digest()
    return (
        f"n,,{client_first_bare}".encode(),
        server_first.encode(),
        f"{without_proof},p={base64.b64encode(proof).decode()}".encode(),
        b"v=" + base64.b64encode(server_signature),
    )


@pytest.mark.parametrize("mechanism,hash_name", [("SCRAM-SHA-512", "sha512"), ("SCRAM-SHA-256", "sha256")])
def test_scram_against_independent_computation(mechanism: str, hash_name: str) -> None:
    cnonce, snonce = "fyko+d2lbbFgONRv9qkxdawL", "3rfcNHYJY1ZVvWVs7j"
    salt = bytes(range(1, 17))
    first, server_first, final, server_final = reference_scram(
        hash_name, "kafka-user", "kafka-pass", cnonce, snonce, salt, 8192
    )
    m = ScramMechanism(mechanism, "kafka-user", "kafka-pass", nonce=lambda: cnonce)
    assert m.initial_response() == first
    assert m.respond(server_first) == final
    assert m.respond(server_final) is None and m.done
    if hash_name == "sha512":
        assert len(base64.b64decode(final.rsplit(b"p=", 1)[1])) == 64  # a SHA-512-sized proof


# -- SCRAM against another implementation: scramp as the server -------------------------


def scramp_server(mechanism: str, users: dict[str, str], iterations: int = 4096) -> object:
    m = scramp.ScramMechanism(mechanism)
    creds = {name: m.make_auth_info(pw, iteration_count=iterations) for name, pw in users.items()}
    return m.make_server(lambda name: creds[name])


def run_with_scramp(client: ScramMechanism, server: object) -> None:
    """A full exchange; raises what the client raises."""
    server.set_client_first(client.initial_response().decode())  # type: ignore[attr-defined]
    final = client.respond(server.get_server_first().encode())  # type: ignore[attr-defined]
    assert final is not None
    try:
        server.set_client_final(final.decode())  # type: ignore[attr-defined]
    except scramp.ScramException:
        pass  # a wrong proof: the server answers e=... below
    assert client.respond(server.get_server_final().encode()) is None  # type: ignore[attr-defined]


# Names and passwords with the characters SCRAM escapes and SASLprep maps.
SPECIAL_USERS = [
    ("alice", "secret"),
    ("a=b,c", "p,a=ss"),  # escaped as a=3Db=2Cc on the wire
    ("jos\u00e9", "p\u00e4ssw\u00f6rd\u20ac"),  # non-ASCII, UTF-8 on the wire
    ("\u7528\u6237", "\u5bc6\u7801 with space"),
]


@needs_scramp
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user,password", SPECIAL_USERS)
def test_scram_full_exchange_with_scramp(mechanism: str, user: str, password: str) -> None:
    server = scramp_server(mechanism, {user: password})
    client = ScramMechanism(mechanism, user, password)
    run_with_scramp(client, server)
    assert client.done


@needs_scramp
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_saslprep_equivalent_password_with_scramp(mechanism: str) -> None:
    # U+2168 (ROMAN NUMERAL NINE) and a soft hyphen prepare to "IX": the same password.
    server = scramp_server(mechanism, {"user": "IX"})
    client = ScramMechanism(mechanism, "user", "\u2168")
    run_with_scramp(client, server)
    assert client.done
    server = scramp_server(mechanism, {"IX": "pw"})
    client = ScramMechanism(mechanism, "I\u00adX", "pw")
    run_with_scramp(client, server)
    assert client.done


@needs_scramp
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_with_scramp(mechanism: str) -> None:
    server = scramp_server(mechanism, {"alice": "right"})
    client = ScramMechanism(mechanism, "alice", "wrong")
    with pytest.raises(ScramServerError, match="invalid-proof") as info:
        run_with_scramp(client, server)
    assert info.value.server_error == "invalid-proof"
    assert isinstance(info.value, errors.SaslAuthenticationFailedError)
    assert info.value.code == 58
    assert "wrong password" in str(info.value)
    assert not client.done


@needs_scramp
def test_scram_server_signature_from_another_credential_with_scramp() -> None:
    # A server that knows a different password for the user cannot produce our signature;
    # feed the client a correct server-first but the signature of another exchange.
    server = scramp_server("SCRAM-SHA-256", {"alice": "pw"})
    client = ScramMechanism("SCRAM-SHA-256", "alice", "pw")
    server.set_client_first(client.initial_response().decode())  # type: ignore[attr-defined]
    client.respond(server.get_server_first().encode())  # type: ignore[attr-defined]
    other_server = scramp_server("SCRAM-SHA-256", {"alice": "pw"})
    other_client = ScramMechanism("SCRAM-SHA-256", "alice", "pw")
    other_server.set_client_first(other_client.initial_response().decode())  # type: ignore[attr-defined]
    final = other_client.respond(other_server.get_server_first().encode())  # type: ignore[attr-defined]
    other_server.set_client_final(final.decode())  # type: ignore[attr-defined,union-attr]
    other_final = other_server.get_server_final().encode()  # type: ignore[attr-defined]
    assert other_client.respond(other_final) is None and other_client.done
    with pytest.raises(ScramServerSignatureError):
        client.respond(other_final)


def test_scram_username_escaping_on_the_wire() -> None:
    assert scram_escape_username("a=b,c") == "a=3Db=2Cc"
    assert scram_escape_username("==,,") == "=3D=3D=2C=2C"
    m = ScramMechanism("SCRAM-SHA-256", "a=b,c", "pw", nonce=lambda: "abc")
    assert m.initial_response() == b"n,,n=a=3Db=2Cc,r=abc"
    m = ScramMechanism("SCRAM-SHA-256", "\u2168=", "pw", nonce=lambda: "abc")
    assert m.initial_response() == b"n,,n=IX=3D,r=abc"  # SASLprep first, then escaping


def test_scram_extensions_in_client_first() -> None:
    # Kafka's delegation tokens authenticate over SCRAM with tokenauth=true (KIP-48).
    m = ScramMechanism("SCRAM-SHA-512", "tokenid", "hmac", nonce=lambda: "n0nce",
                       extensions={"tokenauth": "true"})
    assert m.initial_response() == b"n,,n=tokenid,r=n0nce,tokenauth=true"
    with pytest.raises(ValueError):
        ScramMechanism("SCRAM-SHA-512", "u", "p", extensions={"r": "x"})
    with pytest.raises(ValueError):
        ScramMechanism("SCRAM-SHA-512", "u", "p", extensions={"k": "a,b"})


def test_scram_default_nonce_is_random_and_printable() -> None:
    firsts = {ScramMechanism("SCRAM-SHA-256", "u", "p").initial_response() for _ in range(5)}
    assert len(firsts) == 5
    for first in firsts:
        nonce = first.split(b",r=")[1].decode()
        assert len(nonce) >= 24 and "," not in nonce and nonce.isprintable()


def scram_after_first(**kw: object) -> ScramMechanism:
    m = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=lambda: "cn", **kw)  # type: ignore[arg-type]
    m.initial_response()
    return m


@pytest.mark.parametrize("server_first,error,match", [
    (b"r=cnSN,s=QUJD,i=4095", ScramIterationCountError, "fewer than the minimum 4096"),
    (b"r=cnSN,s=QUJD,i=10000001", ScramIterationCountError, "max_iterations"),
    (b"r=XXSN,s=QUJD,i=4096", SaslProtocolError, "nonce"),
    (b"r=cn,s=QUJD,i=4096", SaslProtocolError, "nonce"),  # no server part
    (b"r=cnSN,s=**,i=4096", SaslProtocolError, "base64"),
    (b"r=cnSN,s=QUJD,i=many", SaslProtocolError, "not a number"),
    (b"r=cnSN,i=4096", SaslProtocolError, "r=, s=, i="),
    (b"m=ext,r=cnSN,s=QUJD,i=4096", SaslProtocolError, "mandatory extension"),
    (b"garbage", SaslProtocolError, "malformed"),
    (b"\xff\xfe", SaslProtocolError, "not UTF-8"),
    (b"e=unknown-user", ScramServerError, "no SCRAM credential"),
])
def test_scram_bad_server_first(server_first: bytes, error: type, match: str) -> None:
    m = scram_after_first()
    with pytest.raises(error, match=match):
        m.respond(server_first)


def test_scram_iteration_minimum_is_kafkas() -> None:
    assert SCRAM_MIN_ITERATIONS == 4096
    m = scram_after_first(min_iterations=8192)
    with pytest.raises(ScramIterationCountError, match="fewer than the minimum 8192"):
        m.respond(b"r=cnSN,s=QUJD,i=4096")


@pytest.mark.parametrize("server_final,error,match", [
    (b"e=invalid-proof", ScramServerError, "invalid-proof"),
    (b"e=other-error", ScramServerError, "unspecified"),
    (b"e=something-new", ScramServerError, "does not know"),
    (b"x=1", SaslProtocolError, "neither v= nor e="),
    (b"v=!!", SaslProtocolError, "base64"),
])
def test_scram_bad_server_final(server_final: bytes, error: type, match: str) -> None:
    m = rfc7677_client()
    m.initial_response()
    m.respond(RFC7677_SERVER_FIRST)
    with pytest.raises(error, match=match):
        m.respond(server_final)
    with pytest.raises(SaslProtocolError, match="after the exchange ended"):
        m.respond(b"v=more")


def test_scram_state_and_construction_errors() -> None:
    with pytest.raises(ValueError, match="SCRAM-SHA-256, SCRAM-SHA-512"):
        ScramMechanism("SCRAM-SHA-1", "u", "p")
    with pytest.raises(SaslPrepError, match="empty"):
        ScramMechanism("SCRAM-SHA-256", "\u00ad", "p")  # maps to nothing
    with pytest.raises(SaslPrepError, match="password.*ASCII control"):
        ScramMechanism("SCRAM-SHA-256", "u", "bell\x07")
    with pytest.raises(SaslProtocolError, match="nonce source"):
        ScramMechanism("SCRAM-SHA-256", "u", "p", nonce=lambda: "a,b").initial_response()
    m = ScramMechanism("SCRAM-SHA-256", "u", "p")
    with pytest.raises(SaslIllegalStateError):
        m.complete(b"v=AAAA")
    assert ScramMechanism("scram-sha-512", "u", "p").name == "SCRAM-SHA-512"
    again = rfc7677_client().fresh()
    assert again.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"


# -- SASLprep: RFC 4013 section 3 and more --------------------------------------------


@pytest.mark.parametrize("given,expected", [
    ("I\u00adX", "IX"),  # SOFT HYPHEN mapped to nothing
    ("user", "user"),  # no transformation
    ("USER", "USER"),  # case preserved, will not match #2
    ("\u00aa", "a"),  # output is NFKC, input in ISO 8859-1
    ("\u2168", "IX"),  # output is NFKC, will match #1
])
def test_saslprep_rfc4013_examples(given: str, expected: str) -> None:
    assert saslprep(given) == expected


@pytest.mark.parametrize("given,match", [
    ("\u0007", "ASCII control"),  # RFC 4013 example 6: prohibited character
    ("\u0627\u0031", "begin and end"),  # RFC 4013 example 7: bidirectional check
])
def test_saslprep_rfc4013_error_examples(given: str, match: str) -> None:
    with pytest.raises(SaslPrepError, match=match):
        saslprep(given)


@pytest.mark.parametrize("given,expected", [
    ("a\u00a0b", "a b"),  # non-ASCII space mapped to SPACE
    ("a\u200bb", "ab"),  # ZERO WIDTH SPACE mapped to nothing
    ("\ufb01", "fi"),  # NFKC of a ligature
    ("\u0627\u0628", "\u0627\u0628"),  # right-to-left only: allowed
    ("\u0627 1 \u0628", "\u0627 1 \u0628"),  # RandALCat at both ends, neutral inside
    ("p\u00e4ss w\u00f6rd", "p\u00e4ss w\u00f6rd"),
])
def test_saslprep_more_cases(given: str, expected: str) -> None:
    assert saslprep(given) == expected


@pytest.mark.parametrize("given,match", [
    ("a\ue000", "private-use"),
    ("a\ufdd0", "non-character"),
    ("a\u0080", "non-ASCII control"),
    ("a\u200e", "display-property"),  # LEFT-TO-RIGHT MARK
    ("a\U000e0001", "tagging"),
    ("a\ufffd", "plain text"),  # REPLACEMENT CHARACTER
    ("\u0627a\u0628", "mixes right-to-left and left-to-right"),
])
def test_saslprep_prohibited(given: str, match: str) -> None:
    with pytest.raises(SaslPrepError, match=match):
        saslprep(given)


def test_saslprep_unassigned_code_points() -> None:
    assert saslprep("a\u0221") == "a\u0221"  # query semantics: allowed (RFC 5802 5.1)
    with pytest.raises(SaslPrepError, match="unassigned"):
        saslprep("a\u0221", allow_unassigned=False)
    with pytest.raises(TypeError):
        saslprep(b"bytes")  # type: ignore[arg-type]


@needs_scramp
@pytest.mark.parametrize("given", [
    "I\u00adX", "user", "\u00aa", "\u2168", "a\u00a0b", "\ufb01", "\u0627\u0628",
    "jos\u00e9", "\u7528\u6237", "\uff21\uff22",  # fullwidth letters, NFKC to AB
])
def test_saslprep_agrees_with_scramp(given: str) -> None:
    assert saslprep(given) == scramp_utils.saslprep(given)


# -- OAUTHBEARER -------------------------------------------------------------------------

JWT = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."


def test_oauthbearer_initial_response_bytes() -> None:
    m = OAuthBearerMechanism(OAuthBearerToken(JWT, 10_000))
    assert m.name == "OAUTHBEARER"
    assert m.initial_response() == b"n,,\x01auth=Bearer " + JWT.encode() + b"\x01\x01"
    assert m.respond(b"") is None and m.done


def test_oauthbearer_extensions_and_authzid() -> None:
    m = OAuthBearerMechanism(
        OAuthBearerToken("tok", 1), extensions={"logicalCluster": "lkc-1", "identityPoolId": "pool 2"},
    )
    assert m.initial_response() == (
        b"n,,\x01auth=Bearer tok\x01logicalCluster=lkc-1\x01identityPoolId=pool 2\x01\x01"
    )
    m = OAuthBearerMechanism(OAuthBearerToken("tok", 1), authzid="alice")
    assert m.initial_response() == b"n,a=alice,\x01auth=Bearer tok\x01\x01"


def test_oauthbearer_token_provider() -> None:
    calls = []

    def provider() -> tuple[str, int]:
        calls.append(1)
        return ("abc-123", 5_000)

    m = OAuthBearerMechanism(provider)
    assert not calls  # asked only when the exchange starts
    assert m.initial_response() == b"n,,\x01auth=Bearer abc-123\x01\x01"
    assert calls == [1]
    assert m.token is not None and m.token.expiry_ms == 5_000 and m.token.start_ms is None
    m2 = m.fresh()
    m2.initial_response()
    assert calls == [1, 1]
    token = OAuthBearerToken.from_lifetime("t", 3_600_000, now_ms=1_000, principal="alice")
    assert (token.start_ms, token.expiry_ms) == (1_000, 3_601_000)
    assert "t'" not in repr(token) and "alice" in repr(token)
    m3 = OAuthBearerMechanism(lambda: token)
    m3.initial_response()
    assert m3.token is token


@pytest.mark.parametrize("value", ["Bearer abc", " abc", "abc def", "", "a\x01b", "=="])
def test_oauthbearer_bad_token(value: str) -> None:
    with pytest.raises(OAuthBearerTokenError, match="b64token"):
        OAuthBearerMechanism(OAuthBearerToken(value, 1)).initial_response()


def test_oauthbearer_bad_extensions_and_providers() -> None:
    with pytest.raises(OAuthBearerTokenError, match="reserved"):
        OAuthBearerMechanism(OAuthBearerToken("t", 1), extensions={"auth": "x"})
    with pytest.raises(OAuthBearerTokenError, match="letters"):
        OAuthBearerMechanism(OAuthBearerToken("t", 1), extensions={"k1": "x"})
    with pytest.raises(OAuthBearerTokenError, match="printable"):
        OAuthBearerMechanism(OAuthBearerToken("t", 1), extensions={"k": "a\x01b"})
    with pytest.raises(OAuthBearerTokenError, match="authzid"):
        OAuthBearerMechanism(OAuthBearerToken("t", 1), authzid="a,b")
    with pytest.raises(TypeError, match="OAuthBearerToken or"):
        OAuthBearerMechanism(lambda: "just a string").initial_response()  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="value, expiry_ms"):
        OAuthBearerMechanism(lambda: ("a", 1, 2)).initial_response()  # type: ignore[arg-type,return-value]


def test_oauthbearer_error_challenge() -> None:
    m = OAuthBearerMechanism(OAuthBearerToken("tok", 1, principal="alice"))
    m.initial_response()
    challenge = json.dumps({"status": "invalid_token", "scope": "kafka",
                            "openid-configuration": "https://idp/.well-known"}).encode()
    assert m.respond(challenge) == b"\x01"  # RFC 7628 3.2.3: the client answers %x01
    err = m.server_error("Authentication failed: token expired")
    assert isinstance(err, OAuthBearerServerError) and err.code == 58
    assert (err.status, err.scope, err.openid_configuration) == ("invalid_token", "kafka", "https://idp/.well-known")
    assert "invalid_token" in str(err) and "token expired" in str(err) and "alice" in str(err)
    # A broker that does not fail after the %x01 still gets the error raised.
    with pytest.raises(OAuthBearerServerError, match="invalid_token"):
        m.respond(b"")


def test_oauthbearer_non_json_challenge() -> None:
    m = OAuthBearerMechanism(OAuthBearerToken("tok", 1))
    m.initial_response()
    m.respond(b"not json")
    err = m.server_error()
    assert err.status is None and err.challenge == "not json" and "not json" in str(err)
    with pytest.raises(OAuthBearerServerError):
        OAuthBearerMechanism(OAuthBearerToken("tok", 1)).complete(b'{"status":"x"}')


# -- timing: token refresh (KIP-255) and re-authentication (KIP-368) --------------------

HOUR = 3_600_000


@pytest.mark.parametrize("kw,expected", [
    (dict(now_ms=0, start_ms=0, jitter=0.0), 2_880_000),  # 80% of an hour
    (dict(now_ms=0, start_ms=0, jitter=1.0), 3_060_000),  # 80% + 5% jitter
    (dict(now_ms=0, start_ms=0, jitter=0.5), 2_970_000),
    (dict(now_ms=0, jitter=0.0), 2_880_000),  # start unknown: counted from now
    (dict(now_ms=3_000_000, start_ms=0, jitter=0.0), 3_060_000),  # at least min_period from now
    (dict(now_ms=HOUR, start_ms=0, jitter=0.5), HOUR),  # expired: refresh at once
    (dict(now_ms=HOUR + 5, start_ms=0, jitter=0.5), HOUR + 5),
])
def test_token_refresh_at(kw: dict, expected: int) -> None:
    assert token_refresh_at_ms(HOUR, **kw) == expected


def test_token_refresh_limits() -> None:
    # 1000 s token: 80% is 800 s, but the 300 s buffer before expiry wins.
    assert token_refresh_at_ms(1_000_000, now_ms=0, start_ms=0, jitter=0.0) == 700_000
    assert token_refresh_at_ms(1_000_000, now_ms=0, start_ms=0, jitter=0.0, buffer_ms=0) == 800_000
    # A token too short for min_period + buffer: the same fractions of what is left.
    assert token_refresh_at_ms(300_000, now_ms=0, jitter=0.0) == 240_000
    assert token_refresh_at_ms(300_000, now_ms=100_000, start_ms=0, jitter=1.0) == 270_000
    # Custom window, as Java's sasl.login.refresh.window.factor/jitter.
    assert token_refresh_at_ms(HOUR, now_ms=0, start_ms=0, jitter=1.0, window_factor=0.5,
                               window_jitter=0.25, buffer_ms=0) == 2_700_000
    token = OAuthBearerToken(JWT, HOUR, start_ms=0)
    assert token.refresh_at_ms(0, 0.0) == 2_880_000
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="jitter"):
            token_refresh_at_ms(HOUR, now_ms=0, jitter=bad)
    with pytest.raises(ValueError, match="window_factor"):
        token_refresh_at_ms(HOUR, now_ms=0, jitter=0.0, window_factor=0.3)
    with pytest.raises(ValueError, match="window_factor"):
        token_refresh_at_ms(HOUR, now_ms=0, jitter=0.0, window_factor=0.9, window_jitter=0.2)


def test_reauthentication_at() -> None:
    assert reauthentication_at_ms(60_000, authenticated_at_ms=1_000, jitter=0.0) == 52_000  # 85%
    assert reauthentication_at_ms(60_000, authenticated_at_ms=1_000, jitter=1.0) == 58_000  # 95%
    assert reauthentication_at_ms(60_000, authenticated_at_ms=1_000, jitter=0.5) == 55_000
    assert reauthentication_at_ms(0, authenticated_at_ms=1_000, jitter=0.5) is None
    assert reauthentication_at_ms(60_000, authenticated_at_ms=0, jitter=0.0, low=0.5, high=0.5) == 30_000
    with pytest.raises(ValueError):
        reauthentication_at_ms(60_000, authenticated_at_ms=0, jitter=2.0)
    with pytest.raises(ValueError):
        reauthentication_at_ms(60_000, authenticated_at_ms=0, jitter=0.0, low=0.9, high=0.8)


def sasl_authenticate_body(version: int, lifetime: int) -> bytes:
    """A SaslAuthenticate response body, hand-packed from the protocol grammar."""
    if version == 2:  # flexible (KIP-482): compact string/bytes, tagged fields
        return i16(0) + cs(None) + cb(b"v=sig") + i64(lifetime) + NO_TAGS
    body = i16(0) + s(None) + b(b"v=sig")
    return body + (i64(lifetime) if version >= 1 else b"")


@pytest.mark.parametrize("version,lifetime", [(0, 0), (1, 3_600_000), (2, 86_400_000)])
def test_session_lifetime_parsed_from_saslauthenticate(version: int, lifetime: int) -> None:
    resp = SASL_AUTHENTICATE.decode_response(sasl_authenticate_body(version, lifetime), version)
    assert resp.session_lifetime_ms == lifetime
    assert resp.auth_bytes == b"v=sig"


# -- the handshake plan ------------------------------------------------------------------


def drive_scramp(exchange: SaslExchange, server: object, lifetime: int = 0) -> None:
    """Answer every step of a SaslHandshake v1 exchange like a Kafka broker backed by scramp."""
    step = exchange.next_step()
    assert step is not None and step.api is SASL_HANDSHAKE and step.version == 1
    assert step.request.mechanism == exchange.mechanism.name  # type: ignore[union-attr]
    exchange.receive(HsResponse(error_code=0, mechanisms=[exchange.mechanism.name]))
    turn = 0
    while (step := exchange.next_step()) is not None:
        assert step.api is SASL_AUTHENTICATE and step.raw is None
        token = step.request.auth_bytes.decode()  # type: ignore[union-attr]
        if turn == 0:
            server.set_client_first(token)  # type: ignore[attr-defined]
            exchange.receive(auth_ok(server.get_server_first().encode()))  # type: ignore[attr-defined]
        else:
            try:
                server.set_client_final(token)  # type: ignore[attr-defined]
            except scramp.ScramException:
                pass
            exchange.receive(auth_ok(server.get_server_final().encode(), lifetime))  # type: ignore[attr-defined]
        turn += 1


@needs_scramp
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_exchange_scram_v1_with_scramp(mechanism: str) -> None:
    server = scramp_server(mechanism, {"alice": "pw"})
    exchange = SaslExchange(ScramMechanism(mechanism, "alice", "pw"), 1, authenticate_version=2)
    drive_scramp(exchange, server, lifetime=60_000)
    assert exchange.done and exchange.result is not None
    assert exchange.result.mechanism == mechanism
    assert exchange.result.session_lifetime_ms == 60_000
    assert exchange.result.reauthenticate_at_ms(10_000, 0.0) == 61_000
    assert exchange.next_step() is None


@needs_scramp
def test_exchange_scram_wrong_password_with_scramp() -> None:
    server = scramp_server("SCRAM-SHA-512", {"alice": "pw"})
    exchange = SaslExchange(ScramMechanism("SCRAM-SHA-512", "alice", "nope"), 1, authenticate_version=1)
    with pytest.raises(ScramServerError, match="invalid-proof"):
        drive_scramp(exchange, server)
    assert not exchange.done
    with pytest.raises(SaslIllegalStateError, match="already failed"):
        exchange.next_step()


def test_exchange_server_error_with_success_code() -> None:
    # Some brokers (Tansu 0.6) end a failed SCRAM with e=... inside an error_code 0 answer.
    exchange = SaslExchange(ScramMechanism("SCRAM-SHA-256", "ghost", "pw", nonce=lambda: "cn"), 1,
                            authenticate_version=2)
    exchange.next_step()
    exchange.receive(HsResponse(error_code=0, mechanisms=["SCRAM-SHA-256"]))
    exchange.next_step()
    exchange.receive(auth_ok(b"r=cnSERVER,s=QUJDRA==,i=16384", 60_000))
    exchange.next_step()
    with pytest.raises(ScramServerError, match="unknown-user") as info:
        exchange.receive(auth_ok(b"e=unknown-user", 60_000))
    assert info.value.server_error == "unknown-user" and info.value.mechanism == "SCRAM-SHA-256"


def test_exchange_plain_v1() -> None:
    exchange = SaslExchange(PlainMechanism("alice", "pw"), 1, authenticate_version=0)
    step = exchange.next_step()
    assert step is not None and step.request.mechanism == "PLAIN"  # type: ignore[union-attr]
    exchange.receive(HsResponse(error_code=0, mechanisms=["PLAIN"]))
    step = exchange.next_step()
    assert step is not None and step.version == 0
    assert step.request.auth_bytes == b"\x00alice\x00pw"  # type: ignore[union-attr]
    exchange.receive(AuthResponse(error_code=0, error_message=None, auth_bytes=b""))
    assert exchange.done and exchange.result.session_lifetime_ms == 0  # type: ignore[union-attr]
    assert exchange.result.reauthenticate_at_ms(0, 0.5) is None  # type: ignore[union-attr]


def test_exchange_unsupported_mechanism_lists_enabled() -> None:
    exchange = SaslExchange(PlainMechanism("a", "b"), 1, authenticate_version=1)
    exchange.next_step()
    with pytest.raises(SaslUnsupportedMechanismError, match="SCRAM-SHA-512, GSSAPI") as info:
        exchange.receive(HsResponse(error_code=33, mechanisms=["SCRAM-SHA-512", "GSSAPI"]))
    err = info.value
    assert err.code == 33 and isinstance(err, errors.UnsupportedSaslMechanismError)
    assert err.enabled_mechanisms == ["SCRAM-SHA-512", "GSSAPI"] and err.mechanism == "PLAIN"
    # A broker that echoes the requested name (Tansu without --authentication).
    exchange = SaslExchange(PlainMechanism("a", "b"), 1, authenticate_version=1)
    exchange.next_step()
    with pytest.raises(SaslUnsupportedMechanismError, match="named only PLAIN itself"):
        exchange.receive(HsResponse(error_code=33, mechanisms=["PLAIN"]))


def test_exchange_authentication_failed_carries_broker_message() -> None:
    exchange = SaslExchange(PlainMechanism("a", "b"), 1, authenticate_version=1)
    exchange.next_step()
    exchange.receive(HsResponse(error_code=0, mechanisms=["PLAIN"]))
    exchange.next_step()
    msg = "Authentication failed: Invalid username or password"
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password") as info:
        exchange.receive(AuthResponse(error_code=58, error_message=msg, auth_bytes=b""))
    assert info.value.error_message == msg and info.value.code == 58
    assert isinstance(info.value, errors.SaslAuthenticationFailedError)


@pytest.mark.parametrize("where", ["handshake", "authenticate"])
def test_exchange_illegal_state(where: str) -> None:
    exchange = SaslExchange(PlainMechanism("a", "b"), 1, authenticate_version=1)
    exchange.next_step()
    if where == "authenticate":
        exchange.receive(HsResponse(error_code=0, mechanisms=["PLAIN"]))
        exchange.next_step()
        with pytest.raises(SaslIllegalStateError, match="ILLEGAL_SASL_STATE") as info:
            exchange.receive(AuthResponse(error_code=34, error_message="not now", auth_bytes=b""))
        assert info.value.error_message == "not now"
    else:
        with pytest.raises(SaslIllegalStateError, match="ILLEGAL_SASL_STATE") as info:
            exchange.receive(HsResponse(error_code=34, mechanisms=[]))
    assert info.value.code == 34 and isinstance(info.value, errors.IllegalSaslStateError)


def test_exchange_other_broker_errors() -> None:
    exchange = SaslExchange(PlainMechanism("a", "b"), 1, authenticate_version=1)
    exchange.next_step()
    with pytest.raises(errors.UnsupportedVersionError, match="SaslHandshake for PLAIN"):
        exchange.receive(HsResponse(error_code=35, mechanisms=[]))
    exchange = SaslExchange(PlainMechanism("a", "b"), 1, authenticate_version=1)
    exchange.next_step()
    exchange.receive(HsResponse(error_code=0, mechanisms=["PLAIN"]))
    exchange.next_step()
    with pytest.raises(errors.UnknownServerError, match="boom"):
        exchange.receive(AuthResponse(error_code=-1, error_message="boom", auth_bytes=b""))


def test_exchange_oauthbearer_rejected_token() -> None:
    exchange = SaslExchange(OAuthBearerMechanism(OAuthBearerToken("tok", 1)), 1, authenticate_version=2)
    exchange.next_step()
    exchange.receive(HsResponse(error_code=0, mechanisms=["OAUTHBEARER"]))
    step = exchange.next_step()
    assert step.request.auth_bytes == b"n,,\x01auth=Bearer tok\x01\x01"  # type: ignore[union-attr]
    exchange.receive(auth_ok(b'{"status":"invalid_token"}'))
    step = exchange.next_step()
    assert step is not None and step.request.auth_bytes == b"\x01"  # type: ignore[union-attr]
    with pytest.raises(OAuthBearerServerError, match="invalid_token") as info:
        exchange.receive(AuthResponse(error_code=58, error_message="token expired", auth_bytes=b""))
    assert info.value.status == "invalid_token" and info.value.error_message == "token expired"
    assert "token expired" in str(info.value)


def test_exchange_oauthbearer_accepted() -> None:
    exchange = SaslExchange(OAuthBearerMechanism(OAuthBearerToken("tok", 1)), 1, authenticate_version=1)
    exchange.next_step()
    exchange.receive(HsResponse(error_code=0, mechanisms=["OAUTHBEARER"]))
    exchange.next_step()
    exchange.receive(auth_ok(b"", 120_000))
    assert exchange.done and exchange.result.session_lifetime_ms == 120_000  # type: ignore[union-attr]


def test_exchange_call_order_errors() -> None:
    with pytest.raises(ValueError, match="authenticate_version"):
        SaslExchange(PlainMechanism("a", "b"), 1)
    with pytest.raises(errors.KafkaWireError):
        SaslExchange(PlainMechanism("a", "b"), 2, authenticate_version=1)
    with pytest.raises(errors.KafkaWireError):
        SaslExchange(PlainMechanism("a", "b"), 1, authenticate_version=7)
    exchange = SaslExchange(PlainMechanism("a", "b"), 1, authenticate_version=1)
    with pytest.raises(SaslIllegalStateError, match="awaiting"):
        exchange.receive(HsResponse(error_code=0, mechanisms=[]))
    exchange.next_step()
    with pytest.raises(SaslIllegalStateError, match="still due"):
        exchange.next_step()
    with pytest.raises(SaslIllegalStateError, match="raw"):
        exchange.receive_raw(b"")
    exchange.receive(HsResponse(error_code=0, mechanisms=["PLAIN"]))
    exchange.next_step()
    with pytest.raises(SaslProtocolError):  # PLAIN expects an empty answer
        exchange.receive(auth_ok(b"extra"))
    closed = SaslExchange(PlainMechanism("a", "b"), 1, authenticate_version=1)
    closed.next_step()
    err = closed.connection_closed()
    assert isinstance(err, errors.KafkaWireError) and "handshake" in str(err)


# -- SaslHandshake v0: raw tokens --------------------------------------------------------


def test_frame_raw_token_and_reader() -> None:
    assert frame_raw_token(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame_raw_token(b"") == b"\x00\x00\x00\x00"
    reader = RawTokenReader()
    stream = frame_raw_token(b"") + frame_raw_token(b"server-first") + b"\x00\x00"
    out = []
    for i in range(len(stream)):  # one byte at a time
        out += reader.feed(stream[i : i + 1])
    assert out == [b"", b"server-first"]
    assert reader.leftover() == b"\x00\x00"
    with pytest.raises(SaslProtocolError, match="raw SASL token"):
        RawTokenReader(max_token_size=10).feed(i32(11))
    with pytest.raises(SaslProtocolError):
        RawTokenReader().feed(i32(-1))


def test_exchange_v0_plain_raw() -> None:
    exchange = SaslExchange(PlainMechanism("alice", "pw"), 0)
    assert exchange.raw_tokens
    step = exchange.next_step()
    assert step is not None and step.api is SASL_HANDSHAKE and step.version == 0 and step.raw is None
    exchange.receive(HsResponse(error_code=0, mechanisms=["PLAIN", "GSSAPI"]))
    step = exchange.next_step()
    assert step is not None and step.api is None and step.request is None
    assert step.raw == struct.pack(">i", 9) + b"\x00alice\x00pw"
    with pytest.raises(SaslIllegalStateError):
        exchange.receive(auth_ok())  # raw mode takes raw tokens only
    exchange.receive_raw(b"")  # Kafka answers PLAIN with an empty token
    assert exchange.done and exchange.result.session_lifetime_ms == 0  # type: ignore[union-attr]


@needs_scramp
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_exchange_v0_scram_raw_with_scramp(mechanism: str) -> None:
    server = scramp_server(mechanism, {"bob": "hunter2"})
    exchange = SaslExchange(ScramMechanism(mechanism, "bob", "hunter2"), 0)
    exchange.next_step()
    exchange.receive(HsResponse(error_code=0, mechanisms=[mechanism]))
    reader = RawTokenReader()
    step = exchange.next_step()
    server.set_client_first(step.raw[4:].decode())  # type: ignore[attr-defined,index,union-attr]
    [token] = reader.feed(frame_raw_token(server.get_server_first().encode()))  # type: ignore[attr-defined]
    exchange.receive_raw(token)
    step = exchange.next_step()
    server.set_client_final(step.raw[4:].decode())  # type: ignore[attr-defined,index,union-attr]
    [token] = reader.feed(frame_raw_token(server.get_server_final().encode()))  # type: ignore[attr-defined]
    exchange.receive_raw(token)
    assert exchange.done and exchange.next_step() is None


def test_exchange_v0_closed_connection_is_authentication_failure() -> None:
    exchange = SaslExchange(PlainMechanism("alice", "wrong"), 0)
    exchange.next_step()
    exchange.receive(HsResponse(error_code=0, mechanisms=["PLAIN"]))
    exchange.next_step()
    err = exchange.connection_closed()
    assert isinstance(err, SaslAuthenticationError) and err.code == 58
    assert "closed the connection" in str(err)


# -- on the wire, through the sans-IO Connection -----------------------------------------


@needs_scramp
def test_exchange_through_connection_bytes() -> None:
    """The plan's requests framed by Connection and read back as a broker would; the
    broker's answers hand-packed (SaslHandshake v1, SaslAuthenticate v2 flexible)."""
    conn = Connection(client_id="c", version_overrides={17: 1, 36: 2})
    server = scramp_server("SCRAM-SHA-256", {"user": "pencil"})
    exchange = SaslExchange(ScramMechanism("SCRAM-SHA-256", "user", "pencil"), 1, authenticate_version=2)
    step = exchange.next_step()
    cid, chunks = conn.send(step.api, step.request, step.version)  # type: ignore[arg-type,union-attr]
    data = b"".join(bytes(c) for c in chunks)
    key, version, got_cid, client_id, pos = decode_request_header(data[4:], 1)
    assert (key, version, got_cid, client_id) == (17, 1, cid, "c")
    assert data[4 + pos :] == s("SCRAM-SHA-256")
    body = i32(cid) + i16(0) + i32(1) + s("SCRAM-SHA-256")
    [event] = conn.receive_data(i32(len(body)) + body)
    exchange.receive(event)
    turn = 0
    while (step := exchange.next_step()) is not None:
        cid, chunks = conn.send(step.api, step.request, step.version)  # type: ignore[arg-type]
        data = b"".join(bytes(c) for c in chunks)
        key, version, got_cid, _, pos = decode_request_header(data[4:], 2)
        assert (key, version, got_cid) == (36, 2, cid)
        # Flexible request body: compact bytes then an empty tag section.
        token = SASL_AUTHENTICATE.decode_request(data[4 + pos :], 2).auth_bytes
        assert data[4 + pos :] == cb(token) + NO_TAGS
        if turn == 0:
            server.set_client_first(token.decode())  # type: ignore[attr-defined]
            reply = server.get_server_first().encode()  # type: ignore[attr-defined]
        else:
            server.set_client_final(token.decode())  # type: ignore[attr-defined]
            reply = server.get_server_final().encode()  # type: ignore[attr-defined]
        body = i32(cid) + NO_TAGS + i16(0) + cs(None) + cb(reply) + i64(900_000) + NO_TAGS
        [event] = conn.receive_data(i32(len(body)) + body)
        exchange.receive(event)
        turn += 1
    assert turn == 2 and exchange.done
    assert exchange.result.session_lifetime_ms == 900_000  # type: ignore[union-attr]


# -- the factory -------------------------------------------------------------------------


def test_create_mechanism() -> None:
    assert MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    assert isinstance(create_mechanism("plain", username="u", password="p"), PlainMechanism)
    m = create_mechanism("SCRAM-SHA-512", username="u", password="p", nonce=lambda: "x")
    assert isinstance(m, ScramMechanism) and m.name == "SCRAM-SHA-512"
    assert m.initial_response() == b"n,,n=u,r=x"
    assert isinstance(create_mechanism("OAUTHBEARER", token=OAuthBearerToken("t", 1)), OAuthBearerMechanism)
    with pytest.raises(ValueError, match="GSSAPI"):
        create_mechanism("GSSAPI", username="u", password="p")
    with pytest.raises(ValueError, match="username and a password"):
        create_mechanism("SCRAM-SHA-256", username="u")
    with pytest.raises(ValueError, match="token"):
        create_mechanism("OAUTHBEARER")
