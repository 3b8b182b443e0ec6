"""Several batches of one partition in flight at once, driven through the accumulator with
no I/O: a producer that is neither idempotent nor transactional sends up to
max_in_flight_requests_per_connection of a partition's batches before the first is
answered, one per Produce request and in queue order; an idempotent one sends one."""

from __future__ import annotations

from test_producer_identity import accumulator, add, answer, given_id, settle

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


def requests(acc, batches):
    """Produce requests as the shells build them, until every batch is in one: the batches
    of each request."""
    out = []
    while batches:
        request, sent, batches, failed = acc.produce_request(batches, PRODUCE.max_version)
        assert request is not None and not failed
        assert [p.index for t in request.topic_data for p in t.partition_data] == [b.partition for b in sent]
        out.append(sent)
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


def test_an_idempotent_producer_keeps_one_batch_of_a_partition_in_flight():
    acc = accumulator(batch_size=30)
    given_id(acc)
    add(acc, TP, 3)
    (head,) = collected(acc)
    assert head is acc.batches[TP][0]
    requests(acc, [head])
    assert collected(acc) == []  # the next waits for the answer, whatever the limit
