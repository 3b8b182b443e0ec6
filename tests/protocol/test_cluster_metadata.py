"""ClusterMetadata (kafkawire.protocol.metadata) taking in Metadata answers, no I/O: a
broker that lags behind the controller must not move a leader back (KIP-320), and a
topic made again under the same name starts afresh.  (On Apache Kafka: a killed leader is
still named by a broker that has not replayed the move yet; test_kafka_failover.py.)"""

from __future__ import annotations

import uuid

from kafkawire.protocol import apis
from kafkawire.protocol.metadata import ClusterMetadata

METADATA = apis.get("Metadata")
R = METADATA.Response
T = R.MetadataResponseTopic
P = T.MetadataResponsePartition
B = R.MetadataResponseBroker
TOPIC_ID = uuid.UUID(int=7)


def answer(leader: int, epoch: int, topic_id=TOPIC_ID, error: int = 0):
    return R(brokers=[B(node_id=n, host="127.0.0.1", port=9000 + n) for n in (1, 2, 3)],
             cluster_id="c", controller_id=1,
             topics=[T(error_code=0, name="t", topic_id=topic_id, is_internal=False, partitions=[
                 P(error_code=error, partition_index=0, leader_id=leader, leader_epoch=epoch,
                   replica_nodes=[1, 2, 3], isr_nodes=[1, 2, 3], offline_replicas=[])])])


def test_an_older_leader_epoch_does_not_move_the_leader_back():
    meta = ClusterMetadata(300000, 100)
    meta.apply(answer(leader=1, epoch=4), 0.0)
    meta.apply(answer(leader=2, epoch=5), 1.0)  # node 1 died: node 2 leads
    meta.apply(answer(leader=1, epoch=4), 2.0)  # a broker still behind the controller
    assert meta.leader_for("t", 0) == 2 and meta.topics["t"].partitions[0].leader_epoch == 5
    meta.apply(answer(leader=3, epoch=6), 3.0)  # newer moves go through
    assert meta.leader_for("t", 0) == 3


def test_a_topic_made_again_or_without_an_id_takes_the_answer_as_it_is():
    meta = ClusterMetadata(300000, 100)
    meta.apply(answer(leader=2, epoch=5), 0.0)
    meta.apply(answer(leader=1, epoch=0, topic_id=uuid.UUID(int=8)), 1.0)  # deleted, created again
    assert meta.leader_for("t", 0) == 1
    meta.apply(answer(leader=2, epoch=9, topic_id=uuid.UUID(int=0)), 2.0)  # no topic ids (old brokers)
    meta.apply(answer(leader=3, epoch=1, topic_id=uuid.UUID(int=0)), 3.0)
    assert meta.leader_for("t", 0) == 3
    meta.apply(answer(leader=-1, epoch=-1, error=5), 4.0)  # no leader (epoch unknown): as said
    assert meta.leader_for("t", 0) is None


def topics_answer(*topics):
    """An answer naming ``(name, topic error, partition count)`` for each topic."""
    return R(brokers=[B(node_id=1, host="127.0.0.1", port=9001)], cluster_id="c", controller_id=1,
             topics=[T(error_code=err, name=name, topic_id=uuid.UUID(int=i + 1), is_internal=False, partitions=[
                 P(error_code=0, partition_index=p, leader_id=1, leader_epoch=0, replica_nodes=[1],
                   isr_nodes=[1], offline_replicas=[]) for p in range(n)])
                     for i, (name, err, n) in enumerate(topics)])


def test_partition_counts_follow_the_answers_in_one_dict():
    # Producers hand this very dict to their compiled send() path: it must be updated,
    # never replaced, and hold a count only while the latest answer gives one.
    meta = ClusterMetadata(300000, 100)
    counts = meta.partition_counts
    meta.apply(topics_answer(("a", 0, 3), ("b", 0, 1)), 0.0)
    assert counts == {"a": 3, "b": 1}
    meta.apply(topics_answer(("a", 0, 5)), 1.0)  # partitions added; b not asked about
    assert counts == {"a": 5, "b": 1}
    meta.apply(topics_answer(("a", 3, 0), ("b", 5, 1)), 2.0)  # a deleted; b's leader lost
    assert counts == {} and meta.partition_counts is counts


def test_topic_names_follow_the_ids_in_the_answers():
    # What a Fetch v13+ answer's topic ids are read by (Fetcher.response_topics).
    meta = ClusterMetadata(300000, 100)
    meta.apply(answer(leader=1, epoch=4), 0.0)
    assert meta.topic_names == {TOPIC_ID: "t"}
    made_again = uuid.UUID(int=8)
    meta.apply(answer(leader=1, epoch=0, topic_id=made_again), 1.0)
    assert meta.topic_names == {made_again: "t"}
    meta.apply(answer(leader=1, epoch=0, topic_id=uuid.UUID(int=0)), 2.0)  # an answer with no ids
    assert meta.topic_names == {}
