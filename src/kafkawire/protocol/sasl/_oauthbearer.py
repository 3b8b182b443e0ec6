"""OAUTHBEARER (RFC 7628 as Kafka speaks it, KIP-255, with KIP-342 extensions): the token,
what may provide one, and the mechanism."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Union

from kafkawire.protocol.sasl._errors import OAuthBearerServerError, OAuthBearerTokenError, SaslProtocolError
from kafkawire.protocol.sasl._mechanism import SaslMechanism
from kafkawire.protocol.sasl._timing import token_refresh_at_ms


class OAuthBearerToken:
    """An OAuth 2 bearer token: ``value``, and when it expires, ``expiry_ms``, in
    milliseconds since the epoch (Java's ``lifetimeMs()``).  ``start_ms`` is when it was
    issued (None: unknown; the refresh helper then counts from the time it is asked).
    ``principal`` is the name the token stands for, for messages only."""

    __slots__ = ("value", "expiry_ms", "start_ms", "principal")

    def __init__(self, value: str, expiry_ms: int, *, start_ms: int | None = None, principal: str | None = None):
        self.value = value
        self.expiry_ms = int(expiry_ms)
        self.start_ms = None if start_ms is None else int(start_ms)
        self.principal = principal

    @classmethod
    def from_lifetime(cls, value: str, lifetime_ms: int, *, now_ms: int, principal: str | None = None) -> OAuthBearerToken:
        """A token received at ``now_ms`` that is valid for ``lifetime_ms`` (an OAuth
        ``expires_in`` times 1000)."""
        return cls(value, now_ms + lifetime_ms, start_ms=now_ms, principal=principal)

    def refresh_at_ms(self, now_ms: int, jitter: float, **limits: Any) -> int:
        """When to fetch the next token: :func:`token_refresh_at_ms` for this token."""
        return token_refresh_at_ms(
            self.expiry_ms, now_ms=now_ms, start_ms=self.start_ms, jitter=jitter, **limits
        )

    def __repr__(self) -> str:  # never shows the token itself
        return f"<OAuthBearerToken principal={self.principal!r} expiry_ms={self.expiry_ms}>"


#: What a token provider may return: a token object, or ``(value, expiry_ms)``.
TokenProvider = Callable[[], Union[OAuthBearerToken, tuple[str, int]]]

# RFC 6750 section 2.1, b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_B64TOKEN_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/"
)


def _check_token(value: str) -> None:
    body = value.rstrip("=")
    if not body or not set(body) <= _B64TOKEN_CHARS:
        raise OAuthBearerTokenError(
            "the OAUTHBEARER token is not an RFC 6750 b64token (letters, digits and "
            "-._~+/ followed by optional '='); was it given with its 'Bearer ' prefix or "
            "with whitespace around it?"
        )


def _check_extension(key: str, value: str) -> None:
    # RFC 7628 section 3.1: key = 1*(ALPHA); value = *(VCHAR / SP / HTAB / CR / LF).
    if not (key.isascii() and key.isalpha()):
        raise OAuthBearerTokenError(f"OAUTHBEARER extension name {key!r} must be ASCII letters only")
    if key == "auth":
        raise OAuthBearerTokenError("'auth' is reserved for the token; it cannot be an OAUTHBEARER extension")
    if not all(0x20 <= ord(c) <= 0x7E or c in "\t\r\n" for c in value):
        raise OAuthBearerTokenError(
            f"OAUTHBEARER extension {key}'s value may hold only printable ASCII, space, tab, CR and LF"
        )


def _parse_json_challenge(challenge: bytes) -> tuple[str, dict[str, Any]]:
    text = bytes(challenge).decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    return text, data if isinstance(data, dict) else {}


class OAuthBearerMechanism(SaslMechanism):
    """OAUTHBEARER (RFC 7628 as Kafka speaks it, KIP-255).

    ``token`` is an :class:`OAuthBearerToken`, or a token provider: a callable returning
    one, or ``(value, expiry_ms)``; it is called by :meth:`initial_response`, and the token
    it gave stays in ``.token`` (for :meth:`OAuthBearerToken.refresh_at_ms`).
    ``extensions`` (KIP-342) go into the initial response as ``key=value`` pairs.

    The initial response is ``n,[a=authzid],\\x01auth=Bearer <token>[\\x01k=v...]\\x01\\x01``.
    A broker that refuses the token answers with a JSON error challenge; the client then
    sends a single ``\\x01`` (RFC 7628 section 3.2.3), the broker answers that with
    SASL_AUTHENTICATION_FAILED, and the exchange raises :class:`OAuthBearerServerError`
    with the JSON's status.
    """

    name = "OAUTHBEARER"

    def __init__(
        self,
        token: OAuthBearerToken | TokenProvider,
        *,
        extensions: Mapping[str, str] | None = None,
        authzid: str | None = None,
    ):
        super().__init__()
        self._source = token
        self.extensions = dict(extensions or {})
        for key, value in self.extensions.items():
            _check_extension(key, value)
        if authzid is not None and ("," in authzid or "=" in authzid or "\x01" in authzid):
            raise OAuthBearerTokenError("OAUTHBEARER authzid must not contain ',', '=' or \\x01")
        self.authzid = authzid
        self.token: OAuthBearerToken | None = None
        #: The broker's JSON error challenge, once one came.
        self.server_challenge: bytes | None = None

    def fresh(self) -> OAuthBearerMechanism:
        return OAuthBearerMechanism(self._source, extensions=self.extensions, authzid=self.authzid)

    def _get_token(self) -> OAuthBearerToken:
        source = self._source
        token = source if isinstance(source, OAuthBearerToken) else source()
        if isinstance(token, tuple):
            if len(token) != 2:
                raise TypeError("an OAUTHBEARER token provider's tuple must be (value, expiry_ms)")
            token = OAuthBearerToken(token[0], token[1])
        if not isinstance(token, OAuthBearerToken):
            raise TypeError(
                f"the OAUTHBEARER token provider returned {type(token).__name__}; it must "
                f"return an OAuthBearerToken or (value, expiry_ms)"
            )
        if not isinstance(token.value, str):
            raise TypeError("an OAUTHBEARER token value must be a str")
        _check_token(token.value)
        return token

    def initial_response(self) -> bytes:
        self._start()
        self.token = self._get_token()
        authzid = f"a={self.authzid}" if self.authzid else ""
        parts = [f"n,{authzid},", f"auth=Bearer {self.token.value}"]
        parts.extend(f"{k}={v}" for k, v in self.extensions.items())
        return ("\x01".join(parts) + "\x01\x01").encode("utf-8")

    def respond(self, challenge: bytes) -> bytes | None:
        self._check_started()
        if self.server_challenge is not None:
            # The broker should have failed the exchange after our %x01; it did not.
            raise self.server_error()
        if self._done:
            raise SaslProtocolError(
                f"OAUTHBEARER: the broker sent {len(challenge)} byte(s) after the exchange ended"
            )
        if not challenge:
            self._done = True
            return None
        # RFC 7628 section 3.2.3: an error challenge is answered with a lone %x01, after
        # which the server fails the exchange (Kafka: with SASL_AUTHENTICATION_FAILED).
        self.server_challenge = bytes(challenge)
        return b"\x01"

    def complete(self, server_final: bytes) -> None:
        if server_final:
            self.server_challenge = bytes(server_final)
            raise self.server_error()
        self._done = True

    def server_error(self, broker_message: str | None = None) -> OAuthBearerServerError:
        """The typed error for the broker's JSON error challenge (and its final message)."""
        text, data = _parse_json_challenge(self.server_challenge or b"")
        status = data.get("status")
        detail = f"status {status!r}" if status else f"challenge {text!r}"
        if data.get("scope"):
            detail += f", scope {data['scope']!r}"
        who = f" for {self.token.principal!r}" if self.token is not None and self.token.principal else ""
        message = f"OAUTHBEARER authentication{who} failed: the broker refused the token ({detail})"
        if broker_message:
            message += f": {broker_message}"
        return OAuthBearerServerError(
            message,
            challenge=text,
            status=status if isinstance(status, str) else None,
            scope=data.get("scope") if isinstance(data.get("scope"), str) else None,
            openid_configuration=data.get("openid-configuration")
            if isinstance(data.get("openid-configuration"), str) else None,
            error_message=broker_message,
        )
