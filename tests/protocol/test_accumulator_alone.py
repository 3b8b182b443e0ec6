"""Accumulator.due_alone (no I/O): the shortcut a record sent one at a time takes past
collect() names a leader only when collect() itself would send that batch, alone, now.
Accumulator.lone_request and book_lone: a record sent while nothing else is pending makes
the request, and leaves the accumulator, as append and produce_request would."""

from __future__ import annotations

from kafkawire.client.config import Config
from kafkawire.client.future import Future
from kafkawire.protocol import apis
from kafkawire.protocol.accumulator import Accumulator
from kafkawire.protocol.producer import encode_produce, lone_produce_request
from kafkawire.protocol.transactions import TransactionManager
from test_connection import negotiated

RECORD = (None, b"v" * 100, 1000)
PRODUCE_KEY, METADATA_KEY = apis.get("Produce").key, apis.get("Metadata").key


def accumulator(**config):
    options = dict(bootstrap_servers="h:1", linger_ms=0, enable_idempotence=False)
    options.update(config)
    return Accumulator(Config.producer(**options), Future)


def append(acc, partition=0, now=0.0):
    tp = ("t", partition)
    return acc.append(tp, RECORD, 130, acc.admit(tp, 130), now)[0]


def leader_one(topic, partition):
    return 1


def test_a_lone_due_batch_goes_to_its_leader_as_collect_would_send_it():
    acc = accumulator()
    b = append(acc)
    assert acc.due_alone(b, 0.0, leader_one) == 1
    assert acc.collect(0.0, leader_one, flushing=False)[0] == {1: [b]}


def test_anything_collect_would_judge_otherwise_is_left_to_it():
    lingering = accumulator(linger_ms=5)
    b = append(lingering)
    assert lingering.due_alone(b, 0.001, leader_one) is None  # its linger has not passed
    assert lingering.collect(0.001, leader_one, flushing=False)[0] == {}
    assert lingering.due_alone(b, 0.005, leader_one) == 1

    two = accumulator()
    first, second = append(two, 0), append(two, 1)
    assert two.due_alone(second, 0.0, leader_one) is None  # another batch waits: collect's turn

    no_id = accumulator(enable_idempotence=True)
    b = append(no_id)
    assert no_id.due_alone(b, 0.0, leader_one) is None  # no producer id yet
    assert no_id.collect(0.0, leader_one, flushing=False)[0] == {}

    expired = accumulator(delivery_timeout_ms=1000, request_timeout_ms=500, linger_ms=0)
    b = append(expired)
    assert expired.due_alone(b, 1.0, leader_one) is None  # collect() fails it
    assert expired.collect(1.0, leader_one, flushing=False)[1] == [b]

    sent = accumulator()
    b = append(sent)
    request, carried, _rest, _failed = sent.produce_request([b], 9, 0.0)
    assert carried == [b] and b.in_flight
    assert sent.due_alone(b, 0.0, leader_one) is None

    leaderless = accumulator()
    b = append(leaderless)
    assert leaderless.due_alone(b, 0.0, lambda t, p: None) is None


# The leader's sans-IO Connection, after ApiVersions: Produce v9 only, v2 only, or no Produce at all.
AT_V9 = negotiated({PRODUCE_KEY: (9, 9)})
NO_PRODUCE = negotiated({METADATA_KEY: (0, 12)})
AT_V2 = negotiated({PRODUCE_KEY: (2, 2)})


def given_id(acc, pid=7, epoch=0):
    init = apis.get("InitProducerId")
    acc.identity.apply_init(init.Response(error_code=0, producer_id=pid, producer_epoch=epoch), None, 0.0, "b1")


def acknowledge(acc, b, offset):
    produce = apis.get("Produce")
    parts = produce.Response.TopicProduceResponse
    answer = produce.Response(responses=[parts(name=b.topic, partition_responses=[
        parts.PartitionProduceResponse(index=b.partition, error_code=0, base_offset=offset)])])
    done, _refresh = acc.settle([b], answer, None, "b1", 1.0, False)
    for batch, result in done:
        acc.release(batch)
        batch.future.set_result(result)


def state(acc):
    return (acc.used_memory, {tp: [b.sequence for b in q] for tp, q in acc.batches.items()},
            sorted((b.topic, b.partition, b.size, b.reserved, b.attempts, b.in_flight, b.full, b.sequence)
                   for b in acc.incomplete))


def test_a_lone_record_makes_the_request_and_the_bookkeeping_append_would():
    for idempotent in (False, True):
        general, lone = accumulator(enable_idempotence=idempotent), accumulator(enable_idempotence=idempotent)
        for acc in (general, lone):
            if idempotent:
                given_id(acc)
        for i in range(3):  # one at a time: the idempotent sequence goes on from each to the next
            b = append(general, now=1.0)
            general.close_open(b)
            expected, carried, _rest, _failed = general.produce_request([b], 9, 1.0)
            made, fields, version = lone.lone_request("t", 0, RECORD, 130, 1.0, AT_V9)
            assert version == 9
            lone.book_lone(made)
            request = lone_produce_request(fields)
            assert b"".join(encode_produce(request, 9)) == b"".join(encode_produce(expected, 9))
            assert state(lone) == state(general)
            assert made.sequence == (i if idempotent else -1)
            for acc, batch in ((general, b), (lone, made)):
                acknowledge(acc, batch, offset=i)
                assert batch.future.result(0) == (i, -1) and state(acc) == (0, {}, [])


def test_a_batch_queued_while_a_lone_one_was_written_stands_behind_it():
    acc = accumulator()
    made, _fields, _version = acc.lone_request("t", 0, RECORD, 130, 0.0, AT_V9)
    other = append(acc)  # another thread's send() before the lone batch is booked
    acc.book_lone(made)
    assert list(acc.batches[("t", 0)]) == [made, other]
    assert acc.collect(0.0, leader_one, flushing=False)[0] == {1: [other]}


def test_a_lone_record_waits_for_a_producer_id_or_a_version_on_the_general_path():
    acc = accumulator(enable_idempotence=True)
    assert acc.lone_request("t", 0, RECORD, 130, 0.0, AT_V9) is None
    assert state(acc) == (0, {}, [])
    given_id(acc)
    assert acc.lone_request("t", 0, RECORD, 130, 0.0, NO_PRODUCE) is None  # append reports it
    assert acc.lone_request("t", 0, RECORD, 130, 0.0, AT_V2) is None  # message sets: produce_request's
    assert state(acc) == (0, {}, [])
    assert acc.lone_request("t", 0, RECORD, 130, 0.0, AT_V9)[0].sequence == 0  # none was used up


def test_only_a_record_with_nothing_pending_linger_0_and_an_answer_to_wait_for_goes_alone():
    assert accumulator().takes_lone()
    assert not accumulator(linger_ms=5).takes_lone()
    assert not accumulator(acks=0).takes_lone()  # no answer to pair with its request
    pending = accumulator()
    append(pending)
    assert not pending.takes_lone()
    transactional = accumulator(transactional_id="tx", enable_idempotence=True, acks="all")
    transactional.txn = TransactionManager(transactional.identity, 100)  # as both shells set it
    assert not transactional.takes_lone()


def test_a_lone_batch_acknowledged_settles_as_one_of_two_would():
    # settle() takes a batch acknowledged alone (a record sent one at a time) by a shorter
    # way; it settles as the general way settles it beside another in the same answer:
    # its result, dequeued, the idempotent bookkeeping.
    produce = apis.get("Produce")
    parts = produce.Response.TopicProduceResponse
    ok = parts.PartitionProduceResponse
    out = []
    for together in (False, True):
        acc = accumulator(enable_idempotence=True)
        given_id(acc)
        b = append(acc, 0, now=1.0)
        acc.close_open(b)
        sent = [b]
        answers = [ok(index=0, error_code=0, base_offset=40, log_append_time_ms=77)]
        if together:
            other = append(acc, 1, now=1.0)
            acc.close_open(other)
            sent.append(other)
            answers.append(ok(index=1, error_code=0, base_offset=9))
        _request, carried, _rest, _failed = acc.produce_request(sent, 9, 1.0)
        assert carried == sent
        answer = produce.Response(responses=[parts(name="t", partition_responses=answers)])
        done, refresh = acc.settle(sent, answer, None, "b1", 1.0, False)
        assert done[0] == (b, (40, 77)) and not refresh
        out.append((("t", 0) in acc.batches, ("t", 0) in acc.identity.written))
    assert out == [(False, True), (False, True)]
