"""What a client that talks to brokers meets besides a broker's error code: unreachable
brokers and broken connections, timeouts, exhausted buffers, bad configuration, refused
records, commits a rebalance overtook.  The I/O-free protocol layer raises these too, so
they live here, below both shells.  Import from :mod:`kafkawire.errors` (the old paths
:mod:`kafkawire.client.errors` and :mod:`kafkawire.core.errors` are that module too);
this module does no I/O.
"""

from __future__ import annotations

from kafkawire._errors_base import KafkaWireError
from typing import Any

__all__ = [
    "KafkaConnectionError",
    "BrokerResolutionError",
    "BrokerConnectionRefusedError",
    "BrokerConnectTimeoutError",
    "BrokerTLSError",
    "BrokerTLSHandshakeTimeoutError",
    "ConnectionClosedError",
    "RequestTimeoutError",
    "NoBrokersAvailableError",
    "KafkaTimeoutError",
    "BufferExhaustedError",
    "DeliveryTimeoutError",
    "ClientClosedError",
    "ConfigError",
    "RecordTooLargeError",
    "UnknownPartitionError",
    "CommitFailedError",
    "REFRESH_METADATA_CODES",
]


# -- reaching brokers ---------------------------------------------------------------------


class KafkaConnectionError(KafkaWireError):
    """A broker could not be reached, or the connection to it broke."""

    retriable = True

    def __init__(self, message: str, *, host: str | None = None, port: int | None = None):
        super().__init__(message)
        self.host = host
        self.port = port


class BrokerResolutionError(KafkaConnectionError):
    """The broker's host name did not resolve (DNS)."""


class BrokerConnectionRefusedError(KafkaConnectionError):
    """Nothing listens on the broker's host and port (connection refused)."""


class BrokerConnectTimeoutError(KafkaConnectionError):
    """The TCP (or TLS) connection, or the ApiVersions exchange, did not finish in time."""


class BrokerTLSError(KafkaConnectionError):
    """TLS with a broker failed: its certificate did not verify (unknown CA, wrong host
    name, expired), it refused the client's certificate, or one side spoke TLS and the
    other plaintext.  The message names the broker, what was wrong and the fix.  Not
    retriable as a rule (the configuration or a certificate must change); ``retriable``
    is True on the instances whose cause could also be a broker going away."""

    retriable = False


class BrokerTLSHandshakeTimeoutError(BrokerTLSError, BrokerConnectTimeoutError):
    """The TLS handshake did not finish by the connection's setup deadline
    (socket_connection_setup_timeout_ms): typically a plaintext listener, which waits
    silently for more bytes."""

    retriable = True


class ConnectionClosedError(KafkaConnectionError):
    """The broker closed the connection, or a socket error broke it."""


class RequestTimeoutError(KafkaConnectionError):
    """A request got no response within request_timeout_ms; the connection was closed."""


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap (or known) brokers answered; the message lists each attempt.

    ``errors`` holds each attempt's typed exception, in order, and ``__cause__`` the
    first of them, so a program tells a wrong CA from a broker not up yet without
    reading the message: ``any(isinstance(e, BrokerTLSError) for e in exc.errors)``.

    When every address refused for a reason no wait fixes (a certificate that does not
    verify, a protocol mismatch: ``retriable`` is False), the error is *also* an
    instance of that refusal's class: ``except BrokerTLSError`` catches a bootstrap
    that met a wrong CA, as it catches the same refusal from a connection made later,
    while ``except NoBrokersAvailableError`` keeps catching it too.  Raising the
    refusal itself instead would have lost the other addresses' attempts from the
    summary and silently stopped ``except NoBrokersAvailableError`` from catching a
    permanent bootstrap failure.  A refused SASL login is raised as its own error
    (SaslAuthenticationError ...), not summed up: every address shares the
    credentials, so the first refusal ends the bootstrap."""

    def __init__(self, message: str, *, host: str | None = None, port: int | None = None,
                 errors: Any = ()):
        # KafkaConnectionError's own, not the next class in a combined class's order
        # (a refusal's class may take other arguments).
        KafkaConnectionError.__init__(self, message, host=host, port=port)
        self.errors: list[BaseException] = list(errors)

    @classmethod
    def summing(cls, message: str, errors: Any, *, final: bool,
                decisive: BaseException | None = None) -> "NoBrokersAvailableError":
        """The error for attempts ``errors`` that all failed; ``final``: every address
        ended with a refusal no wait fixes, ``decisive`` (default: the first error): not
        retriable then, an instance of ``decisive``'s class too, and its ``__cause__``.
        Otherwise the first error is the ``__cause__``."""
        errs = list(errors)
        first = (decisive if final and decisive is not None else None) or (errs[0] if errs else None)
        kind: type = cls
        if final and first is not None and not isinstance(first, cls):
            kind = _also(type(first))
        err = kind(message, errors=errs)
        if kind is not cls and first is not None:
            for name, value in vars(first).items():  # host, port, mechanism ... of the refusal
                if name not in ("errors", "retriable") and not name.startswith("_"):
                    err.__dict__.setdefault(name, value)
            err.host, err.port = getattr(first, "host", None), getattr(first, "port", None)
        err.retriable = not (final and errs)
        if first is not None:
            err.__cause__ = first
        return err

    def __reduce__(self) -> Any:
        return (_rebuild_no_brokers, (self.args[0] if self.args else "", self.errors,
                                      isinstance(self, _RefusedForGood) and bool(self.errors), self.retriable,
                                      self.host, self.port))


class _RefusedForGood(NoBrokersAvailableError):
    """The base of the classes :func:`_also` makes: a summary that is a refusal too."""


_COMBINED: dict[type, type] = {}


def _also(refusal: type) -> type:
    """NoBrokersAvailableError that is also a ``refusal`` (made once per class)."""
    kind = _COMBINED.get(refusal)
    if kind is None:
        try:
            kind = type("NoBrokersAvailableError", (_RefusedForGood, refusal),
                        {"__module__": __name__, "__doc__": NoBrokersAvailableError.__doc__,
                         "__qualname__": f"NoBrokersAvailableError[{refusal.__name__}]"})
        except TypeError:  # a class that cannot be combined (layout): the summary alone
            kind = NoBrokersAvailableError
        _COMBINED[refusal] = kind
    return kind


def _rebuild_no_brokers(message: str, errors: list[BaseException], final: bool, retriable: bool = True,
                        host: str | None = None, port: int | None = None) -> NoBrokersAvailableError:
    err = NoBrokersAvailableError.summing(message, errors, final=final)
    err.retriable, err.host, err.port = retriable, host, port
    return err


# Codes after which the leader map is stale: refresh metadata before retrying.  (Whether a
# code is retriable at all is the error table's: for_code(code).retriable.)
REFRESH_METADATA_CODES = frozenset({3, 5, 6, 9, 56, 74, 75, 100})


# -- waiting ------------------------------------------------------------------------------


class KafkaTimeoutError(KafkaWireError, TimeoutError):
    """A blocking call (flush, close, metadata wait, poll for offsets) ran out of time."""

    retriable = True


class DeliveryTimeoutError(KafkaTimeoutError):
    """A record was not acknowledged within delivery_timeout_ms."""


class BufferExhaustedError(KafkaTimeoutError):
    """Producer.send waited max_block_ms for room in buffer_memory and found none."""


# -- using the client ---------------------------------------------------------------------


class ClientClosedError(KafkaWireError):
    """The producer or consumer was closed."""


class ConfigError(KafkaWireError, ValueError):
    """A configuration value that is unknown, of the wrong type, or out of range."""


class RecordTooLargeError(KafkaWireError, ValueError):
    """A record or batch larger than max_request_size (or a fetch limit) allows."""


class UnknownPartitionError(KafkaWireError, ValueError):
    """A record sent to a partition its topic does not have (refused before it is queued).
    ``topic``, ``partition`` and ``count`` (the topic's partitions) say which."""

    def __init__(self, message: str, *, topic: str | None = None, partition: int | None = None,
                 count: int | None = None):
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.count = count


class CommitFailedError(KafkaWireError):
    """An offset commit the group refused because this member's generation ended: the
    group rebalanced (or expelled the member) after the offsets were read.

    The partitions may belong to another member now, which reads them from the last
    offsets committed; records processed since are read again there.  ``partitions``
    maps each (topic, partition) to the offset that was not committed; ``code`` is the
    broker's error code (22 ILLEGAL_GENERATION, 25 UNKNOWN_MEMBER_ID, 27
    REBALANCE_IN_PROGRESS, 82 FENCED_INSTANCE_ID)."""

    def __init__(self, message: str, code: int | None = None, partitions: dict | None = None):
        super().__init__(message)
        self.code = code
        self.partitions = partitions or {}
