"""Consumer groups in the asyncio shell: an asyncio task drives the same membership
machine the sync consumer's group thread does (classic, or KIP-848's with
``group_protocol="consumer"``: GroupDriver builds it), over a coordinator connection of
its own, and :class:`AsyncConsumerGroup` is the shared
:class:`~kafkawire.protocol.group_member.ConsumerGroup` (the same rebalance, commit and
offset logic as the sync consumer's) with its operations awaited on the consumer's
AsyncCluster (the asyncio shell's one step runner).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from kafkawire.aio.cluster import AsyncCluster
from kafkawire.core.config import Config
from kafkawire.core.group import GroupDriver, settle
from kafkawire.errors import KafkaConnectionError, KafkaTimeoutError
from kafkawire.protocol.group import GroupMembership, Outgoing
from kafkawire.protocol.group_member import ConsumerGroup

__all__ = ["AsyncGroupDriver", "AsyncConsumerGroup"]


class AsyncGroupDriver(GroupDriver):
    """The group thread's asyncio twin, with the same interface (see GroupThread)."""

    def __init__(self, config: Config, brokers: dict[int, tuple[str, int]], wake_caller: Callable[[], None]):
        self.machine = self._make_machine(config)
        self.cluster = AsyncCluster(config)
        self.cluster.meta.brokers.update(brokers)
        self.wake_caller = wake_caller
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._events: list[Any] = []
        self._requests: set[asyncio.Task] = set()
        self._stop = False
        self.last_poll = self._loop.time()
        self._task = asyncio.ensure_future(self._run())

    def new_future(self) -> asyncio.Future:
        return self._loop.create_future()

    def now(self) -> float:
        """The loop's clock: the machine's, the last poll's and the consumer's deadlines
        (a loop's clock need not be time.monotonic())."""
        return self._loop.time()

    def call(self, fn: Callable[[GroupMembership, float], Any]) -> asyncio.Future:
        """Run ``fn(machine, now)`` now (the machine lives on this loop); its result in
        a done future, as the group thread gives it."""
        fut = self.new_future()
        try:
            fut.set_result(fn(self.machine, self._loop.time()))
        except Exception as exc:  # noqa: BLE001 - handed to the caller
            fut.set_exception(exc)
        self._wake.set()
        return fut

    def take_events(self) -> list[Any]:
        ev, self._events = self._events + self.machine.events(), []
        return ev

    def snapshot(self) -> dict[str, Any]:
        return self.machine.snapshot(self._loop.time())

    def send(self, out: Outgoing | None) -> asyncio.Future | None:
        if out is None:
            return None
        out.token = self.new_future()
        self._spawn(out)
        return out.token

    async def stop(self, timeout: float) -> None:
        self._stop = True
        tasks = [self._task, *self._requests]
        for t in tasks:
            t.cancel()
        await asyncio.wait(tasks, timeout=max(0.001, timeout))
        await self.cluster.close()

    # -- the task --------------------------------------------------------------------------

    async def _run(self) -> None:
        m = self.machine
        while not self._stop:
            now = self._loop.time()
            m.poll_called(self.last_poll)
            self._expire_held(now)
            for out in m.poll(now):
                self._spawn(out)
            ev = m.events()
            if ev:
                self._log_events(ev)
                self._events.extend(ev)
                self.wake_caller()
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), m.next_wakeup(now))
            except asyncio.TimeoutError:
                pass

    def _spawn(self, out: Outgoing) -> None:
        task = asyncio.ensure_future(self._exchange(out))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _exchange(self, out: Outgoing) -> None:
        deadline = self._loop.time() + out.timeout
        try:
            if out.to_coordinator:
                coord = self.machine.coordinator
                if coord is None:
                    if out.kind in ("commit", "fetch_offsets"):
                        self._requeue(out)
                    else:
                        self.machine.on_failure(out, KafkaConnectionError("the coordinator is unknown"),
                                                self._loop.time())
                    return
                node, host, port = coord
                self.cluster.meta.brokers[node] = (host, port)
                conn = await self.cluster.connection(node, deadline)
            else:
                conn = await self.cluster.any_connection(deadline)
            if self._refused(out, conn.protocol):
                return
            resp = await conn.request(out.api, out.request, timeout=max(0.001, deadline - self._loop.time()))
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self._finish(out, None, exc, self._loop.time())
        except asyncio.CancelledError:
            settle(out.token, exc=KafkaConnectionError("the consumer's group task has stopped"))
            raise
        else:
            self._finish(out, resp, None, self._loop.time())
        finally:
            self._wake.set()


class AsyncConsumerGroup(ConsumerGroup):
    """ConsumerGroup for the asyncio consumer: the rebalance logic is the same; the
    operations that wait for the coordinator are awaited."""

    def __init__(self, consumer: Any, wake_caller: Callable[[], None]):
        driver = AsyncGroupDriver(consumer.config, dict(consumer.cluster.meta.brokers), wake_caller)
        super().__init__(consumer, driver, driver.now())

    async def _run(self, steps: Any, deadline: float) -> Any:
        return await self.consumer.cluster.run(steps, deadline, self.coordinator_name)

    async def commit_wait(self, offsets: dict[Any, int] | None, deadline: float) -> None:
        await self._run(self.commit_steps(offsets, deadline), deadline)

    async def committed_wait(self, partitions: list[Any], deadline: float) -> dict[Any, int | None]:
        return await self._run(self.committed_steps(partitions, deadline), deadline)

    async def unsubscribe_wait(self, deadline: float) -> None:
        await self._run(self.unsubscribe_steps(deadline), deadline)

    async def close_wait(self, deadline: float) -> None:
        try:
            await self._run(self.close_steps(deadline), deadline)
        finally:
            await self.driver.stop(max(0.0, deadline - self.driver.now()))
