"""The groupmates helper: peer clients as consumer-group members in child processes.

Two confluent-kafka members share a 4-partition topic on Apache Kafka; one is SIGKILLed
(no LeaveGroup, no commit) and the other takes its partitions over from the committed
offsets once the dead one's session times out.  (These ran on Tansu and the librdkafka
mock before: there a rebalance waits half the session timeout (Tansu) or session.timeout.ms
- 1 s (the mock); on Kafka it is done as soon as every member has joined.)
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from groupmates import (
    GroupmateError,
    GroupmateTimeout,
    Groupmates,
    groupmates,  # noqa: F401 - the fixture
)

from kafkawire import Admin

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.broker, pytest.mark.groups]

PARTITIONS = 4
ALL = frozenset(range(PARTITIONS))
# Kafka's group.min.session.timeout.ms: the shortest session, the quickest takeover of a kill.
SESSION_MS = 6000


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _create_topic(bootstrap: str, name: str) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([name], num_partitions=PARTITIONS)


def _produce(bootstrap: str, topic: str, per_partition: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(per_partition):
        for p in range(PARTITIONS):
            producer.produce(topic, f"p{p}-{i}".encode(), partition=p)
    assert producer.flush(15) == 0


def test_members_split_and_survivor_takes_over_a_killed_member(kafka_broker, groupmates):
    bootstrap = kafka_broker.bootstrap
    topic, group = f"mates-{_uid()}", f"mates-{_uid()}"
    _create_topic(bootstrap, topic)
    _produce(bootstrap, topic, 10)

    a = groupmates.start("confluent", bootstrap, topic, group, "range", name="a",
                         session_timeout_ms=SESSION_MS)
    a.wait_partitions(ALL, 30)  # Kafka answers a lone member's JoinGroup at once
    b = groupmates.start("confluent", bootstrap, topic, group, "range", name="b",
                         session_timeout_ms=SESSION_MS)

    def split():
        pa, pb = a.partitions(), b.partitions()
        return pa and pb and not pa & pb and pa | pb == ALL

    groupmates.wait_for(split, 30, "a split of the 4 partitions between a and b")
    a_parts, b_parts = a.partitions(), b.partitions()
    assert len(a_parts) == len(b_parts) == 2  # range over 2 members, 4 partitions

    # Every record is consumed by the member that owns its partition, and committed.
    everything = {(p, o) for p in ALL for o in range(10)}
    groupmates.wait_for(lambda: set(a.consumed()) | set(b.consumed()) >= everything, 20,
                        "all 40 records consumed")
    assert {p for p, _ in b.consumed()} <= b_parts  # b joined the 2-member generation only

    def committed(p):  # a commits what it consumed before b joined (on its revoke), b the rest
        return max(m.committed().get((topic, p), -1) for m in (a, b))

    groupmates.wait_for(lambda: all(committed(p) == 10 for p in ALL), 10, "commits of offset 10")

    before_kill = len(a.consumed())
    b.kill()
    assert not b.alive and b.returncode == -9
    a.wait_partitions(ALL, 30)
    assert a.assignment() == frozenset((topic, p) for p in ALL)

    # a resumes b's partitions at b's committed offsets: offsets 10 and 11, nothing earlier.
    _produce(bootstrap, topic, 2)
    a.wait_for(lambda: {(p, o) for p in ALL for o in (10, 11)} <= set(a.consumed()), 20,
               "the new records on all 4 partitions")
    taken_over = a.consumed()[before_kill:]
    for p in b_parts:
        assert sorted(o for q, o in taken_over if q == p) == [10, 11], p
    assert not a.errors()

    assert a.close() == 0
    kinds = [e["event"] for e in a.events()]
    assert kinds[-1] == "closed" and "closing" in kinds
    assert a.assignment() == frozenset()  # closing revoked everything (then left the group)
    assert a.committed() == {(topic, p): 12 for p in ALL}


def test_children_end_with_their_owner_and_waits_time_out(kafka_broker):
    topic = f"mates-{_uid()}"
    with Groupmates() as mates:
        # The topic does not exist yet: the member runs but is never assigned anything.
        m = mates.start("confluent", kafka_broker.bootstrap, topic, f"g-{_uid()}",
                        extra={"allow.auto.create.topics": False})
        started = time.monotonic()
        with pytest.raises(GroupmateTimeout, match="partitions"):
            m.wait_partitions(ALL, 0.5)
        assert time.monotonic() - started < 5
        assert m.alive
        pid = m.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # ended (and reaped) by the Groupmates that started it
    with pytest.raises(ValueError, match="assignors"):
        mates.start("confluent", kafka_broker.bootstrap, topic, "g", "sticky")
    with Groupmates() as mates, pytest.raises(GroupmateError, match="failed.*no.such.option"):
        # A fatal client error in the child is reported at once, not waited out.
        mates.start("confluent", kafka_broker.bootstrap, topic, "g", extra={"no.such.option": 1})
