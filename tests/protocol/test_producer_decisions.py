"""The producer's decisions both shells take from the protocol layer (no I/O, time passed
in): an explicit partition against the topic's partition count, room in buffer_memory,
and what a Produce request's outcome means for its batches."""

from __future__ import annotations

import pytest

from kafkawire.client.config import Config
from kafkawire.client.future import Future
from kafkawire.errors import (
    BufferExhaustedError,
    ConnectionClosedError,
    NotLeaderOrFollowerError,
    UnknownPartitionError,
)
from kafkawire.protocol import apis
from kafkawire.protocol.accumulator import Accumulator
from kafkawire.protocol.producer import NEED_COUNT, NEED_FRESH_COUNT, partition_check

PRODUCE = apis.get("Produce")
_TPR = PRODUCE.Response.TopicProduceResponse
_PPR = _TPR.PartitionProduceResponse


def accumulator(**options):
    options = {"linger_ms": 0, "enable_idempotence": False, "retries": 3, "retry_backoff_ms": 100,
               "delivery_timeout_ms": 6000, "request_timeout_ms": 3000, **options}
    return Accumulator(Config.producer(bootstrap_servers="h:1", **options), Future)


def test_an_explicit_partition_waits_for_a_count_then_a_fresh_one_then_is_refused():
    assert partition_check("t", 2, None, None) is NEED_COUNT
    assert partition_check("t", 2, 0, None) is NEED_COUNT
    assert partition_check("t", 2, 3, None) is None
    # a partition the known count lacks may have been added since: ask afresh
    assert partition_check("t", 5, 3, None) is NEED_FRESH_COUNT
    assert partition_check("t", 5, 3, 6) is None
    with pytest.raises(UnknownPartitionError, match="has 3 partitions .0-2., so partition 5 does not exist"):
        partition_check("t", 5, 3, 3)
    with pytest.raises(UnknownPartitionError):
        partition_check("t", 0, None, 0)


def test_admit_reserves_a_batch_and_room_wait_ends_at_the_deadline():
    acc = accumulator(batch_size=1000, buffer_memory=1500)
    tp = ("t", 0)
    reserve = acc.admit(tp, 100)
    assert reserve == 1000
    assert acc.room_wait(reserve, 0.0, 5.0) == 0.0  # the buffer is empty
    acc.append(tp, (None, b"v" * 79, 1), 100, reserve, 0.0)
    assert acc.admit(tp, 100) == 0  # joins the open batch
    other = acc.admit(("t", 1), 100)
    assert other == 1000
    assert acc.room_wait(other, 1.0, 5.0) == pytest.approx(0.1)  # look again soon
    assert acc.room_wait(other, 4.95, 5.0) == pytest.approx(0.05)
    with pytest.raises(BufferExhaustedError, match="buffer_memory=1500 bytes is full"):
        acc.room_wait(other, 5.0, 5.0)


def sent_batches(acc, partitions, now=0.0):
    for p in partitions:
        acc.append(("t", p), (None, b"v", 1), 30, acc.admit(("t", p), 30), now)
    by_node, _expired, _wait, _ = acc.collect(now, lambda t, p: 1, flushing=True)
    request, sent, rest, failed = acc.produce_request(by_node[1], PRODUCE.max_version, now)
    assert request is not None and not rest and not failed
    return sent


def test_settle_completes_acknowledged_batches_and_reschedules_retriable_ones():
    acc = accumulator()
    sent = sent_batches(acc, [0, 1, 2])
    resp = PRODUCE.Response(responses=[_TPR(name="t", partition_responses=[
        _PPR(index=0, error_code=0, base_offset=41),
        _PPR(index=1, error_code=NotLeaderOrFollowerError.code, base_offset=-1),
        _PPR(index=2, error_code=87, base_offset=-1)])])  # INVALID_RECORD: permanent
    done, refresh = acc.settle(sent, resp, None, "broker 1", 1.0, closed=False)
    assert refresh  # the leader moved
    assert [(b.partition, r) for b, r in done if not isinstance(r, BaseException)] == [(0, (41, -1))]
    [(failed, exc)] = [(b, r) for b, r in done if isinstance(r, BaseException)]
    assert failed.partition == 2 and exc.code == 87
    retried = sent[1]
    assert not retried.in_flight and retried.retry_at == pytest.approx(1.1)
    assert list(acc.batches[("t", 1)]) == [retried]  # still queued; the others are not
    assert ("t", 0) not in acc.batches and ("t", 2) not in acc.batches  # emptied: forgotten


def test_settle_without_an_answer_retries_until_closed():
    acc = accumulator()
    sent = sent_batches(acc, [0])
    lost = ConnectionClosedError("broker 1 closed the connection")
    done, refresh = acc.settle(sent, None, lost, "broker 1", 1.0, closed=False)
    assert refresh and done == []  # resent after its backoff
    acc2 = accumulator()
    sent = sent_batches(acc2, [0])
    done, _ = acc2.settle(sent, None, lost, "broker 1", 1.0, closed=True)
    assert done == [(sent[0], lost)]


def test_an_idempotent_partition_sends_one_batch_until_the_first_is_written():
    # A broker without state for the producer on a partition takes any sequence: a batch
    # pipelined behind a refused first one would be written before it.
    acc = accumulator(enable_idempotence=True, batch_size=40)
    init = acc.identity.init_request(4)
    assert init.producer_id == -1
    acc.identity.apply_init(apis.get("InitProducerId").Response(error_code=0, producer_id=7, producer_epoch=0),
                            None, 0.0, "broker 1")
    for _ in range(3):
        acc.append(("t", 0), (None, b"v" * 20, 1), 30, acc.admit(("t", 0), 30), 0.0)
    assert len(acc.batches[("t", 0)]) == 3
    by_node, _expired, _wait, _ = acc.collect(0.0, lambda t, p: 1, flushing=True)
    assert len(by_node[1]) == 1  # the partition's first batch alone
    request, sent, _rest, _failed = acc.produce_request(by_node[1], PRODUCE.max_version, 0.0)
    assert sent[0].sequence == 0
    by_node, _expired, _wait, _ = acc.collect(0.1, lambda t, p: 1, flushing=True)
    assert not by_node  # nothing behind it while it is in flight
    refused = PRODUCE.Response(responses=[_TPR(name="t", partition_responses=[
        _PPR(index=0, error_code=NotLeaderOrFollowerError.code, base_offset=-1)])])
    acc.settle(sent, refused, None, "broker 1", 0.2, closed=False)
    by_node, _expired, _wait, _ = acc.collect(1.0, lambda t, p: 1, flushing=True)
    assert [b.sequence for b in by_node[1]] == [0]  # the first again, still alone
    _request, sent, _rest, _failed = acc.produce_request(by_node[1], PRODUCE.max_version, 1.0)
    written = PRODUCE.Response(responses=[_TPR(name="t", partition_responses=[
        _PPR(index=0, error_code=0, base_offset=0)])])
    acc.settle(sent, written, None, "broker 1", 1.1, closed=False)
    by_node, _expired, _wait, _ = acc.collect(1.2, lambda t, p: 1, flushing=True)
    assert len(by_node[1]) == 2  # written: the rest are pipelined


class _CountedQueues(dict):
    """acc.batches that counts the partition queues a collect() pass walks."""

    walked = 0

    def items(self):
        for item in super().items():
            self.walked += 1
            yield item


def _acknowledge(acc, sent, now):
    resp = PRODUCE.Response(responses=[_TPR(name="t", partition_responses=[
        _PPR(index=b.partition, error_code=0, base_offset=0) for b in sent])])
    done, _ = acc.settle(sent, resp, None, "broker 1", now, closed=False)
    assert len(done) == len(sent) and not any(isinstance(r, BaseException) for _, r in done)
    for b, _ in done:
        acc.release(b)


def test_a_partition_whose_batches_are_all_acknowledged_leaves_the_queues():
    acc = accumulator()
    _acknowledge(acc, sent_batches(acc, range(1000)), 0.5)
    assert acc.batches == {}  # the sender's pass no longer walks 1,000 empty queues
    queues = acc.batches = _CountedQueues()
    sent = sent_batches(acc, range(0, 1000, 100), now=1.0)
    assert sorted(b.partition for b in sent) == list(range(0, 1000, 100))
    assert queues.walked == 10  # the partitions with a batch queued, no others
    _acknowledge(acc, sent, 1.5)
    assert not queues and not acc.incomplete and acc.used_memory == 0


def test_expired_and_dropped_batches_leave_no_empty_queue():
    acc = accumulator()
    for p in range(3):
        acc.append(("t", p), (None, b"v", 1), 30, acc.admit(("t", p), 30), 0.0)
    # ("t", 0) in flight, unanswered: kept; ("t", 1) sent, refused, to be resent: kept.
    by_node, _, _, _ = acc.collect(0.0, lambda t, p: 1 if p < 2 else None, flushing=True)
    _request, sent, _rest, _failed = acc.produce_request(by_node[1], PRODUCE.max_version, 0.0)
    resp = PRODUCE.Response(responses=[_TPR(name="t", partition_responses=[
        _PPR(index=1, error_code=NotLeaderOrFollowerError.code, base_offset=-1)])])
    assert acc.settle([b for b in sent if b.partition == 1], resp, None, "broker 1", 0.1, closed=False)[0] == []
    dropped = acc.drop_unsent()  # ("t", 2) was never sent
    assert [b.partition for b in dropped] == [2]
    assert sorted(acc.batches) == [("t", 0), ("t", 1)]
    # Past delivery_timeout_ms the resendable batch expires at the head of its queue.
    _by_node, expired, _wait, _ = acc.collect(7.0, lambda t, p: 1, flushing=True)
    assert [b.partition for b in expired] == [1]
    assert sorted(acc.batches) == [("t", 0)]
    # A new record for an emptied partition starts a queue again.
    acc.append(("t", 2), (None, b"w", 1), 30, acc.admit(("t", 2), 30), 7.0)
    assert [b.partition for b in acc.batches[("t", 2)]] == [2]
