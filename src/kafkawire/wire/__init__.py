"""The wire format, from Apache Kafka's own message definitions.

``_messages`` is generated (``tools/generate_wire.py``) from the JSON definitions inside the
``kafka-clients`` jars of the newest release and of 3.9, and committed; ``spec`` holds the
classes it is written with.  ``APIS`` maps each API key to its :class:`~kafkawire.wire.spec.ApiSpec`.

This package does no I/O.
"""

from __future__ import annotations

from kafkawire.wire._messages import APIS, REQUEST_HEADER, RESPONSE_HEADER, SOURCES
from kafkawire.wire.spec import NO_DEFAULT, ApiSpec, FieldSpec, MessageSpec

__all__ = ["APIS", "NO_DEFAULT", "REQUEST_HEADER", "RESPONSE_HEADER", "SOURCES", "ApiSpec", "FieldSpec", "MessageSpec"]
