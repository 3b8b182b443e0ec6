"""The SASL exceptions: what the client finds wrong itself (:class:`SaslError` and its
subclasses) and the typed forms of the broker's SASL error codes (33, 34, 58), which a
refused login raises.  Import from :mod:`kafkawire.errors` (or
:mod:`kafkawire.protocol.sasl`, which raises them); this module does no I/O."""

from __future__ import annotations

from kafkawire._errors_base import KafkaWireError
from kafkawire._errors_table import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)

__all__ = [
    "SaslError",
    "SaslPrepError",
    "SaslProtocolError",
    "ScramIterationCountError",
    "ScramServerSignatureError",
    "SaslAuthenticationError",
    "ScramServerError",
    "OAuthBearerServerError",
    "OAuthBearerTokenError",
    "SaslUnsupportedMechanismError",
    "SaslIllegalStateError",
]


class SaslError(KafkaWireError):
    """A SASL failure found on the client's side (no broker error code)."""


class SaslPrepError(SaslError, ValueError):
    """A user name or password SASLprep (RFC 4013) refuses: a prohibited character, a
    bidirectional-text rule broken, or nothing left after mapping."""


class SaslProtocolError(SaslError):
    """A broker message that does not follow the mechanism's grammar (a SCRAM message with
    a missing attribute or a nonce that is not ours, bytes after the exchange ended...)."""


class ScramIterationCountError(SaslError):
    """The broker's SCRAM iteration count is below the minimum (4096, as Kafka) or above
    the limit this client accepts."""


class ScramServerSignatureError(SaslError):
    """The broker's ServerSignature does not match: it could not prove it knows the
    password (SCRAM mutual authentication failed).  The client must not trust the
    connection: it may be talking to an impostor."""


class SaslAuthenticationError(SaslAuthenticationFailedError):
    """SASL_AUTHENTICATION_FAILED (58) from the broker; ``error_message`` is the broker's
    text (None when it gave none) and ``mechanism`` the mechanism tried."""

    def __init__(self, message: str, *, mechanism: str | None = None, error_message: str | None = None):
        super().__init__(message)
        self.mechanism = mechanism
        self.error_message = error_message


class ScramServerError(SaslAuthenticationError):
    """The broker ended SCRAM with an ``e=`` attribute (RFC 5802 server-error);
    ``server_error`` is its value, e.g. ``invalid-proof`` or ``unknown-user``."""

    def __init__(self, message: str, *, mechanism: str, server_error: str):
        super().__init__(message, mechanism=mechanism, error_message=server_error)
        self.server_error = server_error


class OAuthBearerServerError(SaslAuthenticationError):
    """The broker refused the OAUTHBEARER token with an RFC 7628 error challenge:
    ``status`` (e.g. ``invalid_token``), ``scope`` and ``openid_configuration`` come from
    its JSON (None when absent); ``challenge`` is the raw text."""

    def __init__(self, message: str, *, challenge: str, status: str | None, scope: str | None,
                 openid_configuration: str | None, error_message: str | None = None):
        super().__init__(message, mechanism="OAUTHBEARER", error_message=error_message)
        self.challenge = challenge
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration


class OAuthBearerTokenError(SaslError, ValueError):
    """A token, authorization id or extension that cannot be put into an OAUTHBEARER
    initial response (not RFC 6750 / RFC 7628 syntax, or a reserved extension name)."""


class SaslUnsupportedMechanismError(UnsupportedSaslMechanismError):
    """UNSUPPORTED_SASL_MECHANISM (33): ``mechanism`` was refused; ``enabled_mechanisms``
    lists what the broker said it offers."""

    def __init__(self, message: str, *, mechanism: str, enabled_mechanisms: list[str]):
        super().__init__(message)
        self.mechanism = mechanism
        self.enabled_mechanisms = enabled_mechanisms


class SaslIllegalStateError(IllegalSaslStateError):
    """ILLEGAL_SASL_STATE (34), from the broker, or a call out of order on this side.
    ``request`` is the request the broker refused (``"SaslHandshake"`` or
    ``"SaslAuthenticate"``), None for this side's own."""

    def __init__(self, message: str, *, error_message: str | None = None, request: str | None = None):
        super().__init__(message)
        self.error_message = error_message
        self.request = request
