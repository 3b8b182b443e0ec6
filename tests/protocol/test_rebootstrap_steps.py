"""KIP-1102 rebootstrap decided without I/O on a fake clock: a client whose every known
broker has failed every attempt for metadata_recovery_rebootstrap_trigger_ms forgets them
and asks its bootstrap addresses again (strategy "rebootstrap", the default); so does one
a broker answered REBOOTSTRAP_REQUIRED; with strategy "none" it keeps to the known brokers
and a REBOOTSTRAP_REQUIRED answer is an error.  (On Apache Kafka, a cluster replaced on
its bootstrap address under a working producer and consumer: test_rebootstrap.py.)"""

from __future__ import annotations

import uuid

import pytest

from kafkawire.errors import BrokerConnectionRefusedError, RebootstrapRequiredError, for_code
from kafkawire.protocol import apis
from kafkawire.protocol.metadata import REBOOTSTRAP_REQUIRED, Backoffs, ClusterMetadata, candidates, rebootstrap_due

METADATA = apis.get("Metadata")
R = METADATA.Response
T = R.MetadataResponseTopic
P = T.MetadataResponsePartition
B = R.MetadataResponseBroker
BOOT = [("boot.example", 9092)]
TRIGGER_MS = 300000  # Java's default


def answer(error: int = 0, cluster: str = "c1"):
    return R(error_code=error, brokers=[B(node_id=n, host="127.0.0.1", port=9000 + n) for n in (1, 2)],
             cluster_id=cluster, controller_id=1,
             topics=[T(error_code=0, name="t", topic_id=uuid.UUID(int=7), is_internal=False, partitions=[
                 P(error_code=0, partition_index=0, leader_id=1, leader_epoch=3,
                   replica_nodes=[1, 2], isr_nodes=[1, 2], offline_replicas=[])])])


def fail(backoffs: Backoffs, port: int, now: float) -> None:
    backoffs.failed(backoffs.get("127.0.0.1", port), BrokerConnectionRefusedError("refused"), now)


def setup(strategy: str = "rebootstrap") -> tuple[ClusterMetadata, Backoffs]:
    meta = ClusterMetadata(300000, 100, strategy, TRIGGER_MS)
    meta.apply(answer(), 0.0)
    return meta, Backoffs(50, 1000, jitter=lambda: 1.0)


def test_the_code_is_kafkas():
    assert REBOOTSTRAP_REQUIRED == 129 and for_code(129) is RebootstrapRequiredError
    assert not RebootstrapRequiredError.retriable


def test_every_known_broker_gone_for_the_trigger_rebootstraps():
    meta, backoffs = setup()
    fail(backoffs, 9001, 10.0)
    assert not rebootstrap_due(meta.brokers, backoffs, 400.0, TRIGGER_MS / 1000)  # node 2 never tried
    fail(backoffs, 9002, 20.0)
    for t in (50.0, 100.0, 319.9):  # node 2 down for less than the trigger
        fail(backoffs, 9001, t)
        fail(backoffs, 9002, t)
        assert not meta.maybe_rebootstrap(backoffs, t)
    assert meta.brokers and meta.rebootstraps == 0
    assert meta.maybe_rebootstrap(backoffs, 320.0)  # 300 s after node 2's first failure
    assert meta.brokers == {} and meta.cluster_id is None and meta.need_refresh and meta.rebootstraps == 1
    # With no brokers known, only the bootstrap addresses are asked.
    assert [c[1:3] for c in candidates(meta.brokers, BOOT, backoffs, 320.0)] == BOOT
    assert not meta.maybe_rebootstrap(backoffs, 321.0)  # nothing left to forget
    meta.apply(answer(cluster="c2"), 330.0)
    assert meta.cluster_id == "c2" and meta.leader_for("t", 0) == 1


def test_a_broker_reached_again_starts_the_count_again():
    meta, backoffs = setup()
    fail(backoffs, 9001, 0.0)
    fail(backoffs, 9002, 0.0)
    backoffs.get("127.0.0.1", 9001).succeeded()  # node 1 came back for a while ...
    fail(backoffs, 9001, 200.0)  # ... and went again
    assert not meta.maybe_rebootstrap(backoffs, 300.0)
    assert not meta.maybe_rebootstrap(backoffs, 499.9)
    assert meta.maybe_rebootstrap(backoffs, 500.0)


def test_rebootstrap_required_answer_rebootstraps_at_once():
    meta, backoffs = setup()
    meta.apply(answer(error=REBOOTSTRAP_REQUIRED, cluster="other"), 5.0)
    assert meta.cluster_id == "c1" and meta.brokers  # the answer is not taken in
    assert meta.maybe_rebootstrap(backoffs, 5.0)  # no broker failed: the answer is enough
    assert meta.brokers == {} and meta.rebootstraps == 1 and not meta.rebootstrap_required


def test_strategy_none_keeps_to_the_known_brokers():
    meta, backoffs = setup("none")
    fail(backoffs, 9001, 0.0)
    fail(backoffs, 9002, 0.0)
    assert not meta.maybe_rebootstrap(backoffs, 10_000.0)
    assert meta.brokers and meta.rebootstraps == 0
    assert sorted(c[3] for c in candidates(meta.brokers, BOOT, backoffs, 10_000.0, "none")) == [1, 2]
    # The default keeps the bootstrap addresses after the known brokers.
    assert [c[1:3] for c in candidates(meta.brokers, BOOT, backoffs, 10_000.0)][-1] == BOOT[0]
    with pytest.raises(RebootstrapRequiredError, match="metadata_recovery_strategy is 'none'"):
        meta.apply(answer(error=REBOOTSTRAP_REQUIRED), 11_000.0)
    assert meta.cluster_id == "c1"


def test_trigger_zero_rebootstraps_at_the_first_failure_of_all():
    meta = ClusterMetadata(300000, 100, "rebootstrap", 0)
    meta.apply(answer(), 0.0)
    backoffs = Backoffs(50, 1000, jitter=lambda: 1.0)
    fail(backoffs, 9001, 1.0)
    assert not meta.maybe_rebootstrap(backoffs, 1.0)
    fail(backoffs, 9002, 1.0)
    assert meta.maybe_rebootstrap(backoffs, 1.0)
