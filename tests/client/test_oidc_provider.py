"""kafkawire.oauth.OidcTokenProvider against kafkawire.testing.oidc.OidcServer on loopback
(no broker): one fetch per token life, the next fetched ahead on its timer thread only
while logins take the tokens, typed errors from a real HTTP exchange."""

from __future__ import annotations

import gc
import time

import pytest

from kafkawire.oauth import (
    OAuthBearerCredentialsError,
    OAuthBearerEndpointTimeoutError,
    OidcLogin,
    OidcTokenProvider,
)
from kafkawire.protocol.sasl import jwt_claims
from kafkawire.testing.brokers import free_port
from kafkawire.testing.oidc import OidcServer


@pytest.fixture
def idp():
    with OidcServer({"svc": "pa:ss word"}, token_lifetime_s=2) as server:
        yield server


def _provider(url: str, secret: str = "pa:ss word", **kw) -> OidcTokenProvider:
    return OidcTokenProvider(OidcLogin(url, client_id="svc", client_secret=secret, scope="kafka",
                                       retry_backoff_ms=50, retry_backoff_max_ms=200), **kw)


def test_one_fetch_per_token_life_and_one_fetch_ahead_while_tokens_are_taken(idp):
    provider = _provider(idp.token_endpoint_url)
    first = provider()
    assert provider() is first and idp.tokens_issued == 1
    claims = jwt_claims(first.value)
    assert claims["sub"] == "svc" and claims["scope"] == "kafka" and claims["aud"] == "kafka"
    assert first.expiry_ms == claims["exp"] * 1000  # the JWT's exp, earlier than iat + expires_in
    # At 80-85% of the token's life the timer fetches the next one, without a login asking.
    deadline = time.monotonic() + 5
    while provider.background_fetches == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert provider.background_fetches == 1 and idp.tokens_issued == 2
    # No login took that one: the timer stops there (a closed client costs no more tokens).
    time.sleep(2.5)
    assert idp.tokens_issued == 2 and provider.fetches == 2
    # A login past that token's refresh point fetches for itself.
    third = provider()
    assert third is not first and idp.tokens_issued == 3 and provider.fetches == 3
    provider.close()


def test_a_provider_nobody_holds_stops_its_timer(idp):
    provider = _provider(idp.token_endpoint_url)
    provider()
    timer = provider._timer
    assert timer is not None and timer.is_alive()
    del provider
    gc.collect()
    timer.join(2)
    assert not timer.is_alive()


def test_a_wrong_secret_is_one_request_and_a_typed_error(idp):
    provider = _provider(idp.token_endpoint_url, secret="wrong")
    with pytest.raises(OAuthBearerCredentialsError) as info:
        provider()
    assert info.value.status == 401 and idp.token_requests == 1 and "wrong" not in str(info.value)


def test_nothing_listening_is_retried_until_the_deadline():
    url = f"http://127.0.0.1:{free_port()}/token"
    provider = _provider(url, timeout_ms=800)
    start = time.monotonic()
    with pytest.raises(OAuthBearerEndpointTimeoutError) as info:
        provider()
    assert 0.75 <= time.monotonic() - start < 2.0
    assert len(info.value.errors) >= 4 and url in str(info.value)


def test_a_login_while_the_timer_fetches_ahead_takes_the_held_token_at_once():
    """The endpoint gone after the first token: the timer thread's fetch ahead retries
    it until its deadline, and a login meanwhile is handed the token held, still valid,
    without waiting for that fetch (nor fetching again for itself)."""
    with OidcServer({"svc": "pa:ss word"}, token_lifetime_s=4) as server:
        provider = _provider(server.token_endpoint_url, timeout_ms=3000)
        first = provider()
    # Just past the refresh point, where the timer began fetching ahead (and meets nothing).
    refresh_at = provider.login.refresh_at_ms
    assert refresh_at is not None and refresh_at + 300 < first.expiry_ms
    time.sleep(max(0.0, (refresh_at + 100) / 1000 - time.time()))
    start = time.monotonic()
    assert provider() is first
    assert time.monotonic() - start < 0.5
    provider.close()
