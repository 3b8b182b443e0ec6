"""SCRAM credentials over the wire (KIP-554): DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51), and the salted password the client computes for them.

- Golden frames spelled out field by field (tests/protocol/wirebytes.py; both APIs are
  flexible from v0: compact strings, bytes and arrays, tagged-field sections).
- Round trips over instances drawn from the declarations, and a cross-check with an
  independent codec (kafka-python 3's, generated from Kafka's message definitions).
- The credential: Hi() as RFC 5802 section 2.2 defines it, written out here with hmac alone;
  RFC 7677's SCRAM-SHA-256 exchange proven with a credential made by scram_credential();
  and the stored and server keys an independent SCRAM implementation (scramp) derives.

That Kafka takes these credentials, and that kafkawire and confluent-kafka then log in with
them, is proven in tests/integration/test_kafka_security.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import plain, requests, responses
from wirebytes import NO_TAGS, carr, cb, cs, i8, i16, i32, uvarint

from kafkawire.protocol import apis
from kafkawire.protocol.apis.admin import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from kafkawire.protocol.headers import encode_request_header, encode_response_header
from kafkawire.protocol.sasl import (
    SCRAM_MECHANISM_TYPES,
    SaslPrepError,
    ScramCredential,
    ScramMechanism,
    scram_credential,
)

try:  # the test extra: an independent SCRAM implementation
    import scramp
except ImportError:
    scramp = None

ALTER, DESCRIBE = ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS


def test_declared_with_keys_versions_and_flexible_from_v0() -> None:
    assert apis.get(50) is DESCRIBE and apis.get("DescribeUserScramCredentials") is DESCRIBE
    assert apis.get(51) is ALTER and apis.get("AlterUserScramCredentials") is ALTER
    for api in (ALTER, DESCRIBE):
        assert (api.min_version, api.max_version, api.flexible_from) == (0, 0, 0)
        assert api.request_header_version(0) == 2 and api.response_header_version(0) == 1
    assert SCRAM_MECHANISM_TYPES == {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


# -- golden frames --------------------------------------------------------------------------


def test_alter_request_golden() -> None:
    R = ALTER.Request
    salt, salted = b"\x01\x02\x03", bytes(range(32))
    req = R(deletions=[R.ScramCredentialDeletion(name="bob", mechanism=2)],
            upsertions=[R.ScramCredentialUpsertion(name="o=ne,two", mechanism=1, iterations=8192,
                                                   salt=salt, salted_password=salted)])
    golden = (
        carr([cs("bob") + i8(2) + NO_TAGS])  # Deletions: Name Mechanism, tags
        + carr([cs("o=ne,two") + i8(1) + i32(8192) + cb(salt) + cb(salted) + NO_TAGS])
        + NO_TAGS
    )
    assert ALTER.encode_request(req, 0).getvalue() == golden
    # Request header v2: the client id stays a classic (int16) string, then a tag section.
    frame = encode_request_header(51, 0, 5, "kw", ALTER.request_header_version(0))
    assert frame == i16(51) + i16(0) + i32(5) + i16(2) + b"kw" + NO_TAGS
    assert plain(ALTER.decode_request(golden, 0)) == plain(req)


def test_alter_response_golden() -> None:
    body = (
        i32(0)  # ThrottleTimeMs
        + carr([cs("o=ne,two") + i16(0) + cs(None) + NO_TAGS,
                cs("bob") + i16(91) + cs("Attempt to delete a user credential that does not exist") + NO_TAGS])
        + NO_TAGS
    )
    resp = ALTER.decode_response(body, 0)
    assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [
        ("o=ne,two", 0, None), ("bob", 91, "Attempt to delete a user credential that does not exist")]
    assert ALTER.encode_response(resp, 0).getvalue() == body
    assert encode_response_header(3, ALTER.response_header_version(0)) == i32(3) + NO_TAGS


def test_describe_request_golden_null_means_every_user() -> None:
    R = DESCRIBE.Request
    assert DESCRIBE.encode_request(R(users=None), 0).getvalue() == carr(None) + NO_TAGS
    # Kafka's definition defaults users to an empty array (which brokers also read as every user).
    assert DESCRIBE.encode_request(R(), 0).getvalue() == carr([]) + NO_TAGS
    named = R(users=[R.UserName(name="alice"), R.UserName(name="ñoño")])
    assert DESCRIBE.encode_request(named, 0).getvalue() == (
        carr([cs("alice") + NO_TAGS, cs("ñoño") + NO_TAGS]) + NO_TAGS)


def test_describe_response_golden() -> None:
    body = (
        i32(0) + i16(0) + cs(None)  # ThrottleTimeMs ErrorCode ErrorMessage
        + carr([
            cs("alice") + i16(0) + cs(None)
            + carr([i8(1) + i32(4096) + NO_TAGS, i8(2) + i32(8192) + NO_TAGS]) + NO_TAGS,
            cs("nobody") + i16(91) + cs("no credential") + carr([]) + NO_TAGS,
        ])
        + NO_TAGS
    )
    resp = DESCRIBE.decode_response(body, 0)
    assert (resp.error_code, resp.error_message) == (0, None)
    alice, nobody = resp.results
    assert [(c.mechanism, c.iterations) for c in alice.credential_infos] == [(1, 4096), (2, 8192)]
    assert (nobody.user, nobody.error_code, nobody.error_message, nobody.credential_infos) == (
        "nobody", 91, "no credential", [])
    assert DESCRIBE.encode_response(resp, 0).getvalue() == body
    # A compact array's length is N+1 as an unsigned varint: 0 would have been null.
    assert carr([]) == uvarint(1)


@pytest.mark.parametrize("api", [ALTER, DESCRIBE], ids=lambda a: a.name)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(api, data: st.DataObject) -> None:
    req = data.draw(requests(api, 0))
    assert plain(api.decode_request(api.encode_request(req, 0).getvalue(), 0)) == plain(req)
    resp = data.draw(responses(api, 0))
    assert plain(api.decode_response(api.encode_response(resp, 0).getvalue(), 0)) == plain(resp)


try:  # kafka-python >= 3 generates its codec from Kafka's message definitions.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.admin.users import (
            AlterUserScramCredentialsRequest,
            AlterUserScramCredentialsResponse,
            DescribeUserScramCredentialsRequest,
            DescribeUserScramCredentialsResponse,
        )
    PEER = {ALTER.name: (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
            DESCRIBE.name: (DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse)}
except ImportError:
    PEER = {}


@pytest.mark.skipif(not PEER, reason="needs kafka-python >= 3 (its codec generated from Kafka's definitions)")
@pytest.mark.parametrize("api", [ALTER, DESCRIBE], ids=lambda a: a.name)
@pytest.mark.parametrize("side", ["request", "response"])
@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_kafka_python_reencodes_our_bytes_exactly(api, side: str, data: st.DataObject) -> None:
    if side == "request":
        peer = PEER[api.name][0]
        header = encode_request_header(api.key, 0, 77, "kw", api.request_header_version(0))
        frame = header + api.encode_request(data.draw(requests(api, 0)), 0).getvalue()
        again = peer.decode(frame, version=0, header=True).encode(version=0, header=True)
    else:
        peer = PEER[api.name][1]
        header = encode_response_header(77, api.response_header_version(0))
        body = api.encode_response(data.draw(responses(api, 0)), 0).getvalue()
        frame = header + body
        obj = peer.decode(body, version=0)
        obj._header = None  # decoded without a header; encode() looks for one
        again = header + bytes(obj.encode(version=0))
    assert bytes(again) == frame


# -- the credential ---------------------------------------------------------------------------


def _hi(hash_name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 section 2.2, literally: U1 = HMAC(str, salt + INT(1)), Ui = HMAC(str, Ui-1),
    Hi = U1 XOR U2 XOR ... XOR Ui."""
    u = hmac.new(password, salt + b"\x00\x00\x00\x01", hash_name).digest()
    out = bytearray(u)
    for _ in range(iterations - 1):
        u = hmac.new(password, u, hash_name).digest()
        out = bytearray(a ^ b for a, b in zip(out, u))
    return bytes(out)


@pytest.mark.parametrize("mechanism,hash_name", [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")])
def test_salted_password_is_rfc5802_hi(mechanism: str, hash_name: str) -> None:
    password, salt = "pä=ss,wörd€", b"sodium chloride"
    cred = scram_credential(mechanism.lower(), password, iterations=4096, salt=salt)
    assert isinstance(cred, ScramCredential)
    assert (cred.mechanism, cred.iterations, cred.salt) == (mechanism, 4096, salt)
    assert cred.mechanism_type == SCRAM_MECHANISM_TYPES[mechanism]
    assert cred.salted_password == _hi(hash_name, password.encode("utf-8"), salt, 4096)
    assert len(cred.salted_password) == hashlib.new(hash_name).digest_size
    assert "pä=ss" not in repr(cred) and str(cred.salted_password) not in repr(cred)


def test_a_credential_made_here_passes_rfc7677s_exchange() -> None:
    # RFC 7677 section 3: user "user", password "pencil", this salt, 4096 iterations.
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = scram_credential("SCRAM-SHA-256", "pencil", salt=salt)
    client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.new(cred.salted_password, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    signature = hmac.new(stored_key, auth, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    assert base64.b64encode(proof) == b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    server_key = hmac.new(cred.salted_password, b"Server Key", "sha256").digest()
    assert base64.b64encode(hmac.new(server_key, auth, "sha256").digest()) == (
        b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


@pytest.mark.skipif(scramp is None, reason="needs the scramp package (the test extra)")
@pytest.mark.parametrize("mechanism,hash_name", [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")])
def test_scramp_derives_the_same_keys(mechanism: str, hash_name: str) -> None:
    password, salt = "pä=ss,wörd€", b"0123456789abcdef"
    cred = scram_credential(mechanism, password, iterations=5000, salt=salt)
    _salt, stored_key, server_key, count = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=5000, salt=salt)
    client_key = hmac.new(cred.salted_password, b"Client Key", hash_name).digest()
    assert hashlib.new(hash_name, client_key).digest() == stored_key
    assert hmac.new(cred.salted_password, b"Server Key", hash_name).digest() == server_key
    assert count == 5000


def test_the_password_is_prepped_as_the_login_preps_it() -> None:
    # U+00AD SOFT HYPHEN maps to nothing and U+2168 ROMAN NUMERAL NINE to "IX" (RFC 4013).
    salt = b"salt-salt-salt"
    prepped = scram_credential("SCRAM-SHA-256", "I\u00adX", salt=salt)
    assert prepped.salted_password == scram_credential("SCRAM-SHA-256", "IX", salt=salt).salted_password
    assert prepped.salted_password == scram_credential("SCRAM-SHA-256", "\u2168", salt=salt).salted_password
    # The login proves the same salted password: its proof is the one computed from it.
    mech = ScramMechanism("SCRAM-SHA-256", "user", "I\u00adX", nonce=lambda: "abc")
    mech.initial_response()
    server_first = b"r=abcdef,s=" + base64.b64encode(salt) + b",i=4096"
    final = mech.respond(server_first)
    auth = b"n=user,r=abc," + server_first + b",c=biws,r=abcdef"
    client_key = hmac.new(prepped.salted_password, b"Client Key", "sha256").digest()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    assert final == b"c=biws,r=abcdef,p=" + base64.b64encode(proof)


def test_random_salts_and_refusals() -> None:
    a = scram_credential("SCRAM-SHA-512", "secret")
    b = scram_credential("SCRAM-SHA-512", "secret")
    assert len(a.salt) == 32 and a.salt != b.salt and a.salted_password != b.salted_password
    with pytest.raises(ValueError, match=r"iterations must be an int of at least 4096 \(RFC 7677"):
        scram_credential("SCRAM-SHA-256", "secret", iterations=4095)
    with pytest.raises(ValueError, match="unknown SCRAM mechanism 'SCRAM-SHA-1'.*SCRAM-SHA-256, SCRAM-SHA-512"):
        scram_credential("SCRAM-SHA-1", "secret")
    with pytest.raises(ValueError, match="salt must be non-empty bytes"):
        scram_credential("SCRAM-SHA-256", "secret", salt=b"")
    with pytest.raises(SaslPrepError, match="prohibits"):
        scram_credential("SCRAM-SHA-256", "bad\x07bell")
