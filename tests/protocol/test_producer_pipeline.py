"""Several batches of one partition in flight at once, driven through the accumulator with
no I/O: a producer that is neither idempotent nor transactional sends up to
max_in_flight_requests_per_connection of a partition's batches before the first is
answered, one per Produce request and in queue order; so do idempotent and transactional
ones (at most 5), resending in sequence order."""

from __future__ import annotations

from test_producer_identity import accumulator, add, answer, given_id, settle, stamps

from kafkawire.errors import KafkaConnectionError
from kafkawire.protocol import apis

PRODUCE = apis.get("Produce")
TP = ("t", 0)


def pipelining(**options):
    """Each record its own batch (batch_size = one record's size), idempotence off."""
    options.setdefault("acks", 1)
    return accumulator(batch_size=30, enable_idempotence=False, **options)


def collected(acc, now=0.0):
    by_node, expired, _wait, _ = acc.collect(now, lambda t, p: 1, flushing=True)
    assert not expired
    return by_node.get(1, [])


def requests(acc, batches, with_stamps=False):
    """Produce requests as the shells build them, until every batch is in one: the batches
    of each request (with_stamps: and the producer stamps it carries)."""
    out = []
    while batches:
        request, sent, batches, failed = acc.produce_request(batches, PRODUCE.max_version)
        assert request is not None and not failed
        assert [p.index for t in request.topic_data for p in t.partition_data] == [b.partition for b in sent]
        out.append((sent, stamps(request)) if with_stamps else sent)
    return out


def test_a_partition_pipelines_its_batches_one_per_request_in_order():
    acc = pipelining()
    add(acc, TP, 4)
    add(acc, ("t", 1), 2)
    batches = collected(acc)
    assert len(batches) == 6  # every ready batch: at most 5 per partition are in flight
    sent = requests(acc, batches)
    # A partition appears once per request; its batches go in queue order.
    assert [sorted(b.partition for b in r) for r in sent] == [[0, 1], [0, 1], [0], [0]]
    queue = list(acc.batches[TP])
    assert [b for r in sent for b in r if b.partition == 0] == queue
    assert all(b.in_flight for b in queue)
    assert collected(acc) == []  # all in flight: nothing more to send


def test_in_flight_batches_of_a_partition_stop_at_the_limit():
    acc = pipelining(max_in_flight_requests_per_connection=2)
    add(acc, TP, 3)
    first = collected(acc)
    assert len(first) == 2
    sent = requests(acc, first)
    assert collected(acc) == []  # two in flight: the third waits
    settle(acc, sent[0], answer(sent[0], [0]))
    (third,) = collected(acc)
    assert third is acc.batches[TP][1] and not third.in_flight


def test_after_a_retriable_error_nothing_passes_the_batch_waiting_to_retry():
    acc = pipelining(retry_backoff_ms=100)
    add(acc, TP, 3)
    head, second, third = acc.batches[TP]
    sent = requests(acc, collected(acc))
    assert [r[0] for r in sent] == [head, second, third]
    settle(acc, sent[0], answer(sent[0], [6]))  # NOT_LEADER_OR_FOLLOWER: retriable
    assert not head.in_flight and head.retry_at > 0
    assert collected(acc, now=0.05) == []  # the head is backing off; the others are in flight
    settle(acc, sent[1], answer(sent[1], [0]), now=0.05)  # the second lands first
    assert list(acc.batches[TP]) == [head, third]
    assert collected(acc, now=0.2) == [head]  # its retry, behind nothing


def idempotent(**options):
    """Each record its own batch, idempotence on, producer id 7 epoch 0, and a batch of
    TP's already written under them (before that only one batch goes at a time: see
    test_producer_decisions.py)."""
    acc = accumulator(batch_size=30, retry_backoff_ms=10, **options)
    given_id(acc)
    acc.identity.written.add(TP)
    return acc


def test_an_idempotent_producer_pipelines_batches_with_consecutive_sequences():
    acc = idempotent()
    add(acc, TP, 7)
    batches = collected(acc)
    assert batches == list(acc.batches[TP])[:5]  # the broker knows a resent batch among 5
    assert [st for _, st in requests(acc, batches, with_stamps=True)] == [
        {TP: (7, 0, i, False)} for i in range(5)]


def test_batches_refused_behind_a_failed_one_are_resent_after_it_in_sequence_order():
    acc = idempotent()
    add(acc, TP, 3)
    a, b, c = acc.batches[TP]
    sent = requests(acc, collected(acc))
    settle(acc, sent[0], answer(sent[0], [6]))  # NOT_LEADER_OR_FOLLOWER: not written
    # The broker refuses the two behind it: their sequences do not follow its last.
    assert settle(acc, sent[1], answer(sent[1], [45])) == []
    assert settle(acc, sent[2], answer(sent[2], [45])) == []
    assert acc.identity.bump_wanted is None and not acc.init_wanted(1.0)  # no gap: no bump
    # One at a time from the head, each with the sequence it had.
    for now, (batch, seq) in enumerate([(a, 0), (b, 1), (c, 2)], start=1):
        assert collected(acc, now) == [batch]
        ((r, st),) = requests(acc, [batch], with_stamps=True)
        assert st == {TP: (7, 0, seq, False)}
        settle(acc, r, answer(r, [0]), now=now)
        assert batch.future.done() and batch.future.exception() is None
    assert TP not in acc.batches


def test_new_batches_wait_behind_a_batch_being_resent():
    acc = idempotent()
    add(acc, TP, 2)
    a, b = acc.batches[TP]
    sent = requests(acc, collected(acc))
    settle(acc, sent[0], answer(sent[0], [6]))
    settle(acc, sent[1], answer(sent[1], [45]))
    add(acc, TP, 1, now=1.0)
    assert collected(acc, now=1.0) == [a]  # b and the new one wait for a's answer
    requests(acc, [a])
    assert collected(acc, now=1.0) == []


def test_a_head_that_fails_for_good_bumps_the_epoch_once_the_batches_behind_it_are_answered():
    acc = idempotent()
    add(acc, TP, 3)
    a, b, c = acc.batches[TP]
    sent = requests(acc, collected(acc))
    failed = settle(acc, sent[0], answer(sent[0], [10]))  # MESSAGE_TOO_LARGE: a fails
    assert [x for x, _ in failed] == [a]
    assert acc.identity.bump_wanted  # b and c have sequences after the gap a leaves
    assert not acc.init_wanted(1.0) and acc.identity.epoch == 0  # b and c are in flight
    assert settle(acc, sent[1], answer(sent[1], [45])) == []  # refused: retried after the bump
    assert not acc.init_wanted(1.0) and acc.identity.epoch == 0  # c still in flight
    assert settle(acc, sent[2], answer(sent[2], [45])) == []
    assert not acc.init_wanted(1.0) and acc.identity.epoch == 1  # bumped locally
    for now, (batch, seq) in enumerate([(b, 0), (c, 1)], start=2):
        assert collected(acc, now) == [batch]
        ((r, st),) = requests(acc, [batch], with_stamps=True)
        assert st == {TP: (7, 1, seq, False)}
        settle(acc, r, answer(r, [0]), now=now)


def test_an_unknown_outcome_behind_a_refused_batch_does_not_hold_the_bump():
    acc = idempotent()
    add(acc, TP, 2)
    a, b = acc.batches[TP]
    sent = requests(acc, collected(acc))
    settle(acc, sent[0], answer(sent[0], [45]))  # refused at the head: a real gap, bump
    acc.retry(b, KafkaConnectionError("broken"), True, 0.0, closed=False)  # b's answer lost
    assert b.unknown
    # b's sequence follows a's, which the broker refused: b cannot have been written.
    assert not acc.init_wanted(1.0) and acc.identity.epoch == 1
    assert collected(acc, now=1.0) == [a]
    ((_, st),) = requests(acc, [a], with_stamps=True)
    assert st == {TP: (7, 1, 0, False)}


def test_a_transactional_producer_pipelines_the_partitions_in_its_transaction():
    acc = idempotent()
    acc.txn = _Added({TP})
    add(acc, TP, 3)
    add(acc, ("t", 1), 2)
    assert collected(acc) == list(acc.batches[TP])  # ("t", 1) waits for AddPartitionsToTxn


class _Added:
    """A transaction these partitions have been added to."""

    def __init__(self, partitions):
        self.partitions = partitions

    def may_send(self, tp):
        return tp in self.partitions
