"""A small OAuth 2 / OIDC identity provider on loopback, for OAUTHBEARER tests (KIP-768).

:class:`OidcServer` serves, from one thread on 127.0.0.1:

* ``/token``: the client_credentials grant (RFC 6749 section 4.4), the client authenticated
  by HTTP Basic or by ``client_id``/``client_secret`` form fields, answering a JWT signed
  RS256 with a key generated at start (``iss``, ``aud``, ``sub`` = the client id, ``iat``,
  ``exp``, ``scope``) and its ``expires_in``; a wrong secret gets 401 ``invalid_client``;
* the JWT bearer grant (RFC 7523, KIP-1139): an RS256 assertion signed by a key trusted
  for its ``iss`` (:meth:`OidcServer.trust_assertions`), with ``aud`` the token endpoint's
  URL and ``exp`` not passed, gets a token for its ``sub``; any other gets 400
  ``invalid_grant``;
* ``/jwks``: the key's public half as a JSON Web Key Set, for Kafka's
  ``sasl.oauthbearer.jwks.endpoint.url``.

:meth:`OidcServer.kafka_options` (:meth:`OidcServer.broker_config` and
:meth:`OidcServer.jvm_options`) gives what a :class:`~kafkawire.testing.KafkaCluster` needs to validate those tokens on its SASL
listeners.  Needs ``cryptography`` (the test extra has it).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote

from kafkawire.testing._process import Lifecycle

__all__ = ["OidcServer", "sign_jwt"]

LOOPBACK = "127.0.0.1"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _uint(n: int) -> str:
    return _b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def sign_jwt(claims: Mapping[str, Any], private_key: Any, kid: str | None = None) -> str:
    """``claims`` as a JWS compact token signed RS256 with ``private_key`` (cryptography's
    RSA key): what the provider issues, and what a test signs as a jwt-bearer assertion."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    header = {"alg": "RS256", "typ": "JWT", **({"kid": kid} if kid else {})}
    signing_input = (_b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(dict(claims)).encode())).encode()
    signature = private_key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return signing_input.decode() + "." + _b64url(signature)


def _verified_claims(token: str, public_key: Any) -> dict[str, Any] | None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    try:
        head, body, sig = token.split(".")
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
        if header.get("alg") != "RS256":
            return None
        public_key.verify(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)), f"{head}.{body}".encode(),
                          padding.PKCS1v15(), hashes.SHA256())
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, InvalidSignature):
        return None
    return claims if isinstance(claims, dict) else None


class OidcServer(Lifecycle):
    """The identity provider: ``clients`` (id: secret) may get tokens living
    ``token_lifetime_s`` (changeable at any time), issued by ``issuer`` for ``audience``.
    ``token_requests`` counts the POSTs to ``/token``, ``tokens_issued`` the tokens given."""

    def __init__(self, clients: Mapping[str, str] | None = None, *, token_lifetime_s: float = 3600.0,
                 issuer: str = "https://kafkawire-oidc.test", audience: str = "kafka"):
        self.clients = dict(clients if clients is not None else {"kafkawire-client": "client-secret"})
        self.token_lifetime_s = token_lifetime_s
        self.issuer, self.audience = issuer, audience
        self.token_requests = 0
        self.tokens_issued = 0
        self.kid = uuid.uuid4().hex[:12]
        self._key: Any = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._assertion_keys: dict[str, Any] = {}

    def trust_assertions(self, issuer: str, public_key: Any) -> None:
        """Accept jwt-bearer assertions from ``issuer`` signed by ``public_key``."""
        self._assertion_keys[issuer] = public_key

    # -- addresses -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the OidcServer first"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    @property
    def token_endpoint_url(self) -> str:
        return self.url + "/token"

    @property
    def jwks_endpoint_url(self) -> str:
        return self.url + "/jwks"

    def client_config(self, client_id: str | None = None, client_secret: str | None = None) -> dict[str, Any]:
        """kafkawire options that log in through this provider (the first client by default)."""
        cid = client_id or next(iter(self.clients))
        return {"sasl_mechanism": "OAUTHBEARER", "sasl_oauthbearer_token_endpoint_url": self.token_endpoint_url,
                "sasl_oauthbearer_client_id": cid,
                "sasl_oauthbearer_client_secret": client_secret if client_secret is not None else self.clients[cid]}

    def broker_config(self, listeners: tuple[str, ...] = ("SASL_PLAINTEXT",)) -> dict[str, str]:
        """server.properties entries making Kafka's OAUTHBEARER on ``listeners`` validate this
        provider's JWTs against its JWKS, audience and issuer (Kafka's
        OAuthBearerValidatorCallbackHandler), in place of the unsecured validator."""
        props = {
            "sasl.oauthbearer.jwks.endpoint.url": self.jwks_endpoint_url,
            "sasl.oauthbearer.expected.audience": self.audience,
            "sasl.oauthbearer.expected.issuer": self.issuer,
        }
        for listener in listeners:
            prefix = f"listener.name.{listener.lower()}.oauthbearer"
            props[f"{prefix}.sasl.server.callback.handler.class"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler")
            props[f"{prefix}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
        return props

    def jvm_options(self) -> list[str]:
        """Kafka 4 refuses to fetch a JWKS (or token) URL not allowed by this system
        property (KIP-1098's allow list; before 4.0 every URL was allowed)."""
        return [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.jwks_endpoint_url}"]

    def kafka_options(self, listeners: tuple[str, ...] = ("SASL_PLAINTEXT",)) -> dict[str, Any]:
        """``broker_config`` and ``jvm_options`` for a :class:`~kafkawire.testing.KafkaCluster`
        whose OAUTHBEARER on ``listeners`` validates this provider's tokens."""
        from kafkawire.testing.kafka import _DEFAULT_JVM_OPTIONS

        return {"broker_config": self.broker_config(listeners),
                "jvm_options": [*_DEFAULT_JVM_OPTIONS, *self.jvm_options()]}

    # -- tokens --------------------------------------------------------------------------

    def issue(self, subject: str, *, lifetime_s: float | None = None, scope: str | None = None) -> tuple[str, float]:
        """A signed JWT for ``subject`` and its lifetime in seconds."""
        lifetime = self.token_lifetime_s if lifetime_s is None else lifetime_s
        now = time.time()
        claims: dict[str, Any] = {"iss": self.issuer, "aud": self.audience, "sub": subject,
                                  "iat": int(now), "exp": int(now + lifetime), "jti": uuid.uuid4().hex}
        if scope:
            claims["scope"] = scope
        token = sign_jwt(claims, self._key, self.kid)
        with self._lock:
            self.tokens_issued += 1
        return token, lifetime

    def _assertion_subject(self, assertion: str) -> str | None:
        """The ``sub`` of a valid jwt-bearer assertion, else None."""
        unverified = assertion.split(".")
        if len(unverified) != 3:
            return None
        try:
            body = unverified[1]
            issuer = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))).get("iss")
        except (ValueError, AttributeError):
            return None
        key = self._assertion_keys.get(issuer)
        claims = _verified_claims(assertion, key) if key is not None else None
        if (claims is None or claims.get("aud") != self.token_endpoint_url
                or not isinstance(claims.get("exp"), (int, float)) or claims["exp"] <= time.time()
                or not isinstance(claims.get("sub"), str)):
            return None
        return claims["sub"]

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                          "n": _uint(numbers.n), "e": _uint(numbers.e)}]}

    # -- lifecycle -----------------------------------------------------------------------

    def _started(self) -> bool:
        return self._server is not None

    def start(self) -> OidcServer:
        from cryptography.hazmat.primitives.asymmetric import rsa

        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _answer(self, status: int, body: Mapping[str, Any], headers: Mapping[str, str] = {}) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/jwks":
                    self._answer(200, provider.jwks())
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                if self.path != "/token":
                    self._answer(404, {"error": "not_found"})
                    return
                with provider._lock:
                    provider.token_requests += 1
                size = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(size).decode()).items()}
                if form.get("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer":
                    subject = provider._assertion_subject(form.get("assertion", ""))
                    if subject is None:
                        self._answer(400, {"error": "invalid_grant", "error_description": "assertion not accepted"})
                        return
                    token, lifetime = provider.issue(subject, scope=form.get("scope"))
                    self._answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": lifetime})
                    return
                cid, secret = form.get("client_id"), form.get("client_secret")
                auth = self.headers.get("Authorization") or ""
                if auth.startswith("Basic "):
                    pair = base64.b64decode(auth[6:]).decode()
                    cid, _, secret = (unquote(x) for x in pair.partition(":"))
                if cid not in provider.clients or provider.clients[cid] != secret:
                    self._answer(401, {"error": "invalid_client", "error_description": "client authentication failed"},
                                 {"WWW-Authenticate": "Basic"})
                    return
                if form.get("grant_type") != "client_credentials":
                    self._answer(400, {"error": "unsupported_grant_type"})
                    return
                token, lifetime = provider.issue(cid, scope=form.get("scope"))
                self._answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": lifetime,
                                   **({"scope": form["scope"]} if form.get("scope") else {})})

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
