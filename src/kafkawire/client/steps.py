"""The sync shell's blocking runner for protocol/steps.py's step generators."""

from __future__ import annotations

import time
from typing import Any, Callable, Generator

from kafkawire.protocol.steps import Request, StepRun

__all__ = ["run_blocking"]


def run_blocking(steps: Generator[Any, Any, Any], deadline: float, on_late: Callable[[], BaseException],
                 start: Callable[[Request], Any] | None = None) -> Any:
    """Run ``steps`` to its end here, blocking, by ``deadline`` (time.monotonic()): an
    answer not in by then has ``on_late()`` thrown in instead.  Returns the generator's
    value or raises its error."""
    run = StepRun(steps)
    while True:
        now = time.monotonic()
        wait = run.advance(now, start)
        if wait is None:
            break
        if run.waiting is not None:
            if not run.waiting.wait(max(0.0, deadline - now)):
                run.fail(on_late(), time.monotonic())
        else:
            time.sleep(wait)
    if run.error is not None:
        raise run.error
    return run.value
