"""The idempotent producer's bookkeeping (kafkawire.protocol.idempotence) driven through
the accumulator with no I/O: which batch carries which producer id, epoch and sequence,
what each Produce answer does to them, and when the epoch is bumped."""

from __future__ import annotations

import pytest

from kafkawire import codec
from kafkawire.client.config import Config
from kafkawire.client.future import Future
from kafkawire.errors import ConfigError, KafkaConnectionError
from kafkawire.protocol import apis
from kafkawire.protocol.accumulator import Accumulator
from kafkawire.protocol.idempotence import restamp

PRODUCE = apis.get("Produce")
INIT = apis.get("InitProducerId")
_TPR = PRODUCE.Response.TopicProduceResponse
_PPR = _TPR.PartitionProduceResponse


def accumulator(**options):
    options.setdefault("linger_ms", 0)
    return Accumulator(Config.producer(bootstrap_servers="h:1", **options), Future)


def given_id(acc, pid=7, epoch=0, now=0.0):
    assert acc.init_wanted(now)
    req = acc.identity.init_request(INIT.max_version)
    assert (req.transactional_id, req.producer_id, req.producer_epoch) == (None, -1, -1)
    acc.identity.apply_init(INIT.Response(error_code=0, producer_id=pid, producer_epoch=epoch), None, now, "b1")


def add(acc, tp, n, now=0.0):
    for i in range(n):
        acc.append(tp, (None, b"v%d" % i, 1000 + i), 30, 100, now)


def sendable(acc, now=0.0):
    by_node, expired, _wait, _ = acc.collect(now, lambda t, p: 1, flushing=True)
    assert not expired
    return by_node.get(1, [])


def send(acc, now=0.0, version=PRODUCE.max_version):
    request, sent, rest, failed = acc.produce_request(sendable(acc, now), version)
    assert not rest and not failed
    return request, sent


def answer(sent, codes, offsets=None):
    parts = {}
    for i, b in enumerate(sent):
        parts.setdefault(b.topic, []).append(_PPR(index=b.partition, error_code=codes[i],
                                                  base_offset=(offsets or [0] * len(sent))[i]))
    return PRODUCE.Response(responses=[_TPR(name=t, partition_responses=p) for t, p in parts.items()])


def stamps(request):
    out = {}
    for t in request.topic_data:
        for p in t.partition_data:
            (b,) = codec.decode_batches(p.records)
            out[(t.name, p.index)] = (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional)
    return out


def settle(acc, sent, resp, now=0.0):
    """Apply a Produce answer as the shells do; the batches that failed, with errors."""
    outcomes, _ = acc.results(resp, sent, "b1")
    failed = []
    for b, result, retriable in outcomes:
        if isinstance(result, BaseException):
            if not acc.retry(b, result, retriable, now, closed=False):
                acc.dequeue(b)
                acc.release(b)
                b.future.set_exception(result)
                failed.append((b, result))
        else:
            acc.dequeue(b)
            acc.release(b)
            b.future.set_result(result)
    return failed


def test_nothing_is_sent_before_the_producer_id_and_then_sequences_count_per_partition():
    acc = accumulator()
    add(acc, ("t", 0), 3)
    assert sendable(acc) == []  # held until InitProducerId answers
    given_id(acc, pid=42, epoch=3)
    assert not acc.init_wanted(0.0)
    request, sent = send(acc)
    assert stamps(request) == {("t", 0): (42, 3, 0, False)}
    settle(acc, sent, answer(sent, [0]))
    add(acc, ("t", 0), 2)
    add(acc, ("t", 1), 4)
    request, sent = send(acc)
    assert stamps(request) == {("t", 0): (42, 3, 3, False), ("t", 1): (42, 3, 0, False)}


def test_a_retry_keeps_its_sequence_and_a_duplicate_answer_is_success():
    acc = accumulator()
    given_id(acc)
    add(acc, ("t", 0), 5)
    request, sent = send(acc)
    first = stamps(request)
    settle(acc, sent, answer(sent, [6]))  # NOT_LEADER_OR_FOLLOWER: retriable
    request, sent = send(acc, now=10.0)
    assert stamps(request) == first
    (b,) = sent
    assert settle(acc, sent, answer(sent, [46]), now=10.0) == []  # DUPLICATE_SEQUENCE_NUMBER
    assert b.future.result(0) == (-1, -1)


@pytest.mark.parametrize("code", [45, 59])  # OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID
def test_a_sequence_the_broker_refuses_bumps_the_epoch_and_every_partition_starts_at_zero(code):
    acc = accumulator()
    given_id(acc, pid=9, epoch=0)
    add(acc, ("t", 0), 3)
    add(acc, ("t", 1), 2)
    request, sent = send(acc)
    settle(acc, sent, answer(sent, [0, 0]))
    add(acc, ("t", 0), 1)
    add(acc, ("t", 1), 1)
    request, sent = send(acc)
    assert stamps(request) == {("t", 0): (9, 0, 3, False), ("t", 1): (9, 0, 2, False)}
    b0, b1 = sent
    assert settle(acc, sent, answer(sent, [code, 0])) == []  # retried, not failed
    assert not b0.future.done() and b1.future.done()
    # Nothing in flight: the epoch is bumped by the producer itself (KIP-360).
    assert not acc.init_wanted(10.0)
    assert acc.identity.describe() == {"producer_id": 9, "producer_epoch": 1, "epoch_bumps": 1,
                                       "idempotent": True}
    add(acc, ("t", 1), 1)
    request, sent = send(acc, now=10.0)
    assert stamps(request) == {("t", 0): (9, 1, 0, False), ("t", 1): (9, 1, 0, False)}


def test_no_bump_while_a_batch_of_unknown_outcome_can_still_be_resolved_under_the_old_epoch():
    acc = accumulator()
    given_id(acc, pid=5, epoch=2)
    add(acc, ("t", 0), 2)
    add(acc, ("t", 1), 2)
    request, sent = send(acc)
    b0, b1 = sent
    # t[1]'s answer never came (it may be written); t[0] is refused out of order.
    acc.retry(b1, KafkaConnectionError("broken"), True, 0.0, closed=False)
    settle(acc, [b0], answer([b0], [45]))
    assert not acc.init_wanted(10.0)  # bump held back by t[1]
    # Only t[1] may go, with its old stamp, where the broker can still recognise it.
    request, sent = send(acc, now=10.0)
    assert sent == [b1] and stamps(request) == {("t", 1): (5, 2, 0, False)}
    # A refusal of this attempt says nothing of the first one: still held back.
    settle(acc, sent, answer(sent, [6]), now=10.0)  # NOT_LEADER_OR_FOLLOWER
    assert b1.unknown and not acc.init_wanted(20.0) and acc.identity.epoch == 2
    request, sent = send(acc, now=20.0)
    assert sent == [b1] and stamps(request) == {("t", 1): (5, 2, 0, False)}
    settle(acc, sent, answer(sent, [46]), now=20.0)  # it was written
    assert not acc.init_wanted(30.0)  # bumped locally
    request, sent = send(acc, now=30.0)
    assert sent == [b0] and stamps(request) == {("t", 0): (5, 3, 0, False)}


def test_a_batch_certainly_not_written_gives_its_sequence_back_one_of_unknown_fate_bumps():
    acc = accumulator()
    given_id(acc, pid=5, epoch=0)
    add(acc, ("t", 0), 4)
    request, sent = send(acc)
    failed = settle(acc, sent, answer(sent, [10]))  # MESSAGE_TOO_LARGE: refused, not written
    assert [type(e).__name__ for _, e in failed] == ["MessageTooLargeError"]
    add(acc, ("t", 0), 1)
    request, sent = send(acc)
    assert stamps(request) == {("t", 0): (5, 0, 0, False)}
    (b,) = sent
    assert not acc.retry(b, KafkaConnectionError("broken"), True, 0.0, closed=True)  # closing: no retry
    acc.dequeue(b)
    acc.release(b)
    assert acc.identity.bump_wanted
    assert not acc.init_wanted(1.0)
    assert acc.identity.epoch == 1 and acc.identity.next_sequence == {}


def test_an_old_broker_turns_default_idempotence_off_and_refuses_the_asked_for_kind():
    acc = accumulator()
    given_id(acc)
    add(acc, ("t", 0), 2)
    request, sent = send(acc, version=2)  # magic 1: no producer id on the wire
    assert acc.identity.disabled and sent[0].sequence == -1
    acc = accumulator(enable_idempotence=True)
    given_id(acc)
    add(acc, ("t", 0), 2)
    _, sent, _, failed = acc.produce_request(sendable(acc), 2)
    assert sent == [] and isinstance(failed[0][1], ConfigError)
    assert "Produce v3+" in str(failed[0][1])


def test_a_fatal_init_error_fails_every_batch_with_it():
    acc = accumulator()
    add(acc, ("t", 0), 2)
    acc.identity.init_request(INIT.max_version)
    acc.identity.apply_init(INIT.Response(error_code=31, producer_id=-1, producer_epoch=-1), None, 0.0, "b1")
    by_node, expired, _, _ = acc.collect(0.0, lambda t, p: 1, flushing=True)
    assert by_node == {} and len(expired) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in str(acc.expired_error(expired[0]))


def test_restamp_rewrites_ids_sequences_and_crcs_of_every_batch():
    first = codec.encode_record_batch([(None, b"a", 1), (b"k", b"b", 2)])
    second = codec.encode_record_batch([(None, b"c", 3)], compression=1)
    data = restamp(first + second, 77, 4, 2**31 - 2, True)
    a, b = codec.decode_batches(data, check_crcs=True)
    assert (a.producer_id, a.producer_epoch, a.base_sequence, a.is_transactional) == (77, 4, 2**31 - 2, True)
    assert (b.producer_id, b.base_sequence, b.is_transactional) == (77, 0, True)  # wrapped past INT32_MAX
    assert [r.value for r in b.records] == [b"c"]
    with pytest.raises(ValueError, match="not a whole magic-2 record batch"):
        restamp(first[:-1], 1, 0, 0, False)
