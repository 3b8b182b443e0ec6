"""The consumer's side of group membership, without I/O: subscription, rebalances
(revoke and assign, the leader's assignment, KIP-848 reconciliation), commits and
committed offsets.  Both shells use it as it is.

:class:`ConsumerGroup` runs on the consumer's thread (or task) inside poll(), at the
time the shell gives it (``step(now)``).  A *driver* of the shell's runs the membership
state machine (:class:`~kafkawire.protocol.group.GroupMembership`, the classic protocol,
or :class:`~kafkawire.protocol.consumer_group.ConsumerGroupMembership`, KIP-848's with
``group_protocol="consumer"``) over a coordinator connection of its own (as the Java
client keeps one), so that heartbeats go out while the caller is busy: the sync shell's
``kafkawire.client.group.GroupThread``, the asyncio shell's
``kafkawire.aio.group.AsyncGroupDriver``, with one interface (``call``, ``take_events``,
``snapshot``, ``send``, ``new_future``, ``wake_caller``, ``now``).  Every time and deadline
here is on the driver's clock (the sync shell's time.monotonic(), the asyncio shell's
loop time, which need not be the same clock); the clock is read by the shell, never here.

The operations that wait for the coordinator (commit, committed, unsubscribe, close)
are generators of protocol/steps.py's steps (``*_steps``: Await an answer, Sleep a
backoff, NOW for the time), run to their end by each shell's one runner (``Cluster.run``,
``AsyncCluster.run``); the commit of a KIP-848 revocation is moved on by the polls
(StepRun), never blocking them, and a poll's idle wait ends when it is due
(:meth:`ConsumerGroup.next_wakeup`).  The rebalance listener is called from :meth:`step` and
the ``*_steps``, so on the thread (or task) and at the moment the shell runs them.

The two protocols share all of it but how a member joins and how its assignment
changes: a classic member runs JoinGroup/SyncGroup rounds (and the assignor when it
leads), a KIP-848 member reconciles the coordinator's assignment step by step
(``_start_reconcile``), moved on by the consumer's polls without blocking them.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from typing import Any

from kafkawire.errors import BrokerError, CommitFailedError, KafkaConnectionError, KafkaTimeoutError
from kafkawire.protocol.consumer import (
    STICKY,
    assignment_to_map,
    decode_assignment,
    is_cooperative,
    leader_assign,
    member_topics,
    subscription_metadata,
)
from kafkawire.protocol.consumer_group import RECONCILING, MetadataNeeded, NonFatal, Reconcile
from kafkawire.protocol.fetcher import PartitionState, TopicPartition
from kafkawire.protocol.group import (
    STABLE,
    SYNCING,
    AssignmentNeeded,
    Assigned,
    Failed,
    Joined,
    Lost,
    RejoinNeeded,
)
from kafkawire.protocol.steps import NOW, Await, Sleep, StepRun
from kafkawire.protocol.transactions import ConsumerGroupMetadata

__all__ = ["ConsumerGroup", "ConsumerRebalanceListener"]

log = logging.getLogger("kafkawire.group")


class ConsumerRebalanceListener:
    """Callbacks around a rebalance, run on the consumer's thread inside poll() (and
    close()).  Override what you need; partitions are lists of TopicPartition."""

    def on_partitions_revoked(self, partitions: list[Any]) -> None:
        """Before the consumer gives these up in a rebalance: after this, their offsets
        are committed (with auto-commit), and another member may read them."""

    def on_partitions_assigned(self, partitions: list[Any]) -> None:
        """After a rebalance gave the consumer these (only the new ones when cooperative)."""

    def on_partitions_lost(self, partitions: list[Any]) -> None:
        """The consumer lost these without a rebalance (expelled, fenced, poll timeout):
        another member may own them already, so nothing was committed.  By default the
        same as on_partitions_revoked."""
        self.on_partitions_revoked(partitions)


class ConsumerGroup:
    """The consumer's side of group membership (on the caller's thread): subscription,
    rebalances as the driver reports them, commits and committed offsets.  Each shell's
    subclass runs the ``*_steps`` operations on its cluster's runner (kafkawire.client.group
    blocks, kafkawire.aio.group awaits).  ``now`` is the driver's clock at creation."""

    def __init__(self, consumer: Any, driver: Any, now: float):
        self.consumer = consumer
        self.config = c = consumer.config
        #: Runs the membership state machine: the sync shell's group thread, or the
        #: asyncio shell's task (same interface).
        self.driver = driver
        self.topics: set[str] | None = None
        self.pattern: Any = None
        self.listener: Any = None
        self.join_wanted = False
        self.join_reason = ""
        self.generation = -1  # the classic generation, or KIP-848's member epoch
        self.protocol: str | None = None
        #: KIP-848's consumer group protocol: the coordinator assigns, incrementally.
        self.kip848 = c.group_protocol == "consumer"
        self.cooperative = self.kip848 or all(is_cooperative(p) for p in c.partition_assignment_strategy)
        self.owned_before: dict[str, list[int]] = {}
        self.leader_counts: dict[str, int] | None = None  # what this leader's assignment used
        self.pending_positions: set[Any] = set()  # assigned, committed offset not known yet
        self._lead_pending: AssignmentNeeded | None = None  # waiting for its topics' metadata
        self._lead_since = 0.0
        self._pattern_checked = -1.0  # the metadata refresh the pattern was last matched against
        self._committed_fut: Any = None
        self.last_committed: dict[Any, int] = {}
        self.done_commits: deque[tuple[Any, dict, Any]] = deque()
        self.next_auto_commit = now + c.auto_commit_interval_ms / 1000
        self._events: deque[Any] = deque()  # taken from the driver, not yet acted on
        self._reconciling: _Reconciling | None = None  # KIP-848: the Reconcile under way
        self._names_checked = -1.0  # the metadata refresh whose topic ids the machine has
        self._names_told: dict[Any, str] = {}

    @property
    def subscribed(self) -> bool:
        return self.topics is not None

    @property
    def coordinator_name(self) -> str:
        """What a runner's timeout names (its "no answer in time")."""
        return f"the coordinator of group {self.config.group_id!r}"

    @property
    def member(self) -> bool:
        """True while this consumer is (or is becoming) a member of its group: it
        subscribed, or holds a generation."""
        return self.subscribed or self.generation >= 0

    # -- subscription ------------------------------------------------------------------

    def subscribe(self, topics: Any, pattern: Any, listener: Any) -> None:
        if self.consumer._assigned and not self.subscribed:
            raise ValueError("subscribe() after assign(): a consumer uses one or the other; "
                             "call assign([]) first")
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern (exactly one)")
        if pattern is not None and self.kip848:
            if not isinstance(pattern, str) or not pattern:
                raise ValueError(
                    f"with group_protocol='consumer' the broker matches the pattern (KIP-848, RE2/J "
                    f"syntax), so it must be a non-empty str, not {pattern!r}: pass the expression "
                    f"as a string (a compiled re.Pattern's .pattern, if RE2/J reads it alike), or "
                    f"use group_protocol='classic' to match a Python pattern in the client")
            self.pattern = pattern
            # The coordinator names assigned topics by id: every topic's metadata names them.
            self.consumer.cluster.all_topics = True
            self.topics = set()  # what the broker matched, as the assignments show it
        elif pattern is not None:
            self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self.consumer.cluster.all_topics = True
            self.topics = self._matching()
        else:
            if isinstance(topics, str):
                topics = [topics]
            self.pattern = None
            self.consumer.cluster.all_topics = False
            self.topics = set(topics)
            if not self.topics:
                raise ValueError("subscribe() with no topics; call unsubscribe() to stop consuming")
        self.listener = listener
        self.consumer.cluster.interest.update(self.topics)
        self.consumer.cluster.request_refresh()
        what = sorted(self.topics) if self.pattern is None else self._pattern_text()
        self._want_join(f"subscribed to {what}")

    def _pattern_text(self) -> str:
        return self.pattern if isinstance(self.pattern, str) else self.pattern.pattern

    def _matching(self) -> set[str]:
        return {t for t in self.consumer.cluster.topics if self.pattern.fullmatch(t) and not t.startswith("__")}

    def _want_join(self, reason: str) -> None:
        if not self.join_wanted:
            log.info("group %r: rejoining: %s", self.config.group_id, reason)
        self.join_wanted = True
        self.join_reason = reason

    # -- the poll loop's step ------------------------------------------------------------

    def step(self, now: float | None = None) -> None:
        """Everything poll() does for the group before fetching, at ``now`` (the
        driver's clock; read from it when not given)."""
        if now is None:
            now = self.driver.now()
        self.driver.last_poll = now
        self.run_callbacks()
        if self.config.enable_auto_commit and now >= self.next_auto_commit:
            self.next_auto_commit = now + self.config.auto_commit_interval_ms / 1000
            self._auto_commit()
        if self.subscribed:
            self._check_metadata()
        # One at a time off a queue: an event that raises (NonFatal) leaves the rest for
        # the next poll.
        self._events.extend(self.driver.take_events())
        while self._events:
            self._on_event(self._events.popleft(), now)
        if self._lead_pending is not None:
            self._lead(self._lead_pending, now)
        if self._reconciling is not None:
            self._advance_reconcile(now)
        if self.join_wanted and self.subscribed:
            self._join()
        self._apply_committed()

    def next_wakeup(self, now: float) -> float | None:
        """How long until :meth:`step` has work of its own that no answer will wake a
        poll for, or None: the next auto-commit, and a KIP-848 revocation's commit waiting
        out its retry backoff.  The shells' idle waits in poll() end by then."""
        due = None
        if self.config.enable_auto_commit and self.consumer._assigned:
            due = self.next_auto_commit
        r = self._reconciling
        if r is not None and r.commit is not None and not r.commit.finished and r.commit.waiting is None:
            due = r.commit.sleep_until if due is None else min(due, r.commit.sleep_until)
        return None if due is None else max(0.0, due - now)

    def _check_metadata(self) -> None:
        cluster = self.consumer.cluster
        if self.kip848:
            # The coordinator notices new topics and partitions itself; the machine only
            # needs the names of the topic ids it assigns.
            self._tell_topic_names()
            return
        if self.pattern is not None and cluster.meta.last_refresh != self._pattern_checked:
            # Matched against every topic: only when a metadata answer came in since.
            self._pattern_checked = cluster.meta.last_refresh
            matched = self._matching()
            if matched != self.topics:
                self.topics = matched
                cluster.interest.update(matched)
                self._want_join(f"pattern {self.pattern.pattern!r} now matches {sorted(matched)}")
        if self.leader_counts is not None:
            for t, n in self.leader_counts.items():
                meta = cluster.topics.get(t)
                if meta is not None and meta.error_code == 0 and meta.partitions and len(meta.partitions) != n:
                    self.leader_counts = None
                    self._want_join(f"topic {t!r} now has {len(meta.partitions)} partitions, not {n}")
                    break

    def _on_event(self, ev: Any, now: float) -> None:
        if isinstance(ev, Failed):
            self.join_wanted = False
            raise ev.error
        if isinstance(ev, Reconcile):
            self._start_reconcile(ev, now)
        elif isinstance(ev, MetadataNeeded):
            log.info("group %r: assigned topic ids %s not in the metadata yet: refreshing it",
                     self.config.group_id, [str(t) for t in ev.topic_ids])
            self._names_checked = -1.0
            self.consumer.cluster.request_refresh()
        elif isinstance(ev, NonFatal):
            raise ev.error  # the member stays in the group
        elif isinstance(ev, Lost):
            self._abandon_reconcile()
            lost = sorted(self.consumer._assigned)
            log.warning("group %r: partitions lost: %s (%s)", self.config.group_id, lost, ev.reason)
            self._drop(lost)
            if self.listener is not None and lost:
                self.listener.on_partitions_lost(lost)
            self.generation = -1
            self._want_join(ev.reason)
        elif isinstance(ev, RejoinNeeded):
            self._want_join(ev.reason)
        elif isinstance(ev, Joined) and self.kip848:
            self.generation = max(self.generation, ev.generation)
            log.info("group %r: joined as %r with member epoch %d (server assignor %s)",
                     self.config.group_id, ev.member_id, ev.generation, ev.protocol or "the broker's default")
        elif isinstance(ev, Joined):
            self.leader_counts = None
            log.info("group %r: joined generation %d as %r (leader %r, assignor %s)", self.config.group_id,
                     ev.generation, ev.member_id, ev.leader, ev.protocol)
        elif isinstance(ev, AssignmentNeeded):
            self._lead(ev, now)
        elif isinstance(ev, Assigned):
            self._assigned(ev)

    def _join(self) -> None:
        reason = self.join_reason
        self.join_wanted = False
        if self.kip848:
            # No join round (KIP-848): the subscription goes out with the next heartbeat,
            # and a member that is out (new, or after a Lost) joins with epoch 0.
            names = None if self.pattern is not None else sorted(self.topics or ())
            regex = self.pattern
            self.driver.call(lambda m, now: (m.subscribe(topics=names, regex=regex), m.join(now, reason)))
            return
        owned = set(self.consumer._assigned)
        if not self.cooperative and owned:
            self._revoke(owned)  # eager: give everything up before joining
            owned = set()
        current = _as_map(owned)
        protocols = []
        for name in self.config.partition_assignment_strategy:
            # Eager members rejoin owning nothing; the sticky assignor still learns what
            # they held from its user_data.
            held = self.owned_before if name == STICKY and not self.cooperative else current
            protocols.append((name, subscription_metadata(name, self.topics or (), held, self.generation)))
        self.driver.call(lambda m, now: m.start_join(protocols, now, reason))

    def _lead(self, ev: AssignmentNeeded, now: float) -> None:
        cluster = self.consumer.cluster
        topics = member_topics(ev.members)
        if self._lead_pending is not ev:
            self._lead_pending, self._lead_since = ev, now
        if not topics <= cluster.interest or any(t not in cluster.topics for t in topics):
            cluster.interest.update(topics)
            cluster.request_refresh()
        if any(t not in cluster.topics for t in topics) and now - self._lead_since < self.config.request_timeout_ms / 2000:
            return  # the poll loop refreshes the metadata: assign on a later step
        # Assign what is known (a topic that appears later triggers a rebalance).
        self._lead_pending = None
        counts: dict[str, list[int]] = {}
        for t in topics:
            meta = cluster.topics.get(t)
            if meta is not None and meta.error_code == 0 and meta.partitions:
                counts[t] = sorted(meta.partitions)
        self.leader_counts = {t: len(ps) for t, ps in counts.items()}
        if ev.skip_assignment:
            # KIP-814: the group keeps its assignment (the machine synced without one);
            # this leader only watches its members' topics for partition changes.
            log.info("group %r: leader of generation %d again, the group's assignment kept (KIP-814)",
                     self.config.group_id, ev.generation)
            return
        assignments = leader_assign(ev.protocol, ev.members, counts)
        log.info("group %r: leader of generation %d assigned %d partitions of %s to %d members with %s",
                 self.config.group_id, ev.generation, sum(len(p) for p in counts.values()), sorted(counts),
                 len(assignments), ev.protocol)
        gen = ev.generation
        self.driver.call(lambda m, now: m.set_assignments(gen, assignments))

    def _assigned(self, ev: Assigned) -> None:
        new = {TopicPartition(t, p) for t, ps in assignment_to_map(decode_assignment(ev.assignment)).items() for p in ps}
        self.generation = ev.generation
        self.protocol = ev.protocol
        owned = set(self.consumer._assigned)
        revoked = owned - new
        if revoked:
            # Cooperative (KIP-429): give up only what moves, then rejoin so the leader
            # can hand it to its new member.
            self._revoke(revoked)
            self._want_join(f"gave up {len(revoked)} partitions for a cooperative rebalance")
        added = new - owned
        log.info("group %r: generation %d: assigned %s%s", self.config.group_id, ev.generation,
                 sorted(added), f", revoked {sorted(revoked)}" if revoked else "")
        self._take(added)
        if self.listener is not None:
            self.listener.on_partitions_assigned(sorted(added))

    def _take(self, added: Any) -> None:
        """Start consuming ``added``, from the group's committed offsets once known."""
        for tp in added:
            self.consumer._assigned[tp] = PartitionState()
        self.consumer.cluster.interest.update(tp.topic for tp in added)
        if added:
            self._partitions_changed()
            self.pending_positions |= set(added)
            self._fetch_committed()

    # -- KIP-848 reconciliation ----------------------------------------------------------

    def _tell_topic_names(self) -> None:
        """Hand the machine the names of the topic ids in the latest metadata (an
        assignment names its topics by id and waits for their names)."""
        meta = self.consumer.cluster.meta
        if meta.last_refresh == self._names_checked:
            return
        self._names_checked = meta.last_refresh
        new = {t.topic_id: name for name, t in meta.topics.items()
               if t.error_code == 0 and t.topic_id is not None and int(t.topic_id)
               and self._names_told.get(t.topic_id) != name}
        if new:
            self._names_told.update(new)
            self.driver.call(lambda m, now: m.set_topic_names(new))

    def _start_reconcile(self, ev: Reconcile, now: float) -> None:
        """The coordinator moved this member's assignment (KIP-848).  The partitions it
        loses stop being fetched and handed out at once (the Java client's "pending
        revocation"), so the positions committed for them are where their next owner
        starts; with auto-commit that commit must be done before the machine acknowledges
        the revocation, which hands them over."""
        self._abandon_reconcile()  # the machine hands out one at a time; never two here
        self.generation = ev.epoch
        held = {}
        for tp in (TopicPartition(*x) for x in ev.revoke):
            st = self.consumer._assigned.pop(tp, None)
            if st is not None:
                st.clear()  # fetched but not returned: the next owner's to read
                held[tp] = st
        self._partitions_changed()
        offsets = {tp: st.position for tp, st in held.items()
                   if st.position is not None and tp not in self.pending_positions}
        commit = None
        if offsets and self.config.enable_auto_commit:
            c = self.config
            deadline = now + min(c.request_timeout_ms, c.max_poll_interval_ms) / 1000
            commit = StepRun(self.commit_steps(offsets, deadline), self._wake_on_answer, now)
        log.info("group %r: member epoch %d: revoking %s, assigning %s%s", self.config.group_id, ev.epoch,
                 ev.revoke, ev.assign, " (committing first)" if commit is not None else "")
        self._reconciling = _Reconciling(ev, held, commit)

    def _advance_reconcile(self, now: float) -> None:
        r = self._reconciling
        assert r is not None
        if r.commit is not None:
            if r.commit.advance(now) is not None:
                return  # a later poll moves it on (its answer wakes one)
            if r.commit.error is not None:
                log.warning("group %r: commit of the revoked partitions %s failed (their next owner "
                            "reads them again from the last commit): %s", self.config.group_id,
                            sorted(r.held), r.commit.error)
        self._reconciling = None
        ev = r.ev
        revoke = [TopicPartition(*tp) for tp in ev.revoke]
        assign = [TopicPartition(*tp) for tp in ev.assign]
        # The listener sees the revoked partitions still assigned: it may commit them.
        self.consumer._assigned.update(r.held)
        failed = self._call_listener("on_partitions_revoked", revoke) if revoke else None
        self._drop(revoke)
        self._take(assign)
        if self.pattern is not None:
            self.topics = {t for t, _p in ev.assignment}
        failed = self._call_listener("on_partitions_assigned", assign) or failed
        self.driver.call(lambda m, now: m.reconciled(ev))
        if failed is not None:
            raise failed  # after the reconciliation, which goes on as the Java client's does

    def _call_listener(self, name: str, partitions: list[Any]) -> BaseException | None:
        if self.listener is None:
            return None
        try:
            getattr(self.listener, name)(partitions)
        except Exception as exc:  # noqa: BLE001 - raised from poll() once the step is done
            log.warning("group %r: %s(%s) raised %r", self.config.group_id, name, partitions, exc)
            return exc
        return None

    def _abandon_reconcile(self) -> None:
        """A Reconcile under way stops (a Lost, close, unsubscribe): the partitions it was
        giving up count as this consumer's again until those end too."""
        r = self._reconciling
        if r is not None:
            self._reconciling = None
            if r.commit is not None:
                r.commit.steps.close()
            self.consumer._assigned.update(r.held)
            self._partitions_changed()

    def _fetch_committed(self) -> None:
        fut = self.driver.new_future()
        tps = sorted(self.pending_positions)
        self._committed_fut = fut
        self.driver.call(lambda m, now: m.fetch_offsets(tps, fut))

    def _apply_committed(self) -> None:
        fut = self._committed_fut
        if fut is None or not fut.done():
            return
        self._committed_fut = None
        exc = fut.exception()
        if exc is not None:
            if getattr(exc, "retriable", False) or isinstance(exc, KafkaConnectionError):
                self._fetch_committed()  # after the coordinator is found again
                return
            raise exc
        for tp, (offset, _meta) in fut.result().items():
            st = self.consumer._assigned.get(TopicPartition(*tp))
            if st is not None and tp in self.pending_positions:
                if st.position is None and offset >= 0:
                    st.position = offset
                    self.last_committed[tp] = offset
        self.pending_positions.clear()
        self._partitions_changed()  # positions set, and the rest for the fetcher to look up

    def _revoke(self, tps: set[Any], commit: bool = True) -> None:
        """Give up ``tps``; with auto-commit (and ``commit``), their positions are
        committed first without waiting: in a rebalance the OffsetCommit goes out ahead
        of the JoinGroup on the same connection, so the coordinator has it before the
        next owner asks."""
        if not tps:
            return
        if commit and self.config.enable_auto_commit:
            self.commit_async({tp: o for tp, o in self.positions().items() if tp in tps}, None)
        self.owned_before = _as_map(set(self.consumer._assigned))
        if self.listener is not None:
            self.listener.on_partitions_revoked(sorted(tps))
        self._drop(tps)

    def _drop(self, tps: Any) -> None:
        for tp in tps:
            self.consumer._assigned.pop(tp, None)
            self.pending_positions.discard(tp)
            self.last_committed.pop(tp, None)
        self._partitions_changed()

    def _partitions_changed(self) -> None:
        """Tell the consumer's fetcher that the group changed the partitions it holds or
        their positions: it plans fetches and position lookups again only after a change
        it is told of (assign() keeps every partition's state)."""
        fetcher = self.consumer._fetcher
        fetcher.assign(list(fetcher.assigned))

    # -- offsets -------------------------------------------------------------------------

    def positions(self) -> dict[Any, int]:
        """The offsets to commit: each assigned partition's next offset to hand out."""
        return {tp: st.position for tp, st in self.consumer._assigned.items()
                if st.position is not None and tp not in self.pending_positions}

    def _wake_on_answer(self, fut: Any) -> None:
        """The steps a poll moves on wait for this answer: its arrival wakes the poll."""
        fut.add_done_callback(lambda _f: self.driver.wake_caller())

    def _send_commit(self, offsets: dict[Any, int]) -> Any:
        fut = self.driver.new_future()
        payload = {tuple(tp): (off, "") for tp, off in offsets.items()}
        self.driver.call(lambda m, now: m.commit(payload, fut))
        return fut

    # The operations that wait for the coordinator are written once, as generators of
    # protocol/steps.py's Await, Sleep and NOW steps, run by each shell's cluster.

    def commit_steps(self, offsets: dict[Any, int] | None, deadline: float) -> Any:
        todo = dict(self.positions() if offsets is None else offsets)
        if todo and self.subscribed and self.generation < 0:
            raise CommitFailedError(
                f"offsets not committed: this consumer is not a member of group "
                f"{self.config.group_id!r} now (it was expelled or has not joined yet); poll() "
                f"to rejoin: the partitions' new owners read from the last committed offsets",
                partitions=dict(todo))
        last: BaseException | None = None
        while todo:
            yield from self._attempt_steps(
                deadline, last, f"commit of {len(todo)} offsets for group {self.config.group_id!r} not done")
            try:
                result = yield Await(self._send_commit(todo))
            except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as exc:
                last = _retried(exc)
                continue
            for tp, err in result.items():
                tp = TopicPartition(*tp)
                if err is None:
                    self.last_committed[tp] = todo.pop(tp)
                elif isinstance(err, CommitFailedError) or not getattr(err, "retriable", False):
                    raise err
                else:
                    last = err

    def committed_steps(self, partitions: list[Any], deadline: float) -> Any:
        last: BaseException | None = None
        tps = [tuple(tp) for tp in partitions]
        while True:
            yield from self._attempt_steps(
                deadline, last, f"committed offsets of group {self.config.group_id!r} not read")
            fut = self.driver.new_future()
            self.driver.call(lambda m, now: m.fetch_offsets(tps, fut))
            try:
                got = yield Await(fut)
            except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as exc:
                last = _retried(exc)
                continue
            return {TopicPartition(*tp): (off if off >= 0 else None) for tp, (off, _m) in got.items()}

    def _attempt_steps(self, deadline: float, last: BaseException | None, late: str) -> Any:
        """Before each attempt of a commit or offset read: after a failed one (``last``),
        retry_backoff_ms first (cut short by the deadline), so that a coordinator out of
        reach is not asked again at once; past ``deadline``, KafkaTimeoutError (``late``
        "in time", with the last error)."""
        now = yield NOW
        if last is not None and now < deadline:
            yield Sleep(min(self.config.retry_backoff_ms / 1000, deadline - now))
            now = yield NOW
        if now >= deadline:
            raise KafkaTimeoutError(f"{late} in time" + (f"; last error: {last}" if last else ""))

    def leave_steps(self) -> Any:
        t = self.driver
        try:
            leave = yield Await(t.call(lambda m, now: t.send(m.leave("the consumer left the group"))))
            if leave is not None:
                yield Await(leave)
        except Exception as exc:  # noqa: BLE001 - the session timeout removes the member anyway
            log.warning("group %r: LeaveGroup failed (the group notices when this member's "
                        "session times out): %s", self.config.group_id, exc)

    def _give_up_steps(self, deadline: float) -> Any:
        # Commit every position (with auto-commit) by ``deadline``, then give the
        # subscription's partitions up (on_partitions_revoked).
        self._abandon_reconcile()
        if self.config.enable_auto_commit and self.consumer._assigned:
            try:
                yield from self.commit_steps(None, deadline)
            except Exception as exc:  # noqa: BLE001 - leaving goes on; the records are read again
                log.warning("group %r: commit of %s failed: %s", self.config.group_id,
                            sorted(self.consumer._assigned), exc)
        if self.subscribed:
            self._revoke(set(self.consumer._assigned), commit=False)

    def close_steps(self, deadline: float) -> Any:
        self.run_callbacks()
        yield from self._give_up_steps(deadline)
        yield from self.leave_steps()
        self.run_callbacks()

    def unsubscribe_steps(self, deadline: float) -> Any:
        yield from self._give_up_steps(deadline)
        self.topics = None
        self.pattern = None
        self.consumer.cluster.all_topics = False
        self.join_wanted = False
        yield from self.leave_steps()

    def commit_async(self, offsets: dict[Any, int] | None, callback: Any) -> None:
        offsets = dict(self.positions() if offsets is None else offsets)
        if not offsets:
            if callback is not None:
                callback({}, None)
            return
        fut = self._send_commit(offsets)
        done = self.done_commits
        fut.add_done_callback(lambda f: (done.append((callback, offsets, f)), self.driver.wake_caller()))

    def run_callbacks(self) -> None:
        """Callbacks of finished commit_async() calls, on the caller's thread."""
        while self.done_commits:
            callback, offsets, fut = self.done_commits.popleft()
            exc = fut.exception()
            if exc is None:
                failed = [e for e in fut.result().values() if e is not None]
                exc = failed[0] if failed else None
                for tp, e in fut.result().items():
                    if e is None:
                        self.last_committed[TopicPartition(*tp)] = offsets[TopicPartition(*tp)]
            if callback is not None:
                callback(offsets, exc)
            elif exc is not None:
                log.warning("group %r: auto-commit failed: %s", self.config.group_id, exc)

    def _auto_commit(self) -> None:
        changed = {tp: o for tp, o in self.positions().items() if self.last_committed.get(tp) != o}
        if changed:
            self.commit_async(changed, None)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Who this consumer is in its group now, for a transactional offset commit."""
        snap = self.driver.snapshot()
        if self.kip848:
            # The coordinator checks a transactional commit against the member's current
            # epoch, which every group epoch moves on, the assignment changed or not; it
            # passes a partition's revocation only once the consumer has acknowledged it
            # (KIP-848), so it never names partitions this consumer was not handed.
            epoch = snap.get("member_epoch", -1)
            generation = epoch if epoch > 0 else -1
        else:
            # The generation of the assignment the caller was handed, not one the group
            # thread has joined since: offsets read under it are refused once the group
            # has moved on (KIP-447).
            generation = self.generation
        return ConsumerGroupMetadata(self.config.group_id, generation, snap.get("member_id") or "",
                                     self.config.group_instance_id)

    # -- health and the end ----------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The driver's snapshot of the membership, seen from this consumer: its
        assignment is the one it took, so "stable" means stable with that assignment."""
        snap = self.driver.snapshot()
        snap.setdefault("group_protocol", "classic")
        snap["assignment"] = sorted(self.consumer._assigned)
        snap["subscription"] = sorted(self.topics) if self.topics is not None else None
        # KIP-848's rebalances are incremental too: only what moves is revoked.
        snap["rebalance_protocol"] = "cooperative" if self.cooperative else "eager"
        if self.kip848:
            if self._reconciling is not None or any(isinstance(e, Reconcile) for e in self._events):
                snap["state"] = RECONCILING  # the machine's next step waits for this consumer
        elif snap["state"] == STABLE and snap["generation"] != self.generation:
            # The SyncGroup answer is in, but the consumer takes it at its next poll: the
            # partitions above are still the previous generation's.
            snap["state"] = SYNCING
        if self.join_wanted and self.subscribed and not snap["rejoin_needed"]:
            # Decided on this side (a cooperative revocation, a metadata change): the
            # JoinGroup goes out at the next poll.
            snap["rejoin_needed"] = True
            snap["rejoin_reason"] = self.join_reason
        return snap


def _retried(exc: BaseException) -> BaseException:
    """``exc``, an attempt's failure, when it is worth another attempt (a connection
    error or timeout: the coordinator may come back, or be found again; a retriable
    broker error); raised again when not."""
    if isinstance(exc, BrokerError) and not exc.retriable:
        raise exc
    return exc


class _Reconciling:
    """A KIP-848 Reconcile the consumer is acting on: ``held``, the partitions it gives
    up (no longer fetched, their states kept for the listener), and ``commit``, their
    offsets' commit under way."""

    __slots__ = ("ev", "held", "commit")

    def __init__(self, ev: Reconcile, held: dict[Any, PartitionState], commit: StepRun | None):
        self.ev, self.held, self.commit = ev, held, commit


def _as_map(tps: Any) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        out.setdefault(t, []).append(p)
    return out
