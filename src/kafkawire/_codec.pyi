"""Typing stub for kafkawire._codec (Cython) and kafkawire._pycodec (its pure-Python twin).

This file is the contract both implementations follow: same names, same signatures,
same results, same exception types and messages (messages come from the factories in
kafkawire.errors).  Import through kafkawire.codec, which picks the implementation.

Conventions
-----------
* Buffers are any object supporting the buffer protocol (bytes, bytearray, memoryview,
  numpy uint8 arrays).  The object decoders never copy the input as a whole; record keys
  and values are copied out into new ``bytes`` objects.  The columnar decode copies no
  record bytes: its Columns is a view of the input (and of the decompressed bytes of
  compressed entries), which it keeps alive; a writable input is copied once first.
* Readers take ``(buf, pos)`` and return ``(value, next_pos)``.  Writers append to a
  ``bytearray``.  A reader past the end raises TruncatedDataError; a writer given a value
  out of range raises EncodeError.
* Compression codec ids are Kafka's: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
* timestamp_type: -1 none (magic 0), 0 CreateTime, 1 LogAppendTime.
* start_offset must be an int within int64 (CodecError otherwise); a decoded offset or
  timestamp outside int64 raises CorruptRecordError.
* Buffers must be C-contiguous (TypeError otherwise).
"""

from collections.abc import Buffer, Callable, Iterable, Sequence
from typing import Any, Final

from kafkawire._columnar import Columns

IMPLEMENTATION: Final[str]  # "cython" or "python"

DEFAULT_MAX_DEPTH: Final[int]  # 4: wrapper messages nested deeper raise NestingDepthError
DEFAULT_MAX_DECOMPRESSED_SIZE: Final[int]  # 64 MiB per compressed set

# ---- checksums -----------------------------------------------------------------------
def crc32(data: Buffer, value: int = 0) -> int: ...  # IEEE, as zlib.crc32
def crc32c(data: Buffer, value: int = 0) -> int: ...  # Castagnoli, hardware when present
def crc32c_implementation() -> str: ...  # "sse4.2", "sse4.2-no-clmul", "armv8", "table", or "python"
def alloc_buffer(size: int) -> bytearray: ...  # not zeroed (zeroed in the twin)

# ---- primitives ----------------------------------------------------------------------
def read_int8(buf: Buffer, pos: int) -> tuple[int, int]: ...
def read_int16(buf: Buffer, pos: int) -> tuple[int, int]: ...
def read_int32(buf: Buffer, pos: int) -> tuple[int, int]: ...
def read_int64(buf: Buffer, pos: int) -> tuple[int, int]: ...
def read_uint32(buf: Buffer, pos: int) -> tuple[int, int]: ...
def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]: ...  # unsigned, <= 5 bytes
def read_varint(buf: Buffer, pos: int) -> tuple[int, int]: ...  # zigzag int32, <= 5 bytes
def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]: ...  # zigzag int64, <= 10 bytes
def read_string(buf: Buffer, pos: int) -> tuple[str | None, int]: ...  # int16 length, -1 null
def read_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]: ...  # int32 length, -1 null
def read_compact_string(buf: Buffer, pos: int) -> tuple[str | None, int]: ...  # uvarint len+1
def read_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]: ...
def read_array_length(buf: Buffer, pos: int) -> tuple[int, int]: ...  # int32; -1 null
def read_compact_array_length(buf: Buffer, pos: int) -> tuple[int, int]: ...  # uvarint-1
def read_tagged_fields(buf: Buffer, pos: int) -> tuple[dict[int, bytes], int]: ...

def write_int8(out: bytearray, value: int) -> None: ...
def write_int16(out: bytearray, value: int) -> None: ...
def write_int32(out: bytearray, value: int) -> None: ...
def write_int64(out: bytearray, value: int) -> None: ...
def write_uint32(out: bytearray, value: int) -> None: ...
def write_uvarint(out: bytearray, value: int) -> None: ...
def write_varint(out: bytearray, value: int) -> None: ...
def write_varlong(out: bytearray, value: int) -> None: ...
def write_string(out: bytearray, value: str | None) -> None: ...
def write_bytes(out: bytearray, value: Buffer | None) -> None: ...
def write_compact_string(out: bytearray, value: str | None) -> None: ...
def write_compact_bytes(out: bytearray, value: Buffer | None) -> None: ...
def write_array_length(out: bytearray, length: int | None) -> None: ...
def write_compact_array_length(out: bytearray, length: int | None) -> None: ...
def write_tagged_fields(out: bytearray, fields: dict[int, Buffer] | None) -> None: ...
def size_of_uvarint(value: int) -> int: ...
def size_of_varint(value: int) -> int: ...  # zigzag, int32 or int64 range

# ---- records -------------------------------------------------------------------------
class Record:
    """One record: a MessageSet message (magic 0/1) or a RecordBatch record (magic 2)."""

    offset: int
    timestamp: int  # milliseconds since the epoch, -1 when absent
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]  # () for magic 0/1
    def __init__(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...] = (),
    ) -> None: ...
    def __eq__(self, other: object) -> bool: ...  # field by field, across implementations
    def __repr__(self) -> str: ...

class Batch:
    """One RecordBatch (magic 2), or one top-level message of a MessageSet (magic 0/1).

    For a legacy message, base_offset is the offset of its first (inner) record, crc the
    CRC32 of the (wrapper) message, producer fields -1, partition_leader_epoch -1.
    """

    base_offset: int
    magic: int
    crc: int
    attributes: int
    compression: int
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    partition_leader_epoch: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record]

class ConsumerRecord:
    """One consumed record, as kafkawire's Consumer.poll() hands it out (all fields
    read-only; equality and hash are identity)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...  # milliseconds since the epoch, -1 when absent
    @property
    def timestamp_type(self) -> int: ...  # 0 CreateTime, 1 LogAppendTime, -1 magic 0
    @property
    def key(self) -> Any: ...  # bytes | None, or what a key deserializer made of it
    @property
    def value(self) -> Any: ...  # bytes | None, or what a value deserializer made of it
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...
    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: Any,
        value: Any,
        headers: Iterable[tuple[str, bytes | None]] = (),
    ) -> None: ...
    def __repr__(self) -> str: ...

# Record input for encoders: a Record, or a tuple (key, value), (key, value, timestamp)
# or (key, value, timestamp, headers).  key/value: bytes-like or None.  timestamp None or
# absent: the encoder's ``timestamp`` argument.  headers: iterable of (str or bytes key,
# bytes-like or None value).
RecordInput = Record | tuple[Any, ...]

def decode_batches(
    data: Buffer,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = ...,
    max_decompressed_size: int = ...,
) -> list[Batch]: ...
def decode_records(
    data: Buffer,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = ...,
    max_decompressed_size: int = ...,
    include_control: bool = False,
) -> list[Record]: ...
def decode_consumer_records(
    data: Buffer,
    topic: str,
    partition: int,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = ...,
    max_decompressed_size: int = ...,
    key_deserializer: Callable[[bytes | None], Any] | None = None,
    value_deserializer: Callable[[bytes | None], Any] | None = None,
) -> tuple[list[ConsumerRecord], int | None]:
    """(records, next_offset): the records of the non-control batches as ConsumerRecords
    of ``topic``/``partition``, and the offset after the last batch (or legacy message)
    holding records at or past ``start_offset``, control batches included; None when
    there is none.  Deserializers run once everything is decoded, in record order."""

# Offered as kafkawire.codec.decode_records_with and FIELD_*; the twin, kafkawire._pycodec,
# re-exports the same names.
class _RecordField:
    """A placeholder in decode_records_with's ``layout``: the named field of each record."""

    name: Final[str]
    code: Final[int]

_FIELD_OFFSET: Final[_RecordField]
_FIELD_TIMESTAMP: Final[_RecordField]
_FIELD_TIMESTAMP_TYPE: Final[_RecordField]
_FIELD_KEY: Final[_RecordField]
_FIELD_VALUE: Final[_RecordField]
_FIELD_KEY_SIZE: Final[_RecordField]  # the key's length in bytes, -1 for a null key
_FIELD_VALUE_SIZE: Final[_RecordField]
_FIELD_HEADERS: Final[_RecordField]  # a tuple of (str, bytes | None)
_FIELD_CRC: Final[_RecordField]  # a magic 0/1 message's own CRC (innermost); None in magic 2

def decode_records_with(
    data: Buffer,
    factory: Callable[..., Any],
    layout: tuple[Any, ...],
    *,
    init: Callable[..., None] | None = None,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = ...,
    max_decompressed_size: int = ...,
    include_control: bool = False,
) -> list[Any]:
    """Each record made by ``factory(*layout)`` with every _FIELD_* item of ``layout`` (at
    most 32 items) replaced by that field: a client's own record type straight from the
    bytes.  With ``init``: ``factory.__new__(factory)``, then ``init(record, *args)``.
    Records below the position (``start_offset``, moved past each record made) are
    dropped, as a consumer reads them.  The twin's is kafkawire._pycodec_decode's."""
def decode_columnar(
    data: Buffer,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = ...,
    max_decompressed_size: int = ...,
) -> Columns:
    """Every record (control batches skipped) in one pass, as a Columns view of ``data``:
    ``is_view`` is True until ``data`` or an ``*_offsets`` array is first used (see
    kafkawire._columnar.Columns).  The extension's and the twin's views hold the same
    arrays and records."""
def encode_message_set(
    records: Iterable[RecordInput],
    *,
    magic: int = 1,
    compression: int = 0,
    compression_level: int | None = None,
    base_offset: int = 0,
    timestamp: int = -1,
    log_append_time: bool = False,
) -> bytes: ...
def encode_record_batch(
    records: Iterable[RecordInput],
    *,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    timestamp: int = -1,
    log_append_time: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes: ...
def encode_columnar(
    columns: Columns,
    *,
    magic: int = 2,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    log_append_time: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes: ...
