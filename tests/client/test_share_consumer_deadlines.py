"""Share consumers with no broker to talk to: every call ends by its deadline, without
spinning (both shells)."""

from __future__ import annotations

import asyncio
import resource
import socket
import time

import pytest

from kafkawire import ShareConsumer
from kafkawire.aio.share_consumer import AsyncShareConsumer

pytestmark = pytest.mark.deadlines


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return port


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def test_sync_share_consumer_calls_end_at_their_deadlines():
    c = ShareConsumer(bootstrap_servers=f"127.0.0.1:{_closed_port()}", group_id="g", request_timeout_ms=1000,
                      reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
    c.subscribe(["t"])
    start, cpu = time.monotonic(), _cpu()
    assert c.poll(1.0) == []
    assert 0.95 < time.monotonic() - start < 1.5
    assert _cpu() - cpu < 0.3  # waited on the selector, not in a loop
    assert c.commit_sync(0.5) == {}  # nothing to acknowledge: done at once
    start = time.monotonic()
    c.close(0.5)
    assert time.monotonic() - start < 1.0


def test_async_share_consumer_calls_end_at_their_deadlines():
    async def main() -> None:
        c = AsyncShareConsumer(bootstrap_servers=f"127.0.0.1:{_closed_port()}", group_id="g",
                               request_timeout_ms=1000, reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
        c.subscribe(["t"])
        start, cpu = time.monotonic(), _cpu()
        assert await c.poll(0.5) == []
        assert await c.poll(0.5) == []
        assert 0.95 < time.monotonic() - start < 1.6
        assert _cpu() - cpu < 0.3
        assert await c.commit_sync(0.3) == {}  # nothing to acknowledge: done at once
        start = time.monotonic()
        await c.close(0.5)
        assert time.monotonic() - start < 1.0

    asyncio.run(asyncio.wait_for(main(), 20))
