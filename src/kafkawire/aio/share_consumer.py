"""The asyncio share consumer (KIP-932): :class:`kafkawire.ShareConsumer`'s calls as
coroutines, over the same I/O-free :class:`~kafkawire.protocol.share_group.ShareGroupMember`.

Each request the member asks for is sent by a task of its own on the cluster's
connections; its answer is handed back to the member by the next step of whichever call
is running.  As in the sync shell nothing runs between calls: poll() at least every few
seconds.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

from kafkawire.aio.cluster import AsyncCluster
from kafkawire.core.config import Config, merge_options
from kafkawire.errors import NoBrokersAvailableError
from kafkawire.protocol.fetcher import TopicPartition
from kafkawire.protocol.share_consumer_base import ShareConsumerBase
from kafkawire.protocol.share_group import (
    AcknowledgementCallback,
    Send,
    ShareConsumerRecord,
    member_for,
    share_mode,
)

__all__ = ["AsyncShareConsumer"]


class AsyncShareConsumer(ShareConsumerBase):
    """An asyncio member of share group ``group_id``; options and calls as
    :class:`kafkawire.ShareConsumer`'s (``await`` poll, commit_sync, close)."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **options: Any):
        opts, mode = share_mode(merge_options("AsyncShareConsumer", config, options))
        self.config = Config.consumer(**opts)
        self._member = member_for(self.config, mode)
        self.cluster = AsyncCluster(self.config)
        self._answers: list[tuple[Send, Any, BaseException | None]] = []
        self._tasks: set[asyncio.Task] = set()
        self._waiter: asyncio.Future | None = None
        self._callback: AcknowledgementCallback | None = None
        self._started = False
        self._closed = False
        self._answer_timeout = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000.0

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    async def start(self, timeout: float | None = None) -> None:
        """Fetch the cluster's metadata (done by the first call that needs it otherwise)."""
        self._check_open()
        if not self._started:
            await self.cluster.bootstrap(self._timeout(timeout))
            self._started = True

    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ShareConsumerRecord]:
        """Records acquired for this member, waiting up to ``timeout`` seconds for some."""
        self._check_open()
        deadline = self._now() + timeout
        if not self._started:
            try:
                await self.start(max(0.001, timeout))
            except NoBrokersAvailableError as exc:
                if not exc.retriable:
                    raise
                return []  # no broker up yet within this poll's time: the next asks again
        m = self._member
        limit = max_records or self.config.max_poll_records
        out = m.take_records(limit)
        while True:
            self._step(fetch=True)
            if not out:
                out = m.take_records(limit)
            if out:
                self._step(fetch=True)
                return out
            if self._now() >= deadline:
                return out
            await self._wait(deadline)

    async def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, BaseException | None]:
        """As :meth:`kafkawire.ShareConsumer.commit_sync`."""
        self._check_open()
        deadline = self._now() + self._timeout(timeout)
        c = self._member.commit(self._now())
        if c.done:
            return dict(c.results)  # nothing held: nothing to send
        await self.start(self._timeout(timeout))
        while True:
            self._step(fetch=False)
            if c.done:
                return dict(c.results)
            if self._now() >= deadline:
                raise self._commit_timeout(c, timeout)
            await self._wait(deadline)

    async def commit_async(self) -> None:
        """Send the acknowledgements held now; results reach the callback later."""
        await self.start()
        self._member.commit(self._now())
        self._step(fetch=False)

    async def close(self, timeout: float | None = None) -> None:
        """As :meth:`kafkawire.ShareConsumer.close`."""
        if self._closed:
            return
        try:
            if self._started and not self.cluster.forked:
                deadline = self._now() + self._timeout(timeout)
                self._member.close(self._now())
                while not self._member.closed and self._now() < deadline:
                    self._step(fetch=False)
                    if self._member.closed:
                        break
                    await self._wait(deadline)
        finally:
            self._closed = True
            for task in self._tasks:
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.cluster.close()

    async def __aenter__(self) -> AsyncShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the shell's loop -----------------------------------------------------------------

    def _check_open(self) -> None:
        super()._check_open()
        self.cluster.check_fork()

    def _step(self, fetch: bool) -> None:
        self._check_open()
        super()._step(fetch)

    def _start(self, send: Send) -> None:
        task = asyncio.ensure_future(self._send(send))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, send: Send) -> None:
        try:
            deadline = self._now() + self.config.request_timeout_ms / 1000.0
            c = self.cluster
            conn = await (c.any_connection(deadline) if send.node is None else c.connection(send.node, deadline))
            resp = await conn.request(send.api, send.request, conn.version_for(send.api),
                                      timeout=self._answer_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the member decides what a failure means
            self._answers.append((send, None, exc))
        else:
            self._answers.append((send, resp, None))
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _wait(self, deadline: float) -> None:
        if self._answers:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(self._wait_time(deadline, self._now()), self._wake)
        refresh = self.cluster.refreshing()
        if refresh is not None:
            refresh.add_done_callback(lambda _f: self._wake())
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
