"""kafkawire's codec as a drop-in for other Kafka clients' record layers.

Each module here adapts one client (``kafka_python``, ...) and imports that client only
when the module itself is imported; importing ``kafkawire.compat`` loads no peer.  Call the
module's ``install()`` to route the client's record decoding and encoding through
kafkawire's compiled codec, ``uninstall()`` to restore the client's own classes.
"""
