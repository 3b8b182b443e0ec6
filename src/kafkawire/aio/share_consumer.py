"""The asyncio share consumer (KIP-932): :class:`kafkawire.ShareConsumer`'s calls as
coroutines, over the same I/O-free :class:`~kafkawire.protocol.share_group.ShareGroupMember`.

Each request the member asks for is sent by a task of its own on the cluster's
connections; its answer is handed back to the member by the next step of whichever call
is running.  As in the sync shell nothing runs between calls: poll() at least every few
seconds.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, Mapping

from kafkawire.aio.cluster import AsyncCluster
from kafkawire.core.config import Config, merge_options
from kafkawire.errors import ClientClosedError, KafkaTimeoutError, NoBrokersAvailableError
from kafkawire.protocol.fetcher import TopicPartition
from kafkawire.protocol.share_group import (
    ACCEPT,
    AcknowledgementCallback,
    Failed,
    MetadataNeeded,
    Send,
    ShareConsumerRecord,
    member_for,
    share_mode,
)

__all__ = ["AsyncShareConsumer"]


class AsyncShareConsumer:
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

    @property
    def member_id(self) -> str:
        return self._member.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        return self._member.acquisition_lock_timeout_ms

    def subscribe(self, topics: Iterable[str]) -> None:
        self._check_open()
        self._member.subscribe(topics, self._now())
        self.cluster.interest.update(self._member.subscription)

    def subscription(self) -> list[str]:
        return list(self._member.subscription)

    def assignment(self) -> set[TopicPartition]:
        return set(self._member.assignment)

    def unsubscribe(self) -> None:
        self._check_open()
        self._member.unsubscribe(self._now())

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCallback | None) -> None:
        """As :meth:`kafkawire.ShareConsumer.set_acknowledgement_commit_callback`."""
        self._callback = callback

    def acknowledge(self, record: Any, type: int = ACCEPT) -> None:
        self._check_open()
        self._member.acknowledge(record, type)

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
                raise KafkaTimeoutError(
                    f"commit_sync: no answer for the acknowledgements of {sorted(c.acks)} "
                    f"within {self._timeout(timeout):g}s")
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

    def _timeout(self, timeout: float | None) -> float:
        return self.config.request_timeout_ms / 1000.0 if timeout is None else timeout

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the share consumer is closed")
        self.cluster.check_fork()

    def _step(self, fetch: bool) -> None:
        self._check_open()
        m = self._member
        answers, self._answers = self._answers, []
        m.on_answers(answers, self._now(), self.cluster.meta)
        failed = None
        for ev in m.events():
            if isinstance(ev, MetadataNeeded):
                self.cluster.interest.update(ev.topics)
                self.cluster.meta.need_refresh = True
            elif isinstance(ev, Failed):
                failed = ev.error
        self.cluster.maybe_refresh()
        for send in m.poll(self._now(), self.cluster.meta, fetch):
            task = asyncio.ensure_future(self._send(send))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if self._callback is not None:
            for c in m.completions():
                self._callback(c.offsets, c.error)
        else:
            m.completions()
        if failed is not None:
            raise failed

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
        now = self._now()
        wait = deadline - now
        wake = self._member.next_wakeup(now)
        if wake is not None:
            wait = min(wait, wake - now)
        if self.cluster.meta.need_refresh:
            wait = min(wait, self.config.retry_backoff_ms / 1000.0)
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(max(wait, 0.0), self._wake)
        refresh = self.cluster.refreshing()
        if refresh is not None:
            refresh.add_done_callback(lambda _f: self._wake())
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
