"""The client suites run against both shells: the ``shell`` fixture gives kafkawire's
sync Producer and Consumer, or its asyncio AsyncProducer and AsyncConsumer behind the
same (blocking) interface, so one test body checks both over the same I/O-free core.

The asyncio clients of a test process share one event loop, run while any of them is
called: as in an application, one consumer's group task goes on while another's poll()
runs.  (With a loop each, a group member idle between calls answered its JoinGroup only
at its next call; the librdkafka mock refuses a follower's SyncGroup that comes after the
leader's with INVALID_REQUEST, where Kafka answers it.)"""

from __future__ import annotations

import asyncio
import atexit
import inspect
from types import SimpleNamespace
from typing import Any

import pytest

from kafkawire.aio import AsyncAdmin, AsyncConsumer, AsyncProducer
from kafkawire.client.admin import Admin
from kafkawire.client.consumer import Consumer
from kafkawire.client.producer import Producer


_loop: asyncio.AbstractEventLoop | None = None


def _shared_loop() -> asyncio.AbstractEventLoop:
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
        atexit.register(_loop.close)
    return _loop


class _AsyncShell:
    """An asyncio client whose coroutines are run to completion on the shared loop."""

    client_class: Any = None

    def __init__(self, *config: Any, **options: Any):
        self._loop = _shared_loop()
        self._closed = False
        self._client = self.client_class(*config, **options)
        try:
            self._run(self._client.start())
        except BaseException:
            self.close()
            raise

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self._run(attr(*args, **kwargs))
        return attr

    def close(self, *args: Any) -> None:
        if not self._closed:
            self._closed = True
            self._run(self._client.close(*args))

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncConsumerShell(_AsyncShell):
    client_class = AsyncConsumer


class _RecordFutureShell:
    def __init__(self, run: Any, fut: Any):
        self._run = run
        self._fut = fut

    def result(self, timeout: float | None = None) -> Any:
        if self._fut.done():
            return self._fut.result()

        async def metadata() -> Any:
            return await self._fut

        return self._run(asyncio.wait_for(metadata(), timeout))

    def exception(self, timeout: float | None = None) -> Any:
        try:
            self.result(timeout)
        except asyncio.TimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - the record's failure is the answer
            return exc
        return None


class AsyncProducerShell(_AsyncShell):
    client_class = AsyncProducer

    def send(self, *args: Any, **kwargs: Any) -> _RecordFutureShell:
        return _RecordFutureShell(self._run, self._run(self._client.send(*args, **kwargs)))


SHELLS = {
    "sync": SimpleNamespace(Producer=Producer, Consumer=Consumer),
    "asyncio": SimpleNamespace(Producer=AsyncProducerShell, Consumer=AsyncConsumerShell),
}


@pytest.fixture(params=sorted(SHELLS))
def shell(request: pytest.FixtureRequest) -> Any:
    """``shell.Producer(**config)`` and ``shell.Consumer(**config)`` of the shell this run tests."""
    return SHELLS[request.param]


class AsyncAdminShell(_AsyncShell):
    """AsyncAdmin behind Admin's blocking interface: its calls run on the shared loop."""

    client_class = AsyncAdmin


ADMINS = {"sync": Admin, "asyncio": AsyncAdminShell}


@pytest.fixture(params=sorted(ADMINS))
def make_admin(request: pytest.FixtureRequest) -> Any:
    """Admin, or AsyncAdmin behind the same interface."""
    return ADMINS[request.param]
