"""protocol/steps.py: the loop that runs a *_steps generator, blocking and awaited."""

from __future__ import annotations

import asyncio

import pytest

from kafkawire.protocol.steps import drive, drive_async


def conversation(log: list):
    """Asks twice; the second answer fails and is handled; returns what it saw."""
    first = yield ("ask", 1)
    log.append(("answer", first))
    try:
        yield ("ask", "boom")
    except ValueError as exc:
        log.append(("thrown", str(exc)))
    return first * 10


def do(step):
    _, arg = step
    if arg == "boom":
        raise ValueError("no answer")
    return arg + 41


async def do_async(step):
    await asyncio.sleep(0)
    return do(step)


@pytest.mark.parametrize("mode", ["blocking", "awaited"])
def test_answers_are_sent_in_errors_thrown_in_and_the_result_returned(mode: str) -> None:
    log: list = []
    if mode == "blocking":
        result = drive(conversation(log), do)
    else:
        result = asyncio.run(drive_async(conversation(log), do_async))
    assert result == 420
    assert log == [("answer", 42), ("thrown", "no answer")]


@pytest.mark.parametrize("mode", ["blocking", "awaited"])
def test_an_error_the_generator_does_not_handle_reaches_the_caller(mode: str) -> None:
    def steps():
        yield ("ask", "boom")

    with pytest.raises(ValueError, match="no answer"):
        if mode == "blocking":
            drive(steps(), do)
        else:
            asyncio.run(drive_async(steps(), do_async))


def test_a_generator_without_steps_returns_at_once() -> None:
    def steps():
        return "done"
        yield  # pragma: no cover - makes it a generator

    calls: list = []
    assert drive(steps(), calls.append) == "done"
    assert calls == []


def test_cancelling_the_awaiting_task_is_not_thrown_into_the_generator() -> None:
    seen: list = []

    def steps():
        try:
            yield ("wait", None)
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
