"""ApiVersions (18) and Metadata (3): what a client asks first on every connection.

Both come from Kafka's own definitions (kafkawire.wire), up to the versions kafkawire's
connection setup and metadata code speak.
"""

from kafkawire.protocol.api import from_generated

# v3 adds the client's software name and version (KIP-511); v4 no new fields: it lets a
# broker answer UNSUPPORTED_VERSION with the versions it does speak.
API_VERSIONS = from_generated(18, max_version=4)

# v1: a null topic list means all topics, an empty one none; v10 names topics by id too
# (KIP-516); v11 drops the cluster's authorized operations (KIP-700).
METADATA = from_generated(3, max_version=13)
