"""Group membership with the consumer group protocol of KIP-848 (``group_protocol=
"consumer"``, on by default in Kafka 4's brokers), as a state machine that does no I/O,
beside the classic one of :mod:`kafkawire.protocol.group`.

One request, ConsumerGroupHeartbeat, does all of it: the member joins with epoch 0,
says what it subscribes to (topic names, or a RE2/J regular expression the broker
evaluates) and which partitions it owns; the group coordinator runs the assignor
(``server_assignor``: "uniform", "range", or None for the broker's default) and answers
with the member's epoch and, when it changed, its target assignment by topic id.  The
member reconciles: it gives up the partitions it loses first, acknowledges that with its
next heartbeat (the coordinator hands them to their next owner only then), and takes the
new ones.  There is no leader, no JoinGroup/SyncGroup round and no stop-the-world.

A shell drives it the way it drives the classic machine (same Outgoing objects, same
loop)::

    for out in m.poll(now): send(out)       # the requests due now
    m.on_response(out, response, now)       # an answer came (returns commit/fetch results)
    m.on_failure(out, exc, now)             # the request failed (connection, timeout)
    m.events()                              # what the consumer must act on
    m.next_wakeup(now)                      # when poll() has work again

and tells it what only the consumer knows: :meth:`subscribe` (names or a regex),
:meth:`join` (after subscribe(), and again after a :class:`Lost`), :meth:`set_topic_names`
(topic id -> name from metadata: an assignment waits for its topics' names),
:meth:`reconciled` once it acted on a :class:`Reconcile`, :meth:`poll_called` on every
consumer poll, :meth:`leave`.  Commits and offset fetches are the classic machine's
(:meth:`commit`, :meth:`fetch_offsets`, :meth:`expire_held`), carrying the member epoch
where the classic ones carry the generation.  Time is always passed in (monotonic
seconds), so tests run it step by step with no broker and no clock.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.group import (
    JOINING,
    STABLE,
    UNJOINED,
    Failed,
    GroupMembership,
    Joined,
    Lost,
    Outgoing,
)

__all__ = [
    "ConsumerGroupMembership",
    "Reconcile",
    "MetadataNeeded",
    "NonFatal",
    "UNJOINED",
    "JOINING",
    "RECONCILING",
    "ACKNOWLEDGING",
    "STABLE",
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "LEAVE_STATIC_EPOCH",
    "new_member_id",
    # the classic machine's, which this one hands out too
    "Outgoing",
    "Joined",
    "Lost",
    "Failed",
]

HEARTBEAT = apis.get("ConsumerGroupHeartbeat")
_OWNED = HEARTBEAT.Request.TopicPartitions

#: States, as group_state() reports them (UNJOINED, JOINING and STABLE as the classic's).
RECONCILING = "reconciling"  # a new assignment: the consumer revokes/takes, or names are missing
ACKNOWLEDGING = "acknowledging"  # reconciled: the heartbeat saying so goes out next

# Member epochs with a meaning of their own (KIP-848).
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2  # a static member that will come back keeps its partitions (KIP-345)

UNKNOWN_MEMBER_ID = 25
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_ID_NOT_FOUND = 69
FENCED_MEMBER_EPOCH = 110
STALE_MEMBER_EPOCH = 113
# The coordinator no longer counts this member in: it drops its partitions and joins
# again with epoch 0, keeping its member id (KIP-848, KIP-1082).  GROUP_ID_NOT_FOUND
# answers a heartbeat with an epoch above 0 for a group the coordinator does not have.
_FENCED = frozenset({UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND})

# Heartbeat errors that end the membership for good, with the fix to name (the Java
# client takes these as fatal too).
_FATAL_FIX = {
    24: "give the consumer a valid group_id",  # INVALID_GROUP_ID
    30: "grant the consumer's principal READ on the group",  # GROUP_AUTHORIZATION_FAILED
    35: "the broker does not speak the consumer group protocol (it needs Kafka 3.7+ with "
        "group.version=1, the default from Kafka 4.0): use group_protocol='classic'",  # UNSUPPORTED_VERSION
    42: "the broker refused the heartbeat's fields (a regex subscription needs "
        "ConsumerGroupHeartbeat v1, Kafka 4.0+; anything else is a kafkawire bug)",  # INVALID_REQUEST
    81: "the group has group.consumer.max.size members already: use another group or "
        "raise the broker's limit",  # GROUP_MAX_SIZE_REACHED
    82: "another consumer joined with the same group_instance_id: give each consumer "
        "its own",  # FENCED_INSTANCE_ID
    111: "another live member holds this group_instance_id: stop it, or give this consumer "
         "its own group_instance_id",  # UNRELEASED_INSTANCE_ID
    112: "set group_remote_assignor to an assignor the broker offers (its "
         "group.consumer.assignors, 'uniform' and 'range' by default) or None for its default",
    128: "fix the subscription's regular expression (RE2/J syntax: no lookaround, no "
         "backreferences)",  # INVALID_REGULAR_EXPRESSION
}

TopicPartitions = list[tuple[str, int]]


def new_member_id() -> str:
    """A member id as Kafka 4 clients make their own (KIP-1082): a random UUID in Kafka's
    text form, URL-safe base64 without padding (22 characters)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        # Kafka's Uuid.randomUuid() never starts with "-": command-line tools would take
        # such an id for an option.
        if not text.startswith("-"):
            return text


class Reconcile:
    """The coordinator changed this member's assignment: give up ``revoke`` (commit their
    offsets first, and wait for that commit: the partitions go to their next owner as
    soon as the machine acknowledges), call on_partitions_revoked, then take ``assign``
    and call on_partitions_assigned, then :meth:`ConsumerGroupMembership.reconciled`.
    ``assignment`` is everything the member owns afterwards; ``epoch`` the member epoch
    the assignment came with.  Partitions are sorted (topic, partition) lists."""

    __slots__ = ("seq", "epoch", "revoke", "assign", "assignment")

    def __init__(self, seq: int, epoch: int, revoke: TopicPartitions, assign: TopicPartitions,
                 assignment: TopicPartitions):
        self.seq, self.epoch = seq, epoch
        self.revoke, self.assign, self.assignment = revoke, assign, assignment

    def __repr__(self) -> str:
        return f"Reconcile(epoch={self.epoch}, revoke={self.revoke}, assign={self.assign})"


class MetadataNeeded:
    """The assignment names topics by ids the machine has no name for yet (``topic_ids``,
    uuid.UUID): refresh metadata (a regex subscriber may not know the topics at all) and
    pass the names to set_topic_names().  The rest of the assignment is taken meanwhile."""

    def __init__(self, topic_ids: list[uuid.UUID]):
        self.topic_ids = topic_ids

    def __repr__(self) -> str:
        return f"MetadataNeeded({[str(t) for t in self.topic_ids]})"


class NonFatal:
    """An error for the consumer to raise from poll() while it stays in the group and
    heartbeats on (TOPIC_AUTHORIZATION_FAILED: it may be granted later)."""

    def __init__(self, error: BaseException):
        self.error = error


class ConsumerGroupMembership(GroupMembership):
    """One member of one consumer group on the KIP-848 protocol (see the module docstring
    for how a shell drives it).

    ``rebalance_timeout_ms`` is the consumer's max_poll_interval_ms, as in the Java client:
    the broker waits that long for a revocation, and a consumer that has not polled for
    that long leaves.  The session timeout and heartbeat interval are the broker's
    (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms; the
    interval comes in every answer); ``session_timeout_ms`` here only decides when a
    coordinator that answers no heartbeat is looked up again.

    Built on the classic :class:`~kafkawire.protocol.group.GroupMembership` for what the
    two protocols share: the coordinator lookup, the commits and offset fetches, the
    request bookkeeping; ``generation`` is the member epoch while it is above 0, else -1.
    """

    def __init__(
        self,
        group_id: str,
        *,
        rebalance_timeout_ms: int = 300000,
        session_timeout_ms: int = 45000,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
        group_instance_id: str | None = None,
        rack_id: str | None = None,
        server_assignor: str | None = None,
        member_id: str | None = None,
    ):
        # The broker refuses empty strings here (null is how "none" is said).
        for name, value in (("group_instance_id", group_instance_id), ("rack_id", rack_id),
                            ("group_remote_assignor", server_assignor), ("member_id", member_id)):
            if value == "":
                raise ValueError(f"{name} must be None or a non-empty string, not ''")
        super().__init__(
            group_id, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=5000,  # the broker's default, until its first answer
            retry_backoff_ms=retry_backoff_ms, group_instance_id=group_instance_id,
            protocol_type="consumer", request_timeout_ms=request_timeout_ms)
        self.member_id = member_id or new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.rack_id = rack_id
        self.server_assignor = server_assignor
        self.protocol = server_assignor
        self.topics: tuple[str, ...] | None = None
        self.regex: str | None = None
        self.topic_names: dict[uuid.UUID, str] = {}
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.target: dict[uuid.UUID, frozenset[int]] | None = None
        self._owned_version = 0  # one more on every reconciliation (see _heartbeat_request)
        self._reconcile: tuple[Reconcile, dict[uuid.UUID, frozenset[int]]] | None = None
        self._seq = 0
        self._reported_unknown: frozenset[uuid.UUID] = frozenset()
        # What the coordinator has heard since the last full heartbeat; None: send it all.
        self._sent: dict[str, Any] | None = None
        self._broker_regex: str | None = None  # the regex the coordinator was last told
        self._heartbeat_now = False

    # -- what the consumer tells it -------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str | None = None, regex: str | None = None) -> None:
        """Subscribe to ``topics`` (names) or to the topics ``regex`` matches (a RE2/J
        regular expression, evaluated by the broker: KIP-848).  A member sends the change
        with its next heartbeat, at once; a member that is not in the group joins with
        join()."""
        if (topics is None) == (regex is None):
            raise ValueError("subscribe() takes topics or a regex (exactly one)")
        if regex is not None:
            if not isinstance(regex, str) or not regex:
                raise ValueError(
                    f"the regex must be a non-empty str (RE2/J syntax, matched by the broker), "
                    f"not {regex!r}; a compiled Python pattern cannot be sent")
            self.topics, self.regex = None, regex
        else:
            names = tuple(sorted({topics} if isinstance(topics, str) else set(topics)))  # type: ignore[arg-type]
            if not names or not all(isinstance(t, str) and t for t in names):
                raise ValueError(f"subscribe() needs non-empty topic names, got {topics!r}; "
                                 f"leave() to stop consuming")
            self.topics, self.regex = names, None
        if self._in_group():
            self._heartbeat_now = True

    def join(self, now: float, reason: str = "") -> None:
        """Join the group (epoch 0) with the subscription: after subscribe(), and again
        after a Lost once the consumer has dropped its partitions.  Nothing to do while
        already a member."""
        if self.topics is None and self.regex is None:
            raise ValueError("join() before subscribe(): the group needs to know what this member reads")
        if self.state != UNJOINED:
            return
        self.state = JOINING
        self._drop_membership()
        self._heartbeat_now = True
        self.rejoin_needed = False
        self.last_rebalance_reason = reason or self.rejoin_reason or "joining the group"
        self.rejoin_reason = ""
        self._last_poll = now
        self._session_start = now

    def set_topic_names(self, names: Mapping[uuid.UUID, str]) -> None:
        """Topic id -> name, from metadata (kept, merged).  An assignment waits for the
        names of its topics; this lets it go on."""
        changed = False
        for topic_id, name in names.items():
            if topic_id is not None and topic_id.int != 0 and self.topic_names.get(topic_id) != name:
                self.topic_names[topic_id] = name
                changed = True
        if changed and self.state in (RECONCILING, ACKNOWLEDGING, STABLE):
            self._maybe_reconcile()

    @property
    def unresolved_topic_ids(self) -> list[uuid.UUID]:
        """The topic ids of the target assignment the machine has no name for."""
        return sorted(t for t in (self.target or {}) if t not in self.topic_names)

    def reconciled(self, ev: Reconcile) -> None:
        """The consumer acted on ``ev``: it gave up ``ev.revoke`` and took ``ev.assign``.
        The next heartbeat, sent at once, tells the coordinator.  A Reconcile from before
        a Lost or a leave() is ignored."""
        current = self._reconcile
        if current is None or current[0] is not ev:
            return
        self._reconcile = None
        self.owned = current[1]
        self._owned_version += 1
        self.state = ACKNOWLEDGING
        self._heartbeat_now = True
        self._maybe_reconcile()  # the target may have moved on meanwhile

    def leave(self, reason: str = "the consumer is closing", *, for_good: bool = False) -> Outgoing | None:
        """Leave the group now (the consumer gave up its partitions first); the heartbeat
        to send (epoch -1), or None when not a member.  A static member (group_instance_id)
        sends epoch -2 unless ``for_good``: the coordinator keeps its partitions for it
        until the session times out, so a restart gets them back (KIP-848, KIP-345)."""
        out = None
        if self.state != UNJOINED and self.coordinator is not None:
            stays = self.group_instance_id is not None and not for_good
            req = HEARTBEAT.Request(
                group_id=self.group_id, member_id=self.member_id,
                member_epoch=LEAVE_STATIC_EPOCH if stays else LEAVE_EPOCH,
                instance_id=self.group_instance_id)
            out = Outgoing("leave", HEARTBEAT, req, True, self.request_timeout, self.member_epoch, reason)
        self.state = UNJOINED
        self.rejoin_needed = False
        self._inflight.clear()
        self._drop_membership()
        return out

    def start_join(self, protocols: Any, now: float, reason: str = "") -> None:
        raise TypeError("the consumer group protocol (KIP-848) has no client-side join round: "
                        "call subscribe() and join(); the coordinator assigns the partitions")

    def set_assignments(self, generation: int, assignments: Any) -> None:
        raise TypeError("the consumer group protocol (KIP-848) assigns on the coordinator "
                        "(group_remote_assignor): a member never computes an assignment")

    def request_rejoin(self, reason: str) -> None:
        """Nothing to do: the coordinator notices subscription and metadata changes itself
        (the classic machine's commit handling calls this on REBALANCE_IN_PROGRESS)."""

    # -- the loop --------------------------------------------------------------------------

    def poll(self, now: float) -> list[Outgoing]:
        """The requests to send now (may also queue events: check events())."""
        out: list[Outgoing] = []
        if self._in_group():
            # The classic machine's: KIP-62's poll interval (leave(), then a Lost; the
            # consumer joins again at its next poll) and the coordinator's silence.
            self._check_timeouts(now)
        # A FindCoordinator, else the queued commits (and a leave): a commit of revoked
        # partitions goes out ahead of the heartbeat that gives them up.
        if (self._poll_coordinator(now, self._want_coordinator or self._in_group(), out)
                and self._in_group() and self._may_send("heartbeat", now)
                and (self._heartbeat_now or now >= self._heartbeat_due)):
            out.append(self._track(self._heartbeat_request(now)))
        return out

    def _in_group(self) -> bool:
        return self.state in (JOINING, RECONCILING, ACKNOWLEDGING, STABLE)

    def _heartbeat_request(self, now: float) -> Outgoing:
        """The next heartbeat: what changed since the last one, or everything when joining
        and after a failure (KIP-848: a null field, or -1, means "unchanged")."""
        joining = self.member_epoch == JOIN_EPOCH
        sent = {} if self._sent is None or joining else self._sent
        full = not sent
        req = HEARTBEAT.Request(group_id=self.group_id, member_id=self.member_id,
                                member_epoch=self.member_epoch, instance_id=self.group_instance_id)
        if full:
            req.rebalance_timeout_ms = int(self.rebalance_timeout * 1000)
            req.rack_id = self.rack_id
            req.server_assignor = self.server_assignor
        # A regex subscriber sends an empty name list: the coordinator tells a full
        # request by its non-null names, and a switch from names to a regex empties them.
        names = self.topics or ()
        if full or sent.get("names") != names:
            req.subscribed_topic_names = list(names)
        regex = self.regex
        if regex is not None and (full or sent.get("regex") != regex):
            req.subscribed_topic_regex = regex
        elif regex is None and self._broker_regex is not None:
            req.subscribed_topic_regex = ""  # drops the regex the coordinator has (v1)
        version = self._owned_version
        if joining:
            req.topic_partitions = []  # a member joins owning nothing
        elif full or sent.get("owned") != version:
            # Sent again after every reconciliation, even to the same set: the
            # coordinator moves on from a revocation only when it reads the owned
            # partitions in a heartbeat after it (KAFKA-16185's local epochs).
            req.topic_partitions = [_OWNED(topic_id=t, partitions=sorted(ps))
                                    for t, ps in sorted(self.owned.items())]
        self._sent = {"names": names, "regex": regex, "owned": version}
        self._heartbeat_now = False
        self._heartbeat_due = now + self.heartbeat_interval
        if self.state == ACKNOWLEDGING:
            # Acknowledged; still reconciling while topic names are missing.
            self.state = RECONCILING if self._reported_unknown else STABLE
        return Outgoing("heartbeat", HEARTBEAT, req, True, self.request_timeout, self.member_epoch)

    def next_wakeup(self, now: float) -> float:
        """Seconds until poll() may have something to send (at most 1)."""
        wake = super().next_wakeup(now)
        if self._in_group() and self.coordinator is not None and "heartbeat" not in self._inflight:
            due = now if self._heartbeat_now else self._heartbeat_due
            wake = min(wake, max(0.0, due - now, self._not_before.get("heartbeat", 0.0) - now))
        return wake

    # -- answers ---------------------------------------------------------------------------

    def _on_heartbeat(self, o: Outgoing, resp: Any, now: float) -> None:
        code = resp.error_code
        self.last_heartbeat_result = "ok" if code == 0 else errors.for_code(code).name
        if not self._in_group():
            return
        if code == 0:
            self._heartbeat_ok(o, resp, now)
            return
        self._sent = None  # after any error the next heartbeat says everything again
        what = (f"ConsumerGroupHeartbeat of group {self.group_id!r} (member {self.member_id!r}, "
                f"epoch {o.generation})")
        if code in _FENCED:
            self.last_error = errors.broker_error(code, what, resp.error_message)
            self._lost(f"heartbeat: {errors.for_code(code).name}: the coordinator no longer counts "
                       f"this member in (it missed its session timeout or fell behind the group), "
                       f"so its partitions may be another member's already")
            return
        if code == TOPIC_AUTHORIZATION_FAILED:
            # The member stays (the topics may be granted later); the consumer raises it.
            err = errors.broker_error(code, what, resp.error_message)
            self.last_error = err
            self._events.append(NonFatal(err))
            return
        fix = _FATAL_FIX.get(code)
        if fix is not None:
            err = errors.broker_error(code, what, resp.error_message)
            err.args = (f"{err.args[0]}: {fix}",)
            self._fail(err)
            return
        self._heartbeat_now = True
        self._retry_or_fail(o, code, now, what)

    def _heartbeat_ok(self, o: Outgoing, resp: Any, now: float) -> None:
        req = o.request
        if req.subscribed_topic_regex is not None:
            self._broker_regex = req.subscribed_topic_regex or None
        if resp.member_id:
            self.member_id = resp.member_id  # brokers before KIP-1082 hand out the id
        self._set_epoch(resp.member_epoch)
        if resp.heartbeat_interval_ms > 0:
            self.heartbeat_interval = resp.heartbeat_interval_ms / 1000
            self._heartbeat_due = min(self._heartbeat_due, now + self.heartbeat_interval)
        self.last_heartbeat_time = now
        self._session_start = now
        if self.state == JOINING:
            self.state = STABLE
            self._events.append(Joined(self.member_epoch, self.member_id, "", self.server_assignor or ""))
        if resp.assignment is not None:
            self.target = {tp.topic_id: frozenset(tp.partitions)
                           for tp in resp.assignment.topic_partitions if tp.partitions}
        self._maybe_reconcile()

    def _maybe_reconcile(self) -> None:
        """Hand the consumer the next step towards the target assignment, one at a time."""
        if self._reconcile is not None or self.target is None:
            return
        unknown = frozenset(t for t in self.target if t not in self.topic_names)
        if unknown and unknown != self._reported_unknown:
            self._events.append(MetadataNeeded(sorted(unknown)))
        self._reported_unknown = unknown
        resolved = {t: ps for t, ps in self.target.items() if t not in unknown}
        if resolved == self.owned:
            if self.state != ACKNOWLEDGING:
                self.state = RECONCILING if unknown else STABLE
            return
        owned, names = self._pairs(self.owned), self._pairs(resolved)
        self._seq += 1
        ev = Reconcile(self._seq, self.member_epoch, sorted(owned - names), sorted(names - owned), sorted(names))
        self._reconcile = (ev, resolved)
        self.state = RECONCILING
        self._events.append(ev)

    def _pairs(self, assignment: Mapping[uuid.UUID, frozenset[int]]) -> set[tuple[str, int]]:
        return {(self.topic_names[t], p) for t, ps in assignment.items() for p in ps}

    def _on_leave(self, o: Outgoing, resp: Any, now: float) -> None:
        code = resp.error_code
        # Already out of the group is what leaving wanted; anything else is worth a log line.
        if code and code not in _FENCED:
            raise errors.broker_error(
                code, f"leaving group {self.group_id!r} (ConsumerGroupHeartbeat with epoch "
                      f"{o.request.member_epoch})", resp.error_message)

    def _on_commit(self, o: Outgoing, resp: Any, now: float) -> dict[tuple[str, int], BaseException | None]:
        result = super()._on_commit(o, resp, now)
        stale = {tp: o.payload.get(tp, (-1, None))[0] for tp, err in result.items()
                 if isinstance(err, errors.BrokerError) and err.code == STALE_MEMBER_EPOCH}
        if not stale:
            return result
        if self.member_epoch > 0 and self._in_group():
            # The member's epoch moved on after the commit was built (or the answer that
            # says so is on its way): the member is still in the group, so the commit is
            # retried and then carries the current epoch (as the Java client does).
            err: BaseException = errors.broker_error(
                STALE_MEMBER_EPOCH, f"OffsetCommit of {sorted(stale)} for group {self.group_id!r} "
                                    f"with member epoch {o.generation}")
            err.args = (f"{err.args[0]}; this member is still in the group (epoch "
                        f"{self.member_epoch} now): commit again, it carries the current epoch",)
            err.retriable = True  # type: ignore[misc]
        else:
            err = errors.CommitFailedError(
                f"offsets for {sorted(stale)} were not committed: member epoch {o.generation} is "
                f"stale and this member is no longer in group {self.group_id!r}, so these "
                f"partitions may be another member's now; their records since the last commit "
                f"will be read again.  Poll again to rejoin", code=STALE_MEMBER_EPOCH, partitions=stale)
        for tp in stale:
            result[tp] = err
        return result

    # -- helpers ---------------------------------------------------------------------------

    def _set_epoch(self, epoch: int) -> None:
        self.member_epoch = epoch
        # Commits carry the epoch where the classic machine puts the generation (v9+).
        self.generation = epoch if epoch > 0 else -1

    def _drop_membership(self) -> None:
        # What a member has is gone: it joins again with epoch 0, owning nothing.
        self._set_epoch(JOIN_EPOCH)
        self.owned = {}
        self.target = None
        self._reconcile = None
        self._reported_unknown = frozenset()
        self._sent = None
        self._heartbeat_now = False
        self.assignment = None

    def _reset(self, reset_member: bool) -> None:
        # The member id stays for the member's lifetime (KIP-1082), whatever the error.
        self._set_epoch(JOIN_EPOCH)

    def _lost(self, reason: str) -> None:
        super()._lost(reason)
        self._inflight.pop("heartbeat", None)
        self._drop_membership()

    def _fail(self, err: BaseException) -> None:
        if self.owned or self._reconcile is not None:
            self._events.append(Lost(f"the member left the group: {err}"))
        super()._fail(err)
        self._inflight.pop("heartbeat", None)
        self._drop_membership()

    def _coordinator_dead(self, now: float, why: str) -> None:
        super()._coordinator_dead(now, why)
        self._sent = None  # the next coordinator hears everything
        if self._in_group():
            self._heartbeat_now = True

    def snapshot(self, now: float) -> dict[str, Any]:
        """The member's health: what group_state() shows."""
        snap = super().snapshot(now)
        names = self.topic_names
        snap.update(
            group_protocol="consumer",
            generation=self.member_epoch,
            member_epoch=self.member_epoch,
            leader=None,
            is_leader=False,
            protocol=self.server_assignor,
            server_assignor=self.server_assignor,
            subscription=list(self.topics) if self.topics is not None else None,
            subscribed_regex=self.regex,
            assignment=sorted(self._pairs(self.owned)),
            target_assignment=None if self.target is None else sorted(
                (names.get(t, str(t)), p) for t, ps in self.target.items() for p in ps),
            unresolved_topic_ids=[str(t) for t in self.unresolved_topic_ids],
            reconciling=self._reconcile is not None,
            heartbeat_interval_ms=int(self.heartbeat_interval * 1000),
        )
        return snap

