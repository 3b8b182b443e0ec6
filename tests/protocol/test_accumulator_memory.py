"""buffer_memory with many partitions (no I/O): a new batch reserves batch_size, as the
Java client's does, but once closed for sending it holds only what its records take, so
batches awaiting their answers do not fill buffer_memory with room they never use."""

from __future__ import annotations

from kafkawire.client.config import Config
from kafkawire.client.future import Future
from kafkawire.protocol.accumulator import Accumulator


def test_a_sent_batch_gives_back_the_room_it_reserved_beyond_its_records():
    acc = Accumulator(Config.producer(bootstrap_servers="h:1", linger_ms=0, enable_idempotence=False,
                                      batch_size=16384, buffer_memory=20 * 16384), Future)
    reserve = acc.admit(("t", 0), 130)
    assert reserve == 16384 and acc.has_room(reserve)
    batch, _i, made, _closed = acc.append(("t", 0), (None, b"v" * 100, 1000), 130, reserve, 0.0)
    assert made and acc.used_memory == 16384  # reserved while records may still join it
    assert not acc.freed
    by_node, _expired, _wait, _ = acc.collect(0.0, lambda t, p: 1, flushing=False)
    assert by_node == {1: [batch]} and batch.full
    assert acc.used_memory == batch.size == batch.reserved < 300  # awaiting its answer
    assert acc.freed  # the shell is to wake callers waiting for room
    # 1,000 partitions, one record each, sent and unanswered: 20 batch_sizes hold them (not 1,000).
    for p in range(1, 1000):
        reserve = acc.admit(("t", p), 130)
        assert acc.room_wait(reserve, 0.0, 1.0) == 0.0, (p, acc.used_memory)
        acc.append(("t", p), (None, b"v" * 100, 1000), 130, reserve, 0.0)
        acc.collect(0.0, lambda t, p: 1, flushing=False)
    assert acc.used_memory == sum(b.size for q in acc.batches.values() for b in q) < 20 * 16384
    acc.release(batch)
    assert acc.used_memory == sum(b.size for q in acc.batches.values() for b in q if b is not batch)
