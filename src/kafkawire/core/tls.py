"""TLS for broker connections: the one place where kafkawire builds its ``ssl.SSLContext``
from the ``ssl_*`` options, and where a failed handshake is given a name.

* :func:`build_ssl_context` turns the Java client's options (``ssl_cafile``,
  ``ssl_certfile``, ``ssl_check_hostname``, ...) into a client context: certificate and
  host name verification on, TLS 1.2 or newer, a client certificate for mutual TLS.
* :func:`handshake_error` and the other ``*_error`` helpers turn what ``ssl`` raises into
  a :class:`~kafkawire.errors.BrokerTLSError` whose message says what was wrong with
  which broker, and what to do about it.  Both I/O shells call them at the same points of a
  connection's setup, so a failure raises the same typed error with the same message in
  the sync and the asyncio client:

  =====================================================  ==================================
  what happened                                          helper
  =====================================================  ==================================
  the context refused to wrap the socket                 :func:`wrap_error`
  the handshake failed                                   :func:`handshake_error`
  the handshake did not finish by the setup deadline     :func:`handshake_timeout_error`
  the connection ended before a byte of the first        :func:`closed_before_answer_error`
  answer (a rejected client certificate after TLS 1.3's
  handshake; a TLS listener dropping a plaintext client)
  a plaintext connection's first bytes are TLS           :func:`plaintext_answer_error`
  =====================================================  ==================================
"""

from __future__ import annotations

import os
import ssl
import weakref
from dataclasses import dataclass
from typing import Any

from kafkawire.errors import BrokerTLSError, BrokerTLSHandshakeTimeoutError, ConfigError

__all__ = [
    "build_ssl_context",
    "wrap_error",
    "handshake_error",
    "closed_before_answer_error",
    "plaintext_answer_error",
    "handshake_timeout_error",
    "after_handshake_error",
    "plaintext_dropped_error",
    "looks_like_tls",
]


@dataclass(frozen=True)
class _Origin:
    """Where a context's trust and identity came from, for error messages."""

    cafile: str | None = None
    capath: str | None = None
    certfile: str | None = None
    crlfile: str | None = None


# Contexts that build_ssl_context made; any other context is the user's own ssl_context.
_ORIGINS: weakref.WeakKeyDictionary[ssl.SSLContext, _Origin] = weakref.WeakKeyDictionary()


def _fspath(name: str, value: Any) -> str | None:
    if value is None:
        return None
    try:
        path = os.fspath(value)
    except TypeError:
        raise ConfigError(f"{name} must be a file path (str or os.PathLike), got {value!r}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path


def build_ssl_context(
    *,
    cafile: Any = None,
    capath: Any = None,
    certfile: Any = None,
    keyfile: Any = None,
    password: str | bytes | None = None,
    check_hostname: bool = True,
    crlfile: Any = None,
    ciphers: str | None = None,
) -> ssl.SSLContext:
    """A client ``SSLContext`` for brokers, from the ``ssl_*`` options.

    The broker's certificate must chain to a CA in ``cafile``/``capath`` (the system's
    trust store when neither is given) and, with ``check_hostname``, name the host the
    client connects to.  ``certfile`` (and ``keyfile``, when the key is not in the
    certificate file; ``password`` when it is encrypted) is the client's certificate
    for mutual TLS.  ``crlfile`` adds a certificate revocation list checked against the
    broker's certificate; ``ciphers`` is an OpenSSL cipher list (TLS 1.2; TLS 1.3's
    suites are not configurable here).  Raises :class:`ConfigError` naming the option
    at fault."""
    cafile = _fspath("ssl_cafile", cafile)
    capath = _fspath("ssl_capath", capath)
    certfile = _fspath("ssl_certfile", certfile)
    keyfile = _fspath("ssl_keyfile", keyfile)
    crlfile = _fspath("ssl_crlfile", crlfile)
    for name, path, isdir in (("ssl_cafile", cafile, False), ("ssl_capath", capath, True),
                              ("ssl_certfile", certfile, False), ("ssl_keyfile", keyfile, False),
                              ("ssl_crlfile", crlfile, False)):
        if path is not None and not (os.path.isdir(path) if isdir else os.path.isfile(path)):
            what = "directory" if isdir else "file"
            raise ConfigError(f"{name} {path!r}: no such {what}")
    if keyfile is not None and certfile is None:
        raise ConfigError("ssl_keyfile is set but ssl_certfile is not: mutual TLS needs the "
                          "client certificate (ssl_certfile) and its key (ssl_keyfile)")
    try:
        # Without cafile/capath this loads the system's trust store.
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile, capath=capath)
    except ssl.SSLError as exc:
        raise ConfigError(f"ssl_cafile {cafile!r} holds no usable PEM certificate: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read ssl_cafile {cafile!r}: {exc.strerror or exc}") from None
    ctx.check_hostname = bool(check_hostname)
    ctx.verify_mode = ssl.CERT_REQUIRED
    if crlfile is not None:
        try:
            ctx.load_verify_locations(cafile=crlfile)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"ssl_crlfile {crlfile!r} holds no usable PEM CRL: {exc}") from None
        ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if ciphers is not None:
        try:
            ctx.set_ciphers(ciphers)
        except ssl.SSLError:
            raise ConfigError(f"ssl_ciphers {ciphers!r} selects no cipher OpenSSL knows; give an "
                              f"OpenSSL cipher list such as 'ECDHE+AESGCM'") from None
    if certfile is not None:
        _load_client_cert(ctx, certfile, keyfile, password)
    _ORIGINS[ctx] = _Origin(cafile, capath, certfile, crlfile)
    return ctx


class _NoPassword(Exception):
    pass


def _load_client_cert(ctx: ssl.SSLContext, certfile: str, keyfile: str | None,
                      password: str | bytes | None) -> None:
    def no_password() -> str:
        # Without a callback OpenSSL would prompt on the terminal (and hang without one).
        raise _NoPassword()

    where = f"ssl_keyfile {keyfile!r}" if keyfile else f"ssl_certfile {certfile!r}"
    try:
        ctx.load_cert_chain(certfile, keyfile, password if password is not None else no_password)
    except _NoPassword:
        raise ConfigError(f"the private key in {where} is encrypted: give its password as "
                          f"ssl_password") from None
    except ssl.SSLError as exc:
        text = f"{exc.reason or ''} {exc}".upper()
        if "KEY_VALUES_MISMATCH" in text:
            raise ConfigError(f"the private key in {where} does not belong to the certificate in "
                              f"ssl_certfile {certfile!r}") from None
        if password is not None and ("BAD_DECRYPT" in text or "PEM LIB" in text):
            raise ConfigError(f"cannot decrypt the private key in {where} with ssl_password "
                              f"(wrong password?), or the file is not a PEM key: {exc}") from None
        raise ConfigError(f"cannot load the client certificate (ssl_certfile {certfile!r}) and "
                          f"its key ({where}): they must be PEM files: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read ssl_certfile {certfile!r} or its key: {exc}") from None


# -- naming failures -------------------------------------------------------------------

# X509_V_ERR_* codes from OpenSSL's x509_vfy.h.
_UNKNOWN_ISSUER = {
    2,   # UNABLE_TO_GET_ISSUER_CERT
    18,  # DEPTH_ZERO_SELF_SIGNED_CERT
    19,  # SELF_SIGNED_CERT_IN_CHAIN
    20,  # UNABLE_TO_GET_ISSUER_CERT_LOCALLY
    21,  # UNABLE_TO_VERIFY_LEAF_SIGNATURE
    27,  # CERT_UNTRUSTED
}
_NOT_YET_VALID, _EXPIRED, _REVOKED = 9, 10, 23
_HOSTNAME_MISMATCH, _EMAIL_MISMATCH, _IP_MISMATCH = 62, 63, 64
_UNABLE_TO_GET_CRL = 3
_INVALID_PURPOSE = 26


def _origin(ctx: ssl.SSLContext | None) -> _Origin | None:
    return _ORIGINS.get(ctx) if ctx is not None else None


def _trust(ctx: ssl.SSLContext | None) -> str:
    """Where this context's trusted CAs came from, for 'not signed by a CA in ...'."""
    origin = _origin(ctx)
    if origin is None:
        return "the ssl_context given (load the CA with its load_verify_locations())"
    if origin.cafile and origin.capath:
        return f"ssl_cafile ({origin.cafile}) or ssl_capath ({origin.capath})"
    if origin.cafile:
        return f"ssl_cafile ({origin.cafile})"
    if origin.capath:
        return f"ssl_capath ({origin.capath})"
    return "the system's trust store (no ssl_cafile was given)"


def _verify_failure(exc: ssl.SSLCertVerificationError, host: str, ctx: ssl.SSLContext | None) -> str:
    code = exc.verify_code
    detail = (exc.verify_message or str(exc)).rstrip(".")
    if code in _UNKNOWN_ISSUER:
        fix = ("set ssl_cafile to the CA (PEM) that signed the broker's certificate"
               if _origin(ctx) is not None else "trust the CA that signed the broker's certificate")
        return (f"certificate verify failed: {detail}: the broker's certificate is not signed by a "
                f"CA in {_trust(ctx)}; {fix}")
    if code in (_HOSTNAME_MISMATCH, _IP_MISMATCH, _EMAIL_MISMATCH):
        return (f"certificate verify failed: {detail}: the broker's certificate does not name the "
                f"host {host!r} that the client connected to (bootstrap_servers, or the broker's "
                f"advertised listener); connect with a name its subjectAltName lists, or give the "
                f"broker a certificate for {host!r}; ssl_check_hostname=False (or "
                f"ssl_endpoint_identification_algorithm='') turns this check off")
    if code == _EXPIRED:
        return (f"certificate verify failed: {detail}: the broker's certificate (or one in its "
                f"chain) has expired; renew it on the broker, and check both hosts' clocks")
    if code == _NOT_YET_VALID:
        return (f"certificate verify failed: {detail}: the broker's certificate is not valid yet; "
                f"check both hosts' clocks")
    if code == _REVOKED:
        origin = _origin(ctx)
        crl = f" ({origin.crlfile})" if origin is not None and origin.crlfile else ""
        return (f"certificate verify failed: {detail}: the broker's certificate is revoked by the "
                f"certificate revocation list{crl}")
    if code == _UNABLE_TO_GET_CRL:
        return (f"certificate verify failed: {detail}: CRL checking is on but no revocation list "
                f"covers the broker's CA; give it in ssl_crlfile")
    if code == _INVALID_PURPOSE:
        return (f"certificate verify failed: {detail}: the broker's certificate is not meant for "
                f"a TLS server (its extended key usage lacks serverAuth)")
    return f"certificate verify failed: {detail} (X509 error {code})"


def _client_cert_hint(ctx: ssl.SSLContext | None) -> str:
    origin = _origin(ctx)
    if origin is not None and origin.certfile:
        return (f"the broker may not trust the client certificate in ssl_certfile ({origin.certfile}): "
                f"it must be signed by a CA in the broker's truststore (ssl.truststore.location)")
    if origin is not None:
        return ("a broker that requires a client certificate (mutual TLS, ssl.client.auth=required) "
                "does this when none is given: set ssl_certfile and ssl_keyfile")
    return ("a broker that requires a client certificate (mutual TLS) does this when the "
            "ssl_context given has none (load_cert_chain()) or one it does not trust")


_NOT_TLS_REASONS = {
    "WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST",
    "UNKNOWN_PROTOCOL", "RECORD_LENGTH_MISMATCH", "WRONG_SSL_VERSION", "BAD_PACKET_LENGTH",
}
_PLAINTEXT_HINT = ("the port is probably a PLAINTEXT (or SASL_PLAINTEXT) listener: use the broker's "
                   "SSL listener, or security_protocol='PLAINTEXT' for this one")


def _ssl_failure(exc: BaseException, ctx: ssl.SSLContext | None) -> tuple[str, bool]:
    """(what went wrong and what to do, retriable) for a handshake error."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        raise AssertionError("handled by _verify_failure")  # pragma: no cover
    reason = (getattr(exc, "reason", None) or "").upper()
    if isinstance(exc, ssl.SSLEOFError) or reason == "UNEXPECTED_EOF_WHILE_READING" or (
            isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError)):
        # asyncio reports the same EOF as a ConnectionResetError with no text: name its type.
        return (f"the broker closed the connection during the TLS handshake ({str(exc) or type(exc).__name__}): "
                f"{_client_cert_hint(ctx)}; or {_PLAINTEXT_HINT}", True)
    if reason in _NOT_TLS_REASONS:
        return f"the broker did not answer in TLS ({exc}): {_PLAINTEXT_HINT}", False
    if reason == "TLSV13_ALERT_CERTIFICATE_REQUIRED":
        fix = ("set ssl_certfile and ssl_keyfile" if ctx is None or _origin(ctx) is not None
               else "load one into the ssl_context given with its load_cert_chain()")
        return (f"the broker requires a client certificate (mutual TLS) and got none ({exc}): "
                f"{fix}", False)
    if reason == "SSLV3_ALERT_HANDSHAKE_FAILURE":
        return (f"the broker refused the handshake ({exc}): {_client_cert_hint(ctx)}; or client and "
                f"broker share no TLS version or cipher (ssl_ciphers)", False)
    if reason in ("TLSV1_ALERT_UNKNOWN_CA", "SSLV3_ALERT_BAD_CERTIFICATE",
                  "SSLV3_ALERT_CERTIFICATE_UNKNOWN", "SSLV3_ALERT_CERTIFICATE_EXPIRED",
                  "SSLV3_ALERT_CERTIFICATE_REVOKED", "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
                  "TLSV1_ALERT_ACCESS_DENIED", "TLSV1_ALERT_DECRYPT_ERROR"):
        extra = ("; or the certificate is not meant for a TLS client (its extended key usage lacks "
                 "clientAuth)" if "UNSUPPORTED_CERTIFICATE" in reason else "")
        return f"the broker rejected the client certificate ({exc}): {_client_cert_hint(ctx)}{extra}", False
    if reason in ("TLSV1_ALERT_PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL", "NO_PROTOCOLS_AVAILABLE",
                  "NO_SHARED_CIPHER", "SSLV3_ALERT_ILLEGAL_PARAMETER", "TLSV1_ALERT_INSUFFICIENT_SECURITY"):
        return (f"client and broker share no TLS version or cipher ({exc}); kafkawire needs TLS 1.2 "
                f"or newer: check the broker's ssl.enabled.protocols and ssl_ciphers", False)
    return f"{exc}", False


def wrap_error(exc: BaseException, *, name: str, host: str, port: int) -> BrokerTLSError:
    """The error for a context that refused to start TLS on the socket (before any byte)."""
    return BrokerTLSError(f"TLS setup for {name} failed before the handshake: {exc}; check the "
                          f"ssl_context (or the ssl_* options)", host=host, port=port)


def handshake_error(exc: BaseException, *, name: str, host: str, port: int,
                    ctx: ssl.SSLContext | None) -> BrokerTLSError:
    """The :class:`BrokerTLSError` for an exception the TLS handshake with ``name`` raised."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        what, retriable = _verify_failure(exc, host, ctx), False
    else:
        what, retriable = _ssl_failure(exc, ctx)
    err = BrokerTLSError(f"TLS handshake with {name} failed: {what}", host=host, port=port)
    err.retriable = retriable
    return err


def handshake_timeout_error(*, name: str, host: str, port: int,
                            timeout: float) -> BrokerTLSHandshakeTimeoutError:
    """The error for a TLS handshake that did not finish by the connection's setup deadline."""
    return BrokerTLSHandshakeTimeoutError(
        f"TLS handshake with {name} did not finish within {timeout * 1000:.0f} ms "
        f"(socket_connection_setup_timeout_ms) and no TLS answer came. A PLAINTEXT (or "
        f"SASL_PLAINTEXT) listener of some brokers (Tansu) waits silently for as many bytes as "
        f"the TLS hello's first four announce as a request's size (Apache Kafka closes the "
        f"connection at once instead): "
        f"check that this port is the broker's SSL listener and security_protocol; "
        f"a slow broker needs a larger socket_connection_setup_timeout_ms",
        host=host, port=port,
    )


def after_handshake_error(exc: BaseException | None, *, name: str, host: str, port: int,
                          ctx: ssl.SSLContext | None) -> BrokerTLSError:
    """The broker closed a TLS connection right after the handshake, before answering the
    first request.  With TLS 1.3 the server checks the client certificate only after the
    client has finished its side of the handshake, so this is how a rejected (or missing)
    client certificate shows."""
    reason = (getattr(exc, "reason", None) or "").upper()
    how = f" ({str(exc) or type(exc).__name__})" if exc is not None else ""
    if reason and reason not in ("UNEXPECTED_EOF_WHILE_READING",) and not reason.startswith("EOF"):
        what, _ = _ssl_failure(exc, ctx)  # type: ignore[arg-type]
        return BrokerTLSError(f"TLS connection to {name} failed right after the handshake: {what}",
                              host=host, port=port)
    err = BrokerTLSError(
        f"{name} closed the TLS connection right after the handshake, before answering "
        f"ApiVersions{how}: {_client_cert_hint(ctx)}", host=host, port=port)
    err.retriable = True  # or the broker went away at that moment
    return err


def closed_before_answer_error(exc: BaseException | None, *, name: str, host: str, port: int,
                               ctx: ssl.SSLContext | None) -> BrokerTLSError:
    """The error for a connection that broke (``exc``, or None for an orderly close) after
    the TCP connect, and the TLS handshake with ``ctx``, but before the broker sent a byte
    of its first ApiVersions answer.  Over TLS that is how a broker rejects a missing or
    untrusted client certificate (TLS 1.3 checks it after the client's side of the handshake
    is done); in plaintext, how a TLS listener drops a client that did not speak TLS."""
    if ctx is not None:
        return after_handshake_error(exc, name=name, host=host, port=port, ctx=ctx)
    return plaintext_dropped_error(name=name, host=host, port=port, tls_seen=False)


def plaintext_answer_error(data: bytes | memoryview, *, name: str, host: str, port: int,
                           ctx: ssl.SSLContext | None) -> BrokerTLSError | None:
    """The error for the first bytes of a plaintext connection's first answer when they are
    a TLS record (a TLS listener's alert), else None (they may be Kafka's)."""
    if ctx is None and looks_like_tls(data):
        return plaintext_dropped_error(name=name, host=host, port=port, tls_seen=True)
    return None


def looks_like_tls(data: bytes | memoryview) -> bool:
    """True when ``data`` starts with a TLS record header (a handshake or alert record of
    TLS 1.0-1.3): what a TLS listener sends to a client that spoke plaintext to it.  A
    Kafka response starting so would announce more than 350 MB."""
    return len(data) >= 3 and data[0] in (0x15, 0x16) and data[1] == 0x03 and data[2] <= 0x04


def plaintext_dropped_error(*, name: str, host: str, port: int, tls_seen: bool) -> BrokerTLSError:
    """A plaintext connection that the broker answered with TLS bytes (``tls_seen``) or
    dropped without a byte before answering the first ApiVersions request."""
    if tls_seen:
        err = BrokerTLSError(
            f"{name} answered in TLS but security_protocol is PLAINTEXT: this port is an SSL "
            f"listener; set security_protocol='SSL' (with ssl_cafile) to connect to it",
            host=host, port=port)
        return err
    err = BrokerTLSError(
        f"{name} dropped the connection before answering ApiVersions, without sending a byte; "
        f"that is how a TLS listener treats a plaintext client: if this port is an SSL listener, "
        f"set security_protocol='SSL' (with ssl_cafile); otherwise the broker may be older than "
        f"Kafka 0.10 or shutting down", host=host, port=port)
    err.retriable = True
    return err
