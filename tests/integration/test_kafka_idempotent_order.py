"""The idempotent producer keeps each partition's order on a topic just created.

Kafka answers CreateTopics before every partition has its leader, so the first batches
of a partition are refused (NOT_LEADER_OR_FOLLOWER) while later ones, pipelined behind
them, may already be taken.  A broker that has no state for a producer on a partition
takes any sequence number, so a batch sent behind the partition's first one could be
written before it, and the first, resent, would then land after it.
"""

from __future__ import annotations

import collections
import time

import pytest
from shells import shell  # noqa: F401 - the fixture
from topics import create_topic

from kafkawire.client.consumer import Consumer, TopicPartition

pytestmark = [pytest.mark.kafka, pytest.mark.broker]

PARTITIONS = 200
RECORDS = 20_000


def test_each_partition_keeps_send_order_on_a_new_topic(kafka_broker, shell):
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, "idem-order", PARTITIONS)
    with shell.Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"%d" % i) for i in range(RECORDS)]
        producer.flush(120)
        for f in futures:
            f.result(60)
    got: dict[int, list[int]] = collections.defaultdict(list)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 120
        total = 0
        while total < RECORDS and time.monotonic() < deadline:
            for r in consumer.poll(1.0):
                got[r.partition].append(int(r.value))
                total += 1
    assert total == RECORDS, f"read {total} of {RECORDS} records"
    reordered = {p: values for p, values in got.items() if values != sorted(values)}
    assert not reordered, (
        f"{len(reordered)} partition(s) hold records out of send order, e.g. "
        f"{next(iter(reordered.items()))}")
