"""kafkawire's codec as a drop-in for other Kafka clients' record layers.

Each module here adapts one client (``kafka_python``, ...) and imports that client only
when the module itself is imported; importing ``kafkawire.compat`` loads no peer.  Call the
module's ``install()`` to route the client's record decoding and encoding through
kafkawire's compiled codec, ``uninstall()`` to restore the client's own classes.

Each module declares the host versions it is tested with (``TESTED_VERSIONS``); its
``install()`` refuses another with UntestedHostError, replacing nothing, unless called
with ``force=True`` (see kafkawire.compat._guard for why it refuses rather than warns).
"""

from kafkawire.compat._guard import UntestedHostError, UntestedHostWarning

__all__ = ["UntestedHostError", "UntestedHostWarning"]
