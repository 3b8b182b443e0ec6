"""The asyncio consumer, driving the same I/O-free
:class:`~kafkawire.protocol.fetcher.Fetcher` as the sync :class:`~kafkawire.Consumer`:
what to fetch, what the answers mean and the records handed out are decided there once.

::

    async with AsyncConsumer(bootstrap_servers="127.0.0.1:9092", auto_offset_reset="earliest") as c:
        c.assign([("events", 0)])
        async for record in c:
            ...

With ``group_id``, ``subscribe()`` joins the group as the sync consumer does: the same
rebalance, commit and offset logic (:class:`~kafkawire.aio.group.AsyncConsumerGroup`),
the membership state machine driven by an asyncio task.

Every await is bounded: ``poll(timeout)`` returns by its timeout, the offset lookups and
commits by theirs (default request_timeout_ms).  One task uses a consumer at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Iterable, Mapping

from kafkawire.aio.cluster import AsyncCluster
from kafkawire.aio.group import AsyncConsumerGroup
from kafkawire.core.config import Config, merge_options
from kafkawire.errors import ClientClosedError, NoBrokersAvailableError
from kafkawire.protocol import apis
from kafkawire.protocol.fetcher import (
    EARLIEST,
    LATEST,
    ConsumerRecord,
    FetchedBatch,
    Fetcher,
    OffsetAndTimestamp,
    TopicPartition,
)
from kafkawire.protocol.fetcher import as_topic_partition as _tp
from kafkawire.protocol.consumer_base import ConsumerBase
from kafkawire.protocol.metadata import check_topic_name, list_topics_steps, missing_partitions_steps
from kafkawire.protocol.offsets import check_timestamps, list_offsets_steps, offsets_and_times, reset_steps

__all__ = ["AsyncConsumer"]

FETCH = apis.get("Fetch")


class AsyncConsumer(ConsumerBase):
    """An asyncio Kafka consumer; options as :class:`kafkawire.Consumer`'s."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **options: Any):
        self.config = c = Config.consumer(**merge_options("AsyncConsumer", config, options))
        self._group: AsyncConsumerGroup | None = None
        # What a poll() with nothing to return waits on: done by _wake() (a fetch's
        # answer applied, or the group has news) or its timer.
        self._waiter: asyncio.Future | None = None
        self.cluster = AsyncCluster(c)
        self._fetcher = Fetcher(c)
        # broker id -> done once its Fetch's answer (or failure) is applied: a task while
        # the connection is set up, else a future the answer's callback resolves.
        self._inflight: dict[int, asyncio.Future] = {}
        self._started = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, timeout: float | None = None) -> None:
        """Fetch the cluster's metadata (done by the first call that needs it otherwise)."""
        self._check_open()
        if not self._started:
            await self.cluster.bootstrap(self._timeout(timeout))
            if self.config.group_id is not None:
                self._group = AsyncConsumerGroup(self, self._wake)
            self._started = True

    async def close(self, timeout: float | None = None) -> None:
        """Leave the group (committing first with auto-commit) and close the
        connections, within ``timeout`` seconds (default request_timeout_ms)."""
        if self._closed:
            return
        if self.cluster.forked:  # a forked child's copy: the parent's loop owns the tasks
            self._closed = True
            await self.cluster.close()
            return
        try:
            if self._group is not None:
                await self._group.close_wait(self._now() + self._timeout(timeout))
        finally:
            self._closed = True
        for task in self._inflight.values():
            task.cancel()
        await asyncio.gather(*self._inflight.values(), return_exceptions=True)
        self._inflight.clear()
        await self.cluster.close()

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    # -- assignment and positions ------------------------------------------------------------

    def assign(self, partitions: Iterable[Any]) -> None:
        """Consume exactly these (topic, partition) pairs (replacing any earlier set).
        A partition its topic lacks is refused (UnknownPartitionError, naming the
        topic's partitions) by the next call, once a Metadata answer says so."""
        if self._assign(self._assignment(partitions)):  # a leader unknown: the next poll refreshes
            self.cluster.meta.need_refresh = True

    async def seek_to_beginning(self, partitions: Iterable[Any] | None = None, timeout: float | None = None) -> None:
        await self._seek_to(EARLIEST, partitions, timeout)

    async def seek_to_end(self, partitions: Iterable[Any] | None = None, timeout: float | None = None) -> None:
        await self._seek_to(LATEST, partitions, timeout)

    async def _seek_to(self, which: int, partitions: Iterable[Any] | None, timeout: float | None) -> None:
        tps = list(self._fetcher.assigned) if partitions is None else [_tp(x) for x in partitions]
        for tp, (offset, _ts) in (await self._list_offsets({tp: which for tp in tps}, self._timeout(timeout))).items():
            self.seek(tp, offset)

    async def position(self, partition: Any, timeout: float | None = None) -> int:
        """The offset of the next record poll() returns for ``partition``."""
        st = self._state(partition)
        if st.position is None:
            await self._reset_positions([_tp(partition)], self._timeout(timeout))
        return st.position  # type: ignore[return-value]

    async def beginning_offsets(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int]:
        got = await self._list_offsets({_tp(x): EARLIEST for x in partitions}, self._timeout(timeout))
        return {tp: v[0] for tp, v in got.items()}

    async def end_offsets(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int]:
        got = await self._list_offsets({_tp(x): LATEST for x in partitions}, self._timeout(timeout))
        return {tp: v[0] for tp, v in got.items()}

    async def offsets_for_times(self, timestamps: dict[Any, int], timeout: float | None = None
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        query = check_timestamps(timestamps)
        return offsets_and_times(query, await self._list_offsets(query, self._timeout(timeout)))

    # The lookups and their retries are protocol/offsets.py's; they run here, awaited.

    async def _list_offsets(self, query: dict[TopicPartition, int], timeout: float
                            ) -> dict[TopicPartition, tuple[int, int]]:
        self._check_open()
        steps = list_offsets_steps(self.cluster.meta, query, self._fetcher.isolation, timeout,
                                   self._fetcher.retry_backoff)
        return await self.cluster.run(steps, self._now() + timeout, "ListOffsets")

    async def _reset_positions(self, tps: list[TopicPartition], timeout: float) -> None:
        steps = reset_steps(self._fetcher, self.cluster.meta, tps, timeout)
        await self.cluster.run(steps, self._now() + timeout, "ListOffsets")

    # -- the cluster's topics (as the producer's) -------------------------------------------

    async def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """Partition ids of ``topic``, waiting up to ``timeout`` seconds (default
        request_timeout_ms) for its metadata."""
        self._check_open()
        check_topic_name(topic)
        if not self._started:
            await self.start(timeout)
        return await self.cluster.partitions_for(topic, self._timeout(timeout))

    async def list_topics(self, timeout: float | None = None, include_internal: bool = False
                          ) -> dict[str, list[int]]:
        """Every topic of the cluster and its partition ids (internal ones only with
        ``include_internal``), within ``timeout`` seconds (default request_timeout_ms)."""
        self._check_open()
        if not self._started:
            await self.start(timeout)
        return await self.cluster.run(list_topics_steps(include_internal), self._now() + self._timeout(timeout),
                                      "Metadata")

    # -- fetching --------------------------------------------------------------------------

    def _send_fetches(self) -> None:
        f = self._fetcher
        due, offsets, buffered = f.due(self.cluster.meta, self._now(), self._inflight)
        timeout = f.answer_timeout
        for node, tps in due:
            req, positions = f.request(tps, offsets, buffered, self.cluster.topics)
            conn = self.cluster.ready_connection(node)
            if conn is not None:
                # Written now; the answer is applied in the transport's read callback
                # and wakes the poll: no task, no turn of the loop in between.
                done = asyncio.get_running_loop().create_future()
                try:
                    sent = conn.send_nowait(FETCH, req, conn.version_for(FETCH), on_answer=self._on_fetch,
                                            args=(node, positions, done), timeout=timeout)
                except Exception as exc:  # noqa: BLE001 - the fetcher says what it means
                    f.fetch_failed(positions, exc, self.cluster.meta, node, self._now())
                    continue
                if sent:
                    self._inflight[node] = done
                    continue
            self._inflight[node] = asyncio.ensure_future(self._fetch(node, req, positions, timeout))

    def _on_fetch(self, node: int, positions: dict[TopicPartition, int], done: asyncio.Future,
                  resp: Any, exc: BaseException | None) -> None:
        if self._inflight.get(node) is done:
            del self._inflight[node]
        if not done.done():  # cancelled by close(): nothing to apply
            if exc is None:
                self._fetcher.fetched(resp, positions, self.cluster.meta, node, self._now())
            else:
                self._fetcher.fetch_failed(positions, exc, self.cluster.meta, node, self._now())
            done.set_result(None)
        self._wake()

    async def _fetch(self, node: int, req: Any, positions: dict[TopicPartition, int], timeout: float) -> None:
        """A fetch to a broker whose connection is not ready yet (or holds requests for a
        re-login): set up, sent and its answer applied in a task."""
        f = self._fetcher
        try:
            conn = await self.cluster.connection(node, self._now() + self.config.request_timeout_ms / 1000)
            resp = await conn.request(FETCH, req, timeout=timeout)
        except asyncio.CancelledError:
            f.on_failure(positions)
            raise
        except Exception as exc:  # noqa: BLE001 - the fetcher says what it means
            # Never left to fail the task unseen: retried, or raised by the next poll().
            f.fetch_failed(positions, exc, self.cluster.meta, node, self._now())
            self._wake()
            return
        finally:
            self._inflight.pop(node, None)
        f.fetched(resp, positions, self.cluster.meta, node, self._now())
        self._wake()

    def metrics(self) -> dict[str, Any]:
        """As the sync Consumer.metrics(): what is buffered, the fetches in flight, the
        partitions read from a replica their leader named (``client_rack``, KIP-392) and
        the records data each broker's answers carried."""
        return {**self._fetcher.metrics(), "fetches_in_flight": len(self._inflight)}

    def _wake(self) -> None:
        """End the wait of a poll() with nothing to return (a fetch's answer, the group's news)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _poll(self, timeout: float, max_records: int, columnar: bool) -> list[Any]:
        self._check_poll()
        deadline = self._now() + timeout
        if not self._started:
            try:
                await self.start(timeout)
            except NoBrokersAvailableError as exc:
                if not exc.retriable:
                    raise
                return []  # no broker up yet within this poll's time: the next asks again
        while True:
            lookup = self._poll_start(deadline)
            if lookup is not None:
                await self.cluster.run(*lookup, "ListOffsets")
            out = self._fetch_round(max_records, columnar, deadline)
            if out is not None:
                return out
            # Connection setups do not wake this wait (no connect delay); a refresh's
            # answer does, as it may give a partition its leader or say it does not exist.
            wait = self._idle_wait(deadline - self._now(), bool(self._inflight))
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(wait, self._wake)
            refresh = self.cluster.refreshing()
            if refresh is not None:
                refresh.add_done_callback(lambda _f: self._wake())
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None

    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to ``timeout`` seconds for
        some; at most ``max_records`` (default ``max_poll_records``)."""
        return await self._poll(timeout, max_records or self.config.max_poll_records, False)

    async def poll_batch(self, timeout: float = 1.0) -> list[FetchedBatch]:
        """Like poll(), but one FetchedBatch (columnar) per partition fetched."""
        return await self._poll(timeout, 1 << 62, True)

    # -- groups and offsets ------------------------------------------------------------------

    async def unsubscribe(self, timeout: float | None = None) -> None:
        await self._need_group("unsubscribe()").unsubscribe_wait(self._now() + self._timeout(timeout))

    async def commit(self, offsets: dict[Any, int] | None = None, timeout: float | None = None) -> None:
        """Commit ``offsets`` (default: every assigned partition's position) and wait for
        the group's answer; CommitFailedError when the group moved on."""
        g = self._need_group("commit()")
        await g.commit_wait(self._offsets(offsets), self._now() + self._timeout(timeout))

    async def committed(self, partitions: Iterable[Any], timeout: float | None = None
                        ) -> dict[TopicPartition, int | None]:
        g = self._need_group("committed()")
        tps = [_tp(x) for x in partitions]
        deadline = self._now() + self._timeout(timeout)
        await self.cluster.run(missing_partitions_steps(self.cluster.meta, tps, self._timeout(timeout)),
                               deadline, "Metadata")
        return await g.committed_wait(tps, deadline)

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self._records()

    async def _records(self) -> AsyncIterator[ConsumerRecord]:
        while not self._closed:
            for record in await self.poll(1.0):
                yield record
