"""SaslHandshake (17) and SaslAuthenticate (36), from Kafka's own definitions.

SaslHandshake v0 is followed by raw, unframed SASL tokens on the socket; v1 means the
tokens travel inside SaslAuthenticate requests instead (KIP-152).  SaslAuthenticate v1
tells the client when it must re-authenticate (KIP-368).
"""

from kafkawire.protocol.api import from_generated

SASL_HANDSHAKE = from_generated(17, max_version=1)

SASL_AUTHENTICATE = from_generated(36, max_version=2)
