"""The consumer group's operations that wait for the coordinator (protocol/group_member.py),
run step by step on a fake clock: every retry, after a connection error, a timeout or a
retriable broker error, comes retry_backoff_ms after the failed attempt (less where the
deadline is nearer), and a permanent error ends the operation at once.  The coordinator's
answers are hand-made: this tests the decisions, not a broker."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from steps_sim import Sim

from kafkawire.core.config import Config
from kafkawire.errors import KafkaConnectionError, KafkaTimeoutError, for_name
from kafkawire.protocol.fetcher import TopicPartition
from kafkawire.protocol.group_member import ConsumerGroup
from kafkawire.protocol.steps import Await, Sleep

BACKOFF = 0.1
TP = TopicPartition("t", 0)


class Driver:
    """The driver's interface as the operations use it: requests handed over are kept."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def new_future(self) -> object:
        return object()  # the Await's answer comes from the Sim

    def call(self, fn: Any) -> None:
        self.calls.append(fn)


def group() -> ConsumerGroup:
    config = Config.consumer(bootstrap_servers="127.0.0.1:9", group_id="g", retry_backoff_ms=int(BACKOFF * 1000))
    consumer = SimpleNamespace(config=config, _assigned={}, cluster=None)
    return ConsumerGroup(consumer, Driver(), now=100.0)


def answers(*outcomes: Any) -> Any:
    """A Sim answer function: each Await gets the next outcome (raised if an exception);
    the time of each attempt is kept in ``attempts``."""
    todo = list(outcomes)
    attempts: list[float] = []

    def answer(step: Any, sim: Sim) -> Any:
        assert isinstance(step, Await)
        attempts.append(sim.now)
        out = todo.pop(0)
        if isinstance(out, BaseException):
            raise out
        return out

    answer.attempts = attempts  # type: ignore[attr-defined]
    return answer


def sleeps(sim: Sim) -> list[float]:
    return [s.seconds for s in sim.log if isinstance(s, Sleep)]


@pytest.mark.parametrize("failure", [KafkaConnectionError("coordinator gone"),
                                     KafkaTimeoutError("no answer in time"),
                                     for_name("COORDINATOR_LOAD_IN_PROGRESS")("loading")])
def test_a_commit_is_tried_again_after_retry_backoff_ms(failure: BaseException) -> None:
    g = group()
    answer = answers(failure, failure, {("t", 0): None})
    sim = Sim(answer)
    sim.run(g.commit_steps({TP: 7}, deadline=105.0))
    assert sleeps(sim) == [BACKOFF, BACKOFF]
    assert answer.attempts == pytest.approx([100.0, 100.1, 100.2])
    assert g.last_committed == {TP: 7}
    assert len(g.driver.calls) == 3  # each attempt handed the driver one commit


def test_a_partition_the_coordinator_refused_for_now_is_committed_again_after_the_backoff() -> None:
    g = group()
    other = TopicPartition("t", 1)
    answer = answers({("t", 0): None, ("t", 1): for_name("REQUEST_TIMED_OUT")("slow")}, {("t", 1): None})
    sim = Sim(answer)
    sim.run(g.commit_steps({TP: 7, other: 9}, deadline=105.0))
    assert sleeps(sim) == [BACKOFF]
    assert answer.attempts == pytest.approx([100.0, 100.1])
    assert g.last_committed == {TP: 7, other: 9}


def test_the_backoff_is_cut_short_by_the_deadline_which_ends_the_commit_with_the_last_error() -> None:
    g = group()
    answer = answers(*[KafkaConnectionError("coordinator gone")] * 5)
    sim = Sim(answer)
    with pytest.raises(KafkaTimeoutError, match="not done in time; last error: coordinator gone"):
        sim.run(g.commit_steps({TP: 7}, deadline=100.15))
    assert sleeps(sim) == pytest.approx([BACKOFF, 0.05])
    assert answer.attempts == pytest.approx([100.0, 100.1])
    assert sim.now == pytest.approx(100.15)


def test_a_permanent_error_ends_a_commit_at_once() -> None:
    g = group()
    sim = Sim(answers(for_name("GROUP_AUTHORIZATION_FAILED")("denied")))
    with pytest.raises(for_name("GROUP_AUTHORIZATION_FAILED")):
        sim.run(g.commit_steps({TP: 7}, deadline=105.0))
    assert sleeps(sim) == []


@pytest.mark.parametrize("failure", [KafkaConnectionError("coordinator gone"),
                                     KafkaTimeoutError("no answer in time"),
                                     for_name("COORDINATOR_NOT_AVAILABLE")("moving")])
def test_committed_offsets_are_read_again_after_retry_backoff_ms(failure: BaseException) -> None:
    g = group()
    answer = answers(failure, {("t", 0): (5, ""), ("t", 1): (-1, "")})
    sim = Sim(answer)
    got = sim.run(g.committed_steps([TP, TopicPartition("t", 1)], deadline=105.0))
    assert got == {TP: 5, TopicPartition("t", 1): None}
    assert sleeps(sim) == [BACKOFF]
    assert answer.attempts == pytest.approx([100.0, 100.1])


def test_reading_committed_offsets_ends_at_the_deadline_with_the_last_error() -> None:
    g = group()
    answer = answers(*[KafkaConnectionError("coordinator gone")] * 5)
    sim = Sim(answer)
    with pytest.raises(KafkaTimeoutError, match="not read in time; last error: coordinator gone"):
        sim.run(g.committed_steps([TP], deadline=100.25))
    assert sleeps(sim) == pytest.approx([BACKOFF, BACKOFF, 0.05])
    assert answer.attempts == pytest.approx([100.0, 100.1, 100.2])


def test_an_operation_past_its_deadline_sends_nothing() -> None:
    g = group()
    sim = Sim(answers(), now=106.0)
    with pytest.raises(KafkaTimeoutError, match="not done in time$"):
        sim.run(g.commit_steps({TP: 7}, deadline=105.0))
    assert sim.log == [] and g.driver.calls == []


def test_a_poll_waits_no_longer_than_the_groups_next_work() -> None:
    """next_wakeup: the auto-commit's time while partitions are assigned, and a KIP-848
    revocation's commit in its retry backoff (no answer would wake the poll for it)."""
    from concurrent.futures import Future

    from kafkawire.protocol.group_member import _Reconciling
    from kafkawire.protocol.steps import StepRun

    g = group()
    g.driver.new_future = Future  # type: ignore[method-assign]
    assert g.next_wakeup(100.0) is None  # nothing assigned, nothing reconciling
    g.consumer._assigned[TP] = object()
    assert g.next_wakeup(101.0) == pytest.approx(g.config.auto_commit_interval_ms / 1000 - 1.0)
    g.consumer._assigned.clear()
    commit = StepRun(g.commit_steps({TP: 7}, deadline=105.0), None, now=100.0)
    g._reconciling = _Reconciling(SimpleNamespace(), {}, commit)
    assert g.next_wakeup(100.0) is None  # its answer wakes the poll
    commit.waiting.set_exception(KafkaConnectionError("coordinator gone"))
    assert commit.advance(100.0) == pytest.approx(BACKOFF)
    assert g.next_wakeup(100.04) == pytest.approx(BACKOFF - 0.04)
    assert g.next_wakeup(100.5) == 0.0  # overdue: at once
    commit.advance(100.1)
    assert commit.waiting is not None and g.next_wakeup(100.1) is None  # tried again
