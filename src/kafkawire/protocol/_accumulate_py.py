"""The pure-Python twin of kafkawire._accumulate: the same names, the same bytes, the same
decisions and errors (tests/protocol/test_accumulate_parity.py holds them to it).

A batch encodes each record (RecordBatch v2 framing) as it is appended; sending it costs
its header and CRC32C (and compression).  See kafkawire._accumulate for the contract.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from kafkawire import codec, compression as _compression, errors
from kafkawire._pycodec import _uv_bytes as _uvarint

IMPLEMENTATION = "python"

_RECORD_OVERHEAD = 21  # accumulator.RECORD_OVERHEAD
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_HEADER = struct.Struct(">qiibIhiqqqhii")  # RecordBatch v2 header, 61 bytes
_M = 0x5BD1E995


# Zigzag varints of small lengths and offset deltas, the common case, precomputed.
_ZZ = [_uvarint(i << 1) for i in range(16384)]


def _zz(v: int) -> bytes:
    """A non-negative int32 as a zigzag varint."""
    return _ZZ[v] if v < 16384 else _uvarint(v << 1)


def _zz64(v: int) -> bytes:
    return _uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def murmur2(data: Any) -> int:
    """Kafka's murmur2 of ``data`` (bytes-like) as a signed 32-bit int: the pure-Python
    build's kafkawire.core.partitioner.murmur2."""
    data = bytes(data)
    n = len(data)
    h = 0x9747B28C ^ n
    # The Java client's Utils.murmur2: four-byte blocks little-endian, then the tail.
    for k in struct.unpack_from(f"<{n >> 2}I", data):
        k = (k * _M) & 0xFFFFFFFF
        h = ((h * _M) ^ ((k ^ (k >> 24)) * _M)) & 0xFFFFFFFF
    if n & 3:
        h = ((h ^ int.from_bytes(data[n & ~3:], "little")) * _M) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * _M) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


class Batch:
    """One partition's batch: the accumulator's bookkeeping and, for records appended one
    by one, their encoding.  ``records`` is None for such a batch; send_batch sets it to
    its record list (with ``encoded`` given) and ``columns`` to its Columns."""

    __slots__ = (
        "topic", "partition", "records", "columns", "size", "created", "future", "attempts",
        "deadline", "retry_at", "encoded", "reserved", "full", "in_flight", "default_ts",
        "pid", "epoch", "sequence", "unknown", "_buf", "_n", "_base_ts", "_max_ts",
    )

    def __init__(self, topic: str, partition: int, now: float, deadline: float, future: Any):
        self.topic = topic
        self.partition = partition
        self.records: list | None = None
        self.columns: Any = None
        self.size = 61  # accumulator.BATCH_OVERHEAD
        self.created = now
        # Resolves to (base_offset, log_append_time_ms) for the whole batch.
        self.future = future
        self.attempts = 0
        self.deadline = deadline
        self.retry_at = 0.0
        # (magic, codec, bytes, (producer id, epoch, base sequence) in those bytes)
        self.encoded: tuple[int, int, bytes, tuple[int, int, int]] | None = None
        # buffer_memory bytes this batch holds (taken when it is made).
        self.reserved = 0
        self.full = False
        self.in_flight = False
        # Timestamp for records that carry none (send_batch sequences), -1: the encoder's.
        self.default_ts = -1
        # The idempotent producer's stamp (protocol/idempotence.py); -1 until first sent.
        self.pid = -1
        self.epoch = -1
        self.sequence = -1
        # Whether the last attempt's outcome is unknown (no answer: it may be written).
        self.unknown = False
        self._buf = bytearray()
        self._n = 0
        self._base_ts = 0
        self._max_ts = 0

    def count(self) -> int:
        if self.columns is not None:
            return len(self.columns)
        if self.records is not None:
            return len(self.records)
        return self._n

    def allocate(self, capacity: int) -> None:
        """Room for ``capacity`` bytes of encoded records up front (a no-op here)."""

    def trim(self) -> None:
        """No record is appended from now on: give back the room allocated beyond the
        records encoded so far (a no-op here: the buffer only ever holds them)."""

    def free(self) -> None:
        """Let go of the encoded records (the batch is done: acknowledged or failed)."""
        self._buf = None

    @property
    def appended(self) -> int:
        """Records appended one by one (encoded in this batch)."""
        return self._n

    def add(self, key: Any, value: Any, timestamp: int, headers: Any = None) -> int:
        """Encode one record (key and value bytes-like or None, ``timestamp`` an int64,
        ``headers`` None or (bytes key, bytes-like value or None) pairs) after the
        others; its offset delta in the batch."""
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise OverflowError("Python int too large to convert to C long")
        i = self._n
        delta = 0 if i == 0 else timestamp - self._base_ts
        if not _INT64_MIN <= delta <= _INT64_MAX:
            raise errors.encode_error(f"record {i}: timestampDelta {delta} out of range for varlong")
        parts = [b"\x00", _zz64(delta), _zz(i)]
        if key is None:
            parts.append(b"\x01")  # zigzag(-1): null
        else:
            key = memoryview(key).cast("B") if type(key) is not bytes else key
            parts += (_zz(len(key)), key)
        if value is None:
            parts.append(b"\x01")
        else:
            value = memoryview(value).cast("B") if type(value) is not bytes else value
            parts += (_zz(len(value)), value)
        if headers is None:
            parts.append(b"\x00")
        else:
            headers = tuple(headers)
            parts.append(_zz(len(headers)))
            for hk, hv in headers:
                hk = memoryview(hk).cast("B")
                parts += (_zz(len(hk)), hk)
                if hv is None:
                    parts.append(b"\x01")
                else:
                    hv = memoryview(hv).cast("B")
                    parts += (_zz(len(hv)), hv)
        body = b"".join(parts)
        if len(body) > 2147483647:
            raise errors.encode_error(f"record {i}: {len(body)} bytes is larger than a record can be")
        buf = self._buf
        buf += _zz(len(body))
        buf += body
        if i == 0:
            self._base_ts = self._max_ts = timestamp
        elif timestamp > self._max_ts:
            self._max_ts = timestamp
        self._n = i + 1
        return i

    def encode_v2(self, compression: int, level: Any, producer_id: int, producer_epoch: int,
                  base_sequence: int, transactional: bool) -> bytes:
        """The records appended so far as one RecordBatch (magic 2), base offset 0,
        CreateTime: byte for byte ``codec.encode_record_batch`` of the same records."""
        n = self._n
        if n == 0:
            raise errors.encode_error("a RecordBatch needs at least one record")
        if self._buf is None:
            raise ValueError("this batch is done (acknowledged or failed): its records are gone")
        section: Any = self._buf
        if compression:
            section = _compression.compress(compression, bytes(section), level)
        total = 61 + len(section)
        if total - 12 > 2147483647:
            raise errors.encode_error(f"a RecordBatch of {total - 12} bytes is larger than int32 allows")
        attrs = compression | (0x10 if transactional else 0)
        out = bytearray(_HEADER.pack(0, total - 12, -1, 2, 0, attrs, n - 1, self._base_ts, self._max_ts,
                                     producer_id, producer_epoch, base_sequence, n))
        out += section
        # KIP-98: CRC32C covers attributes..end
        out[17:21] = codec.crc32c(memoryview(out)[21:]).to_bytes(4, "big")
        return bytes(out)

    def __repr__(self) -> str:
        return f"<Batch {self.topic}[{self.partition}] {self.count()} record(s)>"


class Appender:
    """send()'s one call: append a plain record (bytes value, bytes or None key, no
    headers, a partition given) to its partition's open batch if it has room without
    filling up; else None, and the caller takes the full path.  :meth:`send` is a whole
    ``Producer.send``, :meth:`offer` its hot path alone.  See kafkawire._accumulate.Appender."""

    __slots__ = ("open", "batch_size", "lock", "future", "clock_ns", "full", "pick", "counts", "enabled")

    def __init__(self, open: dict, batch_size: int, lock: Any, future: type, clock_ns: Callable[[], int],
                 full: Callable[..., Any] | None = None, pick: Callable[[Any], Any] | None = None,
                 counts: dict[str, int] | None = None):
        self.open = open
        self.counts = counts
        self.batch_size = batch_size
        self.lock = lock
        self.future = future
        self.clock_ns = clock_ns
        self.full = full
        self.pick = pick
        self.enabled = True

    def send(self, topic: Any, value: Any = None, key: Any = None, partition: Any = None,
             timestamp: Any = None, headers: Any = None, callback: Any = None) -> Any:
        """Producer.send (this is a producer's own send): queue one record; its future."""
        if self.enabled:
            fut = self.append(topic, self._route(topic, key, partition), key, value, timestamp, headers)
            if fut is not None:
                if callback is not None:
                    fut.add_callback(callback)
                return fut
        return self.full(topic, value, key, partition, timestamp, headers, callback)  # type: ignore[misc]

    def offer(self, topic: Any, value: Any = None, key: Any = None, partition: Any = None,
              timestamp: Any = None, headers: Any = None) -> Any:
        """send()'s hot path alone: the record's future, or None (the caller's full path)."""
        if not self.enabled:
            return None
        return self.append(topic, self._route(topic, key, partition), key, value, timestamp, headers)

    def _route(self, topic: Any, key: Any, partition: Any) -> Any:
        # The partition of a record sent without one, when the hot path can choose it.
        if partition is not None:
            return partition
        if key is None:
            return None if self.pick is None else self.pick(topic)
        if self.counts is None or type(key) is not bytes or type(topic) is not str:
            return None
        n = self.counts.get(topic)
        if type(n) is not int or n <= 0:
            return None
        return (murmur2(key) & 0x7FFFFFFF) % n

    def append(self, topic: Any, partition: Any, key: Any, value: Any, timestamp: Any, headers: Any) -> Any:
        if (headers is not None or type(value) is not bytes or type(partition) is not int
                or type(topic) is not str):
            return None
        if key is not None and type(key) is not bytes:
            return None
        if partition < 0:
            return None
        if timestamp is None:
            timestamp = self.clock_ns() // 1_000_000
        elif type(timestamp) is not int or not _INT64_MIN <= timestamp <= _INT64_MAX:
            return None  # the full path says why
        size = _RECORD_OVERHEAD + len(value) + (0 if key is None else len(key))
        lock = self.lock
        if lock is not None:
            lock.acquire()
        try:
            b = self.open.get((topic, partition))
            if b is None or b.full or b.size + size >= self.batch_size:
                return None
            index = b.add(key, value, timestamp)
            b.size += size
        finally:
            if lock is not None:
                lock.release()
        return self.future((b, index, timestamp))
