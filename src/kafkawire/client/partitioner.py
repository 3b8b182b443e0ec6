"""Partitioners: murmur2 for keyed records (the Java client's default), sticky otherwise.

``murmur2`` is the 32-bit MurmurHash2 variant Kafka's Java client uses (seed 0x9747b28c),
so ``partition_for_key(key, n)`` puts a key on the same partition as the Java producer,
librdkafka's "murmur2_random" partitioner and kafka-python.
"""

from __future__ import annotations

import random
import struct
import threading

__all__ = ["murmur2", "partition_for_key", "StickyPartitioner"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as a signed 32-bit int (Java's Utils.murmur2)."""
    data = bytes(data)
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    nblocks = length >> 2
    for (k,) in struct.iter_unpack("<I", data[: nblocks * 4]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = nblocks * 4
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The Java client's default partition for a keyed record: positive murmur2 mod n."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


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
