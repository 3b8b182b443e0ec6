"""OidcLogin (kafkawire.protocol.sasl): the token endpoint's request, its answers read into
tokens or typed errors, refresh times and backoff, on a fake clock (no I/O)."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs

import pytest

from kafkawire.protocol.sasl import (
    OAuthBearerCredentialsError,
    OAuthBearerEndpointError,
    OAuthBearerEndpointTimeoutError,
    OAuthBearerLoginError,
    OAuthBearerMechanism,
    OAuthBearerTokenResponseError,
    OidcLogin,
    jwt_claims,
)

URL = "https://idp.example/oauth2/token"
NOW = 1_800_000_000_000


def _jwt(**claims) -> str:
    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


def _answer(**fields) -> bytes:
    return json.dumps(fields).encode()


def _login(**kw) -> OidcLogin:
    kw.setdefault("client_id", "svc")
    kw.setdefault("client_secret", "s3cr:et")
    return OidcLogin(URL, **kw)


def test_client_credentials_request_is_a_form_post_with_basic_auth():
    req = _login(scope="kafka read").request()
    assert req.url == URL
    assert req.headers["Content-Type"] == "application/x-www-form-urlencoded"
    # RFC 6749 2.3.1: id and secret form-urlencoded, then Basic.
    assert base64.b64decode(req.headers["Authorization"][6:]) == b"svc:s3cr%3Aet"
    assert parse_qs(req.body.decode()) == {"grant_type": ["client_credentials"], "scope": ["kafka read"]}
    assert "s3cr" not in repr(req)


def test_jwt_bearer_request_carries_the_assertion():
    login = OidcLogin(URL, assertion=True)
    form = parse_qs(login.request("a.b.c\n").body.decode())
    assert form == {"grant_type": ["urn:ietf:params:oauth:grant-type:jwt-bearer"], "assertion": ["a.b.c"]}
    with pytest.raises(OAuthBearerLoginError, match="needs an assertion"):
        login.request("")


@pytest.mark.parametrize("kw,match", [
    ({"client_secret": None}, "sasl_oauthbearer_client_secret"),
    ({"client_id": None}, "sasl_oauthbearer_client_id"),
])
def test_client_credentials_need_id_and_secret(kw, match):
    with pytest.raises(ValueError, match=match):
        _login(**kw)


def test_the_url_must_be_http():
    with pytest.raises(ValueError, match="must be an http"):
        OidcLogin("ftp://idp/token", client_id="a", client_secret="b")


def test_expiry_is_the_earlier_of_expires_in_and_exp():
    login = _login()
    value = _jwt(sub="svc-principal", exp=NOW // 1000 + 100, iat=NOW // 1000)
    token = login.accept(200, _answer(access_token=value, token_type="Bearer", expires_in=3600),
                         now_ms=NOW, jitter=0.0)
    assert token.expiry_ms == NOW + 100_000 and token.principal == "svc-principal"
    # A token living 100 s is refreshed at 80% of its life with jitter 0, 85% with jitter 1.
    assert login.refresh_at_ms == NOW + 80_000
    assert not login.needs_token(NOW + 79_999) and login.needs_token(NOW + 80_000)
    opaque = login.accept(200, _answer(access_token="opaque-token", token_type="bearer", expires_in=50),
                          now_ms=NOW, jitter=1.0)
    assert opaque.expiry_ms == NOW + 50_000 and opaque.principal == "svc"
    assert login.refresh_at_ms == NOW + 42_500


def test_a_long_lived_token_is_refreshed_five_minutes_before_its_end_at_the_latest():
    login = _login()
    login.accept(200, _answer(access_token="t", expires_in=3600), now_ms=NOW, jitter=0.5)
    assert NOW + 0.8 * 3_600_000 <= login.refresh_at_ms <= NOW + 0.85 * 3_600_000


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_busy_or_failing_endpoints_are_retriable(status):
    with pytest.raises(OAuthBearerEndpointError) as info:
        _login().accept(status, b"try later", now_ms=NOW, jitter=0)
    assert info.value.retriable and f"HTTP {status}" in str(info.value)


@pytest.mark.parametrize("status,error,option", [
    (401, "invalid_client", "sasl_oauthbearer_client_id / sasl_oauthbearer_client_secret"),
    (400, "invalid_scope", "sasl_oauthbearer_scope"),
    (400, "unsupported_grant_type", "sasl_oauthbearer_token_endpoint_url"),
    (403, None, "sasl_oauthbearer_client_secret"),
    (404, None, "sasl_oauthbearer_token_endpoint_url"),
])
def test_refusals_are_permanent_and_name_the_option(status, error, option):
    body = _answer(error=error, error_description="nope") if error else b"<html>forbidden</html>"
    with pytest.raises(OAuthBearerCredentialsError) as info:
        _login().accept(status, body, now_ms=NOW, jitter=0)
    err = info.value
    assert not err.retriable and err.status == status and err.error == error
    assert option in str(err) and "'svc'" in str(err) and "s3cr" not in str(err)


@pytest.mark.parametrize("body,match", [
    (b"not json", "not with a JSON object"),
    (_answer(token_type="Bearer", expires_in=5), "without an access_token"),
    (_answer(access_token="t", token_type="mac", expires_in=5), "type 'mac'"),
    (_answer(access_token="t"), "no expiry"),
    (_answer(access_token="t", expires_in="soon"), "not a number"),
    (_answer(access_token="has space", expires_in=5), "not a bearer token"),
    (_answer(access_token="t", expires_in=-1), "already expired"),
])
def test_malformed_answers_are_typed(body, match):
    with pytest.raises(OAuthBearerTokenResponseError, match=match) as info:
        _login().accept(200, body, now_ms=NOW, jitter=0)
    assert not info.value.retriable


def test_backoff_doubles_up_to_the_maximum_with_jitter():
    login = _login(retry_backoff_ms=100, retry_backoff_max_ms=1000)
    assert [login.backoff_ms(n, 0.5) for n in range(1, 7)] == [100, 200, 400, 800, 1000, 1000]
    assert login.backoff_ms(1, 0.0) == 80 and login.backoff_ms(1, 1.0) == 120


def test_the_timeout_keeps_every_attempt():
    login = _login()
    attempts = [login.unreachable("Connection refused") for _ in range(3)]
    err = login.timed_out(attempts, 1500)
    assert isinstance(err, OAuthBearerEndpointTimeoutError) and err.errors == attempts
    assert not isinstance(err, TimeoutError)  # see the class: the asyncio shell's waits
    assert "3 attempts" in str(err) and "1500 ms" in str(err) and URL in str(err)


def test_jwt_claims_reads_a_jws_and_refuses_anything_else():
    assert jwt_claims(_jwt(sub="x", exp=5)) == {"sub": "x", "exp": 5}
    assert jwt_claims("opaque") is None and jwt_claims("a.!!.c") is None


def test_the_mechanism_sends_the_fetched_token():
    login = _login()

    def provider():
        return login.accept(200, _answer(access_token="abc.def.ghi", expires_in=60), now_ms=NOW, jitter=0)

    first = OAuthBearerMechanism(provider).initial_response()
    assert first == b"n,,\x01auth=Bearer abc.def.ghi\x01\x01"
