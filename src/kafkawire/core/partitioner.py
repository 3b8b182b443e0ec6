"""Partitioners: murmur2 for keyed records (the Java client's default), sticky otherwise;
and librdkafka's partitioners by name (``partitioner="consistent_random"``, ...), for
teams whose other producers use confluent-kafka's default.

``murmur2`` is the 32-bit MurmurHash2 variant Kafka's Java client uses (seed 0x9747b28c),
so ``partition_for_key(key, n)`` puts a key on the same partition as the Java producer,
librdkafka's "murmur2_random" partitioner and kafka-python.
"""

from __future__ import annotations

import random
import threading
import zlib
from typing import Any, Callable

# The accumulator's: compiled with the codec (a keyed send's hot path uses it there), else
# the pure-Python twin's.  One murmur2 for every keyed record, whichever path it takes.
from kafkawire.protocol.accumulator import murmur2

__all__ = ["murmur2", "murmur2_many", "partition_for_key", "StickyPartitioner", "fnv1a", "NamedPartitioner",
           "PARTITIONERS", "named_partitioner"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The Java client's default partition for a keyed record: positive murmur2 mod n."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def fnv1a(data: Any) -> int:
    """librdkafka's "fnv1a" partitioners' hash: 32-bit FNV-1a of ``data``, read as a
    signed int and made positive (as Sarama's hash partitioner does; -2**31 stays itself,
    read back unsigned)."""
    h = 0x811C9DC5
    for b in bytes(data):
        h = ((h ^ b) * 0x01000193) & _MASK
    return (-(h - 0x100000000)) & _MASK if h & 0x80000000 else h


def _murmur2_positive(data: Any) -> int:
    return murmur2(data) & 0x7FFFFFFF


def _as_bytes(key: Any) -> Any:
    if key is None:
        return b""
    return key.encode() if isinstance(key, str) else key


class NamedPartitioner:
    """One of librdkafka's partitioners, as confluent-kafka's ``partitioner`` option names
    them: ``partitioner(key, n)`` is the key's hash modulo ``n``, or None for a key the
    partitioner spreads at random (the producer then uses its sticky partition, KIP-480, as
    librdkafka does for such keys since 1.6)."""

    __slots__ = ("name", "_hash", "_spread")

    def __init__(self, name: str, hash: Callable[[Any], int] | None, spread: Callable[[Any], bool]):
        self.name = name
        self._hash = hash
        self._spread = spread

    def __call__(self, key: Any, num_partitions: int) -> int | None:
        if self._hash is None or self._spread(key):
            return None
        return self._hash(_as_bytes(key)) % num_partitions

    def __repr__(self) -> str:
        return f"<partitioner {self.name!r}>"


def _never(key: Any) -> bool:
    return False


#: librdkafka's partitioners by name: which hash, and which keys are spread at random
#: (NULL keys; for consistent_random empty ones too).
PARTITIONERS: dict[str, NamedPartitioner] = {p.name: p for p in (
    NamedPartitioner("murmur2", _murmur2_positive, _never),  # NULL: murmur2 of no bytes
    NamedPartitioner("murmur2_random", _murmur2_positive, lambda key: key is None),  # the Java client's rule
    NamedPartitioner("consistent", zlib.crc32, _never),
    NamedPartitioner("consistent_random", zlib.crc32, lambda key: key is None or len(key) == 0),  # librdkafka's default
    NamedPartitioner("fnv1a", fnv1a, _never),
    NamedPartitioner("fnv1a_random", fnv1a, lambda key: key is None),
    NamedPartitioner("random", None, lambda key: True),
)}


def named_partitioner(name: str) -> NamedPartitioner:
    """The partitioner librdkafka (and confluent-kafka's ``partitioner`` option) calls ``name``."""
    try:
        return PARTITIONERS[name]
    except KeyError:
        raise ValueError(f"unknown partitioner {name!r}; the named ones are {', '.join(PARTITIONERS)} "
                         f"(librdkafka's), or pass a callable partitioner(key, num_partitions)") from None


class StickyPartitioner:
    """Unkeyed records stick to one partition until its batch is sent (KIP-480)."""

    def __init__(self) -> None:
        self._current: dict[str, int] = {}
        self._lock = threading.Lock()

    def partition(self, topic: str, num_partitions: int) -> int:
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            with self._lock:
                p = random.randrange(num_partitions)
                self._current[topic] = p
        return p

    def batch_done(self, topic: str, partition: int, num_partitions: int) -> None:
        """The batch of ``partition`` is full or sent: move unkeyed records elsewhere."""
        with self._lock:
            if self._current.get(topic) != partition:
                return
            if num_partitions > 1:
                nxt = random.randrange(num_partitions - 1)
                self._current[topic] = nxt if nxt < partition else nxt + 1


def choose_partition(topic: str, key: Any, n: int, partitioner: Any, sticky: StickyPartitioner
                     ) -> tuple[int, bool]:
    """The partition of a record sent without one, among ``n``: the user's
    ``partitioner(key, n)`` (None from it: the sticky one), else murmur2 of the key
    (Java's rule), else the topic's sticky partition (KIP-480).  Returns (partition,
    whether it is the sticky one)."""
    if partitioner is not None:
        p = partitioner(key, n)
        if p is not None:
            return p, False  # None: a key spread at random (NamedPartitioner), so the sticky one
    elif key is not None:
        return partition_for_key(key, n), False
    return sticky.partition(topic, n), True


def check_partition(partition: Any) -> int:
    """An explicit partition, checked: an int >= 0."""
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise ValueError(f"partition must be an int >= 0 or None, got {partition!r}")
    return int(partition)


def murmur2_many(data: Any, offsets: Any) -> Any:
    """``murmur2`` of many byte strings at once: string ``i`` is
    ``data[offsets[i]:offsets[i + 1]]`` (an Arrow binary column's buffers).  Returns a numpy
    int32 array equal to ``[murmur2(s) for s in strings]``, computed with numpy over every
    string of one length at a time (bulk writers partition millions of keys with it)."""
    import numpy as np

    buf = np.frombuffer(data, dtype=np.uint8) if len(data) else np.zeros(0, np.uint8)
    offs = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offs)
    out = np.empty(len(lengths), dtype=np.uint32)
    m = np.uint32(_M)
    with np.errstate(over="ignore"):  # uint32 products wrap modulo 2**32, as Java's ints do
        same = len(lengths) and lengths.min() == lengths.max()
        for length in (lengths[:1] if same else np.unique(lengths)):
            n = int(length)
            if same:
                # Every string this long (fixed-size keys, the usual case): one reshape, no gather.
                rows = slice(None)
                mat = buf[offs[0]:offs[-1]].reshape(len(lengths), n)
            else:
                rows = np.nonzero(lengths == length)[0]
                mat = buf[offs[rows][:, None] + np.arange(n)]
            blocks = np.ascontiguousarray(mat[:, : n & ~3]).view("<u4")
            tail = mat[:, n & ~3:].astype(np.uint32)
            h = np.full(len(mat), (0x9747B28C ^ n) & _MASK, dtype=np.uint32)
            for i in range(n >> 2):
                k = blocks[:, i] * m
                k ^= k >> np.uint32(24)
                k = k * m
                h = (h * m) ^ k
            rest = n & 3
            if rest == 3:
                h ^= tail[:, 2] << 16
            if rest >= 2:
                h ^= tail[:, 1] << 8
            if rest >= 1:
                h ^= tail[:, 0]
                h = h * m
            h ^= h >> np.uint32(13)
            h = h * m
            h ^= h >> np.uint32(15)
            out[rows] = h
    return out.view(np.int32)
