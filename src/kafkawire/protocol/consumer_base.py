"""What the sync :class:`~kafkawire.Consumer` and the asyncio consumer do alike without
waiting or I/O: assignment, positions, pausing, the subscription and the group calls
that return at once.  Both shells inherit it; each keeps its own sockets, tasks or
threads, and the calls that wait (``poll``, offset lookups, commits, ``close``).

A subclass sets ``config``, ``cluster`` (with a ClusterMetadata as ``cluster.meta``),
``_fetcher`` (a :class:`~kafkawire.protocol.fetcher.Fetcher`) and ``_group`` (its group
member, or None), and defines ``_check_open()``, ``_send_fetches()`` and ``_now()`` (its
clock).
"""

from __future__ import annotations

from typing import Any, Generator, Iterable, Mapping

from kafkawire.protocol.fetcher import Fetcher, PartitionState, TopicPartition
from kafkawire.protocol.fetcher import as_topic_partition as _tp
from kafkawire.protocol.offsets import poll_reset_steps

__all__ = ["ConsumerBase"]


class ConsumerBase:
    config: Any
    cluster: Any
    _fetcher: Fetcher
    _group: Any

    def _check_open(self) -> None:
        raise NotImplementedError

    def _send_fetches(self) -> None:
        raise NotImplementedError

    @staticmethod
    def _now() -> float:
        raise NotImplementedError

    def _timeout(self, timeout: float | None) -> float:
        return self.config.request_timeout_ms / 1000 if timeout is None else timeout

    # -- assignment and positions ---------------------------------------------------------

    def _assignment(self, partitions: Iterable[Any]) -> list[TopicPartition]:
        """assign()'s argument, checked (the consumer open, not subscribed)."""
        self._check_open()
        if self._group is not None and self._group.subscribed:
            raise ValueError("assign() while subscribed: call unsubscribe() first")
        return [_tp(x) for x in partitions]

    def _assign(self, tps: list[TopicPartition]) -> bool:
        """assign()'s bookkeeping for ``tps`` (from :meth:`_assignment`); returns whether
        a partition's leader is unknown (the shell then has the metadata refreshed)."""
        self._fetcher.assign(tps)
        meta = self.cluster.meta
        meta.interest.update(tp.topic for tp in tps)
        return any(meta.leader_for(*tp) is None for tp in tps)

    @property
    def _assigned(self) -> dict[TopicPartition, PartitionState]:
        return self._fetcher.assigned

    def assignment(self) -> set[TopicPartition]:
        return set(self._fetcher.assigned)

    def _state(self, tp: Any) -> PartitionState:
        return self._fetcher.state(tp)

    def seek(self, partition: Any, offset: int) -> None:
        """Make the next poll start at ``offset`` for ``partition``."""
        self._fetcher.seek(partition, offset)

    def pause(self, partitions: Iterable[Any]) -> None:
        self._fetcher.pause(partitions)

    def resume(self, partitions: Iterable[Any]) -> None:
        self._fetcher.pause(partitions, False)

    # -- poll()'s rounds (the shell waits between them) ----------------------------------

    def _check_poll(self) -> None:
        """poll()'s precondition: something to consume."""
        self._check_open()
        group = self._group
        if not self._fetcher.assigned and (group is None or not group.subscribed):
            raise ValueError("poll() with no partitions assigned; call assign() or subscribe() first")

    def _poll_start(self, deadline: float) -> tuple[Generator[Any, Any, None], float] | None:
        """The start of each round of poll(): raise what a fetch left for it, move the
        group on (a subscribed topic the broker refuses, not authorized, ends poll()),
        and return the offset lookup for partitions with no position, if any: its steps
        and their deadline (at least a millisecond, even once the poll's has passed)."""
        self._fetcher.raise_pending()
        group = self._group
        if group is None:
            todo = self._fetcher.needs_position()
        else:
            self.cluster.meta.raise_new_topic_error(group.topics)
            group.step()
            todo = self._fetcher.needs_position(group.pending_positions)
        if not todo:
            return None
        timeout = max(0.001, deadline - self._now())
        return poll_reset_steps(self._fetcher, self.cluster.meta, todo, timeout), self._now() + timeout

    def _idle_wait(self, remaining: float, fetching: bool, connect_delay: float = 0.0) -> float:
        """How long a poll with nothing to return waits for news (Fetcher.idle_wait), cut
        short when the group has work due that no answer would wake the poll for."""
        wait = self._fetcher.idle_wait(remaining, fetching, connect_delay)
        group = self._group
        if group is not None:
            due = group.next_wakeup(group.driver.now())
            if due is not None and due < wait:
                return due
        return wait

    def _fetch_round(self, max_records: int, columnar: bool, deadline: float) -> list[Any] | None:
        """poll()'s records if any are buffered, [] once its ``deadline`` has passed, else
        None (the shell waits for news).  Fetches go out before decoding and again before
        returning, so the broker works while kafkawire decodes and the caller processes;
        but when what is buffered reaches the end of the log (Fetcher.caught_up) the broker
        has nothing more to send yet, and the records are handed out first: the next poll
        sends that fetch, as it would have gone (Fetcher.prefetch_due), and its cost (about
        140 µs cold) is not on their latency."""
        fetcher = self._fetcher
        ahead = not fetcher.caught_up()
        if ahead:
            self._send_fetches()
        out = fetcher.drain(max_records, columnar)
        self.cluster.maybe_refresh()
        if ahead or not out:
            self._send_fetches()
        else:
            fetcher.prefetch_due = True
        if not out:
            fetcher.raise_pending()  # now, rather than after waiting for news
        if out or self._now() >= deadline:
            return out
        return None

    # -- groups ---------------------------------------------------------------------------

    def _need_group(self, what: str) -> Any:
        self._check_open()
        if self.config.group_id is None:
            raise ValueError(f"{what} needs a consumer group: create the Consumer with group_id=...")
        if self._group is None:  # an asyncio consumer not started yet
            raise ValueError(f"{what}: await start() first (or use 'async with')")
        return self._group

    @staticmethod
    def _offsets(offsets: Mapping[Any, int] | None) -> dict[TopicPartition, int] | None:
        return None if offsets is None else {_tp(k): v for k, v in offsets.items()}

    def subscribe(self, topics: Iterable[str] | str | None = None, *, pattern: Any = None,
                  listener: Any = None) -> None:
        """Join the group and consume its share of ``topics`` (or of every topic whose
        name matches ``pattern``, a regex; checked again on each metadata refresh).
        ``listener`` (a ConsumerRebalanceListener) gets on_partitions_revoked /
        _assigned / _lost calls inside poll().

        With ``group_protocol="consumer"`` (KIP-848) the broker matches ``pattern``: give
        it as a str in RE2/J syntax (a compiled Python pattern is refused)."""
        self._need_group("subscribe()").subscribe(topics, pattern, listener)

    def subscription(self) -> set[str]:
        """The topics subscribed to (a pattern's current matches); empty when not subscribed."""
        g = self._group
        return set(g.topics) if g is not None and g.topics is not None else set()

    def commit_async(self, offsets: dict[Any, int] | None = None, callback: Any = None) -> None:
        """Like commit(), without waiting; ``callback(offsets, exception_or_None)`` runs
        inside a later poll(), commit() or close()."""
        self._need_group("commit_async()").commit_async(self._offsets(offsets), callback)

    def group_metadata(self) -> Any:
        """This consumer's place in its group (a ConsumerGroupMetadata: group id, generation
        or KIP-848 member epoch, member id, group instance id) for
        ``producer.send_offsets_to_transaction(offsets, consumer.group_metadata())``: the
        coordinator then refuses the offsets once the group has moved on without this
        member (a zombie's).  Take it when processing what poll() returned; it does not wait."""
        return self._need_group("group_metadata()").group_metadata()

    def group_state(self) -> dict[str, Any]:
        """The member's health: ``group_protocol``, ``state`` (unjoined, joining,
        awaiting-assignment, syncing, stable; with KIP-848's protocol unjoined, joining,
        reconciling, acknowledging, stable), ``member_id``, ``generation`` (KIP-848: the
        member epoch), ``assignment``, ``protocol``, ``is_leader``, ``coordinator``,
        ``rejoin_needed`` and why, the last rebalance's reason, the last heartbeat's age (s)
        and result, the last error.  KIP-848 adds ``member_epoch``, ``server_assignor``,
        ``subscribed_regex``, ``target_assignment``, ``unresolved_topic_ids``,
        ``reconciling`` and the broker's ``heartbeat_interval_ms``."""
        return self._need_group("group_state()").state()
