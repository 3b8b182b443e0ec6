"""A runner for protocol step generators on a fake clock (the asyncio runner,
drive_async, with Sleep moving the clock on instead of waiting): what a generator
decides, step by step, with no broker and no real time."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from kafkawire.protocol.steps import Sleep, drive_async


class Sim:
    def __init__(self, answer: Callable[[Any, "Sim"], Any], now: float = 100.0):
        self.now = now
        self.answer = answer  # (step, sim) -> value, or raises; Sleep never reaches it
        self.log: list[Any] = []

    def run(self, steps: Any) -> Any:
        async def do_step(step: Any) -> Any:
            self.log.append(step)
            if isinstance(step, Sleep):
                self.now += step.seconds
                return None
            return self.answer(step, self)

        return asyncio.run(drive_async(steps, do_step, lambda: self.now))

    def kinds(self) -> list[str]:
        return [type(s).__name__ if not hasattr(s, "api") else s.api.name for s in self.log]
