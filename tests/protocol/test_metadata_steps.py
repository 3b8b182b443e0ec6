"""protocol/metadata.py's decisions that both cluster shells share, no I/O: which broker
to ask, reconnect backoff, how a failed refresh waits and which failure ends it, the
bootstrap's walk through its addresses and partitions_for's wait for a new topic."""

from __future__ import annotations

import pytest

from kafkawire.errors import (
    BrokerConnectTimeoutError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    TopicAuthorizationFailedError,
)
from kafkawire.protocol.metadata import (
    Backoffs,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
    bootstrap_steps,
    candidates,
    partitions_steps,
    refresh_steps,
    refresh_wait,
)
from kafkawire.protocol.steps import Await, Refresh

from steps_sim import Sim


class Permanent(KafkaConnectionError):
    retriable = False


def test_backoff_doubles_per_failure_and_gives_its_error_until_it_passes():
    b = Backoffs(100, 1000, jitter=lambda: 1.0)
    addr = b.get("h", 1)
    for expected in (0.1, 0.2, 0.4, 0.8, 1.0, 1.0):
        b.failed(addr, KafkaConnectionError("refused"), 10.0)
        assert b.remaining("h", 1, 10.0) == pytest.approx(expected)
    assert str(b.refusal("h", 1, 10.5)) == "refused" and b.refusal("h", 1, 11.0) is None
    assert b.next_delay(10.0) == pytest.approx(1.0) and b.next_delay(12.0) == 0.0
    addr.succeeded()
    assert b.remaining("h", 1, 10.0) == 0.0 and b.refusal("h", 2, 0.0) is None


def test_candidates_known_brokers_first_least_recently_failed_first_one_per_address():
    b = Backoffs(100, 1000, jitter=lambda: 1.0)
    b.failed(b.get("a", 1), KafkaConnectionError("x"), 0.0)  # broker 1 is in backoff
    got = candidates({1: ("a", 1), 2: ("b", 2)}, [("a", 1), ("c", 3)], b, 0.0)
    assert got == [(2, "b", 2, 2), (("bootstrap", "c", 3), "c", 3, None), (1, "a", 1, 1)]


def test_a_failed_refresh_waits_for_a_broker_to_leave_its_backoff_or_retry_backoff():
    assert refresh_wait(KafkaConnectionError("x"), 5.0, 0.1, 2.0) == 0.1
    assert refresh_wait(NoBrokersAvailableError("x"), 5.0, 0.1, 2.0) == 2.0
    assert refresh_wait(NoBrokersAvailableError("x"), 5.0, 0.1, 0.0) == 0.01
    assert refresh_wait(KafkaConnectionError("x"), 0.05, 0.1, 0.0) == 0.05  # never past the deadline
    with pytest.raises(Permanent):  # a TLS certificate: waiting cannot help
        refresh_wait(Permanent("bad certificate"), 5.0, 0.1, 0.0)


def test_refresh_retries_until_an_answer_and_ends_at_once_on_a_permanent_failure():
    failures = [KafkaConnectionError("one"), BrokerConnectTimeoutError("two")]

    def attempt(deadline):
        if failures:
            raise failures.pop(0)
        return "answer"

    sim = Sim(lambda step, sim: step.answer)
    sim.run(refresh_steps(5.0, 0.1, attempt, lambda: 0.0))
    assert sim.kinds() == ["Sleep", "Sleep", "Await"]

    def refused(deadline):
        raise Permanent("no")

    sim = Sim(lambda step, sim: step.answer)
    with pytest.raises(Permanent):
        sim.run(refresh_steps(5.0, 0.1, refused, lambda: 0.0))
    assert sim.log == []


def test_refresh_ends_at_its_deadline_with_the_last_error():
    def late(step, sim):
        sim.now += 10
        raise KafkaTimeoutError("Metadata: no answer in time")

    with pytest.raises(KafkaTimeoutError, match="not refreshed within 2s; last error: Metadata: no answer"):
        Sim(late).run(refresh_steps(2.0, 0.1, lambda deadline: "fut", lambda: 0.0))


def test_bootstrap_tries_each_address_once_and_says_what_each_did():
    tried = []

    def attempt(host, port, deadline):
        tried.append(port)
        if port == 1:
            raise KafkaConnectionError("connection refused")
        return ("fut", port)

    def runner(step, sim):
        assert isinstance(step, Await)
        if step.answer[1] == 2:
            raise KafkaTimeoutError("Metadata: no answer in time")
        return None

    sim = Sim(runner)
    assert sim.run(bootstrap_steps([("h", 1), ("h", 2), ("h", 3), ("h", 4)], 5.0, attempt)) is None
    assert tried == [1, 2, 3]
    failed = str(Sim(runner).run(bootstrap_steps([("h", 1), ("h", 2)], 5.0, attempt)))
    assert "h:1: KafkaConnectionError: connection refused" in failed
    assert "h:2: KafkaTimeoutError: Metadata: no answer in time" in failed and "5 s allowed" in failed


def test_partitions_for_waits_for_a_new_topic_to_have_leaders():
    meta = ClusterMetadata(300000, 100)
    answers = iter([{0: -1}, {0: 3, 1: 4}])  # no leader yet, then leaders

    def runner(step, sim):
        assert isinstance(step, Refresh) and meta.need_refresh
        parts = next(answers)
        meta.topics["t"] = TopicMetadata("t", 0 if min(parts.values()) >= 0 else 5, None,
                                         {p: PartitionMetadata(p, leader, 0, 0, [], []) for p, leader in parts.items()})
        meta.topic_seen["t"] = sim.now
        return None

    sim = Sim(runner)
    assert sim.run(partitions_steps(meta, "t", 5.0, 0.1)) == [0, 1]
    assert sim.kinds() == ["Refresh", "Sleep", "Refresh"] and "t" in meta.interest


def test_partitions_for_raises_a_permanent_topic_error_from_a_new_answer_at_once():
    meta = ClusterMetadata(300000, 100)
    meta.topics["t"] = TopicMetadata("t", 29, None, {})
    meta.topic_seen["t"] = 1.0  # an old answer: asked again first

    def runner(step, sim):
        meta.topic_seen["t"] = sim.now
        return None

    sim = Sim(runner)
    with pytest.raises(TopicAuthorizationFailedError):
        sim.run(partitions_steps(meta, "t", 5.0, 0.1))
    assert sim.kinds() == ["Sleep", "Refresh"]


def test_partitions_for_says_what_the_topic_lacks_at_its_deadline():
    meta = ClusterMetadata(300000, 100)

    def runner(step, sim):
        sim.now += step.timeout
        raise KafkaTimeoutError("cluster metadata not refreshed")

    with pytest.raises(KafkaTimeoutError, match="not available within 3s: it does not exist"):
        Sim(runner).run(partitions_steps(meta, "t", 3.0, 0.1))
