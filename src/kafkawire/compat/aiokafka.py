"""kafkawire's codec as aiokafka's record layer.

``install()`` puts classes backed by kafkawire's codec wherever aiokafka looks its record
classes up (``aiokafka.record.*``, the names its consumer and producer imported, and
aiokafka's own Cython/pure-Python selection), ``uninstall()`` puts aiokafka's own back and
``installed()`` says which are in place.  Setting ``KAFKAWIRE_PATCH_AIOKAFKA=1`` installs
them when this module is imported.

What changes:

* ``MemoryRecords`` splits a fetched partition into its batches (every magic, every
  codec); a batch is decoded by kafkawire's codec when its records are read, so aiokafka's
  consumer sees the same batches, CRC results and exceptions as with its own classes.
* The consumer's ``PartitionRecords`` (aiokafka/consumer/fetcher.py) turns each batch
  (every magic; runs of small ones together) into aiokafka's own ``ConsumerRecord``
  objects with one codec call that makes them straight from the bytes (the codec's
  ``decode_records_with``: no record object in between) and hands them out through a
  C-level iterator, with aiokafka's rules for positions, control batches and aborted
  transactions;
  ``FetchResult.getall`` (what ``getmany`` calls) takes them with a C slice of that
  iterator instead of its per-record loop.
* ``AIOKafkaProducer.send`` puts a record into its partition's open batch in one compiled
  coroutine, and ``MessageBatch.done`` resolves a batch's record futures in one compiled
  call (the producer's per-record work around the builder; see "the producer's
  per-record path").
* With ``install(builders=True)``, ``DefaultRecordBatchBuilder`` / ``LegacyRecordBatchBuilder``
  keep appended records and encode the batch with one codec call in ``build()``.

Damaged data reads as aiokafka reads it, exception classes included: a batch kafkawire's
decoder refuses (or would read otherwise) is read by aiokafka's own pure-Python classes
(see _host_readers).  The differences kept on purpose are listed in
tests/fuzz/atheris_compat.py and pinned in tests/compat/test_kept_differences.py.

Install it before creating producers and consumers: a producer batch started under one
builder class must be finished by the same one.

Host versions: ``TESTED_VERSIONS`` are the aiokafka releases this is tested with; on
another, ``install()`` raises UntestedHostError and replaces nothing (``force=True``
installs anyway, with a warning), and the environment opt-in warns and leaves aiokafka's
own record layer (``KAFKAWIRE_PATCH_AIOKAFKA=force`` installs).
"""

from __future__ import annotations

import os
import struct
import sys
import time
import types
from itertools import chain as _chain, islice as _islice
from typing import Any

import aiokafka as _aiokafka
import aiokafka.codec as _aiocodec
import aiokafka.consumer.fetcher as _fetcher
import aiokafka.errors as _aioerrors
import aiokafka.producer.message_accumulator  # noqa: F401 - imported so install() patches it
import aiokafka.producer.producer  # noqa: F401 - imported so install() patches it
import aiokafka.record  # noqa: F401 - imported so install() patches it
import aiokafka.record.control_record as _control
import aiokafka.record.default_records as _default
import aiokafka.record.legacy_records as _legacy
import aiokafka.record.memory_records as _memory

from kafkawire import codec as _codec
from kafkawire import compression as _compression
from kafkawire import errors as _errors
from kafkawire.compat import _factory, _factory_py, _guard, _hostbytes, _pristine
from kafkawire.compat._guard import UntestedHostError, UntestedHostWarning

__all__ = [
    "ENV_VAR",
    "HOST",
    "TESTED_VERSIONS",
    "UntestedHostError",
    "UntestedHostWarning",
    "host_version",
    "install",
    "uninstall",
    "installed",
    "MemoryRecords",
    "DefaultRecordBatch",
    "DefaultRecord",
    "DefaultRecordBatchBuilder",
    "DefaultRecordMetadata",
    "LegacyRecordBatch",
    "LegacyRecord",
    "LegacyRecordBatchBuilder",
    "LegacyRecordMetadata",
    "ControlRecord",
    "ABORT_MARKER",
    "COMMIT_MARKER",
    "PartitionRecords",
    "ENV_VAR",
]

#: Set to 1 to install when this module is imported.
ENV_VAR = "KAFKAWIRE_PATCH_AIOKAFKA"
HOST = "aiokafka"
# The aiokafka releases this drop-in is tested with, lowest and highest (make test runs
# aiokafka's own tests and the parity tests on them, tests/compat/test_host_suites.py).
# 0.11-0.13 differ in the producer internals the drop-in replaces.
TESTED_VERSIONS = ("0.14.0", "0.14.0")

_INT64_MIN = -(1 << 63)
_LOG_OVERHEAD = 12  # offset int64 + size int32 in front of every entry
_MIN_ENTRY = 14  # the smallest magic 0 message: crc, magic, attributes, key and value lengths
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # RecordBatch header up to the record count
_V2_HEADER_SIZE = _V2_HEADER.size  # 61
_V2_RUN_FIELDS = struct.Struct(">q13xhi30xi")  # base offset, attributes, last offset delta, count
_V2_CRC_START = 21  # KIP-98: CRC32C covers attributes..end
_V0_HEADER = struct.Struct(">qiIbb")
_V1_HEADER = struct.Struct(">qiIbbq")
_ENTRY = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_BYTES_TYPES = (bytes, bytearray, memoryview)
_svi = _codec.size_of_varint


def _aiokafka_error(exc: Exception) -> Exception:
    """The aiokafka exception for a kafkawire codec error (chained by the caller)."""
    if isinstance(exc, (_errors.UnsupportedCodecError, _errors.CompressionLibraryMissingError)):
        return _aioerrors.UnsupportedCodecError(str(exc))
    return _aioerrors.CorruptRecordException(str(exc))


def _assert_host_codec(codec_id: int, magic: int) -> None:
    """Raise what aiokafka's readers raise, in its words, for a compressed batch they
    cannot read (see _hostbytes.unreadable_codec)."""
    why = _hostbytes.unreadable_codec(_aiocodec, codec_id, magic)
    if why is None:
        return
    if why[0] == "unknown":
        raise _aioerrors.UnsupportedCodecError(f"Unknown compression codec {codec_id:#04x}")
    raise _aioerrors.UnsupportedCodecError(f"Libraries for {why[1]} compression codec not found")


def _refuse_null_wrapper(buf, magic: int) -> None:
    """aiokafka refuses a compressed magic 0/1 wrapper without a value, in its words,
    before it looks at the codec."""
    if magic < 2 and _hostbytes.null_wrapper(buf):
        raise _aioerrors.CorruptRecordException(_hostbytes.NULL_WRAPPER_MESSAGE)


def _decode_one(buf, codec_id: int, magic: int) -> list:
    """The kafkawire Records of one entry, CRCs unchecked (aiokafka checks them apart)."""
    if codec_id:
        _refuse_null_wrapper(buf, magic)
        _assert_host_codec(codec_id, magic)
    try:
        batches = _codec.decode_batches(buf, check_crcs=False, start_offset=_INT64_MIN)
    except _errors.CodecError as exc:
        raise _aiokafka_error(exc) from exc
    if len(batches) == 1:
        return batches[0].records
    out: list = []
    for b in batches:
        out += b.records
    return out


def _host_readers():
    """aiokafka's own pure-Python batch classes and MemoryRecords (its Cython ones crash the
    interpreter on some damaged data), guarded (see kafkawire.compat._pristine): a batch
    kafkawire's decoder refuses is read by them, so damaged data gives aiokafka's records
    and exception classes."""
    corrupt = _aioerrors.CorruptRecordException
    legacy = _pristine.frozen(
        _legacy, ["_LegacyRecordPy", "_LegacyRecordBatchPy"],
        globals_=_pristine.bounded_decoders(_legacy, corrupt),
        methods={"_LegacyRecordBatchPy": {"_read_all_headers": _pristine.walk_once(corrupt)}})
    default = _pristine.frozen(
        _default, ["_DefaultRecordPy", "_DefaultRecordBatchPy"],
        globals_=_pristine.bounded_decoders(_default, corrupt))
    memory = _pristine.frozen(
        _memory, ["_MemoryRecordsPy"],
        globals_={"LegacyRecordBatch": legacy["_LegacyRecordBatchPy"],
                  "DefaultRecordBatch": default["_DefaultRecordBatchPy"]})
    return (legacy["_LegacyRecordBatchPy"], default["_DefaultRecordBatchPy"],
            memory["_MemoryRecordsPy"])


_HostLegacyBatch, _HostDefaultBatch, _HostMemoryRecords = _host_readers()


class _ReadByHost(Exception):
    """Data aiokafka reads otherwise than kafkawire: its own class reads it."""


def _legacy_alike(view, magic: int) -> bool:
    """Whether aiokafka reads the magic 0/1 entry ``view`` as kafkawire does: key and
    value lengths -1 or inside the message (aiokafka walks one below -1 backwards), and a
    compressed wrapper's inner set made of whole messages of the wrapper's magic (it
    reads them all with that magic)."""
    if not (_hostbytes.plain_lengths(view, magic)
            and _hostbytes.legacy_reads_alike(view, magic)):
        return False
    codec_id = view[17] & 0x07
    if not codec_id:
        return True
    pos = 18 + (8 if magic else 0)
    (klen,) = _INT32.unpack_from(view, pos)
    pos += 4 + max(klen, 0)
    (vlen,) = _INT32.unpack_from(view, pos)
    try:
        inner = memoryview(_compression.decompress(
            codec_id, view[pos + 4:pos + 4 + vlen], _codec.DEFAULT_MAX_DECOMPRESSED_SIZE,
            legacy_lz4=magic == 0))
    except _errors.CodecError:
        return False
    return _hostbytes.whole_messages(inner, magic)


class _Codecs:
    __slots__ = ()
    CODEC_MASK = 0x07
    CODEC_NONE = 0x00
    CODEC_GZIP = 0x01
    CODEC_SNAPPY = 0x02
    CODEC_LZ4 = 0x03
    CODEC_ZSTD = 0x04
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_MASK = 0x10
    CONTROL_MASK = 0x20
    LOG_APPEND_TIME = 1
    CREATE_TIME = 0
    NO_PARTITION_LEADER_EPOCH = -1


# ---------------------------------------------------------------------------------------
# records and metadata
# ---------------------------------------------------------------------------------------


class DefaultRecord:
    """One magic 2 record, as aiokafka's DefaultRecord (headers a list, checksum None)."""

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    @property
    def checksum(self) -> None:
        return None

    def _fields(self) -> tuple:
        return (self.offset, self.timestamp, self.timestamp_type, self.key, self.value,
                list(self.headers))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DefaultRecord):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"DefaultRecord(offset={self.offset!r}, timestamp={self.timestamp!r}, "
                f"timestamp_type={self.timestamp_type!r}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


class LegacyRecord:
    """One magic 0/1 message, as aiokafka's LegacyRecord (no headers, checksum its CRC)."""

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "crc")

    def __init__(self, offset, timestamp, timestamp_type, key, value, crc):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.crc = crc

    @property
    def headers(self) -> list:
        return []

    @property
    def checksum(self) -> int:
        return self.crc

    def _fields(self) -> tuple:
        return (self.offset, self.timestamp, self.timestamp_type, self.key, self.value, self.crc)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LegacyRecord):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"LegacyRecord(offset={self.offset!r}, timestamp={self.timestamp!r}, "
                f"timestamp_type={self.timestamp_type!r}, key={self.key!r}, "
                f"value={self.value!r}, crc={self.crc!r})")


# What DefaultRecordBatchBuilder.append returns (compiled with the compiled codec).
DefaultRecordMetadata = _factory.DefaultRecordMetadata


class LegacyRecordMetadata:
    """What LegacyRecordBatchBuilder.append returns."""

    __slots__ = ("offset", "crc", "size", "timestamp")

    def __init__(self, offset: int, crc: int, size: int, timestamp: int) -> None:
        self.offset = offset
        self.crc = crc
        self.size = size
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (f"LegacyRecordMetadata(offset={self.offset!r}, crc={self.crc!r}, "
                f"size={self.size!r}, timestamp={self.timestamp!r})")


# ---------------------------------------------------------------------------------------
# batches
# ---------------------------------------------------------------------------------------


class DefaultRecordBatch(_Codecs):
    """One magic 2 RecordBatch: header fields, CRC check, and its records when iterated."""

    __slots__ = ("_buffer", "_header", "_records", "_next", "_iterated", "_host")

    def __init__(self, buffer) -> None:
        view = memoryview(buffer)
        self._host = None  # aiokafka's own batch, reading what kafkawire's decoder refuses
        if view.nbytes < _V2_HEADER_SIZE:
            _HostDefaultBatch(view)  # raises what aiokafka raises (struct.error)
            raise _aioerrors.CorruptRecordException(
                f"record batch of {view.nbytes} bytes is shorter than its "
                f"{_V2_HEADER_SIZE}-byte header")
        self._buffer = view
        self._header = _V2_HEADER.unpack_from(view)
        self._records: list | None = None  # kafkawire Records once decoded
        self._next = 0
        self._iterated = False

    base_offset = property(lambda self: self._header[0])
    magic = property(lambda self: self._header[3])
    crc = property(lambda self: self._header[4])
    attributes = property(lambda self: self._header[5])
    compression_type = property(lambda self: self._header[5] & 0x07)
    timestamp_type = property(lambda self: (self._header[5] >> 3) & 1)
    is_transactional = property(lambda self: bool(self._header[5] & 0x10))
    is_control_batch = property(lambda self: bool(self._header[5] & 0x20))
    last_offset_delta = property(lambda self: self._header[6])
    first_timestamp = property(lambda self: self._header[7])
    max_timestamp = property(lambda self: self._header[8])
    producer_id = property(lambda self: self._header[9])
    producer_epoch = property(lambda self: self._header[10])
    base_sequence = property(lambda self: self._header[11])

    @property
    def next_offset(self) -> int:
        return self._header[0] + self._header[6] + 1

    def validate_crc(self) -> bool:
        assert not self._iterated, "Validate should be called before iteration"
        return _codec.crc32c(self._buffer[_V2_CRC_START:]) == self._header[4]

    def _kw_records(self) -> list:
        records = self._records
        if records is None:
            try:
                if not _hostbytes.v2_reads_alike(self._buffer):
                    raise _ReadByHost
                records = _decode_one(self._buffer, self._header[5] & 0x07, 2)
            except Exception:  # noqa: BLE001 - aiokafka's own class says what is wrong
                self._host = _HostDefaultBatch(self._buffer)
                raise _ReadByHost from None
            self._records = records
        return records

    def __iter__(self) -> DefaultRecordBatch:
        self._iterated = True
        if self._host is None:
            try:
                self._kw_records()
            except _ReadByHost:
                iter(self._host)  # raises where aiokafka's does
        return self

    def __next__(self) -> DefaultRecord:
        self._iterated = True
        if self._host is not None:
            return next(self._host)
        try:
            records = self._kw_records()
        except _ReadByHost:
            return next(self._host)
        i = self._next
        if i >= len(records):
            raise StopIteration
        self._next = i + 1
        r = records[i]
        return DefaultRecord(r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                             list(r.headers))


class LegacyRecordBatch(_Codecs):
    """One top-level magic 0/1 message: a record, or a compressed wrapper of several."""

    __slots__ = ("_buffer", "_magic", "_offset", "_crc", "_attributes", "_timestamp",
                 "_records", "_crcs")
    is_control_batch = False
    is_transactional = False
    producer_id = None
    RECORD_OVERHEAD_V0 = 14
    RECORD_OVERHEAD_V1 = 22

    def __init__(self, buffer, magic: int) -> None:
        view = memoryview(buffer)
        header = (_V0_HEADER if magic == 0 else _V1_HEADER).unpack_from(view)
        assert header[1] == view.nbytes - _LOG_OVERHEAD
        assert header[3] == magic
        self._buffer = view
        self._magic = magic
        self._offset = header[0]
        self._crc = header[2]
        self._attributes = header[4]
        self._timestamp = header[5] if magic else None
        self._records: list | None = None
        self._crcs: list | None = None

    @property
    def next_offset(self) -> int:
        return self._offset + 1

    def validate_crc(self) -> bool:
        return _codec.crc32(self._buffer[16:]) == self._crc

    def _kw_records(self) -> list:
        records = self._records
        if records is None:
            records = self._records = _decode_one(self._buffer, self._attributes & 0x07,
                                                  self._magic)
        return records

    def _record_crcs(self, n: int) -> list:
        """Each record's own CRC: the message's, or those of a wrapper's inner messages."""
        if not self._attributes & 0x07:
            return [self._crc] * n
        crcs = self._crcs
        if crcs is None:
            view = self._buffer
            pos = 18 + (8 if self._magic else 0)  # wrapper key length (after magic 1 timestamp)
            (klen,) = _INT32.unpack_from(view, pos)
            pos += 4 + max(klen, 0)
            (vlen,) = _INT32.unpack_from(view, pos)
            inner = _compression.decompress(
                self._attributes & 0x07, view[pos + 4:pos + 4 + vlen],
                _codec.DEFAULT_MAX_DECOMPRESSED_SIZE, legacy_lz4=self._magic == 0)
            crcs = []
            for b in _codec.decode_batches(inner, check_crcs=False, start_offset=_INT64_MIN):
                crcs += [b.crc] * len(b.records)
            self._crcs = crcs
        return crcs

    def _legacy_records(self) -> list:
        records = self._kw_records()
        crcs = self._record_crcs(len(records))
        if self._magic == 0:
            return [LegacyRecord(r.offset, None, None, r.key, r.value, c)
                    for r, c in zip(records, crcs)]
        return [LegacyRecord(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, c)
                for r, c in zip(records, crcs)]

    def __iter__(self):
        if _legacy_alike(self._buffer, self._magic):
            try:
                return iter(self._legacy_records())
            except Exception:  # noqa: BLE001 - aiokafka's own class says what is wrong
                pass
        return iter(_HostLegacyBatch(self._buffer, self._magic))


# ---------------------------------------------------------------------------------------
# MemoryRecords: one codec call for a whole fetched partition
# ---------------------------------------------------------------------------------------


class MemoryRecords:
    """The record data of one partition in a Fetch response, batch by batch (each decoded
    when its records are read: the consumer's magic 2 batches never become kafkawire
    Records, see PartitionRecords)."""

    __slots__ = ("_buffer", "_view", "_entries", "_stuck", "_i", "_host")

    def __init__(self, bytes_data) -> None:
        self._buffer = bytes_data
        self._host = None  # aiokafka's own walk, for negative entry sizes
        view = self._view = memoryview(bytes_data)
        n = view.nbytes
        entries = []  # (start, end, magic)
        stuck = None  # entry too small to be any message: next_batch raises there for good
        pos = 0
        unpack = _ENTRY.unpack_from
        while n - pos >= _LOG_OVERHEAD:
            length = unpack(view, pos)[1]
            end = pos + _LOG_OVERHEAD + length
            if end > n:
                break  # a partial entry at the end of a fetch response is normal
            if length < _MIN_ENTRY:
                stuck = (f"Record size is less than the minimum record overhead "
                         f"({_MIN_ENTRY})")
                if length < 0:
                    # aiokafka's walk slices the buffer from its end: its own walk reads it
                    self._host = _pristine.HostWalk(_HostMemoryRecords(bytes_data),
                                                    _aioerrors.CorruptRecordException)
                break
            entries.append((pos, end, view[pos + 16]))
            pos = end
        self._entries = entries
        self._stuck = stuck
        self._i = 0

    def size_in_bytes(self) -> int:
        return len(self._buffer)

    def has_next(self) -> bool:
        if self._host is not None:
            return self._host.has_next()
        return self._i < len(self._entries) or self._stuck is not None

    def _small_run(self, pos: int, read_committed: bool) -> tuple | None:
        """From the next entry on, the batches PartitionRecords may read with one codec
        call: (index after them, where their bytes end, their magic, [(base offset,
        record count, next offset)]) for two or more batches of one magic and at most
        _RUN_RECORDS records in all, each starting at or past the position the one before
        leaves: magic 2 batches of plain records (no control batch, no transaction to
        decide under read_committed) in a codec aiokafka reads, or uncompressed magic 0/1
        messages (one record each); else None."""
        entries = self._entries
        view = self._view
        i = self._i
        run = []
        total = 0
        first_magic = entries[i][2] if i < len(entries) else -1
        while i < len(entries):
            start, end, magic = entries[i]
            if magic != first_magic:
                break
            if magic == 2:
                if end - start < _V2_HEADER_SIZE:
                    break
                base, attrs, last_delta, count = _V2_RUN_FIELDS.unpack_from(view, start)
                if (attrs & 0x20 or (read_committed and attrs & 0x10) or count < 0
                        or (attrs & 0x07 and (_hostbytes.unreadable_codec(
                            _aiocodec, attrs & 0x07, 2)
                            or not _hostbytes.v2_reads_alike(view, start)))):
                    break
                next_offset = base + last_delta + 1
            elif magic in (0, 1) and not view[start + 17] & 0x07:
                base, count = _ENTRY.unpack_from(view, start)[0], 1
                next_offset = base + 1
            else:
                break
            if base < pos or total + count > _RUN_RECORDS:
                break
            pos = next_offset
            run.append((base, count, pos))
            total += count
            i += 1
        if len(run) < 2:
            return None
        return i, entries[i - 1][1], first_magic, run

    def next_batch(self):
        if self._host is not None:
            return self._host.next_batch()
        i = self._i
        entries = self._entries
        if i >= len(entries):
            if self._stuck is not None:
                raise _aioerrors.CorruptRecordException(self._stuck)
            return None
        self._i = i + 1
        start, end, magic = entries[i]
        view = self._view[start:end]
        if magic >= 2:
            return DefaultRecordBatch(view)
        return LegacyRecordBatch(view, magic)


# ---------------------------------------------------------------------------------------
# the consumer's PartitionRecords
# ---------------------------------------------------------------------------------------

_ORIGINAL_PARTITION_RECORDS = _fetcher.PartitionRecords
# Small batches (a producer with linger 0 writes one record each) are read several at a
# time, up to this many records: a batch's own Python work costs more than its records.
_RUN_RECORDS = 512


class PartitionRecords(_ORIGINAL_PARTITION_RECORDS):
    """aiokafka's PartitionRecords, building ConsumerRecords a whole batch at a time.

    Each batch's records become one list of ConsumerRecords when iteration reaches it;
    the lists are chained by a C iterator, so no Python frame runs per record.  Errors
    come out where aiokafka raises them: after the records of the batches before.
    ``next_fetch_offset`` follows aiokafka's rules: the offset after the last record
    handed out, and past skipped batches (control, aborted, compacted away) once the
    iteration went over them.
    """

    def __init__(self, tp, records, aborted_transactions, fetch_offset, key_deserializer,
                 value_deserializer, check_crcs, isolation_level):
        self._tp = tp
        self._records = records
        self._aborted_transactions = sorted(aborted_transactions or [], key=lambda x: x[1])
        self._aborted_producers: set = set()
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._check_crcs = check_crcs
        self._isolation_level = isolation_level
        self._pos = fetch_offset  # the position before the current list
        # what the codec makes each ConsumerRecord from, in aiokafka's argument order,
        # per magic: checksum None in magic 2, each message's CRC before; no timestamp
        # (None) in magic 0; headers a tuple
        c = _codec
        self._make = _fetcher.ConsumerRecord
        self._init = _plain_init(self._make)
        head = (tp.topic, tp.partition, c.FIELD_OFFSET)
        tail = (c.FIELD_KEY, c.FIELD_VALUE)
        sizes = (c.FIELD_KEY_SIZE, c.FIELD_VALUE_SIZE, c.FIELD_HEADERS)
        stamps = (c.FIELD_TIMESTAMP, c.FIELD_TIMESTAMP_TYPE)
        self._layouts = (head + (None, None) + tail + (c.FIELD_CRC,) + sizes,
                         head + stamps + tail + (c.FIELD_CRC,) + sizes,
                         head + stamps + tail + (None,) + sizes)
        self._cur: list = []  # ConsumerRecords of the current batch
        self._rest: Any = iter(self._cur)  # what is left of it
        # aiokafka's name for it: code that sets it (its own tests do) is heard
        self._records_iterator = _chain.from_iterable(self._lists())

    @property
    def next_fetch_offset(self) -> int:
        cur = self._cur
        consumed = len(cur) - self._rest.__length_hint__()
        if consumed == 0:
            return self._pos
        return cur[consumed - 1].offset + 1

    def __iter__(self):
        return self._records_iterator

    def __next__(self):
        return next(self._records_iterator)

    def _lists(self):
        records = self._records
        read_committed = self._isolation_level == _fetcher.READ_COMMITTED
        runs = type(records) is MemoryRecords and records._host is None
        per_batch_until = 0  # entries before this index are read batch by batch
        while records.has_next():
            if runs and records._i >= per_batch_until:
                run = records._small_run(self._pos, read_committed)
                out = self._run_records(records, run) if run is not None else None
                if out is not None:
                    end_index, _end, magic, batches = run
                    records._i = end_index
                    if read_committed and magic == 2:  # as aiokafka's, batch by batch
                        self._consume_aborted_up_to(batches[-1][0])
                    out, error = self._deserialized(out)
                    if out:
                        self._cur = out
                        self._rest = iter(out)
                        yield self._rest
                        self._settle()
                    if error is None:
                        self._pos = batches[-1][2]
                        continue
                    # aiokafka moved to a batch's next offset before reading the next one
                    k = 0
                    for _base, count, next_offset in batches:
                        k += count
                        if k > len(out):
                            break
                        if k == len(out):  # (past batches left empty too)
                            self._pos = next_offset
                    raise error
                if run is not None:
                    per_batch_until = run[0]  # the exact records and error, batch by batch
            batch = records.next_batch()
            if self._check_crcs and not batch.validate_crc():
                raise _aioerrors.CorruptRecordException(f"Invalid CRC - {self._tp}")
            if read_committed and batch.producer_id is not None:
                self._consume_aborted_up_to(batch.base_offset)
                if batch.is_control_batch and self._contains_abort_marker(batch):
                    self._aborted_producers.discard(batch.producer_id)
                if batch.is_transactional and batch.producer_id in self._aborted_producers:
                    self._pos = batch.next_offset
                    continue
            if batch.is_control_batch:
                self._pos = batch.next_offset
                continue
            out, error = self._batch_records(batch, self._pos)
            if out:
                self._cur = out
                self._rest = iter(out)
                yield self._rest
                self._settle()
            if error is not None:
                raise error
            self._pos = batch.next_offset
        self._settle()
        self._records = None  # the fetched bytes are no longer needed

    def _run_records(self, records: MemoryRecords, run: tuple) -> list | None:
        """The ConsumerRecords of the batches of a MemoryRecords._small_run, from one
        codec call; None when reading them batch by batch could differ (a bad CRC or a
        corrupt batch, records out of offset order or outside their batch's offsets)."""
        _end_index, end, magic, batches = run
        start = records._entries[records._i][0]
        try:
            out = _factory.decode_records_with(
                records._view[start:end], self._make, self._layouts[magic], init=self._init,
                start_offset=self._pos, check_crcs=self._check_crcs)
        except _errors.CodecError:
            return None
        if len(out) != sum(count for _base, count, _next in batches):
            return None
        k = 0
        for base, count, next_offset in batches:
            # made records ascend: within its batch's offsets, each is one aiokafka's
            # loop hands out too
            if count and not (base <= out[k].offset and out[k + count - 1].offset < next_offset):
                return None
            k += count
        return out

    def _deserialized(self, out: list) -> tuple[list, Exception | None]:
        """``out`` through the deserializers (records up to the first error, and it)."""
        # aiokafka calls a deserializer if it is true, not only if it is not None
        kd = self._key_deserializer or None
        vd = self._value_deserializer or None
        if kd is None and vd is None:
            return out, None
        return out, _factory.deserialize(out, kd, vd)

    def _settle(self) -> None:
        """Fold the handed-out records of the current list into the position."""
        self._pos = self.next_fetch_offset
        self._cur = []
        self._rest = iter(self._cur)

    def _batch_records(self, batch, pos: int) -> tuple[list, Exception | None]:
        """(ConsumerRecords, error) of one batch, from offset ``pos`` on: the records up to
        the first error (raised after them), and that error or None."""
        tp = self._tp
        # aiokafka calls a deserializer if it is true, not only if it is not None
        kd = self._key_deserializer or None
        vd = self._value_deserializer or None
        kind = type(batch)
        if (kind is DefaultRecordBatch or kind is LegacyRecordBatch) and batch._records is None:
            if kind is DefaultRecordBatch:
                batch._iterated = True
                magic, codec_id = 2, batch._header[5] & 0x07
            else:
                magic, codec_id = batch._magic, batch._attributes & 0x07
            # (one record in a plain legacy entry: not worth pausing the GC for)
            decode = (_factory.decode_records_with if codec_id or magic == 2
                      else _factory.codec_impl.decode_records_with)
            try:
                if not (_hostbytes.v2_reads_alike(batch._buffer) if magic == 2
                        else _legacy_alike(batch._buffer, magic)):
                    raise _ReadByHost
                if codec_id:
                    _refuse_null_wrapper(batch._buffer, magic)
                    _assert_host_codec(codec_id, magic)
                out = decode(batch._buffer, self._make, self._layouts[magic], init=self._init,
                             start_offset=pos, check_crcs=False)
            except Exception:  # noqa: BLE001 - aiokafka's own class says what is wrong
                # damaged data: aiokafka's own batch reads it, record by record below
                batch = (_HostDefaultBatch(batch._buffer) if magic == 2
                         else _HostLegacyBatch(batch._buffer, magic))
            else:
                return self._deserialized(out)
        # a foreign batch class, or one read before: record by record, as aiokafka does
        out: list = []
        cr = _fetcher.ConsumerRecord
        try:
            for r in batch:
                offset = r.offset
                if offset < pos:
                    continue  # an earlier record of a compressed set
                key = r.key
                value = r.value
                out.append(cr(tp.topic, tp.partition, offset, r.timestamp, r.timestamp_type,
                              key if kd is None else kd(key),
                              value if vd is None else vd(value),
                              r.checksum, -1 if key is None else len(key),
                              -1 if value is None else len(value), tuple(r.headers)))
                pos = offset + 1
        except Exception as exc:  # noqa: BLE001 - raised after the records before it
            return out, exc
        return out, None


def _plain_init(cls) -> Any:
    """``cls.__init__`` when calling ``cls`` is exactly ``object.__new__(cls)`` and then
    that Python function (aiokafka's ConsumerRecord, a dataclass), so the codec may make
    records that way, faster; else None (the codec calls ``cls`` itself)."""
    init = cls.__dict__.get("__init__") if isinstance(cls, type) else None
    if (type(cls) is type and cls.__new__ is object.__new__
            and type(init) is types.FunctionType):
        return init
    return None


def _getall(self, max_records=None):
    """aiokafka's FetchResult.getall over kafkawire's PartitionRecords: the records are
    taken by a C slice of its iterator instead of a Python loop, with the same results,
    positions and exceptions (an error drops the records taken with it, as aiokafka's
    loop does)."""
    records = self._partition_records
    if type(records) is not PartitionRecords or (max_records is not None and max_records < 1):
        return _ORIGINAL_GETALL(self, max_records)
    if not self.check_assignment(self._topic_partition) or not self.has_more():
        return []
    out = list(_islice(records._records_iterator, max_records))
    self._update_position()
    if max_records is None or len(out) < max_records:
        self._partition_records = None  # exhausted
    return out


_ORIGINAL_GETALL = _fetcher.FetchResult.getall


# ---------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------

_ORIGINAL_DEFAULT_BUILDER = _default.DefaultRecordBatchBuilder
_ORIGINAL_LEGACY_BUILDER = _legacy.LegacyRecordBatchBuilder


class DefaultRecordBatchBuilder(_factory.AiokafkaAppender, _Codecs):
    """Collects records for one magic 2 batch and encodes it with one codec call; the
    per-record ``append`` is compiled (kafkawire._compat.AiokafkaAppender)."""

    MAX_RECORD_OVERHEAD = 21  # length 5 + attributes 1 + timestamp delta 10 + offset 5
    HEADER_SIZE = _V2_HEADER_SIZE
    # what estimate_size_in_bytes hands over: headers, keys or values of other types
    _host_estimate = staticmethod(_ORIGINAL_DEFAULT_BUILDER.estimate_size_in_bytes)

    def __init__(self, magic: int, compression_type: int, is_transactional: int,
                 producer_id: int, producer_epoch: int, base_sequence: int,
                 batch_size: int) -> None:
        assert magic >= 2
        self._magic = magic
        self._compression_type = compression_type & 0x07
        self._is_transactional = bool(is_transactional)
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._batch_size = batch_size
        self._records: list = []  # key, value, timestamp, ... (see AiokafkaAppender)
        self._headers: dict = {}  # record index -> its headers, if any
        self._first_timestamp: int | None = None
        self._size = _V2_HEADER_SIZE
        self._built: bytearray | None = None
        # Appends whose offsets are not 0, 1, 2... (the codec writes offset deltas in
        # record order) go to aiokafka's own builder, replayed into it.
        self._fallback: Any = None

    def _rows(self):
        """(key, value, timestamp[, headers]) of each record appended, as they come."""
        it = iter(self._records)
        headers = self._headers
        if not headers:
            return zip(it, it, it)
        return ((key, value, ts, headers.get(i, ()))
                for i, (key, value, ts) in enumerate(zip(it, it, it)))

    def _to_fallback(self):
        fb = _ORIGINAL_DEFAULT_BUILDER(
            self._magic, self._compression_type, self._is_transactional, self._producer_id,
            self._producer_epoch, self._base_sequence, self._batch_size)
        for i, (key, value, ts, *headers) in enumerate(self._rows()):
            fb.append(i, ts, key, value, headers[0] if headers and headers[0] else [])
        self._fallback = fb
        return fb

    def build(self) -> bytearray:
        if self._fallback is not None:
            return self._fallback.build()
        if self._built is not None:
            return self._built
        codec_id = self._compression_type
        compress = _host_compressor(codec_id) if codec_id else None
        if not self._records or (codec_id and compress is None):
            # an empty batch (aiokafka's two builders write its timestamps differently), or
            # a codec aiokafka refuses: its own builder writes or raises
            return self._to_fallback().build()
        try:
            data = _codec.encode_record_batch(
                self._rows(), producer_id=self._producer_id, producer_epoch=self._producer_epoch,
                base_sequence=self._base_sequence, is_transactional=self._is_transactional)
        except _errors.CodecError as exc:
            raise _aiokafka_error(exc) from exc
        if compress is not None:
            data = _hostbytes.v2_compressed(data, codec_id, compress)
        self._built = bytearray(data)
        return self._built

    def size(self) -> int:
        if self._fallback is not None:
            return self._fallback.size()
        if self._built is not None:
            return len(self._built)
        return self._size

    def size_in_bytes(self, offset, timestamp, key, value, headers) -> int:
        if self._fallback is not None:
            return self._fallback.size_in_bytes(offset, timestamp, key, value, headers)
        first = self._first_timestamp
        delta = 0 if first is None else timestamp - first
        body = 1 + _svi(offset) + _svi(delta) + self.size_of(key, value, headers)
        return body + _svi(body)

    @classmethod
    def size_of(cls, key, value, headers) -> int:
        size = 1 if key is None else _svi(len(key)) + len(key)
        size += 1 if value is None else _svi(len(value)) + len(value)
        return size + (_factory_py.headers_wire_size(headers)[0] if headers else 1)

    def set_producer_state(self, producer_id: int, producer_epoch: int,
                           base_sequence: int) -> None:
        if self._fallback is not None:
            self._fallback.set_producer_state(producer_id, producer_epoch, base_sequence)
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence


class LegacyRecordBatchBuilder(_Codecs):
    """Builds a magic 0/1 message set; compressed, one wrapper message around it."""

    RECORD_OVERHEAD_V0 = 14
    RECORD_OVERHEAD_V1 = 22
    RECORD_OVERHEAD = {0: 14, 1: 22}

    def __init__(self, magic: int, compression_type: int, batch_size: int) -> None:
        self._magic = magic
        self._compression_type = compression_type
        self._batch_size = batch_size
        self._messages: list = []  # each message encoded on append (its CRC is returned)
        self._appended: list = []  # (offset, timestamp, key, value) to replay into aiokafka's
        self._pos = 0
        self._built: bytearray | None = None
        # What the fast path does not take goes to aiokafka's own builder (as above).
        self._fallback: Any = None
        if magic not in (0, 1):
            self._to_fallback()

    def _to_fallback(self):
        self._fallback = _hostbytes.replayed(
            _ORIGINAL_LEGACY_BUILDER(self._magic, self._compression_type, self._batch_size),
            self._appended)
        return self._fallback

    def append(self, offset, timestamp, key, value, headers=None,
               _limit=_hostbytes.TIMESTAMP_LIMIT):
        if self._fallback is not None:
            return self._fallback.append(offset, timestamp, key, value, headers)
        if self._magic == 0:
            timestamp = -1
        elif timestamp is None:
            timestamp = int(time.time() * 1000)
        # bytes only: aiokafka's pure-Python builder refuses bytearray and memoryview keys
        # and values, its Cython one takes them; its own builder decides
        if (type(offset) is not int or type(timestamp) is not int
                or not -_limit <= timestamp < _limit
                or not (key is None or type(key) is bytes)
                or not (value is None or type(value) is bytes)):
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        size = self.size_in_bytes(offset, timestamp, key, value)
        # at least one record always fits
        if offset != 0 and self._pos + size >= self._batch_size:
            return None
        try:
            msg = _codec.encode_message_set([(key, value, timestamp)], magic=self._magic,
                                            base_offset=offset)
        except _errors.CodecError as exc:
            raise _aiokafka_error(exc) from exc
        self._messages.append(msg)
        self._appended.append((offset, timestamp, key, value))
        self._pos += size
        return LegacyRecordMetadata(offset, _UINT32.unpack_from(msg, 12)[0], size, timestamp)

    def build(self) -> bytearray:
        if self._fallback is not None:
            return self._fallback.build()
        if self._built is not None:
            return self._built
        inner = b"".join(self._messages)
        codec_id = self._compression_type
        if not codec_id:
            self._built = bytearray(inner)
            return self._built
        compress = _host_compressor(codec_id, self._magic)
        if compress is None:  # a codec aiokafka refuses here: its builder raises
            return self._to_fallback().build()
        wrapper = _hostbytes.legacy_wrapper(compress(inner), self._magic, codec_id)
        self._pos = len(wrapper)
        self._built = wrapper
        return wrapper

    def size(self) -> int:
        if self._fallback is not None:
            return self._fallback.size()
        return self._pos

    def size_in_bytes(self, offset, timestamp, key, value) -> int:
        if self._fallback is not None:
            return self._fallback.size_in_bytes(offset, timestamp, key, value)
        return (_LOG_OVERHEAD + self.RECORD_OVERHEAD[self._magic]
                + (0 if key is None else len(key)) + (0 if value is None else len(value)))

    @classmethod
    def record_overhead(cls, magic: int) -> int:
        overhead = cls.RECORD_OVERHEAD.get(magic)
        if overhead is None:
            return _ORIGINAL_LEGACY_BUILDER.record_overhead(magic)
        return overhead


def _host_compressor(codec_id: int, magic: int = 2):
    """aiokafka's own compress function for ``codec_id`` in a batch of ``magic`` (the bytes
    aiokafka writes: xerial snappy, gzip level 9, lz4 level 9), or None where aiokafka's
    builder raises instead: an unknown codec, its library missing, lz4 in magic 0
    (KAFKA-3160), zstd before magic 2."""
    c = _aiocodec
    if codec_id == 1:
        return c.gzip_encode if c.has_gzip() else None
    if codec_id == 2:
        return c.snappy_encode if c.has_snappy() else None
    if codec_id == 3:
        return c.lz4_encode if magic != 0 and c.has_lz4() else None
    if codec_id == 4:
        return c.zstd_encode if magic == 2 and c.has_zstd() else None
    return None


# ---------------------------------------------------------------------------------------
# control records
# ---------------------------------------------------------------------------------------


_CONTROL_KEY = struct.Struct(">HH")  # version, type (KIP-98), unsigned as aiokafka reads them


class ControlRecord(_control.ControlRecord):
    """A control record key (version, type); equal to aiokafka's own for the same values."""

    __slots__ = ()

    @classmethod
    def parse(cls, data) -> ControlRecord:
        # a key that is not 4 bytes raises what aiokafka's raises (struct.error, or
        # TypeError for none), which is what its consumer's callers see
        version, type_ = _CONTROL_KEY.unpack_from(data)
        return cls(version, type_)


ABORT_MARKER = ControlRecord(0, 0)
COMMIT_MARKER = ControlRecord(0, 1)


# ---------------------------------------------------------------------------------------
# the producer's per-record path
# ---------------------------------------------------------------------------------------
#
# aiokafka's compiled builder leaves its send() path as the producer's cost: three
# coroutines (send, _wait_on_metadata, add_message), the topic's partitions copied into a
# set twice, MessageBatch.append and a future through two helpers, per record.
# _factory.aiokafka_send (compiled: a C coroutine, kafkawire._compat) does the same steps
# for a record that goes into the partition's open batch in one coroutine, with the same
# objects (the loop's future in the batch's _msg_futures, aiokafka's BatchBuilder.append);
# anything else (metadata to wait for, a new or full batch, a closed or failed
# accumulator, a refused partition) goes to aiokafka's own code, before a serializer or
# the partitioner has run where it is send() itself.

_Producer = aiokafka.producer.producer.AIOKafkaProducer
_ORIGINAL_SEND = _Producer.send
_MessageBatch = aiokafka.producer.message_accumulator.MessageBatch
_TopicPartition = aiokafka.producer.producer.TopicPartition
_IllegalOperation = aiokafka.producer.producer.IllegalOperation
_producer_log = aiokafka.producer.producer.log
_BatchBuilder = aiokafka.producer.message_accumulator.BatchBuilder


_ORIGINAL_DONE = _MessageBatch.done
_RecordMetadata = aiokafka.producer.message_accumulator.RecordMetadata
_resolve = _factory.resolve_aiokafka_futures


def _batch_done(self, base_offset, timestamp=None, log_start_offset=None,
                _record_metadata_class=_RecordMetadata):
    """MessageBatch.done: the batch's future, then every record's, resolved as aiokafka
    does, the per-record loop compiled."""
    if _record_metadata_class is not _RecordMetadata:
        return _ORIGINAL_DONE(self, base_offset, timestamp, log_start_offset,
                              _record_metadata_class)
    tp = self._tp
    topic = tp.topic
    partition = tp.partition
    timestamp_type = 0 if timestamp == -1 else 1
    if not self.future.done():
        self.future.set_result(_RecordMetadata(topic, partition, tp, base_offset, timestamp,
                                               timestamp_type, log_start_offset))
    _resolve(self._msg_futures, _RecordMetadata, topic, partition, tp, base_offset, timestamp,
             timestamp_type, log_start_offset)


_batch_done.__name__ = _ORIGINAL_DONE.__name__
_batch_done.__qualname__ = _ORIGINAL_DONE.__qualname__


def _simple_estimators() -> list:
    """The record builder classes send() may stand in for in the size check (aiokafka's
    and kafkawire's): those whose estimate for bytes keys and values without headers is
    82 bytes plus each field's length and its varint, as sampled here."""
    samples = [(None, None), (b"k" * 16, b"v" * 100), (b"", b"x" * 200), (None, b"y" * 70_000)]

    def field(b):
        return 1 if b is None else _svi(len(b)) + len(b)

    return [cls for cls in (_ORIGINAL_DEFAULT_BUILDER, DefaultRecordBatchBuilder)
            if all(cls.estimate_size_in_bytes(k, v, []) == 82 + field(k) + field(v) + 1
                   for k, v in samples)]


_factory.configure_aiokafka_send(
    _ORIGINAL_SEND, _MessageBatch, _BatchBuilder, _TopicPartition, _IllegalOperation,
    _producer_log, aiokafka.producer.producer.__dict__, _simple_estimators())
_send = _factory.aiokafka_send
_send.__doc__ = _ORIGINAL_SEND.__doc__
_send.__name__ = _ORIGINAL_SEND.__name__
_send.__qualname__ = _ORIGINAL_SEND.__qualname__


# ---------------------------------------------------------------------------------------
# install / uninstall
# ---------------------------------------------------------------------------------------

# name -> (module defining aiokafka's selected original, kafkawire's replacement)
_REPLACEMENTS: dict[str, tuple[Any, Any]] = {
    "MemoryRecords": (_memory, MemoryRecords),
    "DefaultRecordBatch": (_default, DefaultRecordBatch),
    "DefaultRecordBatchBuilder": (_default, DefaultRecordBatchBuilder),
    "DefaultRecordMetadata": (_default, DefaultRecordMetadata),
    "DefaultRecord": (_default, DefaultRecord),
    "LegacyRecordBatch": (_legacy, LegacyRecordBatch),
    "LegacyRecordBatchBuilder": (_legacy, LegacyRecordBatchBuilder),
    "LegacyRecordMetadata": (_legacy, LegacyRecordMetadata),
    "LegacyRecord": (_legacy, LegacyRecord),
    "ControlRecord": (_control, ControlRecord),
    "ABORT_MARKER": (_control, ABORT_MARKER),
    "COMMIT_MARKER": (_control, COMMIT_MARKER),
    "PartitionRecords": (_fetcher, PartitionRecords),
}

# (module, name, original) for every binding install() replaced
_patched: list[tuple[Any, str, Any]] = []


# The write side: kafkawire's magic-2 builder keeps each record in a compiled append and
# encodes them all at build(); aiokafka's compiled builder encodes as it appends.  Per
# record they are about even (aiokafka's producer: 2% more CPU with kafkawire's, 16-byte
# keys, 100-byte values, no compression), not faster, so they are installed only on
# request.
_BUILDERS = frozenset({"DefaultRecordBatchBuilder", "DefaultRecordMetadata",
                       "LegacyRecordBatchBuilder", "LegacyRecordMetadata"})


def host_version() -> str:
    """The version of the aiokafka this process imported."""
    return _aiokafka.__version__


def install(builders: bool = False, force: bool = False) -> None:
    """Put kafkawire's record classes wherever aiokafka looks its own up (idempotent).

    Every ``aiokafka.*`` module that binds one of aiokafka's selected record classes
    (Cython or pure Python, whichever aiokafka chose) under its public name gets
    kafkawire's instead; ``uninstall()`` puts each one back.  The batch builders are
    replaced too only with ``builders=True`` (today they are not faster than aiokafka's).
    On an aiokafka outside TESTED_VERSIONS it raises UntestedHostError and replaces
    nothing; ``force=True`` installs anyway, warning once (UntestedHostWarning).  Either
    every replacement is made or none.
    """
    if _patched:
        return
    _guard.check(HOST, host_version(), TESTED_VERSIONS, force)
    try:
        _install(builders)
    except BaseException:
        uninstall()
        raise


def _install(builders: bool) -> None:
    chosen = {name: v for name, v in _REPLACEMENTS.items() if builders or name not in _BUILDERS}
    originals = {name: getattr(mod, name) for name, (mod, _new) in chosen.items()}
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == "aiokafka" or mod_name.startswith("aiokafka.")):
            continue
        namespace = getattr(mod, "__dict__", None)
        if namespace is None:
            continue
        for name, (_mod, new) in chosen.items():
            if name in namespace and namespace[name] is originals[name]:
                setattr(mod, name, new)
                _patched.append((mod, name, originals[name]))
    # the consumer's per-record loop that hands the records out (see _getall)
    _fetcher.FetchResult.getall = _getall
    _patched.append((_fetcher.FetchResult, "getall", _ORIGINAL_GETALL))
    _Producer.send = _send
    _patched.append((_Producer, "send", _ORIGINAL_SEND))
    _MessageBatch.done = _batch_done
    _patched.append((_MessageBatch, "done", _ORIGINAL_DONE))


def uninstall() -> None:
    """Restore aiokafka's own record classes exactly where install() replaced them."""
    while _patched:
        mod, name, original = _patched.pop()
        setattr(mod, name, original)


def installed() -> bool:
    """True while kafkawire's classes are installed in aiokafka."""
    return bool(_patched)


def _auto_install(value: str) -> None:
    """The environment opt-in's install(): an untested aiokafka is left to its own record
    layer with a warning, unless ``value`` is "force"."""
    if _guard.env_check(HOST, host_version(), TESTED_VERSIONS, ENV_VAR, value):
        install(force=True)


if os.environ.get(ENV_VAR, "") not in ("", "0"):
    _auto_install(os.environ[ENV_VAR])
