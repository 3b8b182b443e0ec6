"""protocol/steps.py: the steps of a multi-request operation and the runners that move
one on (never blocking, blocking, awaited)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kafkawire.client.future import Future
from kafkawire.protocol import apis
from kafkawire.client.steps import run_blocking
from kafkawire.protocol.steps import NOW, Await, Refresh, Request, Sleep, StepRun, drive_async

METADATA = apis.get("Metadata")


def ask(n):
    return Request(None, METADATA, lambda v: ("built", v, n))


def conversation(log: list):
    """Asks twice; the second answer fails and is handled; returns what it saw."""
    first = yield ask(1)
    log.append(("answer", first))
    yield Sleep(0.01)
    try:
        yield ask("boom")
    except ValueError as exc:
        log.append(("thrown", str(exc)))
    return first * 10


def answer_now(step: Request) -> Future:
    fut = Future()
    _, version, n = step.build(12)
    if n == "boom":
        fut.set_exception(ValueError("no answer"))
    else:
        fut.set_result(n + 41)
    return fut


async def do_async(step):
    if isinstance(step, Sleep):
        await asyncio.sleep(step.seconds)
        return None
    return answer_now(step).result(0)


def run_polled(steps, start=answer_now):
    run = StepRun(steps)
    now = 0.0
    while (wait := run.advance(now, start)) is not None:
        now += wait
    return run


@pytest.mark.parametrize("mode", ["polled", "blocking", "awaited"])
def test_answers_are_sent_in_errors_thrown_in_and_the_result_returned(mode: str) -> None:
    log: list = []
    if mode == "polled":
        run = run_polled(conversation(log))
        assert run.finished and run.error is None
        result = run.value
    elif mode == "blocking":
        result = run_blocking(conversation(log), time.monotonic() + 5, TimeoutError, answer_now)
    else:
        result = asyncio.run(drive_async(conversation(log), do_async))
    assert result == 420
    assert log == [("answer", 42), ("thrown", "no answer")]


@pytest.mark.parametrize("mode", ["polled", "blocking", "awaited"])
def test_an_error_the_generator_does_not_handle_reaches_the_caller(mode: str) -> None:
    def steps():
        yield ask("boom")

    if mode == "polled":
        run = run_polled(steps())
        assert isinstance(run.error, ValueError) and "no answer" in str(run.error)
        return
    with pytest.raises(ValueError, match="no answer"):
        if mode == "blocking":
            run_blocking(steps(), time.monotonic() + 5, TimeoutError, answer_now)
        else:
            asyncio.run(drive_async(steps(), do_async))


def test_a_generator_without_steps_returns_at_once() -> None:
    def steps():
        return "done"
        yield  # pragma: no cover - makes it a generator

    assert run_blocking(steps(), time.monotonic() + 5, TimeoutError) == "done"


def test_the_polled_runner_never_blocks_and_says_how_long_until_its_next_look() -> None:
    answer = Future()
    woken: list = []

    def steps():
        yield Sleep(2.0)
        got = yield Await(answer)
        return got

    run = StepRun(steps(), on_wait=woken.append)
    assert run.advance(10.0) == 2.0  # asleep until 12
    assert run.advance(11.5) == pytest.approx(0.5)
    wait = run.advance(12.0)
    assert wait is not None and wait <= 0.1 and woken == [answer]  # waiting for the answer
    answer.set_result("here")
    assert run.advance(12.1) is None and run.value == "here"


def test_a_request_waits_for_a_ready_connection_and_a_failed_start_is_thrown_in() -> None:
    seen: list = []

    def steps():
        try:
            yield ask(1)
        except OSError as exc:
            seen.append(str(exc))
        return (yield ask(2))

    ready = {"now": False}

    def start(step):
        if not ready["now"]:
            return None  # no connection ready yet
        if step.build(0)[2] == 1:
            raise OSError("refused")
        return answer_now(step)

    run = StepRun(steps())
    assert run.advance(0.0, start) is not None and run.request is not None
    ready["now"] = True
    assert run.advance(0.1, start) is None
    assert seen == ["refused"] and run.value == 43


def test_a_late_answer_has_the_callers_error_thrown_in() -> None:
    never = Future()
    seen: list = []

    def steps():
        try:
            yield Await(never)
        except TimeoutError as exc:
            seen.append(str(exc))
        return "gave up"

    t0 = time.monotonic()
    assert run_blocking(steps(), t0 + 0.05, lambda: TimeoutError("late")) == "gave up"
    assert seen == ["late"] and time.monotonic() - t0 < 5


def test_the_version_cap_may_depend_on_the_brokers_features() -> None:
    fixed = Request(1, METADATA, lambda v: v, 3)
    by_features = Request(1, METADATA, lambda v: v, lambda f: None if f.get("x", 0) >= 2 else 4)
    assert fixed.version(12, {}) == 3 and fixed.version(2, {}) == 2
    assert by_features.version(12, {"x": 1}) == 4 and by_features.version(12, {"x": 2}) == 12
    assert Request(1, METADATA, lambda v: v).version(9, {}) == 9


def test_something_else_yielded_is_an_error_thrown_in() -> None:
    def steps():
        try:
            yield ("sleep", 1)
        except TypeError as exc:
            return str(exc)

    run = run_polled(steps())
    assert run.value.startswith("not a step")


def test_cancelling_the_awaiting_task_is_not_thrown_into_the_generator() -> None:
    seen: list = []

    def steps():
        try:
            yield Await(None)
        except BaseException as exc:  # noqa: BLE001 - recording what arrives
            seen.append(type(exc).__name__)
            raise

    async def forever(step):
        await asyncio.Event().wait()

    async def main():
        task = asyncio.ensure_future(drive_async(steps(), forever))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)

    asyncio.run(main())
    # CancelledError is not an Exception: it ends the task instead of being thrown in as a
    # failed step (the generator is closed when it is collected: GeneratorExit).
    assert "CancelledError" not in seen


@pytest.mark.parametrize("mode", ["polled", "blocking", "awaited"])
def test_now_is_answered_from_the_runners_clock_and_refresh_is_the_shells(mode: str) -> None:
    refreshed: list = []

    def steps():
        t0 = yield NOW
        yield Refresh(2.5)
        t1 = yield NOW
        return t0, t1

    def start(step):
        assert isinstance(step, Refresh)
        refreshed.append(step.timeout)
        fut = Future()
        fut.set_result(None)
        return fut

    if mode == "polled":
        run = StepRun(steps())
        assert run.advance(7.0, start) is None
        t0, t1 = run.value
        assert t0 == t1 == 7.0
    elif mode == "blocking":
        before = time.monotonic()
        t0, t1 = run_blocking(steps(), before + 5, TimeoutError, start)
        assert before <= t0 <= t1 <= time.monotonic()
    else:
        async def do_step(step):
            return start(step).result(0)

        t0, t1 = asyncio.run(drive_async(steps(), do_step, lambda: 42.0))
        assert t0 == t1 == 42.0
    assert refreshed == [2.5]


def test_the_blocking_runner_sleeps_by_the_shells_sleep_and_gives_up_on_a_connection_at_the_deadline():
    slept: list = []

    def steps():
        yield Sleep(0.01)
        try:
            yield ask(1)
        except TimeoutError as exc:
            return str(exc)

    t0 = time.monotonic()
    got = run_blocking(steps(), t0 + 0.2, lambda: TimeoutError("no connection in time"),
                       lambda step: None, sleep=lambda s: (slept.append(s), time.sleep(s)))
    assert got == "no connection in time" and slept[0] == pytest.approx(0.01)
    assert time.monotonic() - t0 < 5
