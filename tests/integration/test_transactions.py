"""The transactional producer on Tansu, which implements the transaction APIs.

Tansu quirk: it writes the COMMIT and ABORT markers but its Fetch answers carry no
aborted_transactions list, so read_committed consumers that follow Kafka's rule (skip a
producer's batches from the list's first_offset to its ABORT marker) return aborted
records from it.  The tests here check what kafkawire writes: transactional batches, one
marker of the right kind per transaction, offsets committed with the transaction.
"""

from __future__ import annotations

import uuid

import pytest

from kafkawire import Consumer, Producer, codec
from kafkawire.client.cluster import Cluster
from kafkawire.client.config import Config
from kafkawire.protocol import apis
from kafkawire.protocol.transactions import TransactionAbortedError, TransactionStateError
from shells import shell  # noqa: F401 - the fixture
from test_kafka_transactions import runs_of

pytestmark = pytest.mark.broker

FETCH = apis.get("Fetch")


def log_of(bootstrap: str, topic: str, partition: int) -> list[tuple]:
    """(base offset, producer id, transactional, control marker type or record values)
    of every batch in the partition, read raw."""
    req = FETCH.Request(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        topics=[FETCH.Request.FetchTopic(topic=topic, partitions=[
                            FETCH.Request.FetchTopic.FetchPartition(partition=partition, fetch_offset=0,
                                                                    partition_max_bytes=1 << 20)])])
    with Cluster(Config.consumer(bootstrap_servers=bootstrap)) as cluster:
        cluster.bootstrap(10)
        resp = cluster.request(None, FETCH, req, 10, version=4)
    out = []
    for b in codec.decode_batches(resp.responses[0].partitions[0].records):
        # A control record's key is version (int16) and type (int16): 0 ABORT, 1 COMMIT.
        what = ({0: "ABORT", 1: "COMMIT"}[int.from_bytes(b.records[0].key[2:4], "big")] if b.is_control
                else [r.value for r in b.records])
        out.append((b.base_offset, b.producer_id, b.is_transactional, what))
    return out


def test_commit_and_abort_write_transactional_batches_and_their_markers(tansu_broker, shell):
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    with shell.Producer(bootstrap_servers=tansu_broker.bootstrap, transactional_id=f"t-{topic}") as p:
        p.init_transactions(20)
        pid = p.metrics()["producer_id"]
        p.begin_transaction()
        committed = [p.send(topic, b"c%d" % i, partition=0) for i in range(3)]
        p.commit_transaction(20)
        assert [f.result(0).offset for f in committed] == [0, 1, 2]
        p.begin_transaction()
        aborted = [p.send(topic, b"a%d" % i, partition=0) for i in range(2)]
        p.flush(20)
        p.abort_transaction(20)
        assert all(f.exception() is None for f in aborted)  # written, then aborted
        p.begin_transaction()
        never = p.send(topic, b"never sent", partition=1)
        p.abort_transaction(20)
        with pytest.raises(TransactionAbortedError):
            never.result(5)
        p.begin_transaction()  # an empty transaction ends without a coordinator round trip
        p.commit_transaction(20)
    assert pid >= 0
    # Three sends may go out as one batch or, on a slow machine, past linger_ms as two.
    assert runs_of(log_of(tansu_broker.bootstrap, topic, 0)) == [
        (0, pid, True, [b"c0", b"c1", b"c2"]),
        (3, pid, True, "COMMIT"),
        (4, pid, True, [b"a0", b"a1"]),
        (6, pid, True, "ABORT"),
    ]


def test_calls_in_the_wrong_state_say_what_to_call(tansu_broker, shell):
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    with shell.Producer(bootstrap_servers=tansu_broker.bootstrap, transactional_id=f"s-{topic}") as p:
        with pytest.raises(TransactionStateError, match="init_transactions"):
            p.begin_transaction()
        p.init_transactions(20)
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            p.send(topic, b"x", partition=0)
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            p.commit_transaction(5)
        p.begin_transaction()
        with pytest.raises(TransactionStateError, match="commit_transaction"):
            p.begin_transaction()
        p.abort_transaction(20)
    with shell.Producer(bootstrap_servers=tansu_broker.bootstrap) as p:
        with pytest.raises(Exception, match="transactional_id"):
            p.begin_transaction()


def test_a_second_producer_with_the_same_id_fences_the_first(tansu_broker):
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    tid = f"f-{topic}"
    with Producer(bootstrap_servers=tansu_broker.bootstrap, transactional_id=tid) as old:
        old.init_transactions(20)
        old.begin_transaction()
        old.send(topic, b"zombie", partition=0)
        old.flush(20)
        with Producer(bootstrap_servers=tansu_broker.bootstrap, transactional_id=tid) as new:
            new.init_transactions(20)
            assert new.metrics()["producer_epoch"] > old.metrics()["producer_epoch"]
            # Kafka answers the zombie's EndTxn with PRODUCER_FENCED; Tansu closes the
            # connection instead, so here the zombie's commit can only run out of time.
            with pytest.raises(Exception):
                old.commit_transaction(3)
            new.begin_transaction()
            new.send(topic, b"fresh", partition=0)
            new.commit_transaction(20)
            pid = new.metrics()["producer_id"]
    # The new producer's InitProducerId ended the zombie's transaction with an abort.
    assert log_of(tansu_broker.bootstrap, topic, 0) == [
        (0, pid, True, [b"zombie"]), (1, pid, True, "ABORT"), (2, pid, True, [b"fresh"]), (3, pid, True, "COMMIT")]


def test_offsets_sent_to_the_transaction_commit_with_it(tansu_broker, shell):
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    with shell.Producer(bootstrap_servers=tansu_broker.bootstrap, transactional_id=f"o-{topic}") as p:
        p.init_transactions(20)
        p.begin_transaction()
        p.send(topic, b"out", partition=0)
        p.send_offsets_to_transaction({(topic, 0): 42, (topic, 1): 7}, group, timeout=20)
        p.commit_transaction(20)
    with Consumer(bootstrap_servers=tansu_broker.bootstrap, group_id=group, enable_auto_commit=False) as c:
        assert c.committed([(topic, 0), (topic, 1)]) == {(topic, 0): 42, (topic, 1): 7}
