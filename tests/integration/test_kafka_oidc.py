"""OAUTHBEARER logins through an OIDC token endpoint (KIP-768) against Apache Kafka, in both
shells.

The module's Kafka validates JWTs on its SASL_PLAINTEXT listener with Kafka's own
OAuthBearerValidatorCallbackHandler, against the JWKS, audience and issuer of an
identity provider served on loopback (kafkawire.testing.oidc.OidcServer, with keys it
generates); kafkawire fetches the tokens itself with the client credentials grant
(sasl_oauthbearer_token_endpoint_url, _client_id, _client_secret).  Kafka 4 fetches the
JWKS only from URLs in its allow list (a JVM system property, OidcServer.jvm_options).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from first_calls import first_call
from shells import shell  # noqa: F401 - the fixture

from kafkawire.oauth import OidcTokenProvider
from kafkawire.protocol.sasl import (
    OidcLogin,
    OAuthBearerCredentialsError,
    OAuthBearerEndpointError,
    OAuthBearerEndpointTimeoutError,
    OAuthBearerServerError,
)
from kafkawire.testing.brokers import free_port
from kafkawire.testing.kafka import KafkaCluster
from kafkawire.testing.oidc import OidcServer, sign_jwt

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

RECORDS = [(f"k{i}".encode(), f"value-{i}".encode()) for i in range(10)]


@pytest.fixture(scope="module")
def oidc():
    with OidcServer({"kafkawire-client": "client-secret"}) as server:
        yield server


@pytest.fixture(scope="module")
def kafka(oidc):
    with KafkaCluster(1, listeners=["SASL_PLAINTEXT"], **oidc.kafka_options()) as cluster:
        yield cluster


def _config(kafka: KafkaCluster, oidc: OidcServer, **overrides: Any) -> dict[str, Any]:
    config = {"bootstrap_servers": kafka.bootstrap_for("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
              **oidc.client_config()}
    config.update(overrides)
    return config


def _conns(client: Any) -> list[Any]:
    while True:
        try:
            return list(client.cluster._conns.values())
        except RuntimeError:  # the sync producer's sender thread changed the dict: read again
            continue


def test_produce_and_consume_with_tokens_from_the_endpoint(kafka, oidc, shell):  # noqa: F811
    topic = f"oidc-{uuid.uuid4().hex[:8]}"
    issued = oidc.tokens_issued
    config = _config(kafka, oidc)
    with shell.Producer(linger_ms=1, max_block_ms=20000, **config) as p:
        futures = [p.send(topic, v, key=k, partition=0) for k, v in RECORDS]
        p.flush(20)
        assert [f.result(10).offset for f in futures] == list(range(len(RECORDS)))
        conns = _conns(p)
    with shell.Consumer(auto_offset_reset="earliest", request_timeout_ms=20000, **config) as c:
        c.assign([(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < len(RECORDS) and time.monotonic() < deadline:
            got += c.poll(0.5)
        conns += _conns(c)
    assert [(r.key, r.value) for r in got] == RECORDS
    assert conns and {c.sasl_result.mechanism for c in conns} == {"OAUTHBEARER"}
    # Kafka ends the session with the token (an hour here), which it read from the JWT.
    assert all(3_500_000 < c.sasl_result.session_lifetime_ms <= 3_600_000 for c in conns)
    # One token per client, however many connections logged in with it.
    assert len(conns) >= 2
    assert oidc.tokens_issued - issued == 2


def test_a_token_signed_by_another_key_is_refused_by_kafka(kafka, oidc, shell):  # noqa: F811
    """The listener really checks the signature: a JWT with the right claims signed by a key
    outside the JWKS is refused by the broker (not by kafkawire)."""
    with OidcServer(issuer=oidc.issuer, audience=oidc.audience) as other:
        other.kid = oidc.kid  # the same key id, another key
        token, _ = other.issue("mallory")
    config = {"bootstrap_servers": kafka.bootstrap_for("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "OAUTHBEARER",
              "sasl_oauth_token_provider": lambda: (token, int(time.time() * 1000) + 3_600_000)}
    with pytest.raises(OAuthBearerServerError) as info:
        first_call(shell.Producer, max_block_ms=20000, **config)
    assert info.value.status == "invalid_token"


# Alone: the re-logins must land inside 6 s token lifetimes while the test's loop drives them.
@pytest.mark.alone
def test_short_lived_tokens_are_refreshed_and_the_connection_logs_in_again(kafka, oidc, shell):  # noqa: F811
    """Tokens living 6 s: kafkawire fetches a new one at 80-85% of a token's life, and
    each connection logs in again (KIP-368) before Kafka's session (the token's lifetime)
    ends, on the same socket, while records flow; nothing is lost."""
    topic = f"oidc-refresh-{uuid.uuid4().hex[:8]}"
    oidc.token_lifetime_s = 6
    try:
        config = _config(kafka, oidc)
        # The provider the options would build, made here to read its counts.
        provider = OidcTokenProvider(OidcLogin(oidc.token_endpoint_url, client_id="kafkawire-client",
                                               client_secret="client-secret"), timeout_ms=7500)
        for option in ("sasl_oauthbearer_token_endpoint_url", "sasl_oauthbearer_client_id",
                       "sasl_oauthbearer_client_secret"):
            del config[option]
        config["sasl_oauth_token_provider"] = provider
        issued = oidc.tokens_issued
        producer = shell.Producer(linger_ms=5, max_block_ms=20000, **config)
        try:
            futures = [producer.send(topic, b"0", partition=0)]
            futures[0].result(20)
            first = {id(c): c for c in _conns(producer)}
            start = time.monotonic()
            while time.monotonic() - start < 14:
                futures.append(producer.send(topic, str(len(futures)).encode(), partition=0))
                if len(futures) % 20 == 0:
                    futures[-1].result(20)
                time.sleep(0.01)
            producer.flush(20)
            assert [f.result(0).offset for f in futures] == list(range(len(futures)))
            final = {id(c): c for c in _conns(producer)}
        finally:
            producer.close()
            provider.close()
    finally:
        oidc.token_lifetime_s = 3600.0
    brokers = [c for c in first.values() if c.node_id is not None]
    assert brokers
    for c in brokers:
        assert final.get(id(c)) is c, f"{c} was replaced: Kafka closed it when its token expired"
        assert c.setups == 1
        assert c.reauthentications >= 2, c.reauthentications
        assert c.sasl_result.session_lifetime_ms <= 6000
    # A new token for each re-login window (about every 5 s over 14 s), not one per login,
    # the later ones fetched ahead on the provider's timer thread, not inside a login.
    # (The endpoint's own count may include a token fetched ahead for an earlier test's
    # client whose last token was taken just before it closed.)
    assert 3 <= provider.fetches <= 6 and oidc.tokens_issued - issued >= provider.fetches, provider.fetches
    assert provider.background_fetches >= 2, (provider.fetches, provider.background_fetches)


def test_a_wrong_client_secret_fails_at_once_naming_the_option(kafka, oidc, shell):  # noqa: F811
    config = _config(kafka, oidc, sasl_oauthbearer_client_secret="not-the-secret")
    requests = oidc.token_requests
    start = time.monotonic()
    with pytest.raises(OAuthBearerCredentialsError) as info:
        first_call(shell.Producer, max_block_ms=20000, **config)
    assert time.monotonic() - start < 3.0
    err = info.value
    assert not err.retriable and err.status == 401 and err.error == "invalid_client"
    assert "sasl_oauthbearer_client_secret" in str(err) and "kafkawire-client" in str(err)
    assert "not-the-secret" not in str(err)
    assert oidc.token_requests - requests == 1  # not asked again


def test_an_unreachable_endpoint_is_retried_until_the_deadline(kafka, oidc, shell):  # noqa: F811
    port = free_port()  # nothing listens there
    config = _config(kafka, oidc, sasl_oauthbearer_token_endpoint_url=f"http://127.0.0.1:{port}/token",
                     socket_connection_setup_timeout_ms=2000, sasl_login_retry_backoff_ms=100,
                     sasl_login_retry_backoff_max_ms=400)
    start = time.monotonic()
    with pytest.raises(OAuthBearerEndpointTimeoutError) as info:
        first_call(shell.Producer, max_block_ms=20000, **config)
    elapsed = time.monotonic() - start
    # The fetch has 3/4 of the 2 s setup time; then it ends the setup with its own error.
    assert 1.45 <= elapsed < 4.0, elapsed
    err = info.value
    # 100, 200, then 400 ms waits: at least four attempts within 1.5 s, each kept, typed.
    assert len(err.errors) >= 4 and all(isinstance(e, OAuthBearerEndpointError) for e in err.errors)
    text = str(err)
    assert f"127.0.0.1:{port}/token" in text and "attempts" in text and "Connection refused" in text
    assert "sasl_oauthbearer_token_endpoint_url" in text


def _assertion(oidc: OidcServer, key: Any, *, issuer: str = "orders-workload", lifetime_s: int = 300) -> str:
    now = int(time.time())
    return sign_jwt({"iss": issuer, "sub": "orders-service", "aud": oidc.token_endpoint_url,
                     "iat": now, "exp": now + lifetime_s, "jti": uuid.uuid4().hex}, key)


def test_the_jwt_bearer_grant_logs_in_with_an_assertion_from_a_file(kafka, oidc, shell, tmp_path):  # noqa: F811
    """KIP-1139's grant with an assertion made elsewhere: kafkawire reads the file at each
    fetch and sends it; the provider (which checks its signature, audience and expiry)
    answers a token Kafka accepts, for the assertion's subject."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    oidc.trust_assertions("orders-workload", key.public_key())
    path = tmp_path / "assertion.jwt"
    path.write_text(_assertion(oidc, key) + "\n")
    config = {"bootstrap_servers": kafka.bootstrap_for("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "OAUTHBEARER", "sasl_oauthbearer_token_endpoint_url": oidc.token_endpoint_url,
              "sasl_oauthbearer_assertion_file": str(path)}
    topic = f"oidc-assertion-{uuid.uuid4().hex[:8]}"
    with shell.Producer(linger_ms=1, max_block_ms=20000, **config) as p:
        assert p.send(topic, b"asserted", partition=0).result(20).offset == 0
        conns = _conns(p)
    assert conns and all(c.sasl_result.mechanism == "OAUTHBEARER" for c in conns)
    # An assertion signed by a key the provider does not trust: refused at once, typed.
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_text(_assertion(oidc, other))
    with pytest.raises(OAuthBearerCredentialsError) as info:
        first_call(shell.Producer, max_block_ms=20000, **config)
    assert info.value.status == 400 and info.value.error == "invalid_grant"
    assert "sasl_oauthbearer_assertion_file" in str(info.value)
