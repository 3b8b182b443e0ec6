"""What the decoders hand out: Record, Batch, ConsumerRecord.

Part of the pure-Python twin kafkawire._pycodec, which re-exports every name; the
compiled counterpart, to read side by side, is _codec_records.pxi.  No I/O.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------------
# Record and Batch
# ---------------------------------------------------------------------------------------

_RECORD_FIELDS = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")


class Record:
    """One record: a MessageSet message (magic 0/1) or a RecordBatch record (magic 2)."""

    __slots__ = _RECORD_FIELDS
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers=()):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    def __eq__(self, other):
        # Field by field, so a Record of the compiled extension compares equal too.
        try:
            theirs = (
                other.offset,
                other.timestamp,
                other.timestamp_type,
                other.key,
                other.value,
                tuple(other.headers),
            )
        except (AttributeError, TypeError):
            return NotImplemented
        return (
            self.offset,
            self.timestamp,
            self.timestamp_type,
            self.key,
            self.value,
            tuple(self.headers),
        ) == theirs

    def __repr__(self):
        return (
            f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, "
            f"timestamp_type={self.timestamp_type!r}, key={self.key!r}, value={self.value!r}, "
            f"headers={self.headers!r})"
        )


_BATCH_FIELDS = (
    "base_offset",
    "magic",
    "crc",
    "attributes",
    "compression",
    "timestamp_type",
    "is_transactional",
    "is_control",
    "partition_leader_epoch",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "records",
)


class Batch:
    """One RecordBatch (magic 2), or one top-level message of a MessageSet (magic 0/1).

    For a legacy message, base_offset is the offset of its first (inner) record, crc the
    CRC32 of the (wrapper) message, producer fields -1, partition_leader_epoch -1.
    """

    __slots__ = _BATCH_FIELDS

    def __init__(
        self,
        base_offset,
        magic,
        crc,
        attributes,
        compression,
        timestamp_type,
        is_transactional,
        is_control,
        partition_leader_epoch,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records,
    ):
        self.base_offset = base_offset
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.compression = compression
        self.timestamp_type = timestamp_type
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records = records

    def __repr__(self):
        return (
            f"Batch(base_offset={self.base_offset}, magic={self.magic}, "
            f"compression={self.compression}, is_control={self.is_control}, "
            f"records={len(self.records)})"
        )


_CONSUMER_FIELDS = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "headers",
)


class ConsumerRecord:
    """One consumed record: ``topic``, ``partition``, ``offset``, ``timestamp``,
    ``timestamp_type``, ``key``, ``value``, ``headers`` (a tuple of (str, bytes or None)),
    all read-only."""

    __slots__ = _CONSUMER_FIELDS

    def __init__(
        self, topic, partition, offset, timestamp, timestamp_type, key, value, headers=()
    ):
        _fill(self, topic, partition, offset, timestamp, timestamp_type, key, value,
              tuple(headers))

    def __setattr__(self, name, value):
        raise AttributeError("readonly attribute")

    def __delattr__(self, name):
        raise AttributeError("readonly attribute")

    def __repr__(self):
        return (
            f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
            f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={self.value!r})"
        )

    def __reduce__(self):
        return (ConsumerRecord, tuple(getattr(self, f) for f in _CONSUMER_FIELDS))


# Read-only from outside: the decoder and the constructor set fields through the slots'
# own descriptors, which __setattr__ does not stand in front of.
_SETTERS = tuple(getattr(ConsumerRecord, f).__set__ for f in _CONSUMER_FIELDS)
_SET_KEY, _SET_VALUE = _SETTERS[5], _SETTERS[6]


def _fill(r, *fields):
    for put, value in zip(_SETTERS, fields):
        put(r, value)
