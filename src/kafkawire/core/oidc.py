"""The HTTP side of OAUTHBEARER logins through a token endpoint (KIP-768) and AWS MSK IAM:
token providers for ``sasl_oauth_token_provider`` that both shells call.

The decisions (what to send, what an answer means, when to refresh, how long to back off)
are :class:`kafkawire.protocol.sasl.OidcLogin`'s; this module only posts, reads the clock
and waits.  It speaks HTTP through the standard library's urllib rather than httpx: the
client itself has no dependencies, and one POST per token lifetime needs no more.

Both shells call a token provider synchronously at each login (the provider contract of
``sasl_oauth_token_provider``), so one blocking transport serves the sync and the asyncio
clients.  The first login fetches; later tokens are fetched ahead on a timer thread at the
held token's refresh point (80-85% of its life, jittered), while a login still takes the
token it hands out, so the KIP-368 re-logins (85-95% of the session) rarely wait for the
endpoint.  A login past the refresh point with no fresh token fetches for itself.
"""

from __future__ import annotations

import random
import threading
import time
import urllib.error
import urllib.request
import weakref
from typing import Any

from kafkawire.protocol.sasl import (
    OAuthBearerEndpointError,
    OAuthBearerLoginError,
    OAuthBearerToken,
    OidcLogin,
)

__all__ = ["OidcTokenProvider", "MskIamTokenProvider"]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A token request carries the client secret: never replay it to another address.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class OidcTokenProvider:
    """A ``sasl_oauth_token_provider`` that fetches tokens from an OAuth 2 / OIDC token
    endpoint with :class:`OidcLogin`'s request, retrying failures that may pass until
    ``timeout_ms`` (the clients pass ``socket_connection_setup_timeout_ms``) and raising the
    typed errors at once otherwise.  ``assertion_file``: for the JWT bearer grant, a file
    holding the assertion, read again at each fetch (whatever writes it may renew it).
    ``connect_timeout_ms`` / ``read_timeout_ms`` bound each attempt (Java's
    ``sasl.login.connect.timeout.ms`` and ``sasl.login.read.timeout.ms``; urllib has one
    socket timeout, the larger of the two, always within the deadline).
    ``fetches`` counts the tokens fetched."""

    def __init__(self, login: OidcLogin, *, timeout_ms: int = 10_000, assertion_file: str | None = None,
                 connect_timeout_ms: int | None = None, read_timeout_ms: int | None = None):
        self.login = login
        self.timeout_ms = timeout_ms
        self.assertion_file = assertion_file
        per_attempt = max(connect_timeout_ms or 0, read_timeout_ms or 0)
        self._attempt_timeout = per_attempt / 1000 if per_attempt else None
        self._lock = threading.Lock()
        self._prefetched = threading.Condition(self._lock)  # notified as a fetch ahead ends
        self._prefetching = False  # the timer thread is fetching, without the lock
        self._wait = threading.Event()  # never set: its wait() is the backoff sleep
        self._timer: threading.Timer | None = None
        self._handed_out = False  # whether a login took the token held
        #: Tokens fetched in all, and those fetched ahead on the timer thread.
        self.fetches = 0
        self.background_fetches = 0

    def __call__(self) -> OAuthBearerToken:
        with self._lock:
            login = self.login
            if self._prefetching:
                # The timer thread is fetching the next token: the held one serves while it
                # is valid; an expired one waits for that fetch (bounded by its deadline).
                end = time.monotonic() + self.timeout_ms / 1000
                while self._prefetching and _expired(login.token) and time.monotonic() < end:
                    self._prefetched.wait(end - time.monotonic())
            held_serves = self._prefetching and not _expired(login.token)
            if login.needs_token(_now_ms()) and not held_serves:
                self._fetch()
                self._schedule()
            self._handed_out = True
            assert login.token is not None
            return login.token

    def _schedule(self) -> None:
        # Fetch the next token on a timer thread at the held one's refresh point, so the
        # re-logins after it (KIP-368, at 85-95% of the session) find it ready instead of
        # fetching inside the login, on the sync shell's I/O thread or the asyncio loop.
        at = self.login.refresh_at_ms
        if self._timer is not None:
            self._timer.cancel()
        if at is None:
            return
        timer = threading.Timer(max(0.0, (at - _now_ms()) / 1000), _prefetch, args=(weakref.ref(self),))
        timer.daemon = True
        timer.name = "kafkawire-oauthbearer-refresh"
        self._timer = timer
        timer.start()

    def __del__(self) -> None:
        timer = getattr(self, "_timer", None)
        if timer is not None:
            timer.cancel()  # its thread ends now rather than at the refresh point

    def close(self) -> None:
        """Stop fetching ahead (a timer holds only a weak reference: this is optional)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _fetch(self) -> OAuthBearerToken:
        login = self.login
        start = time.monotonic()
        deadline = start + self.timeout_ms / 1000
        failures: list[OAuthBearerEndpointError] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise login.timed_out(failures, round((time.monotonic() - start) * 1000))
            try:
                token = self._attempt(min(remaining, self._attempt_timeout or remaining))
            except OAuthBearerEndpointError as exc:
                failures.append(exc)
                pause = login.backoff_ms(len(failures), random.random()) / 1000
                remaining = deadline - time.monotonic()
                if pause >= remaining:
                    # Another attempt could not finish in time: wait out the deadline and report.
                    self._wait.wait(max(0.0, remaining))
                    raise login.timed_out(failures, round((time.monotonic() - start) * 1000)) from None
                self._wait.wait(pause)
                continue
            self.fetches += 1
            self._handed_out = False
            return token

    def _attempt(self, timeout: float) -> OAuthBearerToken:
        login = self.login
        assertion = None
        if self.assertion_file is not None:
            try:
                with open(self.assertion_file, encoding="utf-8") as f:
                    assertion = f.read()
            except OSError as exc:
                raise OAuthBearerLoginError(
                    f"sasl_oauthbearer_assertion_file {self.assertion_file!r} cannot be read: {exc}") from None
        req = login.request(assertion)
        http = urllib.request.Request(req.url, data=req.body, headers=req.headers, method="POST")
        try:
            with _OPENER.open(http, timeout=timeout) as resp:
                status, body = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        except urllib.error.URLError as exc:
            raise login.unreachable(str(exc.reason)) from None
        except (OSError, ValueError) as exc:  # timeouts, resets, a broken HTTP answer
            raise login.unreachable(f"{type(exc).__name__}: {exc}") from None
        return login.accept(status, body, now_ms=_now_ms(), jitter=random.random())


def _prefetch(ref: weakref.ref[OidcTokenProvider]) -> None:
    provider = ref()
    if provider is None:
        return
    with provider._lock:  # noqa: SLF001 - the provider's own timer
        # A token no login took since it was fetched: the client is gone or idle; the
        # next login fetches for itself.
        if provider._prefetching or not provider._handed_out or not provider.login.needs_token(_now_ms()):
            return
        provider._prefetching = True
    # Without the lock: a login meanwhile takes the held token, still valid, at once.
    fetched = False
    try:
        provider._fetch()
        fetched = True
    except OAuthBearerLoginError:
        pass  # the next login fetches again, and raises what it meets
    finally:
        with provider._lock:
            provider._prefetching = False
            provider._prefetched.notify_all()
            if fetched:
                provider.background_fetches += 1
                provider._schedule()


def _expired(token: OAuthBearerToken | None) -> bool:
    return token is None or _now_ms() >= token.expiry_ms


def _now_ms() -> int:
    # Token expiries are wall-clock times (a JWT's exp), so this clock, not monotonic().
    return round(time.time() * 1000)


class MskIamTokenProvider:
    """A ``sasl_oauth_token_provider`` for AWS MSK IAM: the token AWS's signer
    (``aws-msk-iam-sasl-signer-python``, the ``msk-iam`` extra) makes for ``region``: a
    presigned ``kafka-cluster:Connect`` URL, base64url-encoded, valid for 15 minutes.
    Credentials come from botocore's usual chain (environment, profile, instance role),
    or from ``profile`` or ``role_arn`` when given.  Signing happens locally; a token is
    made only when none is held or the held one is past its refresh point."""

    def __init__(self, region: str, *, profile: str | None = None, role_arn: str | None = None,
                 role_session_name: str | None = None):
        try:
            from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
        except ImportError:
            raise ImportError("AWS MSK IAM logins need the signer: pip install 'kafkawire[msk-iam]' "
                              "(aws-msk-iam-sasl-signer-python)") from None
        if not region:
            raise ValueError("MskIamTokenProvider needs the cluster's AWS region, e.g. 'us-east-1'")
        self._signer = MSKAuthTokenProvider
        self.region, self.profile, self.role_arn = region, profile, role_arn
        self.role_session_name = role_session_name
        self._lock = threading.Lock()
        self.token: OAuthBearerToken | None = None
        self.refresh_at_ms: int | None = None
        self.fetches = 0

    def _sign(self) -> tuple[str, int]:
        signer = self._signer
        if self.role_arn:
            args = (self.region, self.role_arn) + ((self.role_session_name,) if self.role_session_name else ())
            return signer.generate_auth_token_from_role_arn(*args)
        if self.profile:
            return signer.generate_auth_token_from_profile(self.region, self.profile)
        return signer.generate_auth_token(self.region)

    def __call__(self) -> OAuthBearerToken:
        with self._lock:
            now = _now_ms()
            if self.token is not None and self.refresh_at_ms is not None and now < self.refresh_at_ms:
                return self.token
            value, expiry_ms = self._sign()
            self.token = OAuthBearerToken(value, expiry_ms, start_ms=now)
            self.refresh_at_ms = self.token.refresh_at_ms(now, random.random())
            self.fetches += 1
            return self.token
