"""The two roots of kafkawire's exception tree, :class:`KafkaWireError` and
:class:`BrokerError`: everything else in :mod:`kafkawire.errors` derives from them.
Import from :mod:`kafkawire.errors`; this module does no I/O."""

from __future__ import annotations

__all__ = [
    "KafkaWireError",
    "BrokerError",
]


class KafkaWireError(Exception):
    """Root of every exception kafkawire raises on purpose."""

    #: Kafka error code, or None when the error is kafkawire's own.
    code: int | None = None
    #: True when retrying the same operation may succeed.
    retriable: bool = False


class BrokerError(KafkaWireError):
    """An error code returned by a Kafka broker.  Subclasses exist per code."""

    code: int = -1
    retriable: bool = False
    name: str = "UNKNOWN_SERVER_ERROR"
    meaning: str = "The server experienced an unexpected error when processing the request."
    #: What the user can do about it, where the code alone tells (ends the message).
    fix: str = ""

    def __init__(self, message: str | None = None):
        if message is None:
            message = f"{self.name} ({self.code}): {self.meaning}"
        super().__init__(message)

