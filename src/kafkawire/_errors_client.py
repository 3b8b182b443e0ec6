"""What a client that talks to brokers meets besides a broker's error code: unreachable
brokers and broken connections, timeouts, exhausted buffers, bad configuration, refused
records, commits a rebalance overtook.  The I/O-free protocol layer raises these too, so
they live here, below both shells.  Import from :mod:`kafkawire.errors` (the old paths
:mod:`kafkawire.client.errors` and :mod:`kafkawire.core.errors` are that module too);
this module does no I/O.
"""

from __future__ import annotations

from kafkawire._errors_base import KafkaWireError

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
    """None of the bootstrap (or known) brokers answered; the message lists each attempt."""


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
