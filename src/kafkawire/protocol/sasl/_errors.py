"""The SASL exceptions, defined with the rest in :mod:`kafkawire.errors` (so that
``except kafkawire.errors.SaslAuthenticationError`` works) and importable from here as
before."""

from kafkawire._errors_sasl import (  # noqa: F401 - re-exported
    OAuthBearerServerError,
    OAuthBearerTokenError,
    SaslAuthenticationError,
    SaslError,
    SaslIllegalStateError,
    SaslPrepError,
    SaslProtocolError,
    SaslUnsupportedMechanismError,
    ScramIterationCountError,
    ScramServerError,
    ScramServerSignatureError,
)
