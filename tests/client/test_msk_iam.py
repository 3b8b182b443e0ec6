"""AWS MSK IAM logins (kafkawire.oauth.MskIamTokenProvider over AWS's
aws-msk-iam-sasl-signer-python), as far as a machine without AWS allows: fake static
credentials in the environment, the token's shape checked against SigV4 recomputed here,
its expiry, the refresh, and the OAUTHBEARER message a client sends with it.  No MSK
cluster is reachable from here, so no broker ever checks these tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime, timezone
from urllib.parse import parse_qsl, quote, urlsplit

import pytest

# The test extra installs AWS's signer: a missing one fails here rather than skipping.
import aws_msk_iam_sasl_signer  # noqa: E402,F401
from kafkawire.core import oidc as _oidc  # noqa: E402
from kafkawire.client.config import Config  # noqa: E402
from kafkawire.oauth import MskIamTokenProvider  # noqa: E402
from kafkawire.protocol.sasl import OAuthBearerToken  # noqa: E402

KEY_ID, SECRET, SESSION = "AKIAKAFKAWIRETEST01", "kafkawire/fake/secret/key+0123456789abcdef", "fake-session-token"
REGION = "eu-west-3"


@pytest.fixture
def aws_env(monkeypatch):
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION)
    # No instance metadata lookups (the credentials above come first anyway).
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")


def _decode(token: str) -> str:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()


def _sigv4(url: str) -> str:
    """The SigV4 query signature of the presigned URL, computed from its parts (AWS's
    documented algorithm: canonical request, string to sign, derived key)."""
    parts = urlsplit(url)
    params = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
              if k not in ("X-Amz-Signature", "User-Agent")]
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params))
    q = dict(params)
    canonical = "\n".join(["GET", "/", canonical_query, f"host:{parts.netloc}", "", q["X-Amz-SignedHeaders"],
                           hashlib.sha256(b"").hexdigest()])
    scope = q["X-Amz-Credential"].split("/", 1)[1]
    to_sign = "\n".join(["AWS4-HMAC-SHA256", q["X-Amz-Date"], scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + SECRET).encode()
    for piece in scope.split("/"):
        key = hmac.new(key, piece.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_the_token_is_a_presigned_kafka_cluster_connect_url(aws_env):
    before = datetime.now(timezone.utc).replace(microsecond=0)
    token = MskIamTokenProvider(REGION)()
    assert isinstance(token, OAuthBearerToken)
    assert "=" not in token.value  # base64url without padding: an RFC 6750 b64token
    url = _decode(token.value)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", f"kafka.{REGION}.amazonaws.com", "/")
    q = dict(parse_qsl(parts.query))
    assert q["Action"] == "kafka-cluster:Connect"
    assert q["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    signed_at = datetime.strptime(q["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    assert q["X-Amz-Credential"] == f"{KEY_ID}/{signed_at:%Y%m%d}/{REGION}/kafka-cluster/aws4_request"
    assert q["X-Amz-Security-Token"] == SESSION
    assert q["X-Amz-Expires"] == "900" and q["X-Amz-SignedHeaders"] == "host"
    assert q["User-Agent"].startswith("aws-msk-iam-sasl-signer-python")
    assert q["X-Amz-Signature"] == _sigv4(url)
    # The token's expiry is the URL's: signed time + 15 minutes.
    assert token.expiry_ms == round(signed_at.timestamp() * 1000) + 900_000
    assert signed_at >= before


def test_the_token_is_held_until_its_refresh_point_then_signed_again(aws_env, monkeypatch):
    provider = MskIamTokenProvider(REGION)
    first = provider()
    now = first.start_ms
    # A 15-minute token: refreshed at 80-85% of its life, but at least 5 minutes before its
    # end (Java's login-refresh rules, kafkawire.protocol.sasl.token_refresh_at_ms): 10 minutes.
    assert provider.refresh_at_ms == first.expiry_ms - 300_000
    monkeypatch.setattr(_oidc, "_now_ms", lambda: now + 599_000)
    assert provider() is first and provider.fetches == 1
    monkeypatch.setattr(_oidc, "_now_ms", lambda: now + 600_000)
    second = provider()
    assert second is not first and provider.fetches == 2
    assert second.start_ms == now + 600_000 and second.expiry_ms >= first.expiry_ms  # signed again


def test_a_client_sends_the_token_in_its_oauthbearer_login(aws_env):
    provider = MskIamTokenProvider(REGION)
    config = Config.producer(bootstrap_servers="b-1.example.kafka.eu-west-3.amazonaws.com:9098",
                             security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_provider=provider)
    first = config.sasl.fresh().initial_response()
    assert first.startswith(b"n,,\x01auth=Bearer ") and first.endswith(b"\x01\x01")
    value = first[len(b"n,,\x01auth=Bearer "):-2].decode()
    assert value == provider.token.value
    assert "kafka-cluster%3AConnect" in _decode(value) or "kafka-cluster:Connect" in _decode(value)


def test_no_region_is_refused():
    with pytest.raises(ValueError, match="region"):
        MskIamTokenProvider("")
