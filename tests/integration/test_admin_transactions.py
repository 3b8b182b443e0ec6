"""The transaction tooling (KIP-664) through kafkawire's Admin and AsyncAdmin on Apache Kafka:
list_transactions with its filters, describe_transactions, describe_producers, and
abort_transaction ending an open transaction by writing the abort marker to the partition's
leader.  Listings and descriptions are compared field by field with what Kafka's own Admin
client (kafka-clients, through java/TransactionsView.java run with java from the cached
jars) reports for the same state; the abort is checked through what read_committed sees.

Kafka's ``kafka-transactions`` tool is in the kafka-tools jar, which the broker's cache does
not hold; the program above asks the same Admin calls that tool prints.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from settle import eventually
from shells import make_admin  # noqa: F401 - the fixture
from topics import create_topic, unique_name

from kafkawire import errors
from kafkawire.client.admin import TopicPartition, TransactionDescription, TransactionListing
from kafkawire.client.producer import Producer
from kafkawire.testing.kafka import KAFKA_VERSION, java_binary, kafka_jars

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

TIMEOUT = 30.0
VIEW = os.path.join(os.path.dirname(__file__), "java", "TransactionsView.java")


@pytest.fixture
def admin(kafka_broker, make_admin):
    """Admin, then AsyncAdmin behind the same interface."""
    with make_admin(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms=15000) as a:
        yield a


def open_transaction(bootstrap: str, records: int = 2) -> tuple[Producer, str, TopicPartition]:
    """A transactional producer with ``records`` records written in a transaction left open."""
    topic = create_topic(bootstrap, unique_name("txadm"), partitions=2)
    tid = unique_name("tid")
    p = Producer(bootstrap_servers=bootstrap, transactional_id=tid, transaction_timeout_ms=600_000)
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    for i in range(records):
        p.send(topic, b"v%d" % i, partition=1).result(TIMEOUT)
    return p, tid, TopicPartition(topic, 1)


def kafka_view(bootstrap: str, *args: str) -> list[list[str]]:
    """Kafka's Admin client's lines for ``args`` (transactional ids, topic:partition)."""
    libs = os.path.join(kafka_jars(KAFKA_VERSION), "*")
    out = subprocess.run([java_binary(), "-cp", libs, VIEW, bootstrap, *args],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return [line.split("\t") for line in out.stdout.splitlines() if "\t" in line]


def test_listing_and_descriptions_match_kafkas_admin(kafka_broker, admin):
    p, tid, tp = open_transaction(kafka_broker.bootstrap)
    try:
        done = unique_name("tid-done")
        with Producer(bootstrap_servers=kafka_broker.bootstrap, transactional_id=done) as q:
            q.init_transactions(TIMEOUT)
            q.begin_transaction()
            q.send(tp.topic, b"c", partition=0).result(TIMEOUT)
            q.commit_transaction(TIMEOUT)

        # The commit returns once PrepareCommit is logged; the markers follow.
        eventually(lambda: admin.list_transactions(timeout=TIMEOUT)[done].state, "CompleteCommit", TIMEOUT)
        listed = admin.list_transactions(timeout=TIMEOUT)
        assert listed[tid].state == "Ongoing"
        assert listed[done].state == "CompleteCommit"
        described = admin.describe_transactions([tid, done], timeout=TIMEOUT)
        open_ = described[tid]
        assert isinstance(open_, TransactionDescription)
        assert (open_.state, open_.timeout_ms, open_.partitions) == ("Ongoing", 600_000, [tp])
        assert open_.start_time_ms is not None and open_.producer_id == listed[tid].producer_id
        assert described[done].partitions == [] and described[done].producer_epoch >= 0
        producers = admin.describe_producers([tp, TopicPartition(tp.topic, 0)], timeout=TIMEOUT)
        [state] = producers[tp]
        assert (state.producer_id, state.last_sequence, state.current_txn_start_offset) == (
            open_.producer_id, 1, 0)

        view = kafka_view(kafka_broker.bootstrap, tid, done, f"{tp.topic}:{tp.partition}",
                          f"{tp.topic}:0")
        theirs_listed = {x[1]: TransactionListing(x[1], int(x[2]), x[3]) for x in view if x[0] == "listing"}
        assert theirs_listed[tid] == listed[tid] and theirs_listed[done] == listed[done]
        theirs = {x[1]: x[2:] for x in view if x[0] == "transaction"}
        for t in (tid, done):
            d = described[t]
            parts = "[" + ", ".join(f"{x.topic}-{x.partition}" for x in d.partitions) + "]"
            assert theirs[t] == [str(d.coordinator), d.state, str(d.producer_id), str(d.producer_epoch),
                                 str(d.timeout_ms), str(-1 if d.start_time_ms is None else d.start_time_ms),
                                 parts]
        theirs_producers = sorted(x[1:] for x in view if x[0] == "producer")
        ours = sorted([f"{k.topic}-{k.partition}", str(s.producer_id), str(s.producer_epoch), str(s.last_sequence),
                       str(s.last_timestamp), str(s.coordinator_epoch),
                       str(-1 if s.current_txn_start_offset is None else s.current_txn_start_offset)]
                      for k, states in producers.items() for s in states)
        assert theirs_producers == ours and len(ours) == 2
    finally:
        p.close(5)


def test_list_transactions_filters_by_state_producer_and_duration(kafka_broker, admin):
    p, tid, _tp = open_transaction(kafka_broker.bootstrap, records=1)
    try:
        pid = admin.list_transactions(timeout=TIMEOUT)[tid].producer_id
        assert tid in admin.list_transactions(states=["Ongoing"], timeout=TIMEOUT)
        assert tid not in admin.list_transactions(states=["CompleteCommit", "Empty"], timeout=TIMEOUT)
        assert list(admin.list_transactions(producer_ids=[pid], timeout=TIMEOUT)) == [tid]
        assert tid in admin.list_transactions(min_duration_ms=0, timeout=TIMEOUT)
        assert tid not in admin.list_transactions(min_duration_ms=3_600_000, timeout=TIMEOUT)
        with pytest.raises(ValueError, match="knows no transaction state Bogus"):
            admin.list_transactions(states=["Bogus"], timeout=TIMEOUT)
        missing = unique_name("no-such-tid")
        got = admin.describe_transactions([missing], timeout=TIMEOUT, raise_on_error=False)
        assert isinstance(got[missing], errors.TransactionalIdNotFoundError)
    finally:
        p.close(5)


def test_abort_transaction_ends_an_open_transaction_for_read_committed(kafka_broker, admin):
    p, tid, tp = open_transaction(kafka_broker.bootstrap, records=3)
    try:
        committed_end = admin.list_offsets({tp: "latest"}, read_committed=True, timeout=TIMEOUT)[tp].offset
        assert committed_end == 0  # the open transaction holds the last stable offset
        [s] = admin.describe_producers([tp], timeout=TIMEOUT)[tp]
        assert s.current_txn_start_offset == 0
        assert admin.abort_transaction(tp, s.producer_id, s.producer_epoch, s.coordinator_epoch,
                                       timeout=TIMEOUT) is None
        [after] = admin.describe_producers([tp], timeout=TIMEOUT)[tp]
        assert after.current_txn_start_offset is None
        # Three records and the abort marker: the last stable offset is past them all.
        assert admin.list_offsets({tp: "latest"}, read_committed=True, timeout=TIMEOUT)[tp].offset == 4
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.abort_transaction(TopicPartition(unique_name("gone"), 0), s.producer_id, s.producer_epoch,
                                    s.coordinator_epoch, timeout=TIMEOUT)
    finally:
        p.close(5)
