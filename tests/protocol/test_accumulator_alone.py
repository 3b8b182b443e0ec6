"""Accumulator.due_alone (no I/O): the shortcut a record sent one at a time takes past
collect() names a leader only when collect() itself would send that batch, alone, now."""

from __future__ import annotations

from kafkawire.client.config import Config
from kafkawire.client.future import Future
from kafkawire.protocol.accumulator import Accumulator

RECORD = (None, b"v" * 100, 1000)


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
