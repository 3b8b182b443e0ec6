"""Partition reassignments and leader elections through kafkawire's Admin and AsyncAdmin on a
three-node Apache Kafka: alter_partition_reassignments moves replicas (checked through the
topic's metadata), list_partition_reassignments shows one held in progress by a replication
throttle and its cancellation, elect_leaders moves leadership to the preferred replica and
says when no election is needed.
"""

from __future__ import annotations

import pytest
from settle import eventually, until_known
from shells import make_admin  # noqa: F401 - the fixture
from topics import unique_name
from javaview import java_view

from kafkawire import errors
from kafkawire.client.admin import ConfigResource, NewTopic, PartitionReassignment, TopicPartition
from kafkawire.client.producer import Producer
from kafkawire.testing.kafka import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def kafka3():
    with KafkaCluster(3) as cluster:
        yield cluster


@pytest.fixture
def admin(kafka3, make_admin):
    """Admin, then AsyncAdmin behind the same interface."""
    with make_admin(bootstrap_servers=kafka3.bootstrap, request_timeout_ms=15000) as a:
        yield a


def _partition(admin, tp: TopicPartition):
    return admin.describe_topics([tp.topic], timeout=TIMEOUT)[tp.topic].partitions[tp.partition]


def test_reassign_then_elect_the_preferred_leader(admin):
    topic = unique_name("re")
    admin.create_topics([NewTopic(topic, 1, 2)], timeout=TIMEOUT)
    until_known(admin, topic, 1)
    tp = TopicPartition(topic, 0)
    leader = _partition(admin, tp).leader
    other = next(n for n in (1, 2, 3) if n != leader and n not in _partition(admin, tp).replicas)
    # The new first replica is the preferred leader; the current leader stays until elected.
    assert admin.alter_partition_reassignments({tp: [other, leader]}, timeout=TIMEOUT) == {tp: None}
    eventually(lambda: (_partition(admin, tp).replicas, sorted(_partition(admin, tp).isr)),
               ([other, leader], sorted([other, leader])), TIMEOUT)
    eventually(lambda: admin.list_partition_reassignments(timeout=TIMEOUT), {}, TIMEOUT)
    assert _partition(admin, tp).leader == leader

    assert admin.elect_leaders("preferred", [tp], timeout=TIMEOUT) == {tp: None}
    eventually(lambda: _partition(admin, tp).leader, other, TIMEOUT)
    again = admin.elect_leaders("preferred", [tp], timeout=TIMEOUT, raise_on_error=False)
    assert isinstance(again[tp], errors.ElectionNotNeededError)
    unclean = admin.elect_leaders("unclean", [tp], timeout=TIMEOUT, raise_on_error=False)
    assert isinstance(unclean[tp], errors.ElectionNotNeededError)
    missing = TopicPartition(unique_name("gone"), 0)
    got = admin.elect_leaders("preferred", [missing], timeout=TIMEOUT, raise_on_error=False)
    assert isinstance(got[missing], errors.UnknownTopicOrPartitionError)
    with pytest.raises(ValueError, match="preferred' or 'unclean"):
        admin.elect_leaders("random", [tp])


def test_a_throttled_reassignment_is_listed_until_cancelled(kafka3, admin):
    topic = unique_name("rt")
    admin.create_topics([NewTopic(topic, 1, 1)], timeout=TIMEOUT)
    until_known(admin, topic, 1)
    tp = TopicPartition(topic, 0)
    with Producer(bootstrap_servers=kafka3.bootstrap, linger_ms=5) as p:
        for _ in range(64):
            p.send(topic, b"x" * 10_000, partition=0)
        p.flush(TIMEOUT)
    [owner] = _partition(admin, tp).replicas
    adding = next(n for n in (1, 2, 3) if n != owner)
    # A replication throttle of 1 byte/s keeps the new replica from catching up.
    rates = {"leader.replication.throttled.rate": "1", "follower.replication.throttled.rate": "1"}
    brokers = [ConfigResource("broker", str(n)) for n in (1, 2, 3)]
    admin.alter_configs({b: rates for b in brokers}, timeout=TIMEOUT)
    admin.alter_configs({ConfigResource("topic", topic): {"leader.replication.throttled.replicas": "*",
                                                          "follower.replication.throttled.replicas": "*"}},
                        timeout=TIMEOUT)
    try:
        admin.alter_partition_reassignments({tp: [owner, adding]}, timeout=TIMEOUT)
        ongoing = admin.list_partition_reassignments(timeout=TIMEOUT)
        assert ongoing[tp] == PartitionReassignment([owner, adding], [adding], [])
        assert admin.list_partition_reassignments([tp], timeout=TIMEOUT) == {tp: ongoing[tp]}
        assert admin.list_partition_reassignments([TopicPartition(topic, 7)], timeout=TIMEOUT) == {}
        # Kafka's own Admin client sees the same move.
        theirs = [x[1:] for x in java_view("ClusterView", kafka3.bootstrap) if x[0] == "reassignment"]
        assert theirs == [[f"{topic}-0", f"[{owner}, {adding}]", f"[{adding}]", "[]"]]

        assert admin.alter_partition_reassignments({tp: None}, timeout=TIMEOUT) == {tp: None}
        eventually(lambda: admin.list_partition_reassignments(timeout=TIMEOUT), {}, TIMEOUT)
        eventually(lambda: _partition(admin, tp).replicas, [owner], TIMEOUT)
        # Nothing left to cancel: Kafka says so for that partition.
        got = admin.alter_partition_reassignments({tp: None}, timeout=TIMEOUT, raise_on_error=False)
        assert isinstance(got[tp], errors.NoReassignmentInProgressError)
    finally:
        admin.alter_configs({b: dict.fromkeys(rates) for b in brokers}, timeout=TIMEOUT)


def test_describe_cluster_lists_a_stopped_broker_as_fenced(kafka3, admin):
    assert sorted(admin.describe_cluster(timeout=TIMEOUT).brokers) == [1, 2, 3]
    described = admin.describe_cluster(timeout=TIMEOUT, include_fenced_brokers=True)
    assert [(b.node_id, b.fenced) for b in described.brokers.values()] == [(1, False), (2, False), (3, False)]
    assert described.controller_id in (1, 2, 3) and described.cluster_id == kafka3.cluster_id
    kafka3.stop_node(2)  # node 3, with its data: restarted below
    try:
        # Metadata leaves a fenced broker out; DescribeCluster v2 lists it, fenced.
        eventually(lambda: sorted(admin.describe_cluster(timeout=TIMEOUT).brokers), [1, 2], TIMEOUT)
        eventually(lambda: {n: b.fenced for n, b in admin.describe_cluster(
            timeout=TIMEOUT, include_fenced_brokers=True).brokers.items()}, {1: False, 2: False, 3: True}, TIMEOUT)
        ours = admin.describe_cluster(timeout=TIMEOUT, include_fenced_brokers=True).brokers.values()
        theirs = [x[1:] for x in java_view("ClusterView", kafka3.bootstrap) if x[0] == "node"]
        assert sorted(theirs) == sorted([str(b.node_id), b.host, str(b.port), str(b.fenced).lower()] for b in ours)
    finally:
        kafka3.restart(2)
    eventually(lambda: {n: b.fenced for n, b in admin.describe_cluster(
        timeout=TIMEOUT, include_fenced_brokers=True).brokers.items()}, {1: False, 2: False, 3: False}, TIMEOUT)
