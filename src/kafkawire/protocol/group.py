"""Group membership (the classic protocol of the 0.9 protocol guide, with KIP-394 and KIP-345) and the
group's offset requests, as a state machine that does no I/O.

A shell drives it (the sync consumer's group thread, the asyncio consumer's task)::

    for out in m.poll(now): send(out)       # the requests due now
    m.on_response(out, response, now)       # an answer came (returns commit/fetch results)
    m.on_failure(out, exc, now)             # the request failed (connection, timeout)
    m.events()                              # what the consumer must act on
    m.next_wakeup(now)                      # when poll() has work again

and tells it what only the consumer knows: :meth:`start_join` once it has revoked what
the assignor's protocol requires, :meth:`set_assignments` when this member leads,
:meth:`poll_called` on every consumer poll, :meth:`leave`.  Time is always passed in
(monotonic seconds), so tests run it step by step with no broker and no clock.

The timeouts are the Java client's: a member that has had no successful heartbeat for
``session_timeout_ms`` takes its coordinator for dead and looks it up again; one whose
consumer has not polled for ``max_poll_interval_ms`` leaves the group (its partitions
are lost) and rejoins on the next poll; JoinGroup may take ``rebalance_timeout_ms``.
"""

from __future__ import annotations

from typing import Any, Iterable

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.coordinator import COORDINATOR_MOVED, FIND_COORDINATOR, GROUP, answers, find_request

__all__ = [
    "GroupMembership",
    "Outgoing",
    "Joined",
    "AssignmentNeeded",
    "Assigned",
    "Lost",
    "RejoinNeeded",
    "Failed",
    "UNJOINED",
    "JOINING",
    "AWAITING_ASSIGNMENT",
    "SYNCING",
    "STABLE",
]

JOIN_GROUP = apis.get("JoinGroup")
SYNC_GROUP = apis.get("SyncGroup")
HEARTBEAT = apis.get("Heartbeat")
LEAVE_GROUP = apis.get("LeaveGroup")
OFFSET_COMMIT = apis.get("OffsetCommit")
OFFSET_FETCH = apis.get("OffsetFetch")

#: States, as group_state() reports them.
UNJOINED = "unjoined"  # not a member (not subscribed, or left)
JOINING = "joining"  # finding the coordinator, or JoinGroup under way
AWAITING_ASSIGNMENT = "awaiting-assignment"  # the leader computes the assignment
SYNCING = "syncing"  # SyncGroup under way
STABLE = "stable"  # a member with an assignment (a rejoin may be pending)

_RETRY_LATER = frozenset({7, 14, 15, 16})  # REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, ...
_GENERATION_GONE = frozenset({22, 25, 27, 82})  # what makes a commit a CommitFailedError
MEMBER_ID_REQUIRED = 79  # KIP-394: the first JoinGroup only gets a member id to rejoin with
UNKNOWN_MEMBER_ID = 25
ILLEGAL_GENERATION = 22
REBALANCE_IN_PROGRESS = 27
FENCED_INSTANCE_ID = 82
INVALID_REQUEST = 42
# The librdkafka mock answers a follower's SyncGroup that arrives after the leader's (which
# carried every assignment) with INVALID_REQUEST, where Kafka gives the assignment: the
# member joins again, this many times in a row before the error is taken as it stands.
_SYNC_REFUSALS = 3

_JOIN_PROTOCOL = JOIN_GROUP.Request.JoinGroupRequestProtocol
_SYNC_ASSIGNMENT = SYNC_GROUP.Request.SyncGroupRequestAssignment
_LEAVE_MEMBER = LEAVE_GROUP.Request.MemberIdentity
_OC_TOPIC = OFFSET_COMMIT.Request.OffsetCommitRequestTopic
_OC_PARTITION = _OC_TOPIC.OffsetCommitRequestPartition
_OF_TOPIC = OFFSET_FETCH.Request.OffsetFetchRequestTopic
_OF_GROUP = OFFSET_FETCH.Request.OffsetFetchRequestGroup
_OF_GROUP_TOPIC = _OF_GROUP.OffsetFetchRequestTopics


class Outgoing:
    """One request the shell should send: ``api`` and ``request`` (fields for every
    version are set, the encoder keeps the negotiated version's), to the coordinator
    when ``to_coordinator`` else to any broker, answered within ``timeout`` seconds.
    ``kind`` names its purpose; ``token`` is the shell's own, handed back unchanged."""

    __slots__ = ("kind", "api", "request", "to_coordinator", "timeout", "generation", "token", "payload")

    def __init__(self, kind: str, api: Any, request: Any, to_coordinator: bool, timeout: float,
                 generation: int, payload: Any = None, token: Any = None):
        self.kind = kind
        self.api = api
        self.request = request
        self.to_coordinator = to_coordinator
        self.timeout = timeout
        self.generation = generation
        self.payload = payload
        self.token = token

    def __repr__(self) -> str:
        return f"<Outgoing {self.kind} {self.api.name} generation={self.generation}>"


class Joined:
    """JoinGroup succeeded: ``generation``, ``member_id``, ``leader`` (a member id) and
    the ``protocol`` (assignor) the group chose."""

    def __init__(self, generation: int, member_id: str, leader: str, protocol: str):
        self.generation, self.member_id, self.leader, self.protocol = generation, member_id, leader, protocol

    def __repr__(self) -> str:
        return f"Joined(generation={self.generation}, member_id={self.member_id!r}, leader={self.leader!r})"


class AssignmentNeeded:
    """This member leads: compute the assignment with ``protocol`` for ``members``
    (member id, group instance id, metadata bytes) and call set_assignments().

    With ``skip_assignment`` (KIP-814: a static leader rejoined a stable group, which
    keeps its assignment) the SyncGroup is already on its way without one: the leader
    only learns the members' subscriptions, to watch their topics' metadata."""

    def __init__(self, generation: int, protocol: str, members: list[tuple[str, str | None, bytes]],
                 skip_assignment: bool = False):
        self.generation, self.protocol, self.members = generation, protocol, members
        self.skip_assignment = skip_assignment


class Assigned:
    """SyncGroup gave this member its ``assignment`` (bytes, the protocol's format)."""

    def __init__(self, generation: int, protocol: str, assignment: bytes):
        self.generation, self.protocol, self.assignment = generation, protocol, assignment


class Lost:
    """The member's generation ended without a clean rebalance (expelled, fenced, left
    after a poll timeout): its partitions may already be another member's, so it must
    drop them without committing."""

    def __init__(self, reason: str):
        self.reason = reason


class RejoinNeeded:
    """The group is rebalancing (or must): the consumer revokes what its protocol
    requires, then calls start_join()."""

    def __init__(self, reason: str):
        self.reason = reason


class Failed:
    """A fatal error (``error``): the member is out of the group and does not retry."""

    def __init__(self, error: BaseException):
        self.error = error


class GroupMembership:
    """One member of one group (see the module docstring for how a shell drives it)."""

    def __init__(
        self,
        group_id: str,
        *,
        session_timeout_ms: int = 45000,
        rebalance_timeout_ms: int = 300000,
        heartbeat_interval_ms: int = 3000,
        retry_backoff_ms: int = 100,
        group_instance_id: str | None = None,
        protocol_type: str = "consumer",
        request_timeout_ms: int = 30000,
    ):
        if not group_id:
            raise ValueError("group_id must be a non-empty string")
        self.group_id = group_id
        self.session_timeout = session_timeout_ms / 1000
        self.rebalance_timeout = rebalance_timeout_ms / 1000
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.group_instance_id = group_instance_id
        self.protocol_type = protocol_type

        self.state = UNJOINED
        self.coordinator: tuple[int, str, int] | None = None
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader: str | None = None
        self.assignment: bytes | None = None
        self.rejoin_needed = False
        self.rejoin_reason = ""
        self.last_rebalance_reason = ""
        self.last_heartbeat_time: float | None = None  # when the last heartbeat was answered
        self.last_heartbeat_result = ""
        self.last_error: BaseException | None = None
        self._sync_refused = 0  # SyncGroups in a row answered INVALID_REQUEST

        self._protocols: list[tuple[str, bytes]] = []
        self._want_coordinator = False
        self._inflight: dict[str, Outgoing] = {}
        self._not_before: dict[str, float] = {}  # kind -> earliest time to send it again
        self._heartbeat_due = 0.0
        self._session_start = 0.0  # the latest of: joined, heartbeat answered
        self._last_poll: float | None = None
        self._sync_assignments: dict[str, bytes] = {}
        self._pending: list[Outgoing] = []  # commits / offset fetches waiting for a coordinator
        # Held ones a permanent FindCoordinator error refused, with it (take_refused).
        self._refused: list[tuple[Outgoing, BaseException]] = []
        # id(outgoing) -> (outgoing, since) of those held while no coordinator is known.
        self._held_since: dict[int, tuple[Outgoing, float]] = {}
        self._events: list[Any] = []

    # -- what the consumer tells it -------------------------------------------------------

    def start_join(self, protocols: Iterable[tuple[str, bytes]], now: float, reason: str = "") -> None:
        """Join (or rejoin) offering ``protocols``: (assignor name, metadata), in order
        of preference."""
        self._protocols = [(n, bytes(m)) for n, m in protocols]
        if not self._protocols:
            raise ValueError("start_join() needs at least one (protocol name, metadata)")
        self.state = JOINING
        self.rejoin_needed = False
        self.last_rebalance_reason = reason or self.rejoin_reason or "joining the group"
        self.rejoin_reason = ""
        self._last_poll = now
        self._inflight.pop("join", None)
        self._inflight.pop("sync", None)

    def set_assignments(self, generation: int, assignments: dict[str, bytes]) -> None:
        """The leader's assignment for ``generation``: member id -> assignment bytes."""
        if self.state != AWAITING_ASSIGNMENT or generation != self.generation:
            return  # the group moved on while the assignment was computed
        self._sync_assignments = assignments
        self.state = SYNCING

    def poll_called(self, now: float) -> None:
        """The consumer polled: it is alive (max_poll_interval_ms counts from here)."""
        self._last_poll = now

    def request_rejoin(self, reason: str) -> None:
        """Rejoin at the next chance (the subscription or a topic's partitions changed)."""
        if self.state != UNJOINED and not self.rejoin_needed:
            self.rejoin_needed = True
            self.rejoin_reason = reason
            self._events.append(RejoinNeeded(reason))

    def leave(self, reason: str = "the consumer is closing") -> Outgoing | None:
        """Leave the group now; the LeaveGroup to send, or None (not a member, or a
        static member, which keeps its place until its session times out: KIP-345)."""
        out = None
        if self.member_id and self.coordinator is not None and self.group_instance_id is None:
            req = LEAVE_GROUP.Request(
                group_id=self.group_id, member_id=self.member_id,
                members=[_LEAVE_MEMBER(member_id=self.member_id, group_instance_id=None, reason=reason)])
            out = Outgoing("leave", LEAVE_GROUP, req, True, self.request_timeout, self.generation)
        self._reset(reset_member=self.group_instance_id is None)
        self.state = UNJOINED
        self.rejoin_needed = False
        self._inflight.clear()
        return out

    # -- offsets ---------------------------------------------------------------------------

    def commit(self, offsets: dict[tuple[str, int], tuple[int, str | None]], token: Any = None) -> None:
        """Queue an OffsetCommit of ``offsets``: (topic, partition) -> (next offset to
        read, metadata).  Sent with the current generation once the coordinator is known;
        a member that is not in the group commits as a simple consumer (generation -1)."""
        self._pending.append(Outgoing("commit", OFFSET_COMMIT, None, True, self.request_timeout,
                                      -1, dict(offsets), token))
        self._want_coordinator = True

    def expire_held(self, now: float) -> list[Outgoing]:
        """The commits and offset fetches held for want of a coordinator for longer than
        their request timeout, dequeued: the caller fails them.  Without this, while the
        coordinator (or every broker) is down, a commit_async() callback would wait for
        ever and every auto-commit would add one more request, all sent at once later."""
        if self.coordinator is not None or not self._pending:
            self._held_since.clear()
            return []
        expired = []
        for o in self._pending:
            since = self._held_since.setdefault(id(o), (o, now))[1]
            if now - since > o.timeout and o.kind in ("commit", "fetch_offsets"):
                expired.append(o)
        if expired:
            self._pending = [o for o in self._pending if o not in expired]
            for o in expired:
                del self._held_since[id(o)]
        return expired

    def take_refused(self) -> list[tuple[Outgoing, BaseException]]:
        """The commits and offset fetches a permanent FindCoordinator error ended (the
        group id not authorized, say), each with that error, dequeued: the caller fails
        them at once instead of holding them for a coordinator that will not come."""
        out, self._refused = self._refused, []
        return out

    def fetch_offsets(self, partitions: Iterable[tuple[str, int]], token: Any = None) -> None:
        """Queue an OffsetFetch of the group's committed offsets for ``partitions``."""
        tps = sorted(set(partitions))
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        req = OFFSET_FETCH.Request(
            group_id=self.group_id,
            topics=[_OF_TOPIC(name=t, partition_indexes=ps) for t, ps in topics.items()],
            groups=[_OF_GROUP(group_id=self.group_id, topics=[
                _OF_GROUP_TOPIC(name=t, partition_indexes=ps) for t, ps in topics.items()])],
            require_stable=True)
        self._pending.append(Outgoing("fetch_offsets", OFFSET_FETCH, req, True, self.request_timeout,
                                      -1, tps, token))
        self._want_coordinator = True

    def _commit_request(self, offsets: dict[tuple[str, int], tuple[int, str | None]]) -> Any:
        member = self.generation >= 0  # else a simple consumer's commit (or the group refuses it)
        topics: dict[str, list[Any]] = {}
        for (t, p), (offset, meta) in sorted(offsets.items()):
            topics.setdefault(t, []).append(
                _OC_PARTITION(partition_index=p, committed_offset=offset, committed_metadata=meta))
        return OFFSET_COMMIT.Request(
            group_id=self.group_id,
            generation_id_or_member_epoch=self.generation if member else -1,
            member_id=self.member_id if member else "",
            group_instance_id=self.group_instance_id if member else None,
            topics=[_OC_TOPIC(name=t, partitions=ps) for t, ps in topics.items()])

    # -- the loop --------------------------------------------------------------------------

    def poll(self, now: float) -> list[Outgoing]:
        """The requests to send now (may also queue events: check events())."""
        out: list[Outgoing] = []
        if self.state == STABLE:
            self._check_timeouts(now)
        need_coordinator = self._want_coordinator or self.state in (JOINING, SYNCING, STABLE)
        if not self._poll_coordinator(now, need_coordinator, out):
            return out
        if self.state == JOINING and self._may_send("join", now):
            out.append(self._track(self._join_request()))
        elif self.state == SYNCING and self._may_send("sync", now):
            out.append(self._track(self._sync_request()))
        elif self.state == STABLE and now >= self._heartbeat_due and self._may_send("heartbeat", now):
            req = HEARTBEAT.Request(group_id=self.group_id, generation_id=self.generation,
                                    member_id=self.member_id, group_instance_id=self.group_instance_id)
            self._heartbeat_due = now + self.heartbeat_interval
            out.append(self._track(Outgoing("heartbeat", HEARTBEAT, req, True, self.request_timeout,
                                            self.generation)))
        return out

    def _poll_coordinator(self, now: float, need_coordinator: bool, out: list[Outgoing]) -> bool:
        """poll()'s part shared with the KIP-848 machine (kafkawire.protocol.consumer_group):
        a FindCoordinator while there is no coordinator (False: nothing else can go), else
        the queued commits, offset fetches and leaves (True)."""
        if self.coordinator is None:
            if need_coordinator and self._may_send("find", now):
                req = find_request([self.group_id], GROUP)
                out.append(self._track(Outgoing("find", FIND_COORDINATOR, req, False,
                                                self.request_timeout, self.generation)))
            return False
        # Queued commits go first: one made while revoking reaches the coordinator
        # ahead of the JoinGroup that follows it, so the next owner reads it.
        for o in self._pending:
            if o.kind == "commit":
                o.request = self._commit_request(o.payload)
                o.generation = self.generation
            out.append(o)
        self._pending = []
        self._want_coordinator = False
        return True

    def _may_send(self, kind: str, now: float) -> bool:
        return kind not in self._inflight and self._not_before.get(kind, 0.0) <= now

    def _track(self, o: Outgoing) -> Outgoing:
        self._inflight[o.kind] = o
        return o

    def _check_timeouts(self, now: float) -> None:
        if self._last_poll is not None and now - self._last_poll > self.rebalance_timeout:
            # KIP-62: the consumer stopped polling; let the group move its partitions on.
            reason = (f"the consumer did not poll for {now - self._last_poll:.1f}s, more than "
                      f"max_poll_interval_ms={self.rebalance_timeout * 1000:.0f}: it left the group "
                      f"(process records faster, or raise max_poll_interval_ms / lower max_poll_records)")
            leave = self.leave(reason)
            if leave is not None:
                self._pending.append(leave)
            self._lost(reason)
            return
        if now - self._session_start > self.session_timeout:
            self._coordinator_dead(now, f"no heartbeat answered for {self.session_timeout:g}s")

    def _join_request(self) -> Outgoing:
        req = JOIN_GROUP.Request(
            group_id=self.group_id,
            session_timeout_ms=int(self.session_timeout * 1000),
            rebalance_timeout_ms=int(self.rebalance_timeout * 1000),
            member_id=self.member_id, group_instance_id=self.group_instance_id,
            protocol_type=self.protocol_type,
            protocols=[_JOIN_PROTOCOL(name=n, metadata=m) for n, m in self._protocols],
            reason=self.last_rebalance_reason[:200] or None)
        # The coordinator holds JoinGroup until every member has joined, up to the
        # rebalance timeout: wait that long, plus a margin, as the Java client does.
        return Outgoing("join", JOIN_GROUP, req, True, self.rebalance_timeout + 5.0, self.generation)

    def _sync_request(self) -> Outgoing:
        assignments = self._sync_assignments
        req = SYNC_GROUP.Request(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type=self.protocol_type,
            protocol_name=self.protocol,
            assignments=[_SYNC_ASSIGNMENT(member_id=m, assignment=a) for m, a in assignments.items()])
        return Outgoing("sync", SYNC_GROUP, req, True, self.rebalance_timeout + 5.0, self.generation)

    def next_wakeup(self, now: float) -> float:
        """Seconds until poll() may have something to send (at most 1)."""
        wake = 1.0
        for kind, t in self._not_before.items():
            if kind not in self._inflight and t > now:
                wake = min(wake, t - now)
        if self.state == STABLE:
            wake = min(wake, max(0.0, self._heartbeat_due - now))
        if self._pending and self.coordinator is not None:
            wake = 0.0
        return wake

    def events(self) -> list[Any]:
        """Events since the last call, oldest first."""
        ev, self._events = self._events, []
        return ev

    # -- answers ---------------------------------------------------------------------------

    def on_failure(self, o: Outgoing, exc: BaseException, now: float) -> Any:
        """``o`` got no answer (connection lost, timeout).  For a commit or an offset
        fetch, returns the error for the caller."""
        if not self._current(o):
            return exc  # replaced by a newer request of its kind (or the member moved on)
        self.last_error = exc
        if o.kind == "heartbeat":
            self.last_heartbeat_result = f"failed: {exc}"
        if o.to_coordinator:
            self._coordinator_dead(now, f"{o.api.name} failed: {exc}")
        else:
            self._not_before[o.kind] = now + self.retry_backoff
        return exc

    def refuse(self, o: Outgoing, err: BaseException) -> None:
        """The shell did not send ``o``: the broker cannot serve it (its ApiVersions answer
        says so), and asking again would not change that.  The membership ends with
        ``err`` (a :class:`Failed`)."""
        if self._current(o):
            self._fail(err)

    def on_response(self, o: Outgoing, resp: Any, now: float) -> Any:
        """Apply the answer to ``o``.  Returns, for a commit, {(topic, partition):
        None or the error}; for an offset fetch, {(topic, partition): (offset,
        metadata)} with offset -1 where nothing is committed, or raises the group's error."""
        if not self._current(o) and o.kind in ("find", "join", "sync", "heartbeat"):
            return None  # an answer to a request that was replaced: a newer one is in flight
        handler = getattr(self, f"_on_{o.kind}")
        return handler(o, resp, now)

    def _current(self, o: Outgoing) -> bool:
        """True for a commit, fetch or leave, or the tracked request of its kind (which
        then stops being in flight)."""
        if o.kind not in ("find", "join", "sync", "heartbeat"):
            return True
        if self._inflight.get(o.kind) is not o:
            return False
        del self._inflight[o.kind]
        return True

    def _on_find(self, o: Outgoing, resp: Any, now: float) -> None:
        _key, node, host, port, code, msg = answers(resp, [self.group_id])[0]
        if code:
            err = errors.broker_error(code, f"FindCoordinator for group {self.group_id!r}", msg)
            if err.retriable:
                self._not_before["find"] = now + self.retry_backoff
                self.last_error = err
            else:
                held = [o for o in self._pending if o.kind in ("commit", "fetch_offsets")]
                self._pending = [o for o in self._pending if o not in held]
                self._refused.extend((o, err) for o in held)
                self._fail(err)
            return
        self.coordinator = (node, host, port)
        self._session_start = now
        self._heartbeat_due = now

    def _on_join(self, o: Outgoing, resp: Any, now: float) -> None:
        if self.state != JOINING:
            return
        code = resp.error_code
        if code == 0:
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.protocol = resp.protocol_name
            self.leader = resp.leader
            self._events.append(Joined(self.generation, self.member_id, self.leader, self.protocol or ""))
            self._session_start = now
            if self.member_id == self.leader:
                members = [(m.member_id, getattr(m, "group_instance_id", None), bytes(m.metadata))
                           for m in resp.members]
                skip = bool(getattr(resp, "skip_assignment", False))
                if skip:
                    # KIP-814 (JoinGroup v9): the group stays as it is; an assignment sent
                    # now would be ignored by the coordinator, so none is computed.
                    self._sync_assignments = {}
                    self.state = SYNCING
                else:
                    self.state = AWAITING_ASSIGNMENT
                self._events.append(AssignmentNeeded(self.generation, self.protocol or "", members, skip))
            else:
                self._sync_assignments = {}
                self.state = SYNCING
            return
        if code == MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id  # rejoin at once with it (KIP-394)
            return
        if code == UNKNOWN_MEMBER_ID:
            self._reset(reset_member=True)
            return
        if code == ILLEGAL_GENERATION or code == REBALANCE_IN_PROGRESS:
            self._reset(reset_member=False)
            return
        self._retry_or_fail(o, code, now, f"JoinGroup of group {self.group_id!r}")

    def _on_sync(self, o: Outgoing, resp: Any, now: float) -> None:
        if self.state != SYNCING or o.generation != self.generation:
            return
        code = resp.error_code
        if code == INVALID_REQUEST and self._sync_refused < _SYNC_REFUSALS:
            self._sync_refused += 1
            self.last_error = errors.broker_error(code, f"SyncGroup of group {self.group_id!r}")
            self._reset(reset_member=False)
            self.state = JOINING
            return
        self._sync_refused = 0
        if code == 0:
            self.state = STABLE
            self.assignment = bytes(resp.assignment)
            self._session_start = now
            self._heartbeat_due = now + self.heartbeat_interval
            self._events.append(Assigned(self.generation, self.protocol or "", self.assignment))
            return
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS):
            self._reset(reset_member=code == UNKNOWN_MEMBER_ID)
            self.state = JOINING
            return
        self._retry_or_fail(o, code, now, f"SyncGroup of group {self.group_id!r}")
        if self.state == SYNCING and o.kind == "sync":
            self.state = JOINING  # a coordinator move: the new one needs a fresh join

    def _on_heartbeat(self, o: Outgoing, resp: Any, now: float) -> None:
        code = resp.error_code
        self.last_heartbeat_result = "ok" if code == 0 else errors.for_code(code).name
        if o.generation != self.generation or self.state != STABLE:
            return
        if code == 0:
            self.last_heartbeat_time = now
            self._session_start = now
            return
        if code == REBALANCE_IN_PROGRESS:
            self.request_rejoin("the coordinator started a rebalance (a member joined or left)")
            self._session_start = now
            return
        if code in (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
            self._reset(reset_member=code == UNKNOWN_MEMBER_ID)
            self._lost(f"heartbeat: {errors.for_code(code).name}, the group went on without this member")
            return
        self._retry_or_fail(o, code, now, f"Heartbeat of group {self.group_id!r}")

    def _on_leave(self, o: Outgoing, resp: Any, now: float) -> None:
        # The member is gone from this side either way; an error is only worth a log line.
        codes = [resp.error_code] + [m.error_code for m in getattr(resp, "members", None) or ()]
        code = next((c for c in codes if c), 0)
        if code:
            raise errors.broker_error(code, f"LeaveGroup of group {self.group_id!r}")

    def _on_commit(self, o: Outgoing, resp: Any, now: float) -> dict[tuple[str, int], BaseException | None]:
        result: dict[tuple[str, int], BaseException | None] = {}
        gone: dict[tuple[str, int], int] = {}
        gone_code = 0
        for t in resp.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                code = p.error_code
                if code == 0:
                    result[tp] = None
                elif code in _GENERATION_GONE:
                    gone[tp] = o.payload.get(tp, (-1, None))[0]
                    gone_code = code
                else:
                    if code in COORDINATOR_MOVED:
                        self._coordinator_dead(now, f"OffsetCommit: {errors.for_code(code).name}")
                    result[tp] = errors.broker_error(code, f"OffsetCommit of {tp[0]}[{tp[1]}] for group {self.group_id!r}")
        if gone:
            name = errors.for_code(gone_code).name
            err = errors.CommitFailedError(
                f"offsets for {sorted(gone)} were not committed: the group {self.group_id!r} "
                f"{'is rebalancing' if gone_code == REBALANCE_IN_PROGRESS else 'has a newer generation'} "
                f"({name}), so these partitions may be another member's now; their records since "
                f"the last commit will be read again.  Poll again to rejoin; processing a poll's "
                f"records within max_poll_interval_ms avoids this", code=gone_code, partitions=gone)
            for tp in gone:
                result[tp] = err
            if gone_code == REBALANCE_IN_PROGRESS:
                self.request_rejoin("a commit found the group rebalancing")
            elif o.generation == self.generation and self.state == STABLE:
                self._reset(reset_member=gone_code == UNKNOWN_MEMBER_ID)
                self._lost(f"commit: {name}")
        for tp in o.payload:
            result.setdefault(tp, None)
        return result

    def _on_fetch_offsets(self, o: Outgoing, resp: Any, now: float) -> dict[tuple[str, int], tuple[int, str | None]]:
        groups = getattr(resp, "groups", None)
        if groups:  # v8+
            g = groups[0]
            code, topics = g.error_code, g.topics
        else:
            code, topics = getattr(resp, "error_code", 0), resp.topics
        if code:
            if code in COORDINATOR_MOVED:
                self._coordinator_dead(now, f"OffsetFetch: {errors.for_code(code).name}")
            raise errors.broker_error(code, f"OffsetFetch for group {self.group_id!r}")
        out: dict[tuple[str, int], tuple[int, str | None]] = {}
        for t in topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if p.error_code:
                    if p.error_code in COORDINATOR_MOVED:
                        self._coordinator_dead(now, f"OffsetFetch: {errors.for_code(p.error_code).name}")
                    raise errors.broker_error(p.error_code, f"OffsetFetch of {tp[0]}[{tp[1]}] for group {self.group_id!r}")
                out[tp] = (p.committed_offset, p.metadata)
        for tp in o.payload:
            out.setdefault(tp, (-1, None))
        return out

    # -- helpers ---------------------------------------------------------------------------

    def _retry_or_fail(self, o: Outgoing, code: int, now: float, what: str) -> None:
        err = errors.broker_error(code, what)
        self.last_error = err
        if code in COORDINATOR_MOVED:
            self._coordinator_dead(now, f"{o.api.name}: {err.name}")
        elif code in _RETRY_LATER or err.retriable:
            self._not_before[o.kind] = now + self.retry_backoff
        else:
            self._fail(err)

    def _coordinator_dead(self, now: float, why: str) -> None:
        if self.coordinator is not None:
            self.coordinator = None
            self.last_rebalance_reason = f"coordinator lost: {why}"
        self._inflight.pop("heartbeat", None)
        self._not_before["find"] = now + self.retry_backoff
        self._session_start = now
        if self.state == SYNCING:
            self.state = JOINING

    def _reset(self, reset_member: bool) -> None:
        self.generation = -1
        self.protocol = None
        self.leader = None
        if reset_member:
            self.member_id = ""

    def _lost(self, reason: str) -> None:
        # Not a member any more: no JoinGroup until start_join(), so the consumer drops
        # its partitions (without committing) before it rejoins.
        self.state = UNJOINED
        self.assignment = None
        self.rejoin_needed = True
        self.rejoin_reason = reason
        self.last_rebalance_reason = reason
        self._inflight.pop("join", None)
        self._inflight.pop("sync", None)
        self._events.append(Lost(reason))

    def _fail(self, err: BaseException) -> None:
        self.last_error = err
        self.state = UNJOINED
        self.rejoin_needed = False
        self._events.append(Failed(err))

    def snapshot(self, now: float) -> dict[str, Any]:
        """The member's health: what group_state() shows."""
        return {
            "group_id": self.group_id,
            "state": self.state,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "generation": self.generation,
            "protocol": self.protocol,
            "leader": self.leader,
            "is_leader": bool(self.member_id) and self.member_id == self.leader,
            "coordinator": self.coordinator,
            "rejoin_needed": self.rejoin_needed,
            "rejoin_reason": self.rejoin_reason,
            "last_rebalance_reason": self.last_rebalance_reason,
            "last_heartbeat_age": None if self.last_heartbeat_time is None else now - self.last_heartbeat_time,
            "last_heartbeat_result": self.last_heartbeat_result,
            "last_error": None if self.last_error is None else str(self.last_error),
        }

