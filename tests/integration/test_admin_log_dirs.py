"""describe_log_dirs and alter_replica_log_dirs through kafkawire's Admin and AsyncAdmin on an
Apache Kafka node with two log directories (JBOD, KRaft): a replica's directory, size and
lag as the broker reports them, and its move to the other directory seen through the same
call."""

from __future__ import annotations

import os

import pytest
from settle import eventually, until_known
from shells import make_admin  # noqa: F401 - the fixture
from topics import unique_name
from javaview import java_view

from kafkawire import errors
from kafkawire.client.admin import NewTopic, TopicPartition, TopicPartitionReplica
from kafkawire.client.producer import Producer
from kafkawire.testing.kafka import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def two_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("logdirs")
    dirs = [str(base / "a"), str(base / "b")]
    # One node: the same log.dirs for every node would be shared.
    with KafkaCluster(1, broker_config={"log.dirs": ",".join(dirs)}) as cluster:
        yield cluster, dirs


@pytest.fixture
def admin(two_dirs, make_admin):
    with make_admin(bootstrap_servers=two_dirs[0].bootstrap, request_timeout_ms=15000) as a:
        yield a


def _where(admin, tp: TopicPartition) -> dict[str, tuple[int, bool]]:
    """The directories holding ``tp`` on node 1: path -> (size, is_future)."""
    return {path: (d.replicas[tp].size, d.replicas[tp].is_future)
            for path, d in admin.describe_log_dirs([1], timeout=TIMEOUT)[1].items() if tp in d.replicas}


def test_describe_and_move_a_replica_between_log_dirs(two_dirs, admin):
    cluster, dirs = two_dirs
    topic = unique_name("ld")
    admin.create_topics([NewTopic(topic, 1, 1)], timeout=TIMEOUT)
    until_known(admin, topic, 1)
    tp = TopicPartition(topic, 0)
    with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=5) as p:
        for _ in range(10):
            p.send(topic, b"x" * 1000, partition=0)
        p.flush(TIMEOUT)

    described = admin.describe_log_dirs(timeout=TIMEOUT)
    assert list(described) == [1] and sorted(described[1]) == sorted(dirs)
    for path, d in described[1].items():
        assert d.error is None and d.path == path
        assert d.total_bytes and d.usable_bytes is not None and 0 <= d.usable_bytes <= d.total_bytes
    [(here, (size, future))] = _where(admin, tp).items()
    assert size > 10_000 and not future
    assert described[1][here].replicas[tp].offset_lag == 0
    there = next(x for x in dirs if x != here)
    # Kafka's own Admin client sees the same directories and replicas.
    view = java_view("ClusterView", cluster.bootstrap, "1")
    assert sorted(x[1:] for x in view if x[0] == "logdir") == sorted(
        ["1", path, "-", str(d.total_bytes)] for path, d in described[1].items())
    assert sorted(x[1:] for x in view if x[0] == "replica") == sorted(
        ["1", path, f"{tp.topic}-{tp.partition}", str(r.size), str(r.offset_lag), str(r.is_future).lower()]
        for path, d in admin.describe_log_dirs([1], timeout=TIMEOUT)[1].items() for tp, r in d.replicas.items())

    replica = TopicPartitionReplica(topic, 0, 1)
    assert admin.alter_replica_log_dirs({replica: there}, timeout=TIMEOUT) == {replica: None}
    eventually(lambda: {k: v[1] for k, v in _where(admin, tp).items()}, {there: False}, TIMEOUT)
    assert os.path.isdir(os.path.join(there, f"{topic}-0"))

    # A directory the broker does not have: refused for that replica alone.
    got = admin.alter_replica_log_dirs({(topic, 0, 1): "/no/such/dir"}, timeout=TIMEOUT, raise_on_error=False)
    assert isinstance(got[replica], errors.LogDirNotFoundError)
    # A node id the cluster does not have: said at once, not after the deadline.
    missing = admin.describe_log_dirs([1, 7], timeout=TIMEOUT, raise_on_error=False)
    assert isinstance(missing[7], ValueError) and "not in the cluster" in str(missing[7])
    assert sorted(missing[1]) == sorted(dirs)
