"""The sync producer wakes its sender once for the new batches it makes while the sender
polls, not once per batch (issue 23, many partitions).

A new batch that must go before the sender's next look wakes it (a system call on the
poller's wake-up socket).  Writing to many partitions, nearly every record opens a batch:
before, each of them woke the sender until its next pass (22,000 wake-ups for 500,000
records to 1,000 partitions, about half the batches), and the extra passes closed
smaller batches; the producer ran at 0.6x the rate it has now."""

from __future__ import annotations

import pytest
from topics import create_topic

from kafkawire.client.producer import Producer


@pytest.mark.broker
def test_new_batches_for_many_partitions_wake_the_sender_once_per_pass(modern_broker):
    partitions, n = 100, 20_000
    topic = create_topic(modern_broker.bootstrap, "wakeups", partitions=partitions)
    with Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=5) as p:
        p.partitions_for(topic, timeout=30)
        p.send(topic, b"warm", partition=0).result(30)
        wakes, made = [0], [0]
        wakeup, new_batch = p._poller.wakeup, p._acc.new_batch

        def counted_wakeup():
            wakes[0] += 1
            wakeup()

        def counted_new_batch(*a):
            made[0] += 1
            return new_batch(*a)

        p._poller.wakeup, p._acc.new_batch = counted_wakeup, counted_new_batch
        futures = [p.send(topic, b"v" * 100, partition=i % partitions) for i in range(n)]
        p.flush(60)
        assert made[0] > partitions  # several batches a partition: new batches while the sender polls
        # Before, every batch woke it (here 200 of 200); now a quarter to a half do (flush,
        # and a pass that found nothing lingering, so the next batch wakes it once; more
        # passes on a loaded machine).
        assert wakes[0] < made[0] * 3 // 4, (wakes[0], made[0])
    offsets = {}
    for f in futures:
        m = f.result(0)
        assert m.offset > offsets.get(m.partition, -1)  # every record written, in order
        offsets[m.partition] = m.offset
    assert len(offsets) == partitions
