"""OAUTHBEARER tokens from an OAuth 2 / OIDC token endpoint (KIP-768), as decisions with no
I/O: what to send (:meth:`OidcLogin.request`), what an answer means
(:meth:`OidcLogin.accept`: a token, or a typed error), when to fetch the next token and
how long to wait between failed attempts.  A transport (``kafkawire.core.oidc``) sends
the request, reads the clock and sleeps.

Grants: ``client_credentials`` (RFC 6749 section 4.4), with the client authenticated by
HTTP Basic (section 2.3.1, as Kafka's own client does); and the JWT bearer assertion grant
(RFC 7523 section 2.1, KIP-1139) with an assertion made elsewhere.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from kafkawire.protocol.sasl._errors import SaslError
from kafkawire.protocol.sasl._oauthbearer import OAuthBearerToken, _check_token

__all__ = [
    "OidcLogin",
    "TokenRequest",
    "jwt_claims",
    "OAuthBearerLoginError",
    "OAuthBearerCredentialsError",
    "OAuthBearerTokenResponseError",
    "OAuthBearerEndpointError",
    "OAuthBearerEndpointTimeoutError",
]

CLIENT_CREDENTIALS = "client_credentials"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"

# RFC 6749 section 5.2 error codes that say the client's own settings are wrong: asking
# again with the same settings meets the same answer.
_PERMANENT_OAUTH_ERRORS = {
    "invalid_client": "sasl_oauthbearer_client_id / sasl_oauthbearer_client_secret",
    "unauthorized_client": "sasl_oauthbearer_client_id (the client may not use this grant)",
    "invalid_grant": "the assertion (sasl_oauthbearer_assertion_file)",
    "invalid_scope": "sasl_oauthbearer_scope",
    "unsupported_grant_type": "sasl_oauthbearer_token_endpoint_url (the endpoint does not offer this grant)",
    "invalid_request": "sasl_oauthbearer_token_endpoint_url and the sasl_oauthbearer_* options",
}


class OAuthBearerLoginError(SaslError):
    """Fetching an OAUTHBEARER token from the token endpoint failed."""

    retriable = False


class OAuthBearerCredentialsError(OAuthBearerLoginError):
    """The token endpoint refused the client (HTTP 400/401/403, an RFC 6749 ``error``
    such as ``invalid_client``): permanent; the message names the option to check.
    ``status`` is the HTTP status, ``error`` and ``error_description`` the endpoint's."""

    def __init__(self, message: str, *, status: int, error: str | None = None,
                 error_description: str | None = None):
        super().__init__(message)
        self.status = status
        self.error = error
        self.error_description = error_description


class OAuthBearerTokenResponseError(OAuthBearerLoginError):
    """The token endpoint answered 200 with something that is not a usable token answer
    (not JSON, no ``access_token``, a token type other than Bearer, no expiry)."""


class OAuthBearerEndpointError(OAuthBearerLoginError):
    """One attempt to reach the token endpoint failed in a way that may pass: it could not
    be reached, timed out, or answered 429 or 5xx.  Retried until the login's deadline."""

    retriable = True


class OAuthBearerEndpointTimeoutError(OAuthBearerLoginError):
    """No token within the deadline: every attempt failed retriably.  ``errors`` holds each
    attempt's :class:`OAuthBearerEndpointError`.  Deliberately not a ``TimeoutError``: the
    asyncio shell reads a ``TimeoutError`` out of an awaited answer as its own wait having
    run out, which would hide this one behind "no answer in time"."""

    retriable = True

    def __init__(self, message: str, errors: list[OAuthBearerEndpointError]):
        super().__init__(message)
        self.errors = list(errors)


class TokenRequest:
    """An HTTP POST to make: ``url``, ``headers`` and the form-encoded ``body``."""

    __slots__ = ("url", "headers", "body")

    def __init__(self, url: str, headers: dict[str, str], body: bytes):
        self.url, self.headers, self.body = url, headers, body

    def __repr__(self) -> str:  # never shows the secret
        return f"TokenRequest(POST {self.url}, {len(self.body)} bytes)"


def _b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def jwt_claims(token: str) -> dict[str, Any] | None:
    """The claims of a JWS compact token (not verified: the broker verifies), or None when
    ``token`` is not one (an opaque token)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(_b64url_decode(parts[1]))
    except (ValueError, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


class OidcLogin:
    """The OAUTHBEARER login of one client against one token endpoint.

    ``token_endpoint_url`` (http or https), ``client_id`` and ``client_secret`` for the
    client credentials grant, or ``assertion`` for the JWT bearer grant (then ``client_id``
    and ``client_secret`` are optional: sent when given); ``scope``; ``extra_params`` more
    form fields.  ``retry_backoff_ms`` doubles per failed attempt up to
    ``retry_backoff_max_ms`` (Java's ``sasl.login.retry.backoff[.max].ms``), each wait
    scaled by up to +-20% jitter.
    """

    def __init__(self, token_endpoint_url: str, *, client_id: str | None = None, client_secret: str | None = None,
                 scope: str | None = None, assertion: bool = False,
                 extra_params: Mapping[str, str] | None = None,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 10_000):
        parts = urlsplit(token_endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"sasl_oauthbearer_token_endpoint_url must be an http(s) URL, got {token_endpoint_url!r}")
        if not assertion and (not client_id or not client_secret):
            raise ValueError("the client credentials grant needs sasl_oauthbearer_client_id and "
                             "sasl_oauthbearer_client_secret")
        self.url = token_endpoint_url
        self.client_id, self._client_secret = client_id, client_secret
        self.scope = scope
        self.grant = JWT_BEARER if assertion else CLIENT_CREDENTIALS
        self.extra_params = dict(extra_params or {})
        self.retry_backoff_ms, self.retry_backoff_max_ms = retry_backoff_ms, max(retry_backoff_ms, retry_backoff_max_ms)
        #: The last token accepted, and when to fetch the next one (ms since the epoch).
        self.token: OAuthBearerToken | None = None
        self.refresh_at_ms: int | None = None

    # -- what to send --------------------------------------------------------------------

    def request(self, assertion: str | None = None) -> TokenRequest:
        """The POST that asks for a token (``assertion``: the JWT for the bearer grant)."""
        form: dict[str, str] = {"grant_type": self.grant}
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if self.grant == JWT_BEARER:
            if not assertion:
                raise OAuthBearerLoginError("the JWT bearer grant needs an assertion "
                                            "(sasl_oauthbearer_assertion_file is empty)")
            form["assertion"] = assertion.strip()
        if self.scope:
            form["scope"] = self.scope
        form.update(self.extra_params)
        if self.client_id and self._client_secret:
            # RFC 6749 section 2.3.1: each part form-urlencoded before the Basic encoding.
            pair = f"{quote(self.client_id, safe='')}:{quote(self._client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        elif self.client_id:
            form["client_id"] = self.client_id
        return TokenRequest(self.url, headers, urlencode(form).encode("ascii"))

    # -- when ----------------------------------------------------------------------------

    def needs_token(self, now_ms: int) -> bool:
        """Whether the next login should fetch a new token first."""
        return self.token is None or self.refresh_at_ms is None or now_ms >= self.refresh_at_ms

    def backoff_ms(self, failed_attempts: int, jitter: float) -> int:
        """How long to wait after the ``failed_attempts``-th failure (``jitter`` in [0, 1])."""
        base = min(self.retry_backoff_max_ms, self.retry_backoff_ms * 2 ** max(0, failed_attempts - 1))
        return max(1, round(base * (0.8 + 0.4 * jitter)))

    # -- what came back ------------------------------------------------------------------

    def accept(self, status: int, body: bytes, *, now_ms: int, jitter: float) -> OAuthBearerToken:
        """The token in an answer with HTTP ``status`` and ``body``, kept as ``token`` with
        its refresh time (80-85% of its life, :func:`token_refresh_at_ms`); or the typed
        error: :class:`OAuthBearerEndpointError` (429, 5xx: retry),
        :class:`OAuthBearerCredentialsError` (the client refused: permanent),
        :class:`OAuthBearerTokenResponseError` (an answer that is no token)."""
        where = f"the token endpoint {self.url}"
        data: Any = None
        try:
            data = json.loads(bytes(body).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            pass
        if status == 429 or 500 <= status < 600:
            raise OAuthBearerEndpointError(f"{where} answered HTTP {status}{_said(data, body)}")
        if status != 200:
            error = data.get("error") if isinstance(data, dict) and isinstance(data.get("error"), str) else None
            description = data.get("error_description") if isinstance(data, dict) else None
            option = _PERMANENT_OAUTH_ERRORS.get(error or "")
            if option is None:
                option = ("sasl_oauthbearer_client_id / sasl_oauthbearer_client_secret" if status in (401, 403)
                          else "sasl_oauthbearer_token_endpoint_url")
            raise OAuthBearerCredentialsError(
                f"{where} refused the {self._grant_name()} request{self._for_client()} with "
                f"HTTP {status}{_said(data, body)}: check {option}",
                status=status, error=error, error_description=description if isinstance(description, str) else None)
        if not isinstance(data, dict):
            raise OAuthBearerTokenResponseError(f"{where} answered 200 but not with a JSON object{_said(None, body)}")
        value = data.get("access_token")
        if not isinstance(value, str) or not value:
            raise OAuthBearerTokenResponseError(f"{where} answered without an access_token (fields: {sorted(data)})")
        token_type = data.get("token_type")
        if token_type is not None and (not isinstance(token_type, str) or token_type.lower() != "bearer"):
            raise OAuthBearerTokenResponseError(
                f"{where} gave a token of type {token_type!r}; OAUTHBEARER needs a Bearer token")
        try:
            _check_token(value)
        except SaslError as exc:
            raise OAuthBearerTokenResponseError(f"{where} gave an access_token that is not a bearer token: {exc}") from None
        claims = jwt_claims(value) or {}
        expiries = []
        expires_in = data.get("expires_in")
        if expires_in is not None:
            try:
                expiries.append(now_ms + round(float(expires_in) * 1000))
            except (TypeError, ValueError):
                raise OAuthBearerTokenResponseError(f"{where} gave expires_in {expires_in!r}, not a number") from None
        if isinstance(claims.get("exp"), (int, float)) and not isinstance(claims.get("exp"), bool):
            expiries.append(round(claims["exp"] * 1000))
        if not expiries:
            raise OAuthBearerTokenResponseError(
                f"{where} gave a token with no expiry: neither expires_in nor a JWT exp claim")
        # The earlier of the two: the broker rejects the JWT at its exp whatever expires_in said.
        expiry_ms = min(expiries)
        if expiry_ms <= now_ms:
            raise OAuthBearerTokenResponseError(f"{where} gave a token that had already expired")
        start_ms = now_ms
        if isinstance(claims.get("iat"), (int, float)) and claims["iat"] * 1000 <= now_ms:
            start_ms = round(claims["iat"] * 1000)
        sub = claims.get("sub")
        token = OAuthBearerToken(value, expiry_ms, start_ms=start_ms,
                                 principal=sub if isinstance(sub, str) else self.client_id)
        self.token = token
        self.refresh_at_ms = token.refresh_at_ms(now_ms, jitter)
        return token

    def unreachable(self, reason: str) -> OAuthBearerEndpointError:
        """The error for one attempt that did not get an answer (``reason``: what the
        transport saw)."""
        return OAuthBearerEndpointError(f"the token endpoint {self.url} could not be reached: {reason}")

    def timed_out(self, errors: list[OAuthBearerEndpointError], elapsed_ms: int) -> OAuthBearerEndpointTimeoutError:
        """The error once the deadline passed with only retriable failures."""
        last = errors[-1] if errors else None
        return OAuthBearerEndpointTimeoutError(
            f"no OAUTHBEARER token from {self.url} within {elapsed_ms} ms: {len(errors)} "
            f"attempt{'s' if len(errors) != 1 else ''} with the {self._grant_name()} grant"
            f"{self._for_client()}, the last: {last}; check that sasl_oauthbearer_token_endpoint_url "
            f"is reachable from here (the wait is 3/4 of socket_connection_setup_timeout_ms)", errors)

    def _for_client(self) -> str:
        return f" for client {self.client_id!r}" if self.client_id else ""

    def _grant_name(self) -> str:
        return "client_credentials" if self.grant == CLIENT_CREDENTIALS else "jwt-bearer"


def _said(data: Any, body: bytes) -> str:
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        description = data.get("error_description")
        return f" ({data['error']}{': ' + description if isinstance(description, str) else ''})"
    text = bytes(body[:200]).decode("utf-8", "replace").strip()
    return f" ({text!r})" if text else ""
