"""When to authenticate again: re-authentication before the broker's session ends
(KIP-368) and refresh of an OAUTHBEARER token before it expires (KIP-255).  Time is
never read here: the caller passes ``now_ms`` and its random ``jitter``."""

from __future__ import annotations


def _check_fraction(jitter: float) -> None:
    if not 0.0 <= jitter <= 1.0:
        raise ValueError(f"jitter must be a random number in [0, 1], got {jitter}")


def reauthentication_at_ms(
    session_lifetime_ms: int,
    *,
    authenticated_at_ms: int,
    jitter: float,
    low: float = 0.85,
    high: float = 0.95,
) -> int | None:
    """When to re-authenticate (KIP-368), or None if the broker set no session lifetime.

    A point between ``low`` and ``high`` of ``session_lifetime_ms`` (SaslAuthenticate v1+)
    after ``authenticated_at_ms``, chosen by ``jitter`` (a random number in [0, 1]) so
    that many connections do not re-authenticate at once.  The broker closes a
    connection whose session expired, so re-authenticate before the returned time passes.
    """
    _check_fraction(jitter)
    if not 0.0 < low <= high < 1.0:
        raise ValueError(f"need 0 < low <= high < 1, got low={low} high={high}")
    if session_lifetime_ms <= 0:
        return None
    fraction = low + (high - low) * jitter
    return authenticated_at_ms + round(session_lifetime_ms * fraction)


def token_refresh_at_ms(
    expiry_ms: int,
    *,
    now_ms: int,
    jitter: float,
    start_ms: int | None = None,
    window_factor: float = 0.8,
    window_jitter: float = 0.05,
    min_period_ms: int = 60_000,
    buffer_ms: int = 300_000,
) -> int:
    """When to fetch a new OAUTHBEARER token expiring at ``expiry_ms``.

    At ``window_factor`` plus up to ``window_jitter`` (scaled by ``jitter``, a random
    number in [0, 1]) of the token's lifetime, counted from ``start_ms`` (its issue time;
    ``now_ms`` when unknown), with Java's login-refresh defaults (80% + up to 5%).  When
    the token lives long enough, the time is then kept at least ``buffer_ms`` before the
    expiry and at least ``min_period_ms`` after ``now_ms``; a shorter-lived token is
    refreshed at the same fractions of what is left of it.  Never before ``now_ms``; an
    expired token gives ``now_ms`` (refresh at once).
    """
    _check_fraction(jitter)
    if not (0.5 <= window_factor <= 1.0 and 0.0 <= window_jitter <= 0.25 and window_factor + window_jitter <= 1.0):
        raise ValueError(
            f"need 0.5 <= window_factor <= 1, 0 <= window_jitter <= 0.25 and their sum <= 1; "
            f"got {window_factor} and {window_jitter}"
        )
    remaining = expiry_ms - now_ms
    if remaining <= 0:
        return now_ms
    fraction = window_factor + window_jitter * jitter
    start = now_ms if start_ms is None or start_ms > now_ms else start_ms
    if remaining >= min_period_ms + buffer_ms:
        target = start + round((expiry_ms - start) * fraction)
        target = min(target, expiry_ms - buffer_ms)
        target = max(target, now_ms + min_period_ms)
    else:
        target = now_ms + round(remaining * fraction)
    return max(target, now_ms)
