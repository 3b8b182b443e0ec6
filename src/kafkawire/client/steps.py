"""The sync shell's blocking runner for protocol/steps.py's step generators."""

from __future__ import annotations

import time
from typing import Any, Callable, Generator

from kafkawire.protocol.steps import StepRun

__all__ = ["run_blocking"]


def run_blocking(steps: Generator[Any, Any, Any], deadline: float, on_late: Callable[[], BaseException],
                 start: Callable[[Any], Any] | None = None, *,
                 sleep: Callable[[float], Any] = time.sleep) -> Any:
    """Run ``steps`` to its end here, blocking, by ``deadline`` (time.monotonic()): an
    answer not in by then, or a request that found no connection ready by then, has
    ``on_late()`` thrown in instead.  ``start`` begins a Request or Refresh step (see
    StepRun.advance); ``sleep(seconds)`` waits out a Sleep step (a cluster's poll, so
    that its connections move on meanwhile).  Returns the generator's value or raises
    its error."""
    run = StepRun(steps, clock=time.monotonic)
    while True:
        now = time.monotonic()
        wait = run.advance(now, start)
        if wait is None:
            break
        if run.waiting is not None:
            if not run.waiting.wait(max(0.0, deadline - time.monotonic())):
                run.fail(on_late(), time.monotonic())
        elif run.request is not None and now >= deadline:
            run.fail(on_late(), now)
        else:
            sleep(wait)
    if run.error is not None:
        raise run.error
    return run.value
