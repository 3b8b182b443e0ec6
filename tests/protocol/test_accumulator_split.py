"""A batch refused with MESSAGE_TOO_LARGE is split in halves and resent (KIP-126, as the
Java client), in the I/O-free accumulator against a simulated partition leader that
refuses batches above a size and checks idempotent sequences as Kafka does: every record
written once, in order, each record's future at its offset, and only a record too large
by itself failing, typed."""

from __future__ import annotations

import pytest

from kafkawire import codec
from kafkawire.client.config import Config
from kafkawire.client.future import Future
from kafkawire.core.records import RecordFuture
from kafkawire.errors import MessageTooLargeError
from kafkawire.protocol import apis
from kafkawire.protocol.accumulator import Accumulator

PRODUCE = apis.get("Produce")
_TPR = PRODUCE.Response.TopicProduceResponse
_PPR = _TPR.PartitionProduceResponse
TP = ("t", 0)


def accumulator(**options):
    options = {"linger_ms": 1000, "retries": 10, "retry_backoff_ms": 100, "batch_size": 100_000,
               "delivery_timeout_ms": 60000, "request_timeout_ms": 3000, **options}
    acc = Accumulator(Config.producer(bootstrap_servers="h:1", **options), Future)
    if acc.identity is not None:
        acc.identity.apply_init(apis.get("InitProducerId").Response(error_code=0, producer_id=7, producer_epoch=0),
                                None, 0.0, "broker 1")
    return acc


class Leader:
    """A partition leader refusing batches over ``limit`` bytes (max.message.bytes) and
    checking sequences per producer as Kafka does (the next one, else OUT_OF_ORDER)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.log: list[bytes] = []
        self.next_seq: dict[int, int] = {}
        self.refused = 0

    def answer(self, request) -> object:
        parts = []
        for t in request.topic_data:
            for p in t.partition_data:
                data = bytes(p.records)
                (batch,) = codec.decode_batches(data)
                code, base = 0, -1
                if len(data) > self.limit:
                    code = 10
                    self.refused += 1
                elif batch.producer_id >= 0 and batch.base_sequence != self.next_seq.get(
                        (batch.producer_id, batch.producer_epoch), 0):
                    code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER (a new epoch starts at 0)
                else:
                    if batch.producer_id >= 0:
                        self.next_seq[(batch.producer_id, batch.producer_epoch)] = \
                            batch.base_sequence + len(batch.records)
                    base = len(self.log)
                    self.log += [r.value for r in batch.records]
                parts.append(_PPR(index=p.index, error_code=code, base_offset=base))
        return PRODUCE.Response(responses=[_TPR(name="t", partition_responses=parts)])


def run(acc: Accumulator, leader: Leader, until: float = 60.0) -> float:
    """The sender's loop on a fake clock, one request in flight at a time, until nothing
    is left."""
    now = 0.0
    while acc.incomplete and now < until:
        acc.init_wanted(now)  # an idempotent producer bumps its epoch itself (KIP-360)
        by_node, expired, wait, _ = acc.collect(now, lambda t, p: 1, flushing=True)
        for b in expired:
            b.future.set_exception(acc.expired_error(b))
            acc.release(b)
        for node, batches in by_node.items():
            while batches:
                request, sent, batches, failed = acc.produce_request(batches, PRODUCE.max_version, now)
                assert not failed
                if request is None:
                    break
                done, _refresh = acc.settle(sent, leader.answer(request), None, "broker 1", now, False)
                for b, result in done:
                    acc.release(b)
                    (b.future.set_exception if isinstance(result, BaseException) else b.future.set_result)(result)
        now += max(wait, 0.01)
    assert not acc.incomplete
    return now


def send(acc: Accumulator, values: list[bytes]) -> list[RecordFuture]:
    futures = []
    for v in values:
        size = 21 + len(v)
        b, index, _made, _closed = acc.append(TP, (None, v, 1000), size, acc.admit(TP, size), 0.0)
        futures.append(RecordFuture((b, index, 1000)))
    return futures


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_batch_too_large_is_split_until_its_parts_fit(idempotent):
    acc = accumulator(enable_idempotence=idempotent, max_in_flight_requests_per_connection=5 if idempotent else 1)
    values = [b"%05d" % i + b"x" * 95 for i in range(100)]  # ~100 bytes each, ~11 KB in all
    futures = send(acc, values)
    assert len(acc.batches[TP]) == 1
    leader = Leader(limit=1500)  # about 12 records a batch
    run(acc, leader)
    assert leader.log == values  # each once, in order
    assert leader.refused >= 7  # 100 -> 50 -> 25 -> 12/13: refused until the parts fit
    assert [f.result(0).offset for f in futures] == list(range(100))
    assert all(f.exception(0) is None for f in futures)
    assert acc.used_memory == 0 and not acc.parts and not acc.batches
    if idempotent:
        assert leader.next_seq == {(7, 0): 100} and acc.identity.next_sequence[TP] == 100
        assert acc.identity.bump_wanted is None and acc.identity.bumps == 0


def test_the_batches_behind_a_split_one_keep_their_sequences():
    # Three batches in flight together: the first too large, the two behind it refused
    # as out of order (the broker wrote nothing of the first) and resent after its parts.
    acc = accumulator(enable_idempotence=True, batch_size=1200)
    big = [b"%05d" % i + b"y" * 95 for i in range(10)]
    small = [b"%05d" % i + b"z" for i in range(10, 30)]
    futures = send(acc, big) + send(acc, small)
    assert len(acc.batches[TP]) >= 2
    leader = Leader(limit=700)
    run(acc, leader)
    assert leader.log == big + small
    assert [f.result(0).offset for f in futures] == list(range(30))
    assert acc.identity.bumps == 0 and leader.next_seq == {(7, 0): 30}


def test_only_a_record_too_large_by_itself_fails_typed():
    for idempotent in (True, False):
        acc = accumulator(enable_idempotence=idempotent, max_in_flight_requests_per_connection=5 if idempotent else 1)
        values = [b"%05d" % i + b"s" * 50 for i in range(9)]
        values[4] = b"00004" + b"H" * 2000  # larger than the leader takes alone
        futures = send(acc, values)
        leader = Leader(limit=1000)
        run(acc, leader)
        assert leader.log == values[:4] + values[5:]
        for i, f in enumerate(futures):
            if i == 4:
                exc = f.exception(0)
                assert isinstance(exc, MessageTooLargeError) and exc.code == 10
                with pytest.raises(MessageTooLargeError):
                    f.result(0)
            else:
                assert f.exception(0) is None
                assert f.result(0).offset == (i if i < 4 else i - 1)
        got = []
        futures[4].add_callback(lambda md, exc: got.append((md, type(exc))))
        futures[5].add_callback(lambda md, exc: got.append((md.offset, exc)))
        assert got == [(None, MessageTooLargeError), (4, None)]
        if idempotent:
            # The failed record left a gap in the sequences: the epoch is bumped, as after
            # any batch that failed with records behind it.
            assert acc.identity.bumps == 1


def test_a_lone_record_too_large_is_not_split():
    acc = accumulator(enable_idempotence=False)
    [f] = send(acc, [b"B" * 3000])
    leader = Leader(limit=1000)
    run(acc, leader)
    assert isinstance(f.exception(0), MessageTooLargeError) and leader.refused == 1 and leader.log == []


def test_dropping_the_unsent_parts_fails_the_batch_split_in_their_place():
    # An aborted transaction drops what was never sent: a split batch's parts not yet
    # sent go, and the batch split fails in their place (its futures are its records').
    acc = accumulator(enable_idempotence=False)
    futures = send(acc, [b"%05d" % i + b"d" * 100 for i in range(10)])
    by_node, _expired, _wait, _ = acc.collect(0.0, lambda t, p: 1, flushing=True)
    request, sent, _rest, _failed = acc.produce_request(by_node[1], PRODUCE.max_version, 0.0)
    done, _ = acc.settle(sent, Leader(limit=100).answer(request), None, "broker 1", 0.0, False)
    assert done == [] and len(acc.parts) == 2 and [b.count() for b in acc.batches[TP]] == [5, 5]
    dropped = acc.drop_unsent()
    assert dropped == [futures[0][0]] and not acc.parts and not acc.batches
