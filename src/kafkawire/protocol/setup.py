"""A connection's setup after the transport is up, with no I/O: ApiVersions with its
retries, then the SASL exchange (and KIP-368's re-authentication later).

Both shells drive one :class:`ConnectionSetup` the same way: write what :meth:`start`
returns; feed every byte read to :meth:`receive` and write what it returns, until
``done``; ask :meth:`closed_error` what a connection the broker closed means, and
:meth:`timeout_error` what a setup that ran out of time means.  The errors raised are
the client's typed ones, with the broker named and, where there is one, the fix; so the
sync and the asyncio client fail alike on the same broker.
"""

from __future__ import annotations

from typing import Any, NoReturn
from weakref import WeakKeyDictionary

from kafkawire.errors import BrokerConnectTimeoutError, ConnectionClosedError, KafkaWireError
from kafkawire.protocol.connection import Connection, ProtocolError
from kafkawire.protocol.sasl import (
    OAuthBearerMechanism,
    RawTokenReader,
    SaslAuthenticationError,
    SaslExchange,
    SaslIllegalStateError,
    SaslMechanism,
    SaslProtocolError,
    SaslResult,
    ScramServerError,
    exchange_for,
)

__all__ = ["ConnectionSetup", "broker_name", "sasl_error", "closed_in_flight_error", "NEGOTIATING",
           "AUTHENTICATING", "DONE"]

NEGOTIATING, AUTHENTICATING, DONE = "negotiating", "authenticating", "done"


def broker_name(host: str, port: int, node_id: int | None) -> str:
    """How errors name a broker, in both shells: "broker 1 at host:port", or "broker
    host:port" before its node id is known (a bootstrap address)."""
    return f"broker {node_id} at {host}:{port}" if node_id is not None else f"broker {host}:{port}"


def sasl_error(exc: BaseException, name: str, mechanism: SaslMechanism, *, closed: bool = False,
               login_only: bool = False) -> BaseException:
    """``exc``, a failed SASL exchange with broker ``name``, with the broker named first
    and, where there is one, the fix after.  ``closed``: the broker dropped the
    connection mid-exchange; ``login_only``: the exchange was a KIP-368 re-login.  An
    exception that is not kafkawire's (a token provider's own) is returned as it is."""
    if not isinstance(exc, KafkaWireError) or not exc.args or not isinstance(exc.args[0], str):
        return exc
    message = exc.args[0]
    mech = mechanism.name
    fix = ""
    if closed and not isinstance(exc, SaslAuthenticationError):
        fix = (f"the broker dropped the connection during {mech} authentication instead of "
               f"answering: check that this listener expects SASL and enables {mech} (some "
               f"brokers close the connection on a mechanism they do not offer)")
    elif isinstance(exc, SaslIllegalStateError) and exc.request == "SaslHandshake":
        if login_only:
            fix = ("a second handshake on an authenticated connection needs KIP-368 "
                   "re-authentication support on the broker")
        else:
            # Kafka answers a SaslHandshake on a listener without SASL with this code.
            fix = (f"that is how a listener without SASL answers: if this port is a PLAINTEXT or "
                   f"SSL listener, set security_protocol='PLAINTEXT' (or 'SSL') and leave "
                   f"sasl_mechanism unset; to log in with {mech}, connect to the broker's "
                   f"SASL_PLAINTEXT or SASL_SSL listener")
    elif isinstance(exc, ScramServerError):
        user = getattr(mechanism, "username", "?")
        if exc.server_error == "unknown-user":
            fix = (f"create the {mech} credential of user {user!r} on the broker (Kafka: "
                   f"kafka-configs.sh --alter --add-config '{mech}=[password=...]' "
                   f"--entity-type users --entity-name {user}), or fix sasl_plain_username")
        elif exc.server_error == "invalid-proof":
            fix = f"fix sasl_plain_password for user {user!r}"
        else:
            fix = "check sasl_plain_username and sasl_plain_password"
    elif isinstance(exc, SaslAuthenticationError):
        if isinstance(mechanism, OAuthBearerMechanism):
            fix = ("check the token sasl_oauth_token_provider returns (expired, or not "
                   "accepted by the broker's validator)")
        else:
            fix = "check sasl_plain_username and sasl_plain_password"
    text = message if message.startswith(name) else f"{name}: {message}"
    if fix:
        text += f"; {fix}"
    exc.args = (text, *exc.args[1:])
    return exc


def _reraise(exc: BaseException, err: BaseException) -> NoReturn:
    """Raise ``err`` in place of ``exc`` without losing why ``exc`` came: the same error
    (sasl_error renames it in place) keeps its own ``__cause__`` (an OIDC endpoint's
    timeout under a login's), a new one has ``exc`` as its cause."""
    if err is exc:
        raise exc
    raise err from exc


# The correlation id of each connection's first request after its setup (None until the
# setup is done), kept beside the connection rather than in it: only the reading of a close
# below needs it.
_first_after_setup: WeakKeyDictionary[Connection, int] = WeakKeyDictionary()


def closed_in_flight_error(protocol: Connection | None, in_flight: int, *, name: str, host: str, port: int,
                           sasl: SaslMechanism | None, tls: bool) -> ConnectionClosedError:
    """The error for a set-up connection the broker closed (an orderly close) with
    ``in_flight`` requests unanswered.  When the first request after ApiVersions is among
    them and the client did not log in, the message says what that usually is: Kafka's
    SASL listeners answer ApiVersions, then drop a client that sends anything but
    SaslHandshake.  That error is not retriable: the configuration must change, and
    reconnecting meets the same answer."""
    text = f"{name} closed the connection" + (f" with {in_flight} request(s) in flight" if in_flight else "")
    first = _first_after_setup.get(protocol) if protocol is not None else None
    pending = protocol._pending if protocol is not None else ()  # noqa: SLF001 - same layer
    if sasl is None and in_flight and first is not None and pending and pending[0][0] == first:
        protocol_name = "SASL_SSL" if tls else "SASL_PLAINTEXT"
        text += (f", without answering the first request after ApiVersions: that is how a SASL "
                 f"listener drops a client that does not log in; if this port is a SASL listener, "
                 f"set security_protocol='{protocol_name}' and sasl_mechanism (with "
                 f"sasl_plain_username and sasl_plain_password, or sasl_oauth_token_provider)")
        err = ConnectionClosedError(text, host=host, port=port)
        err.retriable = False
        return err
    return ConnectionClosedError(text, host=host, port=port)


def dropped_without_login(exc: BaseException | None, protocol: Connection | None, in_flight: int, *, name: str,
                          host: str, port: int, sasl: SaslMechanism | None, tls: bool) -> ConnectionClosedError | None:
    """:func:`closed_in_flight_error`'s SASL-listener error for a connection that broke
    (``exc``: reset, or a write into the closed socket) rather than closed in order, when
    it applies, else None: a request written while the broker's close is on its way meets
    a broken pipe instead of the end of the stream, and it is the same drop."""
    if not isinstance(exc, (BrokenPipeError, ConnectionResetError)):
        return None
    err = closed_in_flight_error(protocol, in_flight, name=name, host=host, port=port, sasl=sasl, tls=tls)
    return None if err.retriable else err


def relogin_holds(running: Any, due_at: float | None, now: float) -> bool:
    """Whether a request must wait for a KIP-368 re-login before it is written: one is
    ``running``, or one is due (``due_at`` on the shell's clock) by ``now``.  Both shells
    hold their requests (or take their slow path) on this one test."""
    return running is not None or (due_at is not None and now >= due_at)


class ConnectionSetup:
    """ApiVersions, then SASL when a mechanism is given, over ``protocol``.  With
    ``login_only`` it is a KIP-368 re-authentication of a connection already set up
    (nothing else is in flight meanwhile: the shell holds new requests)."""

    def __init__(self, protocol: Connection, sasl: SaslMechanism | None, name: str, host: str, port: int,
                 *, login_only: bool = False):
        self.protocol = protocol
        self.sasl = sasl
        self.name, self.host, self.port = name, host, port
        self.phase = AUTHENTICATING if login_only else NEGOTIATING
        self.login_only = login_only
        self.api_versions_sent = 0
        # Whether the broker has sent a byte yet: a connection closed before that tells a
        # TLS/plaintext mismatch or a refused client certificate (the shell's TLS rules).
        self.received_any = False
        self.result: SaslResult | None = None
        self._exchange: SaslExchange | None = None
        self._raw: RawTokenReader | None = None  # after SaslHandshake v0: raw tokens

    @property
    def done(self) -> bool:
        return self.phase == DONE

    @property
    def reading_raw(self) -> bool:
        """True while the broker's next bytes are a raw SASL token, outside Kafka's framing."""
        return self._raw is not None

    def start(self) -> list[Any]:
        """The first bytes to write."""
        if self.phase == NEGOTIATING:
            return self._ask_versions()
        return self._start_login()

    def receive(self, data: Any) -> list[Any]:
        """Feed bytes read; returns the bytes to write next (maybe none).  Raises the
        typed error that ends the setup."""
        if data:
            self.received_any = True
        if self._raw is not None:
            return self._receive_raw(data)
        try:
            events = self.protocol.receive_data(data)
        except ProtocolError as exc:
            during = " during SASL authentication" if self.phase == AUTHENTICATING else ""
            raise self._closed_error_for(f"sent bytes kafkawire cannot follow{during}: {exc}") from None
        out: list[Any] = []
        for ev in events:
            if self.phase == NEGOTIATING:
                out += self._on_versions(ev.response)
            elif self.phase == AUTHENTICATING:
                out += self._login_step(lambda ex, ev=ev: ex.receive(ev))
            else:
                raise self._closed_error_for("answered a request that was never sent during setup")
        return out

    def closed_error(self) -> BaseException | None:
        """What the broker closing the connection now means, for the SASL exchange
        under way; None when the shell's own reading applies (see ``received_any``)."""
        if self._exchange is not None and self.sasl is not None:
            return sasl_error(self._exchange.connection_closed(), self.name, self.sasl, closed=True)
        return None

    def timeout_error(self, elapsed: float) -> KafkaWireError:
        """The error for a setup not done within ``elapsed`` seconds, named by its phase."""
        mech = self.sasl.name if self.sasl is not None else "SASL"
        if self.login_only:
            what = (f"{self.name} did not finish {mech} re-authentication (KIP-368) within "
                    f"{elapsed:.3g}s (request_timeout_ms)")
        elif self.phase == AUTHENTICATING:
            what = (f"{self.name} did not finish {mech} authentication within the setup timeout "
                    f"({elapsed:.3g}s; socket_connection_setup_timeout_ms)")
        else:
            what = f"{self.name} accepted the connection but did not answer ApiVersions in time"
        return BrokerConnectTimeoutError(what, host=self.host, port=self.port)

    def reauthenticate_at(self, now: float, jitter: float) -> float | None:
        """When (on the ``now`` clock, seconds) the broker's session needs a new login
        (KIP-368), or None; ``jitter`` in [0, 1) spreads the logins of many connections."""
        if self.result is None:
            return None
        at_ms = self.result.reauthenticate_at_ms(round(now * 1000), jitter)
        return None if at_ms is None else at_ms / 1000.0

    # -- ApiVersions --------------------------------------------------------------------

    def _ask_versions(self) -> list[Any]:
        self.api_versions_sent += 1
        return self.protocol.api_versions_request()[1]

    def _on_versions(self, resp: Any) -> list[Any]:
        proto = self.protocol
        if proto.negotiated:
            if self.sasl is None:
                self._done()
                return []
            self.phase = AUTHENTICATING
            return self._start_login()
        if not proto.retry_api_versions:
            raise self._closed_error_for(f"answered ApiVersions with error code {resp.error_code}")
        # UNSUPPORTED_VERSION (35): ask again at the version the broker named (always lower:
        # Connection gives up with ApiVersionError below v0, so this ends).
        return self._ask_versions()

    # -- SASL ---------------------------------------------------------------------------

    def _start_login(self) -> list[Any]:
        assert self.sasl is not None
        return self._login_step(lambda _ex: None, start=True)

    def _login_step(self, feed: Any, start: bool = False) -> list[Any]:
        """Give the exchange what came (``feed``), then return its next step's bytes, or
        finish the setup once it has no next step."""
        assert self.sasl is not None
        try:
            if start:
                self._exchange = exchange_for(self.sasl.fresh(), self.protocol.version_for)
            exchange = self._exchange
            assert exchange is not None
            feed(exchange)
            step = exchange.next_step()
        except Exception as exc:  # noqa: BLE001 - the typed SASL errors, or a token provider's own
            _reraise(exc, sasl_error(exc, self.name, self.sasl, login_only=self.login_only))
        if step is None:
            self._authenticated(exchange)
            return []
        if step.raw is None:
            return self.protocol.send(step.api, step.request, step.version)[1]
        # After SaslHandshake v0 the tokens go raw, size-prefixed, outside Kafka's framing
        # (KIP-43).
        self._raw = self._raw or RawTokenReader()
        return [step.raw]

    def _receive_raw(self, data: Any) -> list[Any]:
        exchange, raw = self._exchange, self._raw
        assert exchange is not None and raw is not None and self.sasl is not None
        try:
            tokens = raw.feed(data)
            if len(tokens) > 1:
                raise SaslProtocolError(f"{exchange.mechanism.name}: the broker sent {len(tokens)} raw "
                                        f"SASL tokens in answer to one")
        except Exception as exc:  # noqa: BLE001 - the typed SASL errors
            _reraise(exc, sasl_error(exc, self.name, self.sasl))
        if not tokens:
            return []
        return self._login_step(lambda ex: ex.receive_raw(tokens[0]))

    def _authenticated(self, exchange: SaslExchange) -> None:
        if self._raw is not None:
            leftover = self._raw.leftover()
            self._raw = None
            if leftover:
                assert self.sasl is not None
                raise sasl_error(SaslProtocolError(
                    f"{exchange.mechanism.name}: the broker sent {len(leftover)} byte(s) after the "
                    f"last raw SASL token"), self.name, self.sasl)
        self._exchange = None
        self.result = exchange.result
        self._done()

    def _done(self) -> None:
        self.phase = DONE
        if not self.login_only:
            _first_after_setup[self.protocol] = self.protocol._next_id  # noqa: SLF001 - same layer

    def _closed_error_for(self, what: str) -> KafkaWireError:
        return ConnectionClosedError(f"{self.name} {what}", host=self.host, port=self.port)
