"""What the sync client (kafkawire.client) and the asyncio client (kafkawire.aio) share
besides the I/O-free protocol layer: configuration, futures and record metadata, fork
detection, the partitioner, TLS contexts and their failures, OAUTHBEARER tokens from an
OIDC endpoint (both shells call the provider at each login).  Neither shell's loops
live here: kafkawire.aio imports this and kafkawire.protocol, never kafkawire.client
(tests/client/test_layers.py)."""
