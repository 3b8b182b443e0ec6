"""SaslHandshake (17) and SaslAuthenticate (36).

SaslHandshake v0 is followed by raw, unframed SASL tokens on the socket; v1 means the
tokens travel inside SaslAuthenticate requests instead (KIP-152).
"""

from kafkawire.protocol.api import Api
from kafkawire.protocol.schema import Field as F

SASL_HANDSHAKE = Api(
    17, "SaslHandshake", (0, 1), flexible_from=None,
    request=[
        F("mechanism", "string"),
    ],
    response=[
        F("error_code", "int16"),
        F("mechanisms", "[]string"),  # what the broker offers, for UNSUPPORTED_SASL_MECHANISM
    ],
)

SASL_AUTHENTICATE = Api(
    36, "SaslAuthenticate", (0, 2), flexible_from=2,
    request=[
        F("auth_bytes", "bytes"),
    ],
    response=[
        F("error_code", "int16"),
        F("error_message", "string", nullable_since=0),
        F("auth_bytes", "bytes"),
        # KIP-368: after this many ms the client must re-authenticate; 0 means never.
        F("session_lifetime_ms", "int64", since=1, default=0),
    ],
)
