"""The conversation with the broker as data (:class:`SaslExchange`): SaslHandshake, then
SaslAuthenticate requests (KIP-152) or, after SaslHandshake v0, raw size-prefixed
tokens (KIP-43); each answer becomes the next step or a typed error."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kafkawire import errors
from kafkawire.protocol.api import Api, ApiVersionError
from kafkawire.protocol.apis.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kafkawire.protocol.sasl._errors import (
    SaslAuthenticationError,
    SaslIllegalStateError,
    SaslProtocolError,
    SaslUnsupportedMechanismError,
)
from kafkawire.protocol.sasl._mechanism import SaslMechanism
from kafkawire.protocol.sasl._oauthbearer import OAuthBearerMechanism
from kafkawire.protocol.sasl._timing import reauthentication_at_ms
from kafkawire.protocol.schema import Struct


_I32 = struct.Struct(">i")


def frame_raw_token(token: bytes) -> bytes:
    """A SASL token as sent after SaslHandshake v0: a 4-byte big-endian size, then the
    token, with no Kafka request header (KIP-43)."""
    return _I32.pack(len(token)) + bytes(token)


class RawTokenReader:
    """Splits the bytes read after SaslHandshake v0 into the broker's raw SASL tokens.

    ``feed(data)`` returns the tokens completed; bytes past the last complete token stay
    buffered.  The broker sends a token only in answer to one, so after the last one no
    Kafka response can be mixed in; ``leftover()`` returns whatever is buffered anyway.
    """

    def __init__(self, max_token_size: int = 1 << 20):
        self._buf = bytearray()
        self.max_token_size = max_token_size

    def feed(self, data: Any) -> list[bytes]:
        self._buf += data
        tokens = []
        while len(self._buf) >= 4:
            size = _I32.unpack_from(self._buf, 0)[0]
            if size < 0 or size > self.max_token_size:
                raise SaslProtocolError(
                    f"the broker sent a raw SASL token of {size} bytes (limit "
                    f"{self.max_token_size}); the stream is not a SASL exchange"
                )
            if len(self._buf) < 4 + size:
                break
            tokens.append(bytes(self._buf[4 : 4 + size]))
            del self._buf[: 4 + size]
        return tokens

    def leftover(self) -> bytes:
        out = bytes(self._buf)
        self._buf.clear()
        return out


class SaslStep:
    """One thing to send.  Either a Kafka request (``api``, ``version``, ``request``: frame
    it with :meth:`Connection.send`), or, after SaslHandshake v0, ``raw``: bytes to write
    to the socket as they are (size prefix included), bypassing the connection's framing,
    whose answer is one raw token (read it with :class:`RawTokenReader`)."""

    __slots__ = ("api", "version", "request", "raw")

    def __init__(self, api: Api | None, version: int | None, request: Struct | None, raw: bytes | None):
        self.api = api
        self.version = version
        self.request = request
        self.raw = raw

    def __repr__(self) -> str:
        if self.raw is not None:
            return f"SaslStep(raw={len(self.raw) - 4} bytes)"
        assert self.api is not None
        return f"SaslStep({self.api.name} v{self.version})"


class SaslResult:
    """An authentication that succeeded: ``mechanism`` (its name), ``session_lifetime_ms``
    (KIP-368; 0: the broker set none, or SaslAuthenticate v0)."""

    __slots__ = ("mechanism", "session_lifetime_ms")

    def __init__(self, mechanism: str, session_lifetime_ms: int):
        self.mechanism = mechanism
        self.session_lifetime_ms = session_lifetime_ms

    def reauthenticate_at_ms(self, authenticated_at_ms: int, jitter: float, **bounds: float) -> int | None:
        """:func:`reauthentication_at_ms` for this session (None: never needed)."""
        return reauthentication_at_ms(
            self.session_lifetime_ms, authenticated_at_ms=authenticated_at_ms, jitter=jitter, **bounds
        )

    def __repr__(self) -> str:
        return f"SaslResult(mechanism={self.mechanism!r}, session_lifetime_ms={self.session_lifetime_ms})"


_HANDSHAKE, _AUTH, _RAW, _DONE, _FAILED = "handshake", "authenticate", "raw", "done", "failed"


class SaslExchange:
    """The SASL conversation for one connection, as data.  See the module docstring.

    ``handshake_version`` is the negotiated SaslHandshake version: 1 carries the tokens in
    SaslAuthenticate requests (KIP-152) at ``authenticate_version``; 0 sends them raw.
    Call :meth:`next_step`, send it, and feed the answer to :meth:`receive` (a decoded
    response) or :meth:`receive_raw` (a raw token); repeat until ``next_step`` returns
    None.  ``result`` then holds the :class:`SaslResult`.  Failures raise typed errors;
    after one the exchange is over and the connection must be closed.
    """

    def __init__(self, mechanism: SaslMechanism, handshake_version: int, *, authenticate_version: int | None = None):
        SASL_HANDSHAKE.check_version(handshake_version)
        if handshake_version >= 1:
            if authenticate_version is None:
                raise ValueError(
                    "SaslHandshake v1 carries the tokens in SaslAuthenticate: pass the "
                    "negotiated authenticate_version"
                )
            SASL_AUTHENTICATE.check_version(authenticate_version)
        self.mechanism = mechanism
        self.handshake_version = handshake_version
        self.authenticate_version = authenticate_version
        self.result: SaslResult | None = None
        self._state = _HANDSHAKE
        self._handshake_sent = False
        self._pending: bytes | None = None  # the next token to send
        self._awaiting = False

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def raw_tokens(self) -> bool:
        """True when tokens go raw (SaslHandshake v0): the shell must then not feed the
        socket's bytes to the Connection until the exchange is done."""
        return self.handshake_version == 0

    def _fail(self, exc: BaseException) -> BaseException:
        self._state = _FAILED
        self._awaiting = False
        return exc

    def _check_not_awaiting(self) -> None:
        if self._state == _FAILED:
            raise SaslIllegalStateError("the SASL exchange already failed; close the connection")
        if self._awaiting:
            raise SaslIllegalStateError(
                "next_step() called while the answer to the previous step is still due"
            )

    def next_step(self) -> SaslStep | None:
        """The next thing to send, or None when the exchange is complete."""
        self._check_not_awaiting()
        if self._state == _DONE:
            return None
        if self._state == _HANDSHAKE:
            self._awaiting = True
            request = SASL_HANDSHAKE.Request(mechanism=self.mechanism.name)
            return SaslStep(SASL_HANDSHAKE, self.handshake_version, request, None)
        assert self._pending is not None
        token, self._pending = self._pending, None
        self._awaiting = True
        if self._state == _RAW:
            return SaslStep(None, None, None, frame_raw_token(token))
        request = SASL_AUTHENTICATE.Request(auth_bytes=token)
        return SaslStep(SASL_AUTHENTICATE, self.authenticate_version, request, None)

    def receive(self, response: Any) -> None:
        """Feed the decoded SaslHandshake or SaslAuthenticate response (a response struct,
        or the :class:`~kafkawire.protocol.connection.Response` event holding it)."""
        if self._state == _FAILED:
            raise SaslIllegalStateError("the SASL exchange already failed; close the connection")
        if not self._awaiting or self._state in (_RAW, _DONE):
            raise SaslIllegalStateError(
                "receive() with no SaslHandshake/SaslAuthenticate request awaiting an answer"
            )
        body = getattr(response, "response", response)
        self._awaiting = False
        if self._state == _HANDSHAKE:
            self._on_handshake(body)
        else:
            self._on_authenticate(body)

    def receive_raw(self, token: bytes) -> None:
        """Feed one raw token the broker sent (after SaslHandshake v0), without its size."""
        if self._state != _RAW or not self._awaiting:
            raise SaslIllegalStateError("receive_raw() with no raw SASL token awaiting an answer")
        self._awaiting = False
        self._advance(bytes(token), 0)

    def connection_closed(self) -> BaseException:
        """The error for a broker that closed the connection during the exchange (raise
        it).  After SaslHandshake v0 that is how a broker says authentication failed."""
        if self._state == _RAW:
            exc: BaseException = SaslAuthenticationError(
                f"{self.mechanism.name}: the broker closed the connection during raw SASL "
                f"authentication (SaslHandshake v0 gives no reason): most likely a wrong "
                f"user name or password",
                mechanism=self.mechanism.name,
            )
        else:
            exc = errors.KafkaWireError(
                f"the broker closed the connection during the SASL {self._state} step of "
                f"{self.mechanism.name}"
            )
        return self._fail(exc)

    # -- answers ----------------------------------------------------------------------------

    def _on_handshake(self, body: Any) -> None:
        code = body.error_code
        name = self.mechanism.name
        enabled = list(body.mechanisms or [])
        if code == errors.UnsupportedSaslMechanismError.code:
            if enabled == [name]:
                # Tansu echoes the requested name instead of listing what it offers (and
                # answers 33 to every mechanism when started without --authentication).
                offered = f"it named only {name} itself, so SASL may be switched off on it"
            else:
                offered = f"it offers {', '.join(enabled) if enabled else 'none it would name'}"
            raise self._fail(SaslUnsupportedMechanismError(
                f"the broker does not offer SASL mechanism {name}; {offered}: configure a "
                f"mechanism the broker enables (UNSUPPORTED_SASL_MECHANISM, 33)",
                mechanism=name,
                enabled_mechanisms=enabled,
            ))
        if code == errors.IllegalSaslStateError.code:
            raise self._fail(SaslIllegalStateError(
                "the broker refused SaslHandshake in the connection's current state "
                "(ILLEGAL_SASL_STATE, 34)", request="SaslHandshake"
            ))
        if code:
            raise self._fail(errors.broker_error(code, f"SaslHandshake for {name}"))
        try:
            first = self.mechanism.initial_response()
        except BaseException as exc:
            self._fail(exc)
            raise  # as it came: a token provider's error keeps its own cause
        self._pending = first
        self._state = _RAW if self.handshake_version == 0 else _AUTH

    def _on_authenticate(self, body: Any) -> None:
        code = body.error_code
        name = self.mechanism.name
        message = body.error_message
        if code == errors.SaslAuthenticationFailedError.code:
            mech = self.mechanism
            if isinstance(mech, OAuthBearerMechanism) and mech.server_challenge is not None:
                raise self._fail(mech.server_error(message))
            raise self._fail(SaslAuthenticationError(
                f"{name} authentication failed: {message or 'the broker gave no reason'} "
                f"(SASL_AUTHENTICATION_FAILED, 58)",
                mechanism=name,
                error_message=message,
            ))
        if code == errors.IllegalSaslStateError.code:
            raise self._fail(SaslIllegalStateError(
                f"the broker refused SaslAuthenticate for {name}: "
                f"{message or 'not allowed in the current SASL state'} (ILLEGAL_SASL_STATE, 34)",
                error_message=message, request="SaslAuthenticate",
            ))
        if code:
            raise self._fail(errors.broker_error(code, f"SaslAuthenticate for {name}", message))
        self._advance(bytes(body.auth_bytes or b""), getattr(body, "session_lifetime_ms", 0) or 0)

    def _advance(self, challenge: bytes, session_lifetime_ms: int) -> None:
        try:
            reply = self.mechanism.respond(challenge)
        except BaseException as exc:
            self._fail(exc)
            raise  # as it came: a token provider's error keeps its own cause
        if reply is not None:
            self._pending = reply
            return
        if not self.mechanism.done:  # pragma: no cover - every mechanism here is done when it stops
            raise self._fail(SaslProtocolError(f"{self.mechanism.name} stopped before it was done"))
        self._state = _DONE
        self.result = SaslResult(self.mechanism.name, session_lifetime_ms)


def exchange_for(mechanism: SaslMechanism, version_for: Callable[[Api], int]) -> SaslExchange:
    """A :class:`SaslExchange` for ``mechanism`` at the versions negotiated with the broker.

    ``version_for`` is the connection's
    :meth:`~kafkawire.protocol.connection.Connection.version_for`.  Both shells start
    their exchange here, so they pick the same versions.  A broker whose ApiVersions
    answer lists no SaslHandshake has no SASL on this listener: that raises
    :class:`SaslUnsupportedMechanismError` with no enabled mechanisms.
    """
    try:
        handshake_version = version_for(SASL_HANDSHAKE)
    except ApiVersionError as exc:
        raise SaslUnsupportedMechanismError(
            f"no SASL authentication ({mechanism.name} or any other) on this listener: {exc}; "
            f"connect to a listener with SASL enabled, or without SASL",
            mechanism=mechanism.name,
            enabled_mechanisms=[],
        ) from None
    authenticate_version = None
    if handshake_version >= 1:
        try:
            authenticate_version = version_for(SASL_AUTHENTICATE)
        except ApiVersionError:
            # KIP-152: without SaslAuthenticate the tokens can only go raw, after v0.
            handshake_version = 0
    return SaslExchange(mechanism, handshake_version, authenticate_version=authenticate_version)
