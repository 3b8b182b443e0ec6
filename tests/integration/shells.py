"""The client suites run against both shells: ``consumer_shell`` is kafkawire's sync
Consumer, or its asyncio AsyncConsumer behind the same (blocking) interface on an event
loop of its own, so one test body checks both over the same I/O-free core."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from kafkawire.aio import AsyncConsumer
from kafkawire.client.consumer import Consumer


class AsyncConsumerShell:
    """An AsyncConsumer whose coroutines are run to completion on a private loop."""

    def __init__(self, **config: Any):
        self._loop = asyncio.new_event_loop()
        self._consumer = AsyncConsumer(**config)
        try:
            self._run(self._consumer.start())
        except BaseException:
            self.close()
            raise

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._consumer, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self._run(attr(*args, **kwargs))
        return attr

    def close(self) -> None:
        if not self._loop.is_closed():
            self._run(self._consumer.close())
            self._loop.close()

    def __enter__(self) -> AsyncConsumerShell:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(params=["sync", "asyncio"])
def consumer_shell(request: pytest.FixtureRequest) -> Any:
    """``consumer_shell(**config)``: a consumer of the shell this run tests."""
    return Consumer if request.param == "sync" else AsyncConsumerShell
