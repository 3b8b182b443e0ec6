"""The transactional producer's coordinator exchanges (kafkawire.protocol.transactions)
driven step by step with no I/O: answers are built with the API classes and each
request is encoded at the version the step allows."""

from __future__ import annotations

import pytest

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.idempotence import ProducerIdentity
from kafkawire.protocol.steps import Request, Sleep
from kafkawire.protocol.transactions import (
    ABORTABLE, FATAL, IN_TRANSACTION, READY, TransactionManager, TransactionStateError,
)

FIND = apis.get("FindCoordinator")
INIT = apis.get("InitProducerId")
ADD = apis.get("AddPartitionsToTxn")
END = apis.get("EndTxn")


def manager():
    return TransactionManager(ProducerIdentity("tx", 60000, explicit=True), retry_backoff_ms=100)


def begun():
    """In a transaction: producer id 11, epoch 4, coordinator 3."""
    txn = manager()
    txn.identity.producer_id, txn.identity.epoch = 11, 4
    txn.coordinator, txn.state = 3, READY
    txn.begin()
    return txn


class Driver:
    """Feeds answers to a *_steps generator; records what it sent.  ``features``: the
    finalized features of the broker it talks to (a step's cap may depend on them)."""

    def __init__(self, steps, features=None):
        self.steps = steps
        self.features = features or {}
        self.sent = []
        self.versions = []
        self.step = next(steps)

    def answer(self, resp=None, exc=None):
        assert isinstance(self.step, Request), self.step
        node, api, build = self.step.node, self.step.api, self.step.build
        version = self.step.version(api.max_version, self.features)
        self.versions.append(version)
        request = build(version)
        for v in {api.min_version, version}:  # valid on the wire at both ends
            api.decode_request(bytes(api.encode_request(request, v).getvalue()), v)
        self.sent.append((node, api.name, request))
        try:
            self.step = self.steps.throw(exc) if exc is not None else self.steps.send(resp)
            while isinstance(self.step, Sleep):
                self.step = self.steps.send(None)
        except StopIteration as stop:
            self.step = None
            return stop.value
        return None


def found(node):
    return FIND.Response(error_code=0, node_id=node, host="h", port=1,
                         coordinators=[FIND.Response.Coordinator(key="tx", node_id=node, host="h", port=1, error_code=0)])


def test_init_finds_the_coordinator_waits_out_a_concurrent_transaction_and_gets_an_epoch():
    txn = manager()
    d = Driver(txn.init_steps())
    d.answer(found(3))
    d.answer(INIT.Response(error_code=51, producer_id=-1, producer_epoch=-1))  # CONCURRENT_TRANSACTIONS
    d.answer(INIT.Response(error_code=0, producer_id=11, producer_epoch=4))
    assert d.step is None and txn.state == READY
    assert [(n, a) for n, a, _ in d.sent] == [(None, "FindCoordinator"), (3, "InitProducerId"), (3, "InitProducerId")]
    assert d.sent[1][2].transactional_id == "tx"
    assert (txn.identity.producer_id, txn.identity.epoch) == (11, 4)


def test_partitions_are_added_at_v3_and_a_moved_coordinator_is_found_again():
    txn = begun()
    txn.partition_used(("t", 1))
    txn.partition_used(("t", 0))
    assert txn.wants_add() and not txn.may_send(("t", 0))
    d = Driver(txn.add_partitions_steps())
    assert d.step.max_version == 3  # never the brokers' batched v4+ form
    result = ADD.Response.AddPartitionsToTxnTopicResult
    part = result.AddPartitionsToTxnPartitionResult
    d.answer(ADD.Response(results_by_topic_v3_and_below=[
        result(name="t", results_by_partition=[part(partition_index=0, partition_error_code=16)])]))  # NOT_COORDINATOR
    d.answer(found(2))
    d.answer(ADD.Response(results_by_topic_v3_and_below=[result(name="t", results_by_partition=[
        part(partition_index=0, partition_error_code=0), part(partition_index=1, partition_error_code=0)])]))
    assert d.step is None and txn.may_send(("t", 0)) and txn.may_send(("t", 1)) and not txn.wants_add()
    req = d.sent[0][2]
    assert (req.v3_and_below_producer_id, req.v3_and_below_producer_epoch) == (11, 4)
    assert [(t.name, t.partitions) for t in req.v3_and_below_topics] == [("t", [0, 1])]
    assert d.sent[2][0] == 2


def test_a_failed_batch_allows_only_abort_and_abort_ends_the_transaction():
    txn = begun()
    txn.added.add(("t", 0))
    txn.batch_failed(errors.broker_error(10, "producing"))
    assert txn.state == ABORTABLE
    with pytest.raises(TransactionStateError, match="abort_transaction"):
        txn.commit_or_abort(True)
    txn.commit_or_abort(False)
    d = Driver(txn.end_steps(False))
    d.answer(END.Response(error_code=0))
    assert d.step is None and txn.state == READY and not txn.added
    assert d.sent[0][2].committed is False


def test_a_fenced_producer_fails_for_good():
    txn = begun()
    txn.added.add(("t", 0))
    txn.commit_or_abort(True)
    d = Driver(txn.end_steps(True))
    with pytest.raises(errors.BrokerError, match="PRODUCER_FENCED"):
        d.answer(END.Response(error_code=90))
    assert txn.state == FATAL and txn.identity.fatal is not None
    with pytest.raises(TransactionStateError, match="close it"):
        txn.begin()
    assert txn.state != IN_TRANSACTION


def test_a_partition_that_could_not_be_added_makes_the_transaction_abortable():
    txn = begun()
    txn.partition_used(("t", 0))
    txn.partition_used(("t", 1))
    d = Driver(txn.add_partitions_steps())
    result = ADD.Response.AddPartitionsToTxnTopicResult
    part = result.AddPartitionsToTxnPartitionResult
    # partition 0 failed (TOPIC_AUTHORIZATION_FAILED, 29); 1 not attempted because of it (55)
    d.answer(ADD.Response(results_by_topic_v3_and_below=[result(name="t", results_by_partition=[
        part(partition_index=0, partition_error_code=29), part(partition_index=1, partition_error_code=55)])]))
    assert d.step is None and txn.state == ABORTABLE
    assert "TOPIC_AUTHORIZATION_FAILED" in str(txn.error)
    assert not txn.added


def test_a_retriable_partition_error_is_asked_again_until_the_caller_aborts():
    # Kafka's coordinator answers UNKNOWN_TOPIC_OR_PARTITION (3) for a topic it has not
    # heard of yet, KAFKA_STORAGE_ERROR (56) while a log dir is offline: both retriable.
    txn = begun()
    txn.partition_used(("t", 0))
    d = Driver(txn.add_partitions_steps())
    result = ADD.Response.AddPartitionsToTxnTopicResult
    part = result.AddPartitionsToTxnPartitionResult

    def answer(code):
        return ADD.Response(results_by_topic_v3_and_below=[result(name="t", results_by_partition=[
            part(partition_index=0, partition_error_code=code)])])

    d.answer(answer(3))
    d.answer(answer(56))
    d.answer(answer(0))
    assert d.step is None and txn.state == IN_TRANSACTION and txn.may_send(("t", 0))
    assert [a for _n, a, _r in d.sent] == ["AddPartitionsToTxn"] * 3

    txn.partition_used(("t", 1))
    d = Driver(txn.add_partitions_steps())
    txn.commit_or_abort(False)  # the caller aborts while the answer is awaited
    d.answer(answer(3))
    assert d.step is None and not txn.may_send(("t", 1))


def test_endtxn_v5_only_at_transaction_version_2_and_its_epoch_is_taken():
    # KIP-890 part 2: at transaction.version 2 the coordinator bumps the epoch at every
    # EndTxn v5 and answers with it; below, Kafka offers v5 but must get v4.
    for features, version in [({}, 4), ({"transaction.version": 0}, 4), ({"transaction.version": 1}, 4),
                              ({"transaction.version": 2}, 5)]:
        txn = begun()
        txn.added.add(("t", 0))
        txn.commit_or_abort(True)
        d = Driver(txn.end_steps(True), features)
        d.answer(END.Response(error_code=0, producer_id=11 if version == 5 else -1,
                              producer_epoch=5 if version == 5 else -1))
        assert d.step is None and d.versions == [version], features
        assert txn.state == READY
        assert (txn.identity.producer_id, txn.identity.epoch) == (11, 5 if version == 5 else 4)


def test_a_fenced_answer_before_kip_588_is_the_same_typed_error():
    txn = begun()
    txn.added.add(("t", 0))
    txn.commit_or_abort(True)
    d = Driver(txn.end_steps(True))
    with pytest.raises(errors.ProducerFencedError, match="answered INVALID_PRODUCER_EPOCH"):
        d.answer(END.Response(error_code=47))  # EndTxn v0-v1's INVALID_PRODUCER_EPOCH
    assert txn.state == FATAL


def test_offsets_sent_with_the_transaction_fail_with_the_partition_error_that_cannot_be_retried():
    offsets_api = apis.get("AddOffsetsToTxn")
    commit_api = apis.get("TxnOffsetCommit")
    txn = begun()
    d = Driver(txn.send_offsets_steps({("t", 0): 5, ("t", 1): 7}, "g"))
    d.answer(offsets_api.Response(error_code=0))
    d.answer(found(4))  # the group's coordinator
    topic = commit_api.Response.TxnOffsetCommitResponseTopic
    part = topic.TxnOffsetCommitResponsePartition
    # UNKNOWN_TOPIC_OR_PARTITION (retriable: a topic the coordinator has not heard of yet)
    # is asked again; UNKNOWN_MEMBER_ID ends the call.
    d.answer(commit_api.Response(topics=[topic(name="t", partitions=[
        part(partition_index=0, error_code=0), part(partition_index=1, error_code=3)])]))
    d.answer(found(4))
    with pytest.raises(errors.BrokerError, match="UNKNOWN_MEMBER_ID"):
        d.answer(commit_api.Response(topics=[topic(name="t", partitions=[
            part(partition_index=0, error_code=3), part(partition_index=1, error_code=25)])]))
    assert [(n, a) for n, a, _ in d.sent] == [(3, "AddOffsetsToTxn"), (None, "FindCoordinator"),
                                              (4, "TxnOffsetCommit"), (None, "FindCoordinator"),
                                              (4, "TxnOffsetCommit")]
    assert [(p.partition_index, p.committed_offset) for p in d.sent[2][2].topics[0].partitions] == [(0, 5), (1, 7)]
    assert d.versions[2] == 4  # v5 only at transaction.version 2 (KIP-890 part 2)
    # Committing without the offsets would lose the consumer's progress: abort only.
    assert txn.state == ABORTABLE
    with pytest.raises(TransactionStateError, match="abort_transaction"):
        txn.commit_or_abort(True)


def test_partitions_waiting_to_be_added_with_no_known_leader_are_looked_up():
    txn = begun()
    txn.partition_used(("known", 0))
    txn.partition_used(("new", 2))
    leaders = {("known", 0): 1}
    assert txn.topics_to_look_up(lambda t, p: leaders.get((t, p))) == {"new"}
    txn.state = ABORTABLE  # nothing is added once only an abort can end the transaction
    assert txn.topics_to_look_up(lambda t, p: None) == set()
