"""UpdateFeatures (57), from Kafka's own definition: v1 says upgrade, safe or unsafe
downgrade (KIP-778) where v0 had a downgrade flag; v2 answers with one error for the whole
request, no longer per feature.  (The features are described by ApiVersions.)"""

from kafkawire.protocol.api import from_generated

UPDATE_FEATURES = from_generated(57, max_version=2)
