"""kafkawire's codec as kafka-python's record layer: one call, no change to user code.

    import kafkawire.compat.kafka_python as kw_kafka_python
    kw_kafka_python.install()      # KafkaConsumer / KafkaProducer now use kafkawire's codec
    kw_kafka_python.uninstall()    # kafka-python's own classes are back

``install()`` replaces ``kafka.record``'s MemoryRecords, MemoryRecordsBuilder and the
record batch / builder / record classes with classes of the same interface backed by
kafkawire's codec, in every kafka-python module that holds a reference to them (the
consumer's fetcher, the producer's accumulator and KafkaProducer).  A fetched
MemoryRecords decodes all of its batches in one call of the compiled decoder (CRCs
checked there); the fetcher's ``Fetcher.PartitionRecords`` (also replaced) turns each
decoded batch into kafka-python's own ConsumerRecords with one call of a compiled record
factory (kafkawire._compat) and hands them out through a C iterator; producer batches are
encoded in one call when they close, compressed by kafka-python's own compressor so the
bytes are kafka-python's.  On the producer's side ``KafkaProducer.send`` is replaced too:
a record goes into its partition's open batch in one frame and one compiled call, and a
batch's record futures are resolved a run at a time (see "the producer's per-record
path"); keys are hashed by a compiled murmur2.

Without touching code: set ``KAFKAWIRE_PATCH_KAFKA_PYTHON=1`` and import this module (for
example ``import kafkawire.compat.kafka_python`` next to ``import kafka``), or run a
program unchanged with ``python -m kafkawire.compat.kafka_python app.py [args]`` (or
``-m package.module``), which installs the codec and then runs it.

Host versions: ``TESTED_VERSIONS`` are the kafka-python releases this is tested with;
on another, ``install()`` raises UntestedHostError and replaces nothing (``force=True``
installs anyway, with a warning), and the environment opt-in and the runner warn and
leave kafka-python's own record layer (``KAFKAWIRE_PATCH_KAFKA_PYTHON=force`` installs).

Damaged data reads as kafka-python reads it, exception classes included: what kafkawire's
decoder refuses, kafka-python's own classes read (see MemoryRecords).  The differences
kept on purpose are listed in tests/fuzz/atheris_compat.py and pinned in
tests/compat/test_kept_differences.py.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import struct
import sys
import time

import kafka as _kafka
import kafka.codec as _k_codec
import kafka.consumer.fetcher as _k_fetcher
import kafka.errors as _k_errors
import kafka.future as _k_future
import kafka.partitioner.default as _k_partitioner
import kafka.producer.future as _k_producer_future
import kafka.producer.kafka as _k_producer
import kafka.producer.record_accumulator as _k_accumulator
import kafka.record as _k_record
import kafka.record.default_records as _k_default
import kafka.record.legacy_records as _k_legacy
import kafka.record.memory_records as _k_memory
from kafka.record.abc import ABCRecord, ABCRecordBatch, ABCRecordBatchBuilder, ABCRecords

from kafkawire import codec, compression as _compression, errors as _kw_errors
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
    "MemoryRecordsBuilder",
    "DefaultRecordBatch",
    "DefaultRecordBatchBuilder",
    "DefaultRecord",
    "ControlRecord",
    "LegacyRecordBatch",
    "LegacyRecordBatchBuilder",
    "LegacyRecord",
]

ENV_VAR = "KAFKAWIRE_PATCH_KAFKA_PYTHON"
HOST = "kafka-python"
# The kafka-python releases this drop-in is tested with, lowest and highest (make test
# runs kafka-python's own tests and the parity tests on the lowest and on 3.0.11, whose
# tag stands for the highest's, tests/compat/test_host_suites.py): every release between
# them has the same record layer.
TESTED_VERSIONS = ("3.0.0", "3.0.12")

# kafka-python's own classes, taken before anything can patch them: our classes inherit
# their constants (CODEC_*, HEADER_STRUCT, ...) and fall back to them where kafkawire's
# encoder cannot express a request (see _to_fallback, _to_host).
_ORIG_DEFAULT_BUILDER = _k_default.DefaultRecordBatchBuilder
_ORIG_LEGACY_BUILDER = _k_legacy.LegacyRecordBatchBuilder
_LegacyRecordMetadata = _k_legacy.LegacyRecordMetadata


def _host_readers():
    """kafka-python's own legacy batch class and MemoryRecords (with the batches and records
    they make), out of install()'s reach and guarded (see kafkawire.compat._pristine):
    MemoryRecords hands data kafkawire's decoder refuses to them, so damaged data reads as
    kafka-python reads it."""
    corrupt = _k_errors.CorruptRecordError
    legacy = _pristine.frozen(
        _k_legacy, ["LegacyRecord", "LegacyRecordBatch"],
        globals_={**_pristine.bounded_decoders(_k_legacy, corrupt),
                  "lz4_decode_old_kafka": _pristine.bounded(_k_legacy.lz4_decode_old_kafka, 3, corrupt,
                                                            legacy_lz4=True)},
        methods={"LegacyRecordBatch": {"_read_all_headers": _pristine.walk_once(corrupt)}})
    default = _pristine.frozen(
        _k_default, ["DefaultRecord", "ControlRecord", "DefaultRecordBatch"],
        globals_=_pristine.bounded_decoders(_k_default, corrupt))
    memory = _pristine.frozen(
        _k_memory, ["MemoryRecords"],
        globals_={"LegacyRecordBatch": legacy["LegacyRecordBatch"],
                  "DefaultRecordBatch": default["DefaultRecordBatch"]},
        methods={"MemoryRecords": {"valid_bytes": _pristine.valid_bytes_once(corrupt)}})
    return legacy["LegacyRecordBatch"], memory["MemoryRecords"]


_HostLegacyBatch, _HostMemoryRecords = _host_readers()

_INT64_MIN = -(2**63)
_ENTRY = struct.Struct(">qi")  # offset / baseOffset, size: common to every magic
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_LOG_OVERHEAD = 12
_MIN_SLICE = _LOG_OVERHEAD + 14  # the smallest magic-0 message, as kafka-python checks
_V2_HEADER = 61
_CORRUPT = _k_errors.CorruptRecordError
_sv = codec.size_of_varint
_EMPTY = ()

try:  # the C descriptor namedtuple uses: field access without a Python frame
    from collections import _tuplegetter as _field
except ImportError:  # pragma: no cover - other interpreters

    def _field(index, doc):
        return property(operator.itemgetter(index), doc=doc)


# Called with no arguments, these return a constant without a Python frame; as class
# attributes they are not descriptors, so ``record.validate_crc()`` calls them as is.
_TRUE = functools.partial(bool, 1)
_FALSE = functools.partial(bool, 0)


def _k_error(exc: Exception) -> Exception:
    """kafka-python's exception for a kafkawire codec error."""
    if isinstance(exc, (_kw_errors.UnsupportedCodecError, _kw_errors.CompressionLibraryMissingError)):
        return _k_errors.UnsupportedCodecError(str(exc))
    return _CORRUPT(str(exc))


class _ReadByHost(Exception):
    """Data kafka-python reads otherwise than kafkawire: its own class reads it."""


class _NoRecords:
    """What a batch decodes to when the codec found no records in it."""

    __slots__ = ()
    records: list = []


_NO_RECORDS = _NoRecords()


def _raising(exc):
    raise exc
    yield  # a generator: the exception comes from its first next()


def _host_codec_error(view, start: int = 0) -> Exception | None:
    """kafka-python's UnsupportedCodecError, in its words, for a compressed entry it
    cannot read (see _hostbytes.unreadable_codec); None when it reads it."""
    magic, codec_id = _hostbytes.entry_codec(view, start)
    why = _hostbytes.unreadable_codec(_k_codec, codec_id, magic) if codec_id else None
    if why is None:
        return None
    if why[0] == "missing":
        return _k_errors.UnsupportedCodecError(
            f"Libraries for {why[1]} compression codec not found")
    return _k_errors.UnsupportedCodecError(
        "Unrecognized compression type" + (f": {codec_id}" if magic == 2 else ""))


def _decode_one(view):
    """Decode one batch or top-level message on its own (the slow, per-entry path).

    CRCs are not checked here: kafka-python checks them through validate_crc(), and a
    consumer with check_crcs=False reads damaged data as it is.
    """
    if _hostbytes.null_wrapper(view):
        # kafka-python refuses it before it looks at the codec, in its words
        raise _CORRUPT(_hostbytes.NULL_WRAPPER_MESSAGE)
    refused = _host_codec_error(view)
    if refused is not None:
        raise refused
    try:
        batches = codec.decode_batches(view, start_offset=_INT64_MIN, check_crcs=False)
    except _kw_errors.CodecError as exc:
        raise _k_error(exc) from None
    if len(batches) == 1:
        return batches[0]
    return None  # a batch without records


# ---------------------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------------------


class DefaultRecord(tuple, ABCRecord):
    """A magic-2 record, as kafka-python's DefaultRecord, stored as one tuple."""

    __slots__ = ()
    offset = _field(0, "Absolute offset of the record")
    timestamp = _field(1, "Epoch milliseconds")
    timestamp_type = _field(2, "CREATE_TIME(0) or APPEND_TIME(1)")
    key = _field(3, "Bytes key or None")
    value = _field(4, "Bytes value or None")
    headers = _field(5, "List of (str, bytes or None) headers")
    checksum = _field(6, "None: magic 2 has no per-record CRC")
    size_in_bytes = _field(7, "Size of the record body on the wire")
    validate_crc = _TRUE

    def __repr__(self):
        return (
            f"DefaultRecord(offset={self[0]!r}, timestamp={self[1]!r}, "
            f"timestamp_type={self[2]!r}, key={self[3]!r}, value={self[4]!r}, "
            f"headers={self[5]!r})"
        )


_CONTROL_KEY = struct.Struct(">hh")  # version, type (KIP-98 control record key)


class ControlRecord(DefaultRecord):
    """The one record of a control batch (a transaction marker, KIP-98)."""

    __slots__ = ()

    @property
    def version(self):
        return _CONTROL_KEY.unpack_from(self[3])[0]

    @property
    def type(self):
        return _CONTROL_KEY.unpack_from(self[3])[1]

    @property
    def abort(self):
        return self.type == 0

    @property
    def commit(self):
        return self.type == 1

    def __repr__(self):
        return (
            f"ControlRecord(offset={self[0]!r}, timestamp={self[1]!r}, "
            f"timestamp_type={self[2]!r}, version={self.version!r}, type={self.type!r} "
            f"<{'abort' if self.abort else 'commit'}>)"
        )


class LegacyRecord(tuple, ABCRecord):
    """A magic 0/1 message, as kafka-python's LegacyRecord, stored as one tuple."""

    __slots__ = ()
    magic = _field(0, "Magic byte, 0 or 1")
    offset = _field(1, "Absolute offset of the message")
    timestamp = _field(2, "Epoch milliseconds (None for magic 0)")
    timestamp_type = _field(3, "CREATE_TIME(0), APPEND_TIME(1), None for magic 0")
    key = _field(4, "Bytes key or None")
    value = _field(5, "Bytes value or None")
    checksum = _field(6, "CRC32 of the message")
    size_in_bytes = _field(7, "Estimated size of the message")
    validate_crc = _TRUE

    @property
    def headers(self):
        return []

    def __repr__(self):
        return (
            f"LegacyRecord(magic={self[0]!r} offset={self[1]!r}, timestamp={self[2]!r}, "
            f"timestamp_type={self[3]!r}, key={self[4]!r}, value={self[5]!r}, crc={self[6]!r})"
        )


class _BadCrcLegacyRecord(LegacyRecord):
    """An inner message whose own CRC is wrong (only on the per-entry path)."""

    __slots__ = ()
    validate_crc = _FALSE


_new = tuple.__new__


def _header_size(headers) -> int:
    # encoded size of magic-2 record headers (1: the count of none, the common case)
    return _factory_py.headers_wire_size(headers)[0] if headers else 1


def _v2_records(recs, base_offset, base_ts, raw_ts, ttype, control):
    """kafka-python record objects for the codec's records of one magic-2 batch.

    ``raw_ts``: the records' timestamps as stored (a list), when the batch uses
    LogAppendTime and the decoded timestamps are the batch's.  The size is that of the
    record body as kafka-python reports it (its length varint's value), as the record
    factory measures it.
    """
    cls = ControlRecord if control else DefaultRecord
    consumer_records, cum, _ = _factory.kafka_python_records(
        _ConsumerRecord, "", 0, -1, recs, base_offset, base_ts, raw_ts)
    # ConsumerRecord fields 3..8: offset, timestamp, timestamp_type, key, value, headers
    return [_new(cls, (c[3], c[4], ttype, c[6], c[7], c[8], None, cum[i + 1] - cum[i]))
            for i, c in enumerate(consumer_records)]


# ---------------------------------------------------------------------------------------
# batches
# ---------------------------------------------------------------------------------------


class DefaultRecordBatch(_k_default.DefaultRecordBase, ABCRecordBatch):
    """A magic-2 RecordBatch read by kafkawire's codec, with kafka-python's interface.

    Built by MemoryRecords with the records of its one-call decode, or on its own from
    the bytes of one batch (then decoded when first iterated).
    """

    __slots__ = ("_buffer", "_header_data", "_codec_batch", "_crc_ok", "_records", "_iter",
                 "_iterated")

    def __init__(self, buffer, *, _codec_batch=None, _crc_ok=None):
        self._buffer = buffer
        # a batch shorter than its header: struct.error, as kafka-python's
        self._header_data = self.HEADER_STRUCT.unpack_from(buffer)
        self._codec_batch = _codec_batch
        self._crc_ok = _crc_ok
        self._records = None
        self._iter = None
        self._iterated = False

    base_offset = property(lambda self: self._header_data[0])
    size_in_bytes = property(lambda self: self._header_data[1] + self.AFTER_LEN_OFFSET)
    leader_epoch = property(lambda self: self._header_data[2])
    magic = property(lambda self: self._header_data[3])
    crc = property(lambda self: self._header_data[4])
    attributes = property(lambda self: self._header_data[5])
    last_offset_delta = property(lambda self: self._header_data[6])
    first_timestamp = property(lambda self: self._header_data[7])
    max_timestamp = property(lambda self: self._header_data[8])
    producer_id = property(lambda self: self._header_data[9])
    producer_epoch = property(lambda self: self._header_data[10])
    base_sequence = property(lambda self: self._header_data[11])
    records_count = property(lambda self: self._header_data[12])
    has_sequence = property(lambda self: self._header_data[11] != -1)

    @property
    def last_offset(self):
        h = self._header_data
        return h[0] + h[6]

    @property
    def next_offset(self):
        h = self._header_data
        return h[0] + h[6] + 1

    @property
    def compression_type(self):
        return self._header_data[5] & 0x07

    @property
    def timestamp_type(self):
        return 1 if self._header_data[5] & 0x08 else 0

    @property
    def is_transactional(self):
        return bool(self._header_data[5] & 0x10)

    @property
    def is_control_batch(self):
        return bool(self._header_data[5] & 0x20)

    def has_producer_id(self):
        return self._header_data[9] > -1

    @property
    def last_sequence(self):
        base = self._header_data[11]
        if base == -1:
            return -1
        delta = self._header_data[6]
        # sequences wrap at int32 max back to 0 (KIP-98)
        return base + delta if base <= 2147483647 - delta else delta - (2147483647 - base) - 1

    def validate_crc(self):
        assert not self._iterated, "Validate should be called before iteration"
        if self._crc_ok is None:
            # KIP-98: CRC32C covers everything from the attributes to the end of the batch.
            self._crc_ok = codec.crc32c(memoryview(self._buffer)[21:]) == self._header_data[4]
        return self._crc_ok

    def _codec_records(self):
        """The codec's records of this batch (decoded now if MemoryRecords did not), and
        their timestamps as stored when the batch uses LogAppendTime (else None)."""
        cb = self._codec_batch
        if cb is None:
            cb = self._codec_batch = _decode_one(self._buffer) or _NO_RECORDS
        recs = cb.records
        raw_ts = self._stored_timestamps() if self._header_data[5] & 0x08 and recs else None
        return recs, raw_ts

    def _materialize(self):
        if self._records is None:
            h = self._header_data
            recs, raw_ts = self._codec_records()
            attributes = h[5]
            self._records = _v2_records(
                recs, h[0], h[7], raw_ts, 1 if attributes & 0x08 else 0, attributes & 0x20
            )
        return self._records

    def _control_key_error(self, records):
        """The exception kafka-python raises making the first control record whose key is
        not 4 bytes (it reads version and type when it makes the record), and its index;
        None when every key is."""
        for i, r in enumerate(records):
            try:
                _CONTROL_KEY.unpack(r[3])
            except (struct.error, TypeError) as exc:
                return i, exc
        return None

    def _stored_timestamps(self):
        # With LogAppendTime every record reports the batch's time; the sizes need the
        # deltas as stored, so decode a copy with the timestamp-type bit cleared.
        raw = bytearray(self._buffer)
        raw[22] &= 0xF7  # low byte of the int16 attributes
        return [r.timestamp for r in _decode_one(raw).records]

    def _start(self):
        try:
            records = self._materialize()
        except Exception as exc:  # noqa: BLE001 - raised by the first next(), as kafka-python
            self._iter = _raising(exc)
            return
        bad = self._header_data[5] & 0x20 and self._control_key_error(records)
        if bad:  # raised where kafka-python makes that record, after the ones before
            self._iter = itertools.chain(records[:bad[0]], _raising(bad[1]))
        else:
            self._iter = iter(records)

    def __iter__(self):
        self._iterated = True
        if self._iter is None:
            self._start()
        return self._iter

    def __next__(self):
        if self._iter is None:
            self._start()
        return next(self._iter)

    next = __next__

    def __str__(self):
        return (
            f"DefaultRecordBatch(magic={self.magic}, base_offset={self.base_offset}, "
            f"last_offset_delta={self.last_offset_delta}, first_timestamp={self.first_timestamp}, "
            f"max_timestamp={self.max_timestamp}, is_transactional={self.is_transactional}, "
            f"producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"base_sequence={self.base_sequence}, records_count={self.records_count})"
        )


class LegacyRecordBatch(ABCRecordBatch, _k_legacy.LegacyRecordBase):
    """One top-level magic 0/1 message (maybe a compressed wrapper), read by kafkawire."""

    __slots__ = ("_buffer", "_magic", "_offset", "_length", "_crc", "_timestamp",
                 "_attributes", "_codec_batch", "_crc_ok", "_records")

    def __init__(self, buffer, magic, *, _codec_batch=None, _crc_ok=None):
        self._buffer = memoryview(buffer)
        self._magic = magic
        header = self.HEADER_STRUCT_V0 if magic == 0 else self.HEADER_STRUCT_V1
        # a message shorter than its header: struct.error, as kafka-python's
        offset, length, crc, magic_, attrs, *ts = header.unpack_from(self._buffer)
        assert length == len(buffer) - self.LOG_OVERHEAD
        assert magic == magic_
        self._offset = offset
        self._length = length
        self._crc = crc
        self._timestamp = ts[0] if ts else None
        self._attributes = attrs
        self._codec_batch = _codec_batch
        self._crc_ok = _crc_ok
        self._records = None

    @property
    def base_offset(self):
        return self._offset

    @property
    def size_in_bytes(self):
        return self._length + self.LOG_OVERHEAD

    @property
    def timestamp_type(self):
        if self._magic == 0:
            return None
        return 1 if self._attributes & self.TIMESTAMP_TYPE_MASK else 0

    @property
    def compression_type(self):
        return self._attributes & self.CODEC_MASK

    @property
    def magic(self):
        return self._magic

    def validate_crc(self):
        if self._crc_ok is None:
            self._crc_ok = codec.crc32(self._buffer[self.MAGIC_OFFSET:]) == self._crc
        return self._crc_ok

    def _inner_crcs(self):
        """(crc, valid) of each inner message of a compressed wrapper.

        kafka-python reports every message's own CRC as its checksum; the codec reports
        the wrapper's, so the inner set is decompressed again and only its entry
        headers are read (inner sets of magic 0/1 are rare today); None when they do
        not end where the set ends.
        """
        buf = self._buffer
        pos = (self.KEY_OFFSET_V0 if self._magic == 0 else self.KEY_OFFSET_V1)
        (key_len,) = _INT32.unpack_from(buf, pos)
        pos += 4 + max(key_len, 0)
        (value_len,) = _INT32.unpack_from(buf, pos)
        pos += 4
        inner = memoryview(
            _compression.decompress(
                self.compression_type, buf[pos : pos + value_len],
                codec.DEFAULT_MAX_DECOMPRESSED_SIZE, legacy_lz4=self._magic == 0,
            )
        )
        entries, end = _frame(inner)
        if end != len(inner) or (entries and entries[-1][1] < entries[-1][0]):
            return None
        out = []
        for start, stop in entries:
            # kafka-python reads every inner message with its wrapper's magic, and
            # refuses one compressed itself
            if inner[start + 16] != self._magic or inner[start + 17] & 0x07 or not (
                    _hostbytes.plain_lengths(inner[start:stop], self._magic)):
                return None
            (crc,) = _UINT32.unpack_from(inner, start + 12)
            out.append((crc, codec.crc32(inner[start + 16 : stop]) == crc))
        return out

    def _materialize(self):
        if self._records is None:
            cb = self._codec_batch
            if cb is None:
                cb = _decode_one(self._buffer)
            recs = cb.records if cb is not None else _EMPTY
            magic = self._magic
            ttype = self.timestamp_type
            overhead = self.LOG_OVERHEAD + self.record_overhead(magic)
            if not (_hostbytes.plain_lengths(self._buffer, magic)
                    and _hostbytes.legacy_reads_alike(self._buffer, magic)):
                raise _ReadByHost
            if self._attributes & self.CODEC_MASK:
                crcs = None
                if recs:
                    try:
                        crcs = self._inner_crcs()
                    except (_kw_errors.CodecError, struct.error):
                        pass
                if crcs is None or len(crcs) != len(recs):
                    # an inner set kafka-python does not read as kafkawire does (nothing
                    # in it, bytes after its last message, a nested wrapper): it reads it
                    raise _ReadByHost
            else:
                crcs = [(self._crc, self.validate_crc())] * len(recs)
            out = []
            for r, (crc, ok) in zip(recs, crcs):
                key = r.key
                value = r.value
                out.append(_new(
                    LegacyRecord if ok else _BadCrcLegacyRecord,
                    (
                        magic, r.offset, None if magic == 0 else r.timestamp, ttype, key, value,
                        crc,
                        overhead + (0 if key is None else len(key))
                        + (0 if value is None else len(value)),
                    ),
                ))
            self._records = out
        return self._records

    def __iter__(self):
        # as kafka-python's: every iteration starts again from the first message, and
        # errors come from the first next()
        try:
            records = self._materialize()
        except _ReadByHost:
            yield from _HostLegacyBatch(self._buffer, self._magic)
            return
        yield from records

    record_overhead = classmethod(lambda cls, magic: 14 if magic == 0 else 22)


# ---------------------------------------------------------------------------------------
# MemoryRecords
# ---------------------------------------------------------------------------------------


def _frame(buf):
    """The (start, stop) of each complete entry in ``buf``, and where the complete ones end.

    Reads only the 12-byte entry headers (offset, size), which all magics share.  A
    partial entry at the end is normal in a fetch response and ends the walk; so does an
    entry with a size too small to be valid (its own next_batch() raises).
    """
    n = len(buf)
    pos = 0
    out = []
    unpack = _ENTRY.unpack_from
    while n - pos >= _LOG_OVERHEAD:
        size = unpack(buf, pos)[1]
        stop = pos + _LOG_OVERHEAD + size
        if stop > n:
            break
        out.append((pos, stop))
        if size < 0:
            return out, pos  # nothing after a negative size can be framed
        pos = stop
    return out, pos


class MemoryRecords(ABCRecords):
    """kafka-python's MemoryRecords, decoded by kafkawire in one call.

    The first next_batch() decodes every complete batch in the buffer with the compiled
    decoder, CRCs checked.  If that call fails (a damaged batch, a bad CRC, a codec
    kafka-python lacks), or an entry's size is negative, kafka-python's own MemoryRecords
    reads the buffer instead (see _host_readers): damaged data gives its batches, records
    and exceptions, whatever they are.
    """

    LENGTH_OFFSET = 8
    LOG_OVERHEAD = _LOG_OVERHEAD
    MAGIC_OFFSET = 16
    MIN_SLICE = _MIN_SLICE

    __slots__ = ("_buffer", "_view", "_entries", "_valid", "_index", "_decoded", "_host")

    def __init__(self, bytes_data):
        self._buffer = bytes_data
        self._view = memoryview(bytes_data)
        if self._view.format != "B" or self._view.ndim != 1:
            self._view = self._view.cast("B")
        self._entries, self._valid = entries, _valid = _frame(self._view)
        self._index = 0
        self._decoded = None  # per entry: codec Batch or None
        self._host = None  # kafka-python's own walk, for damaged data
        if entries and entries[-1][1] - entries[-1][0] < _LOG_OVERHEAD:
            # a negative size: kafka-python's walk slices the buffer from its end
            self._host = _pristine.HostWalk(_HostMemoryRecords(bytes_data), _CORRUPT)

    def size_in_bytes(self):
        return len(self._buffer)

    def valid_bytes(self):
        if self._host is not None:
            return self._host.records.valid_bytes()
        return self._valid

    def has_next(self):
        if self._host is not None:
            return self._host.has_next()
        return self._index < len(self._entries)

    def _decode_all(self):
        view = self._view
        entries = self._entries
        try:
            # up to the end of the complete entries: an entry with a negative size, last
            # in ``entries``, has none (its own next_batch() raises)
            batches = codec.decode_batches(
                view[: self._valid], start_offset=_INT64_MIN, check_crcs=True
            )
        except (_kw_errors.CodecError, MemoryError):
            # (MemoryError: an lz4 frame that declares an impossible size)
            return False
        # The decoder leaves out batches without records; find which entries those are.
        out = []
        j = 0
        nb = len(batches)
        for start, stop in entries:
            if stop - start < _MIN_SLICE:  # next_batch() raises there
                out.append(None)
                continue
            if _host_codec_error(view, start) is not None:
                return False  # entry by entry: that one raises kafka-python's error
            magic = view[start + 16]
            if magic == 2:
                if not _hostbytes.v2_reads_alike(view, start):
                    return False
                has = _INT32.unpack_from(view, start + 57)[0] > 0
            elif view[start + 17] & 0x07 == 0:
                has = True
            else:
                has = (
                    j < nb
                    and batches[j].magic == magic
                    and batches[j].crc == _UINT32.unpack_from(view, start + 12)[0]
                )
            if has:
                if j >= nb:
                    return False
                out.append(batches[j])
                j += 1
            else:
                out.append(None)
        return out if j == nb else False

    def next_batch(self):
        if self._host is not None:
            return self._host.next_batch()
        i = self._index
        entries = self._entries
        if i >= len(entries):
            return None
        start, stop = entries[i]
        if stop - start < _MIN_SLICE:
            # as kafka-python: the position stays, so asking again raises again
            raise _CORRUPT(
                f"Record size is less than the minimum record overhead "
                f"({_MIN_SLICE - _LOG_OVERHEAD})"
            )
        decoded = self._decoded
        if decoded is None:
            decoded = self._decoded = self._decode_all()
            if decoded is False:
                # (the first call: kafka-python's walk starts where this one is)
                self._host = _pristine.HostWalk(_HostMemoryRecords(self._buffer), _CORRUPT)
                return self._host.next_batch()
        self._index = i + 1
        view = self._view[start:stop]
        cb = decoded[i]
        if view[16] == 2:
            return DefaultRecordBatch(view, _codec_batch=cb, _crc_ok=True)
        return LegacyRecordBatch(view, view[16], _codec_batch=cb, _crc_ok=True)

    def __iter__(self):
        return self

    def __next__(self):
        if not self.has_next():
            raise StopIteration
        return self.next_batch()

    next = __next__


# ---------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------

_BYTES_LIKE = (bytes, bytearray, memoryview)


def _host_compressor(codec_id, magic=2):
    """The compress function kafka-python's own builder calls for ``codec_id`` in a batch of
    ``magic`` (so the bytes are kafka-python's: xerial snappy, gzip level 9, its lz4 frame,
    the pre-KIP-57 lz4 header in magic 0), or None where its builder raises instead: an
    unknown codec, its library missing, zstd before magic 2."""
    mod = _k_default if magic == 2 else _k_legacy
    if codec_id == 1:
        return mod.gzip_encode if _k_codec.has_gzip() else None
    if codec_id == 2:
        return mod.snappy_encode if _k_codec.has_snappy() else None
    if codec_id == 3:
        if not _k_codec.has_lz4():
            return None
        return mod.lz4_encode if magic != 0 else mod.lz4_encode_old_kafka
    if codec_id == 4:
        return mod.zstd_encode if magic == 2 and _k_codec.has_zstd() else None
    return None


class DefaultRecordBatchBuilder(_factory.AiokafkaAppender, _k_default.DefaultRecordBase,
                                ABCRecordBatchBuilder):
    """Collects magic-2 records; build() encodes them with kafkawire in one call.  The
    per-record ``append`` is compiled (kafkawire._compat.AiokafkaAppender: kafka-python
    and aiokafka size a record alike); what it does not take goes to kafka-python's own
    builder, the records before it replayed into it (``_to_fallback``)."""

    MAX_RECORD_OVERHEAD = 21  # length 5 + timestamp delta 10 + offset delta 5 + attributes
    _host_estimate = staticmethod(_ORIG_DEFAULT_BUILDER.estimate_size_in_bytes)

    __slots__ = ("_magic", "_compression_type", "_is_transactional", "_producer_id",
                 "_producer_epoch", "_base_sequence", "_built")

    def __init__(self, magic, compression_type, is_transactional, producer_id,
                 producer_epoch, base_sequence, batch_size):
        assert magic >= 2
        self._magic = magic
        self._compression_type = compression_type & self.CODEC_MASK
        self._batch_size = batch_size
        self._is_transactional = bool(is_transactional)
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._records = []  # key, value, timestamp, ... (see AiokafkaAppender)
        self._headers = {}  # record index -> its headers, if any
        self._first_timestamp = None
        self._size = _V2_HEADER
        self._built = None
        self._fallback = None  # kafka-python's own builder, once an append needed it

    def _rows(self):
        """(offset, timestamp, key, value, headers) of each record appended."""
        it = iter(self._records)
        headers = self._headers
        return [(i, ts, key, value, headers.get(i) or [])
                for i, (key, value, ts) in enumerate(zip(it, it, it))]

    def _to_fallback(self):
        self._fallback = _hostbytes.replayed(_ORIG_DEFAULT_BUILDER(
            self._magic, self._compression_type, self._is_transactional, self._producer_id,
            self._producer_epoch, self._base_sequence, self._batch_size), self._rows())
        return self._fallback

    def set_producer_state(self, producer_id, producer_epoch, base_sequence, is_transactional):
        if self._fallback is not None:
            self._fallback.set_producer_state(producer_id, producer_epoch, base_sequence,
                                              is_transactional)
        assert not is_transactional or producer_id != -1, \
            "Cannot write transactional messages without a valid producer ID"
        assert producer_id == -1 or producer_epoch != -1, "Invalid negative producer epoch"
        assert producer_id == -1 or base_sequence != -1, "Invalid negative sequence number"
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional

    producer_id = property(lambda self: self._producer_id)
    producer_epoch = property(lambda self: self._producer_epoch)
    base_sequence = property(lambda self: self._base_sequence)

    def build(self):
        if self._fallback is not None:
            return self._fallback.build()
        if self._built is None:
            c = self._compression_type
            compress = _host_compressor(c) if c else None
            if not self._records or (c and compress is None):
                # an empty batch, or a codec kafka-python refuses: its own builder
                return self._to_fallback().build()
            it = iter(self._records)
            headers = self._headers
            try:
                out = codec.encode_record_batch(
                    [(key, value, ts, headers.get(i, _EMPTY))
                     for i, (key, value, ts) in enumerate(zip(it, it, it))]
                    if headers else zip(it, it, it),
                    producer_id=self._producer_id,
                    producer_epoch=self._producer_epoch,
                    base_sequence=self._base_sequence,
                    is_transactional=self._is_transactional,
                    partition_leader_epoch=0,  # as kafka-python writes it; the broker sets it
                )
            except _kw_errors.CodecError as exc:
                raise _k_error(exc) from None
            if compress is not None:
                out = _hostbytes.v2_compressed(out, c, compress)
            self._built = bytearray(out)
        return self._built

    def size(self):
        if self._fallback is not None:
            return self._fallback.size()
        return self._size if self._built is None else len(self._built)

    @classmethod
    def header_size_in_bytes(cls):
        return _V2_HEADER

    @classmethod
    def size_in_bytes(cls, offset_delta, timestamp_delta, key, value, headers):
        body = 1 + _sv(offset_delta) + _sv(timestamp_delta) + cls.size_of(key, value, headers)
        return body + _sv(body)

    @classmethod
    def size_of(cls, key, value, headers):
        n = 1 if key is None else _sv(len(key)) + len(key)
        n += 1 if value is None else _sv(len(value)) + len(value)
        return n + _header_size(headers)

    @classmethod
    def estimate_size_in_bytes(cls, key, value, headers):
        return _V2_HEADER + cls.MAX_RECORD_OVERHEAD + cls.size_of(key, value, headers)

    def __str__(self):
        if self._fallback is not None:
            return str(self._fallback)
        n = len(self._records) // 3
        return (
            f"DefaultRecordBatchBuilder(magic={self._magic}, base_offset=0, "
            f"last_offset_delta={max(n - 1, 0)}, first_timestamp={self._first_timestamp or 0}, "
            f"max_timestamp={max(self._records[2::3], default=0)}, "
            f"is_transactional={self._is_transactional}, producer_id={self._producer_id}, "
            f"producer_epoch={self._producer_epoch}, base_sequence={self._base_sequence}, "
            f"records_count={n})"
        )


class LegacyRecordBatchBuilder(ABCRecordBatchBuilder, _k_legacy.LegacyRecordBase):
    """Collects magic 0/1 messages; each is encoded by kafkawire as it is appended (its CRC
    is part of the returned metadata), a compressed set packed by kafka-python's own
    compressor at build()."""

    __slots__ = ("_magic", "_compression_type", "_batch_size", "_parts", "_items",
                 "_size", "_built", "_host")

    def __init__(self, magic, compression_type, batch_size):
        self._magic = magic
        self._compression_type = compression_type
        self._batch_size = batch_size
        self._parts = []
        self._items = []
        self._size = 0
        self._built = None
        self._host = None  # kafka-python's own builder, as in DefaultRecordBatchBuilder

    def _to_host(self):
        self._host = _hostbytes.replayed(
            _ORIG_LEGACY_BUILDER(self._magic, self._compression_type, self._batch_size), self._items)
        return self._host

    def append(self, offset, timestamp, key, value, headers=None,
               _limit=_hostbytes.TIMESTAMP_LIMIT):
        if self._host is not None:
            return self._host.append(offset, timestamp, key, value, headers)
        assert not headers, "Headers not supported in v0/v1"
        if self._magic == 0:
            timestamp = self.NO_TIMESTAMP
        elif timestamp is None:
            timestamp = int(time.time() * 1000)
        if (type(offset) is not int or type(timestamp) is not int
                or not -_limit <= timestamp < _limit
                or not (key is None or type(key) in _BYTES_LIKE)
                or not (value is None or type(value) in _BYTES_LIKE)):
            return self._to_host().append(offset, timestamp, key, value, headers)
        size = self.size_in_bytes(offset, timestamp, key, value)
        if offset != 0 and self._size + size >= self._batch_size:
            return None
        try:
            data = codec.encode_message_set(
                [(key, value, timestamp)], magic=self._magic, base_offset=offset
            )
        except _kw_errors.CodecError as exc:
            raise _k_error(exc) from None
        (crc,) = _UINT32.unpack_from(data, 12)
        self._parts.append(data)
        self._items.append((offset, timestamp, key, value))
        self._size += size
        return _LegacyRecordMetadata(offset, crc, size, timestamp)

    def build(self):
        if self._host is not None:
            return self._host.build()
        if self._built is None:
            c = self._compression_type
            inner = b"".join(self._parts)
            if not c:
                out = bytearray(inner)
            else:
                compress = _host_compressor(c, self._magic)
                if compress is None:  # a codec kafka-python refuses here: its builder raises
                    return self._to_host().build()
                out = _hostbytes.legacy_wrapper(compress(inner), self._magic, c)
            self._built = out
        return self._built

    def size(self):
        if self._host is not None:
            return self._host.size()
        return self._size if self._built is None else len(self._built)

    def size_in_bytes(self, offset, timestamp, key, value, headers=None):
        assert not headers, "Headers not supported in v0/v1"
        return self.LOG_OVERHEAD + self.record_size(self._magic, key, value)

    @classmethod
    def record_size(cls, magic, key, value):
        n = cls.record_overhead(magic)
        if key is not None:
            n += len(key)
        if value is not None:
            n += len(value)
        return n

    @classmethod
    def record_overhead(cls, magic):
        assert magic in (0, 1), "Not supported magic"
        return cls.RECORD_OVERHEAD_V0 if magic == 0 else cls.RECORD_OVERHEAD_V1

    @classmethod
    def estimate_size_in_bytes(cls, magic, compression_type, key, value):
        assert magic in (0, 1), "Not supported magic"
        size = cls.LOG_OVERHEAD + cls.record_size(magic, key, value)
        if compression_type:  # room for the wrapper message around the inner set
            size += cls.record_overhead(magic)
        return size


class MemoryRecordsBuilder:
    """kafka-python's MemoryRecordsBuilder over kafkawire's batch builders."""

    __slots__ = ("_builder", "_batch_size", "_buffer", "_next_offset", "_closed", "_magic",
                 "_bytes_written", "_producer_id", "_producer_epoch", "_base_sequence")

    def __init__(self, magic, compression_type, batch_size, offset=0, transactional=False,
                 producer_id=-1, producer_epoch=-1, base_sequence=-1):
        assert magic in (0, 1, 2), "Not supported magic"
        assert compression_type in (0, 1, 2, 3, 4), "Not valid compression type"
        if magic >= 2:
            assert not transactional or producer_id != -1, \
                "Cannot write transactional messages without a valid producer ID"
            assert producer_id == -1 or producer_epoch != -1, "Invalid negative producer epoch"
            assert producer_id == -1 or base_sequence != -1, \
                "Invalid negative sequence number used"
            self._builder = DefaultRecordBatchBuilder(
                magic, compression_type, transactional, producer_id, producer_epoch,
                base_sequence, batch_size,
            )
            self._producer_id = producer_id
            self._producer_epoch = producer_epoch
            self._base_sequence = base_sequence
        else:
            assert not transactional and producer_id == -1, \
                f"Idempotent messages are not supported for magic {magic}"
            self._builder = LegacyRecordBatchBuilder(magic, compression_type, batch_size)
            self._producer_id = self._producer_epoch = self._base_sequence = None
        self._batch_size = batch_size
        self._buffer = None
        self._next_offset = offset
        self._closed = False
        self._magic = magic
        self._bytes_written = 0

    def skip(self, offsets_to_skip):
        self._next_offset += offsets_to_skip

    def append(self, timestamp, key, value, headers=None):
        if self._closed:
            return None
        metadata = self._builder.append(
            self._next_offset, timestamp, key, value, [] if headers is None else headers
        )
        if metadata is not None:
            self._next_offset += 1
        return metadata

    def set_producer_state(self, producer_id, producer_epoch, base_sequence, is_transactional):
        if self._magic < 2:
            raise _k_errors.UnsupportedVersionError("Producer State requires Message format v2+")
        if self._closed:
            # a retried batch keeps its sequence numbers: changing them could duplicate data
            raise _k_errors.IllegalStateError(
                "Trying to set producer state of an already closed batch. This indicates a "
                "bug on the client."
            )
        self._builder.set_producer_state(producer_id, producer_epoch, base_sequence,
                                         is_transactional)
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence

    producer_id = property(lambda self: self._producer_id)
    producer_epoch = property(lambda self: self._producer_epoch)
    base_sequence = property(lambda self: self._base_sequence)

    def records(self):
        assert self._closed
        return MemoryRecords(self._buffer)

    def close(self):
        # Safe to call again (retries): a batch is encoded once, never compressed twice.
        if not self._closed:
            builder = self._builder
            self._bytes_written = builder.size()
            self._buffer = builder.build()
            if self._magic == 2:
                self._producer_id = builder.producer_id
                self._producer_epoch = builder.producer_epoch
                self._base_sequence = builder.base_sequence
            self._builder = None
        self._closed = True

    def size_in_bytes(self):
        return self._builder.size() if not self._closed else len(self._buffer)

    def compression_rate(self):
        assert self._closed
        return self.size_in_bytes() / self._bytes_written

    def is_full(self):
        return self._closed or self._builder.size() >= self._batch_size

    def next_offset(self):
        return self._next_offset

    def buffer(self):
        assert self._closed
        return self._buffer


# ---------------------------------------------------------------------------------------
# the producer's per-record path
# ---------------------------------------------------------------------------------------
#
# With the builder replaced, kafka-python's own send() -> RecordAccumulator.append ->
# ProducerBatch.try_append -> FutureRecordMetadata chain is ~90% of a producer's CPU.
# _send does the same steps for the common case in one frame and one compiled call
# (_factory.kafka_python_append), with the same locks, the same state changes and the same
# objects (kafka-python's FutureRecordMetadata on the batch's FutureProduceResult, resolved
# by one callback per run of them, _factory.KafkaPythonFutures); whatever it does not
# cover goes to kafka-python's own send() before anything with a side effect (a
# serializer, the partitioner) has run, so every refusal is kafka-python's own exception.

_HostProducer = _k_producer.KafkaProducer
_ORIG_SEND = _HostProducer.send
_FRM = _k_producer_future.FutureRecordMetadata
_Lock = _k_producer_future.threading.Lock
_TopicPartition = _k_producer.TopicPartition
_SERIALIZED = (bytes, bytearray, memoryview, type(None))
_p_ns = _k_producer.__dict__  # its logger as it is now: close() from __del__ replaces it
_monotonic = time.monotonic
_MAX_RECORD_OVERHEAD = DefaultRecordBatchBuilder.MAX_RECORD_OVERHEAD
_ORIG_PARTITION = _HostProducer._partition
_DefaultPartitioner = _k_partitioner.DefaultPartitioner
_partitioner_ns = _k_partitioner.__dict__  # its murmur2 as called now (ours once installed)


def _valid_headers(headers):
    # kafka-python's own test of send()'s headers, without side effects
    return all(isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
               and isinstance(item[1], bytes) for item in headers)


# compiled (kafkawire._compat) with the compiled codec, else the twin (_factory_py)
_factory.configure_kafka_python(_FRM, _Lock, _k_producer_future.RecordMetadata,
                                _k_future.log, MemoryRecordsBuilder, DefaultRecordBatchBuilder,
                                _k_accumulator.AtomicInteger, _monotonic)
_append = _factory.kafka_python_append


def _send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
    config = self.config
    md = self._metadata
    parts = md._partitions.get(topic)
    if (self._closed or value is None or parts is None or topic in md.internal_topics
            or (headers is not None and not (isinstance(headers, list) and _valid_headers(headers)))
            or (partition is None and (key is None or config["key_serializer"] is not None))
            or (partition is not None and not (type(partition) is int and partition in parts
                                               and partition >= 0))):
        # sticky partitioning, metadata to wait for, a refusal: kafka-python's own send()
        return _ORIG_SEND(self, topic, value, key, headers, partition, timestamp_ms)
    if headers is None:
        headers = []
    serializer = config["key_serializer"]
    key_bytes = key if serializer is None else self._serialize(serializer, topic, headers, key)
    serializer = config["value_serializer"]
    value_bytes = (value if serializer is None
                   else self._serialize(serializer, topic, headers, value))
    if type(key_bytes) not in _SERIALIZED:
        raise TypeError("Unsupported type for serialized key: %s" % type(key_bytes))
    if type(value_bytes) not in _SERIALIZED:
        raise TypeError("Unsupported type for serialized value: %s" % type(value_bytes))
    if partition is None:  # a keyed record: the partitioner, as kafka-python calls it
        if (parts and type(config["partitioner"]) is _DefaultPartitioner
                and type(self)._partition is _ORIG_PARTITION):
            # KafkaProducer._partition -> DefaultPartitioner.partition for a known topic
            # (~30% of a keyed send's time), without their four frames and three copies of
            # the topic's partitions: the same pick, with the partitioner module's murmur2
            partition = sorted(parts)[(_partitioner_ns["murmur2"](key_bytes) & 0x7FFFFFFF)
                                      % len(parts)]
        else:
            partition = self._partition(topic, None, key, value, key_bytes, value_bytes)
        if partition is None:
            raise ValueError(f'Partitioner did not assign a partition for topic {topic}!')
    if config["api_version"] >= (0, 11):  # magic 2
        if not headers and type(key_bytes) is bytes and type(value_bytes) is bytes:
            # DefaultRecordBatchBuilder.estimate_size_in_bytes, without its three frames
            k, v = len(key_bytes), len(value_bytes)
            size = _V2_HEADER + _MAX_RECORD_OVERHEAD + 1 + k + v + _sv(k) + _sv(v)
        else:
            size = _k_producer.DefaultRecordBatchBuilder.estimate_size_in_bytes(
                key_bytes, value_bytes, headers)
    else:
        size = self._estimate_size_in_bytes(key_bytes, value_bytes, headers)
    if size > config["max_request_size"]:
        self._ensure_valid_record_size(size)
    tp = _new(_TopicPartition, (topic, partition))  # the namedtuple, without a frame
    log = _p_ns["log"]
    if log.isEnabledFor(10):
        log.debug("%s: Sending (key=%r value=%r headers=%r) to %s", str(self), key, value,
                  headers, tp)
    tm = self._transaction_manager
    if tm and tm.is_transactional():
        tm.maybe_add_partition_to_transaction(tp)
    future, batch_is_full, new_batch_created = _append(
        self._accumulator, tp, timestamp_ms, key_bytes, value_bytes, headers)
    if batch_is_full or new_batch_created:
        if log.isEnabledFor(10):  # str(self) only for a line that is written
            log.debug("%s: Waking up the sender since %s is either full or"
                      " getting a new batch", str(self), tp)
        self._sender.wakeup()
    return future


_ORIG_PRODUCE_SUCCESS = _FRM._produce_success
_RecordMetadata = _k_producer_future.RecordMetadata


def _produce_success(self, result):
    """FutureRecordMetadata._produce_success (the sender thread, once per record when its
    batch is acknowledged): the record's RecordMetadata made without the namedtuple's
    frame, otherwise as kafka-python makes it."""
    offset, produce_timestamp_ms, record_exceptions_fn = result
    batch_index, timestamp_ms, checksum, key_size, value_size, header_size = self.args
    if record_exceptions_fn is not None:
        self.failure(record_exceptions_fn(batch_index))
        return
    if produce_timestamp_ms is not None and produce_timestamp_ms != -1:
        timestamp_ms = produce_timestamp_ms  # LogAppendTime: the broker's
    if offset != -1 and batch_index is not None:
        offset += batch_index
    tp = self._produce_future.topic_partition
    self.success(_new(_RecordMetadata, (tp[0], tp[1], tp, offset, timestamp_ms, checksum,
                                        key_size, value_size, header_size)))


_produce_success.__name__ = _ORIG_PRODUCE_SUCCESS.__name__
_produce_success.__qualname__ = _ORIG_PRODUCE_SUCCESS.__qualname__


_ORIG_MURMUR2 = _k_partitioner.murmur2
_kw_murmur2 = None
if codec.IMPLEMENTATION == "cython":  # the twin's murmur2 is no faster than kafka-python's
    try:
        from kafkawire._accumulate import murmur2 as _kw_murmur2
    except ImportError:  # an older build without the accumulator: kafka-python's own
        pass
if _kw_murmur2 is None:
    _murmur2 = _ORIG_MURMUR2
else:

    def _murmur2(data):
        # kafka-python's DefaultPartitioner hashes keys with a pure-Python murmur2; the
        # same hash compiled (unsigned, as kafka-python returns it), for bytes keys
        if type(data) is bytes or type(data) is bytearray:
            return _kw_murmur2(data) & 0xFFFFFFFF
        return _ORIG_MURMUR2(data)

    _murmur2.__doc__ = _ORIG_MURMUR2.__doc__


_send.__doc__ = _ORIG_SEND.__doc__
_send.__name__ = _ORIG_SEND.__name__
_send.__qualname__ = _ORIG_SEND.__qualname__


# ---------------------------------------------------------------------------------------
# the consumer's per-record path
# ---------------------------------------------------------------------------------------

_ConsumerRecord = _k_fetcher.ConsumerRecord
_READ_COMMITTED = _k_fetcher.IsolationLevel.READ_COMMITTED
_HostPartitionRecords = _k_fetcher.Fetcher.PartitionRecords
_chain = itertools.chain.from_iterable
_NOTHING = iter(())


def _headers_bytes(headers):
    # the header size a ConsumerRecord reports (kafka-python's measure): keys' UTF-8 bytes
    # plus values' bytes, no length prefixes
    return _factory_py.headers_wire_size(headers)[1]


class PartitionRecords(_HostPartitionRecords):
    """kafka-python's Fetcher.PartitionRecords, handing out a whole batch at a time.

    Over kafkawire's MemoryRecords, each batch becomes one list of ConsumerRecords (one
    call of the record factory for a magic-2 batch) when the fetcher's ``take()`` reaches
    it, and the lists are chained by a C iterator: no Python frame runs per record.  The
    records, positions, counters and exceptions are kafka-python's, raised at the same
    record: ``next_fetch_offset``, ``records_read`` and ``bytes_read`` count the records
    of the current list handed out so far.  Other records (kafka-python's own classes,
    when installed mid-way) go through kafka-python's own generator.
    """

    def __init__(self, fetch_offset, tp, records, key_deserializer=None,
                 value_deserializer=None, *args, **kwargs):
        self._cur = []  # ConsumerRecords of the current batch
        self._cum = None  # their running sizes (see kafka_python_records)
        self._rest = _NOTHING  # what is left of the current list
        self._read = self._bytes = 0  # counters of the lists before
        self._pos = fetch_offset  # the position before the current list
        super().__init__(fetch_offset, tp, records, key_deserializer, value_deserializer,
                         *args, **kwargs)
        if type(records) is MemoryRecords:
            self.record_iterator = itertools.dropwhile(
                self._maybe_skip_record,
                _chain(self._lists(tp, records, key_deserializer, value_deserializer)))

    @property
    def next_fetch_offset(self):
        k = len(self._cur) - self._rest.__length_hint__()
        return self._cur[k - 1][3] + 1 if k else self._pos

    @next_fetch_offset.setter
    def next_fetch_offset(self, value):
        self._pos = value

    @property
    def records_read(self):
        return self._read + len(self._cur) - self._rest.__length_hint__()

    @records_read.setter
    def records_read(self, value):
        self._read = value

    @property
    def bytes_read(self):
        k = len(self._cur) - self._rest.__length_hint__()
        return self._bytes + self._cum[k] if k else self._bytes

    @bytes_read.setter
    def bytes_read(self, value):
        self._bytes = value

    def _settle(self):
        """Fold the handed-out records of the current list into the counters."""
        self._pos, self._read, self._bytes = (
            self.next_fetch_offset, self.records_read, self.bytes_read)
        self._cur = []
        self._cum = None
        self._rest = _NOTHING

    def _lists(self, tp, records, key_deserializer, value_deserializer):
        """The ConsumerRecords of each batch, as a list iterator per batch; errors come
        after the records before them, as kafka-python's generator raises them."""
        topic, partition = tp.topic, tp.partition
        custom = key_deserializer is not None or value_deserializer is not None
        deserialize = self._deserialize
        try:
            batch = records.next_batch()
            last_batch = None
            while batch is not None:
                last_batch = batch
                if self.check_crcs and not batch.validate_crc():
                    raise _CORRUPT("Record batch for partition %s at offset %s failed crc check"
                                   % (self.topic_partition, batch.base_offset))
                v2 = batch.magic == 2
                if v2:
                    self.leader_epoch = batch.leader_epoch
                    if self.isolation_level == _READ_COMMITTED and batch.has_producer_id():
                        # KIP-98: a batch of a transaction aborted before it ends is
                        # skipped; the abort marker retires its producer id
                        self._consume_aborted_transactions_up_to(batch.last_offset)
                        if self._contains_abort_marker(batch):
                            self.aborted_producer_ids.discard(batch.producer_id)
                        elif self._is_batch_aborted(batch):
                            self._pos = batch.next_offset
                            batch = records.next_batch()
                            continue
                    if batch.is_control_batch:
                        self._pos = batch.next_offset
                        batch = records.next_batch()
                        continue
                if v2 and type(batch) is DefaultRecordBatch and not (
                        self.check_crcs and DefaultRecord.validate_crc is not _TRUE):
                    recs, raw_ts = batch._codec_records()
                    h = batch._header_data
                    out, cum, error = _factory.kafka_python_records(
                        _ConsumerRecord, topic, partition, self.leader_epoch, recs, h[0], h[7],
                        raw_ts, deserialize if custom else None, key_deserializer,
                        value_deserializer)
                else:
                    # magic 0/1; kafka-python's own batch (damaged data); or magic 2 with
                    # validate_crc replaced (kafka-python asks each record, whose answer is
                    # always yes unless a test's double says otherwise): record by
                    # record, as kafka-python
                    out, cum, error = self._legacy_list(
                        batch, topic, partition, key_deserializer, value_deserializer)
                if out:
                    self._cur = out
                    self._cum = cum
                    self._rest = rest = iter(out)
                    yield rest
                    self._settle()
                if error is not None:
                    raise error
                batch = records.next_batch()
            # a magic-2 batch keeps its last offset even when compaction removed that
            # record: the next fetch starts after it
            if last_batch is not None and last_batch.magic == 2:
                self._pos = last_batch.next_offset
            self.drain()
        except StopIteration:
            # a StopIteration inside a generator would end it silently; kafka-python turns
            # it into this error, and so does kafkawire
            raise RuntimeError("StopIteration raised unpacking messageset") from None

    def _legacy_list(self, batch, topic, partition, key_deserializer, value_deserializer):
        """(ConsumerRecords, running sizes, error) of a batch, record by record as
        kafka-python makes them (each record's validate_crc() asked on the way)."""
        out = []
        cum = [0]
        deserialize = self._deserialize
        try:
            for r in batch:
                if self.check_crcs and not r.validate_crc():
                    raise _CORRUPT("Record for partition %s at offset %s failed crc check" % (
                        self.topic_partition, r.offset))
                key, value, headers = r.key, r.value, r.headers
                key_size = -1 if key is None else len(key)
                value_size = -1 if value is None else len(value)
                key = deserialize(key_deserializer, topic, headers, key)
                value = deserialize(value_deserializer, topic, headers, value)
                cum.append(cum[-1] + r.size_in_bytes)
                out.append(_ConsumerRecord(
                    topic, partition, self.leader_epoch, r.offset, r.timestamp,
                    r.timestamp_type, key, value, headers, r.checksum, key_size, value_size,
                    _headers_bytes(headers) if headers else -1))
        except Exception as exc:  # noqa: BLE001 - raised after the records before it
            return out, cum, exc
        return out, cum, None


# ---------------------------------------------------------------------------------------
# install / uninstall
# ---------------------------------------------------------------------------------------

# (module, name) -> our replacement; every place kafka-python looks these names up.
_TARGETS = [
    (_k_record, "MemoryRecords", MemoryRecords),
    (_k_record, "MemoryRecordsBuilder", MemoryRecordsBuilder),
    (_k_memory, "MemoryRecords", MemoryRecords),
    (_k_memory, "MemoryRecordsBuilder", MemoryRecordsBuilder),
    (_k_memory, "DefaultRecordBatch", DefaultRecordBatch),
    (_k_memory, "DefaultRecordBatchBuilder", DefaultRecordBatchBuilder),
    (_k_memory, "LegacyRecordBatch", LegacyRecordBatch),
    (_k_memory, "LegacyRecordBatchBuilder", LegacyRecordBatchBuilder),
    (_k_default, "DefaultRecordBatch", DefaultRecordBatch),
    (_k_default, "DefaultRecordBatchBuilder", DefaultRecordBatchBuilder),
    (_k_default, "DefaultRecord", DefaultRecord),
    (_k_default, "ControlRecord", ControlRecord),
    (_k_legacy, "LegacyRecordBatch", LegacyRecordBatch),
    (_k_legacy, "LegacyRecordBatchBuilder", LegacyRecordBatchBuilder),
    (_k_legacy, "LegacyRecord", LegacyRecord),
    (_k_fetcher, "MemoryRecords", MemoryRecords),
    (_k_accumulator, "MemoryRecords", MemoryRecords),
    (_k_accumulator, "MemoryRecordsBuilder", MemoryRecordsBuilder),
    (_k_producer, "DefaultRecordBatchBuilder", DefaultRecordBatchBuilder),
    (_k_producer, "LegacyRecordBatchBuilder", LegacyRecordBatchBuilder),
    (_k_fetcher.Fetcher, "PartitionRecords", PartitionRecords),
    (_HostProducer, "send", _send),
    (_FRM, "_produce_success", _produce_success),
    (_k_partitioner, "murmur2", _murmur2),
]
_ORIGINALS = [(module, name, module.__dict__[name]) for module, name, _ in _TARGETS]


def host_version() -> str:
    """The version of the kafka-python this process imported."""
    return _kafka.__version__


def install(force: bool = False) -> None:
    """Route kafka-python's record decoding and encoding through kafkawire's codec.

    Affects every KafkaConsumer and KafkaProducer of this process, including running
    ones (from their next fetch or batch).  Calling it again does nothing.  On a
    kafka-python outside TESTED_VERSIONS it raises UntestedHostError and replaces
    nothing; ``force=True`` installs anyway, warning once (UntestedHostWarning).  Either
    every replacement is made or none.
    """
    _guard.check(HOST, host_version(), TESTED_VERSIONS, force)
    done = []
    try:
        for module, name, ours in _TARGETS:
            original = module.__dict__[name]
            setattr(module, name, ours)
            done.append((module, name, original))
    except BaseException:
        for module, name, original in reversed(done):
            setattr(module, name, original)
        raise


def uninstall() -> None:
    """Put kafka-python's own record classes back, exactly as they were."""
    for module, name, original in _ORIGINALS:
        setattr(module, name, original)


def installed() -> bool:
    """Whether kafkawire's codec is in place in kafka-python (all of it)."""
    return all(module.__dict__.get(name) is ours for module, name, ours in _TARGETS)


def _main(argv: list[str]) -> None:
    """``python -m kafkawire.compat.kafka_python app.py [args]`` (or ``-m module``)."""
    import runpy

    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(
            "usage: python -m kafkawire.compat.kafka_python (script.py | -m module) [args...]\n"
            "Runs the program with kafka-python's record layer replaced by kafkawire's codec.",
            file=sys.stderr,
        )
        raise SystemExit(2)
    # Run as __main__ this file is a second copy of the module: install the imported one,
    # so that installed() and uninstall() see the same classes.
    from kafkawire.compat import kafka_python

    kafka_python._auto_install("force" if os.environ.get(ENV_VAR) == "force" else "1")
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        runpy.run_path(argv[0], run_name="__main__")


def _auto_install(value: str) -> None:
    """The environment opt-in's and the runner's install(): an untested kafka-python is
    left to its own record layer with a warning, unless ``value`` is "force"."""
    if _guard.env_check(HOST, host_version(), TESTED_VERSIONS, ENV_VAR, value):
        install(force=True)


if os.environ.get(ENV_VAR, "") in ("1", "force") and __name__ != "__main__":
    _auto_install(os.environ[ENV_VAR])

if __name__ == "__main__":
    _main(sys.argv[1:])
