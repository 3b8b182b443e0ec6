"""Exceptions raised by kafkawire's I/O shell (connections, cluster, producer, consumer).

They join :mod:`kafkawire.errors`' tree under :class:`~kafkawire.errors.KafkaWireError`.
Broker error codes keep their own classes (``kafkawire.errors.for_code``); this module
gathers what a client that talks over sockets can meet: unreachable brokers, timeouts,
exhausted buffers, bad configuration.  The bases the I/O-free cores raise too
(KafkaConnectionError, BrokerConnectTimeoutError, ConnectionClosedError,
KafkaTimeoutError, DeliveryTimeoutError, ConfigError, RecordTooLargeError,
OffsetOutOfRangeError) are defined in :mod:`kafkawire.errors` and
re-exported here.
"""

from __future__ import annotations

from kafkawire import errors as _errors
from kafkawire.errors import (  # defined there: the I/O-free cores raise them too
    REFRESH_METADATA_CODES,
    BrokerConnectTimeoutError,
    ConfigError,
    ConnectionClosedError,
    DeliveryTimeoutError,
    KafkaConnectionError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    broker_error,
)

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
    "OffsetOutOfRangeError",
    "broker_error",
    "REFRESH_METADATA_CODES",
]


class BrokerResolutionError(KafkaConnectionError):
    """The broker's host name did not resolve (DNS)."""


class BrokerConnectionRefusedError(KafkaConnectionError):
    """Nothing listens on the broker's host and port (connection refused)."""


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


class RequestTimeoutError(KafkaConnectionError):
    """A request got no response within request_timeout_ms; the connection was closed."""


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap (or known) brokers answered; the message lists each attempt."""


class BufferExhaustedError(KafkaTimeoutError):
    """Producer.send waited max_block_ms for room in buffer_memory and found none."""


class ClientClosedError(_errors.KafkaWireError):
    """The producer or consumer was closed."""


