"""Running a ``*_steps`` generator to its end: the transaction coordinator exchanges
(protocol/transactions.py) and the group's commits, offset lookups and leaving
(client/group.py).

Such a generator yields the step it needs done next and is resumed with the step's
result, or has the exception that stopped the step thrown in; its return value is the
outcome.  The shells differ only in how a step is done (blocking, awaited, or polled by
the sync producer's sender thread, which must not block: client/producer.py _StepRun),
so the loop around it is here, once for blocking callers and once for coroutines.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Generator

__all__ = ["drive", "drive_async"]


def drive(steps: Generator[Any, Any, Any], do_step: Callable[[Any], Any]) -> Any:
    """Run ``steps`` to its end, each step done by ``do_step(step)``: what it returns is
    sent in, what it raises is thrown in.  Returns the generator's return value."""
    value: Any = None
    exc: BaseException | None = None
    while True:
        try:
            step = steps.throw(exc) if exc is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        value, exc = None, None
        try:
            value = do_step(step)
        except Exception as err:  # noqa: BLE001 - thrown into the generator
            exc = err


async def drive_async(steps: Generator[Any, Any, Any], do_step: Callable[[Any], Awaitable[Any]]) -> Any:
    """:func:`drive` for coroutines: each step is ``await do_step(step)``."""
    value: Any = None
    exc: BaseException | None = None
    while True:
        try:
            step = steps.throw(exc) if exc is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        value, exc = None, None
        try:
            value = await do_step(step)
        except Exception as err:  # noqa: BLE001 - thrown into the generator
            exc = err
