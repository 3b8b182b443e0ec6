"""The groupmates helper: peer clients as consumer-group members in child processes.

Two confluent-kafka members share a 4-partition topic on each test broker; one is SIGKILLed
(no LeaveGroup, no commit) and the other takes its partitions over from the committed
offsets.  Timings (see groupmates.py): Tansu completes a JoinGroup after half the session
timeout (rounded up to a second); the mock waits its initial rebalance delay (set to 0
here) and then session.timeout.ms - 1 s for every later rebalance.
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
    set_mock_initial_rebalance_delay,
)

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.broker, pytest.mark.groups]

PARTITIONS = 4
ALL = frozenset(range(PARTITIONS))
# Short sessions keep a kill's takeover quick: Tansu and (with no initial delay) the mock
# both accept 3 s.
SESSION_MS = 3000


def _uid() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(params=["tansu", "mock"])
def group_broker(request, tansu_broker, mock_cluster_factory):
    """(bootstrap, create_topic) on Tansu (the shared broker) or a fresh mock cluster."""
    if request.param == "tansu":
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": tansu_broker.bootstrap})

        def create(name: str) -> None:
            for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
                future.result(15)

        return tansu_broker.bootstrap, create
    cluster = mock_cluster_factory(3)
    # The mock's 3 s initial rebalance delay would outlast a 3 s session (DESIGN quirk).
    set_mock_initial_rebalance_delay(cluster, 0)
    return cluster.bootstrap, lambda name: cluster.create_topic(name, PARTITIONS, 1)


def _produce(bootstrap: str, topic: str, per_partition: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(per_partition):
        for p in range(PARTITIONS):
            producer.produce(topic, f"p{p}-{i}".encode(), partition=p)
    assert producer.flush(15) == 0


def test_members_split_and_survivor_takes_over_a_killed_member(group_broker, groupmates):
    bootstrap, create_topic = group_broker
    topic, group = f"mates-{_uid()}", f"mates-{_uid()}"
    create_topic(topic)
    _produce(bootstrap, topic, 10)

    a = groupmates.start("confluent", bootstrap, topic, group, "range", name="a",
                         session_timeout_ms=SESSION_MS)
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


def test_children_end_with_their_owner_and_waits_time_out(tansu_broker):
    topic = f"mates-{_uid()}"
    with Groupmates() as mates:
        # The topic does not exist yet: the member runs but is never assigned anything.
        m = mates.start("confluent", tansu_broker.bootstrap, topic, f"g-{_uid()}",
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
        mates.start("confluent", tansu_broker.bootstrap, topic, "g", "sticky")
    with Groupmates() as mates, pytest.raises(GroupmateError, match="failed.*no.such.option"):
        # A fatal client error in the child is reported at once, not waited out.
        mates.start("confluent", tansu_broker.bootstrap, topic, "g", extra={"no.such.option": 1})
