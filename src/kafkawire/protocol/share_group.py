"""A member of a share group (KIP-932, "queues for Kafka") as a state machine that does no
I/O: events in, actions out.

A share group's members read the same partitions together.  The group coordinator hands
out partitions with ShareGroupHeartbeat (no revocation round: an assignment is taken as it
comes); each partition leader hands out records with ShareFetch, each one *acquired* by
one member under a time-limited lock (the answer's AcquisitionLockTimeoutMs) and with a
delivery count.  The member acknowledges every record it was given: ACCEPT (done), RELEASE
(give it to someone again: delivered again with its count one higher) or REJECT (never
again), riding on its next ShareFetch to that leader or in a ShareAcknowledge of its own.
A record whose lock runs out unacknowledged is released; one delivered
``group.share.delivery.count.limit`` times is archived.  Fetches and acknowledgements to
one leader travel in a share session whose epoch goes up by one with every request (0
opens it, -1 closes it, and closing releases what the member still holds there).

A shell drives it like this::

    m.subscribe(["orders"], now)
    for send in m.poll(now, meta, fetch=True): ...   # requests due now (Send objects)
    m.on_answer(send, response, now)                  # its answer came
    m.on_failure(send, exc, now)                      # it failed (connection, timeout)
    m.take_records(max_records)                       # records for the caller's poll()
    m.acknowledge(record, ACCEPT | RELEASE | REJECT)  # explicit acknowledgement
    m.commit(now)                                     # acknowledgements out now: a Commit
    m.completions()                                   # acknowledgement results for callbacks
    m.events()                                        # MetadataNeeded / Failed
    m.next_wakeup(now)                                # when poll() has work again
    m.close(now)                                      # then poll() until m.closed

``meta`` is the shell's :class:`~kafkawire.protocol.metadata.ClusterMetadata` (leaders and
topic ids; read, never changed).  Time is passed in (monotonic seconds).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from typing import Any, Callable

from kafkawire import codec, errors
from kafkawire.errors import KafkaWireError
from kafkawire.protocol import apis
from kafkawire.protocol.consumer_group import new_member_id
from kafkawire.protocol.coordinator import COORDINATOR_MOVED, FIND_COORDINATOR, GROUP, answers, find_request
from kafkawire.protocol.fetcher import TopicPartition
from kafkawire.protocol.metadata import check_topic_name

__all__ = [
    "AcknowledgeType",
    "ACCEPT",
    "RELEASE",
    "REJECT",
    "ShareConsumerRecord",
    "ShareGroupMember",
    "Send",
    "Commit",
    "Completion",
    "MetadataNeeded",
    "Failed",
    "AcknowledgementStateError",
    "ShareGroupFatalError",
    "AcknowledgementCallback",
    "share_mode",
    "member_for",
]

HEARTBEAT = apis.get("ShareGroupHeartbeat")
SHARE_FETCH = apis.get("ShareFetch")
SHARE_ACKNOWLEDGE = apis.get("ShareAcknowledge")


#: ``callback(offsets, error)``: {partition: [offset, ...]} answered, None or the typed error.
AcknowledgementCallback = Callable[[dict[TopicPartition, list[int]], "BaseException | None"], Any]

_MODE_KEYS = ("share_acknowledgement_mode", "share.acknowledgement.mode")


def share_mode(options: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A share consumer's options split into the consumer's and its
    ``share_acknowledgement_mode`` ("implicit" or "explicit", the Java client's
    share.acknowledgement.mode)."""
    rest = dict(options)
    mode = "implicit"
    for key in _MODE_KEYS:
        if key in rest:
            mode = str(rest.pop(key)).lower()
    if mode not in ("implicit", "explicit"):
        raise errors.ConfigError(f"share_acknowledgement_mode must be 'implicit' or 'explicit', not {mode!r}")
    return rest, mode


def member_for(config: Any, mode: str) -> ShareGroupMember:
    """The member a share consumer with these (consumer) options drives."""
    if not config.group_id:
        raise errors.ConfigError("a share consumer needs group_id: the share group its members read together")
    return ShareGroupMember(
        config.group_id, acknowledgement_mode=mode, max_wait_ms=config.fetch_max_wait_ms,
        min_bytes=config.fetch_min_bytes, max_bytes=config.fetch_max_bytes, max_records=config.max_poll_records,
        retry_backoff_ms=config.retry_backoff_ms, check_crcs=config.check_crcs,
        key_deserializer=config.key_deserializer, value_deserializer=config.value_deserializer)


class AcknowledgeType(enum.IntEnum):
    """How a record is acknowledged (Kafka's AcknowledgeType; GAP marks an offset that
    holds no record, such as a transaction marker)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
REJECT = AcknowledgeType.REJECT
GAP = AcknowledgeType.GAP

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
# Share session epochs: 0 opens a session, -1 closes it; after 2**31-1 the count starts at 1.
INITIAL_SESSION_EPOCH = 0
FINAL_SESSION_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
_SESSION_LOST = frozenset({SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH})
# The coordinator no longer counts the member in: join again with epoch 0, same member id.
_FENCED = frozenset({UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH})
# Leadership moved or the topic is not known here yet: ask for metadata, fetch again.
_STALE_LEADER = frozenset({NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, 5, 74, 75})

_FATAL_FIX = {
    24: "give the share consumer a valid group_id",  # INVALID_GROUP_ID
    30: "grant the consumer's principal READ on the group",  # GROUP_AUTHORIZATION_FAILED
    35: "the broker does not speak share groups: it needs Kafka 4.1+ with the share.version "
        "feature enabled (the default from Kafka 4.2)",  # UNSUPPORTED_VERSION
    81: "the group has group.share.max.size members already: use another group or raise "
        "the broker's limit",  # GROUP_MAX_SIZE_REACHED
    23: "the group id is used by a group of another type (a consumer or streams group): "
        "give the share group an id of its own",  # INCONSISTENT_GROUP_PROTOCOL
    69: "the group id is used by a group of another type: give the share group an id of "
        "its own",  # GROUP_ID_NOT_FOUND
}


class AcknowledgementStateError(KafkaWireError, RuntimeError):
    """An acknowledgement that does not fit the records held: a record not delivered by the
    last poll (or acknowledged already), or, with explicit acknowledgement, a poll while
    records of the last one are still unacknowledged."""


class ShareGroupFatalError(KafkaWireError):
    """The share group refused this member for good; the message names the fix.
    ``cause`` is the broker's typed error."""

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause
        self.code = getattr(cause, "code", None)


class ShareConsumerRecord:
    """One record a share consumer was given: ``topic``, ``partition``, ``offset``,
    ``timestamp``, ``timestamp_type``, ``key``, ``value``, ``headers`` and
    ``delivery_count`` (1 on its first delivery; higher after a release or a lock that ran
    out)."""

    __slots__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
                 "headers", "delivery_count")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int, timestamp_type: int,
                 key: Any, value: Any, headers: Any = (), delivery_count: int = 1):
        self.topic, self.partition, self.offset = topic, partition, offset
        self.timestamp, self.timestamp_type = timestamp, timestamp_type
        self.key, self.value, self.headers = key, value, headers
        self.delivery_count = delivery_count

    def __repr__(self) -> str:
        return (f"ShareConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, delivery_count={self.delivery_count}, key={self.key!r}, "
                f"value={self.value!r})")


def _init_record(r: ShareConsumerRecord, topic: str, partition: int, offset: int, timestamp: int,
                 timestamp_type: int, key: Any, value: Any, headers: Any) -> None:
    r.topic, r.partition, r.offset = topic, partition, offset
    r.timestamp, r.timestamp_type = timestamp, timestamp_type
    r.key, r.value, r.headers = key, value, headers
    r.delivery_count = 1


class Send:
    """A request to send: ``api`` with ``request`` to broker ``node`` (None: any broker).
    ``kind`` is "find", "heartbeat", "fetch", "ack" or "leave"; hand the Send back with
    its answer (:meth:`ShareGroupMember.on_answer`) or failure."""

    __slots__ = ("kind", "node", "api", "request", "acks", "epoch", "commits")

    def __init__(self, kind: str, node: int | None, api: Any, request: Any,
                 acks: dict[TopicPartition, dict[int, int]] | None = None, epoch: int = 0,
                 commits: list[Commit] | None = None):
        self.kind, self.node, self.api, self.request = kind, node, api, request
        self.acks = acks or {}
        self.epoch = epoch
        self.commits = commits or []

    def __repr__(self) -> str:
        return f"Send({self.kind}, node={self.node})"


class Commit:
    """Acknowledgements on their way (commit_sync / commit_async): ``done`` once every
    leader answered; ``results`` is {partition: None or the typed error}."""

    def __init__(self, acks: dict[TopicPartition, dict[int, int]]):
        self.acks = acks
        self.results: dict[TopicPartition, BaseException | None] = {}
        self.pending: set[TopicPartition] = set(acks)  # not sent yet
        self.inflight = 0
        self.done = not acks

    def _check(self) -> None:
        self.done = not self.pending and not self.inflight


class Completion:
    """Acknowledgements the broker answered: ``offsets`` {partition: offsets} and ``error``
    (None, or the typed error for them), for an acknowledgement commit callback."""

    __slots__ = ("offsets", "error")

    def __init__(self, offsets: dict[TopicPartition, list[int]], error: BaseException | None):
        self.offsets, self.error = offsets, error

    def __repr__(self) -> str:
        return f"Completion({self.offsets}, {self.error!r})"


class MetadataNeeded:
    """The assignment names topic ids the metadata has no name for, or leaders are unknown:
    refresh the metadata (with ``topics`` in its interest)."""

    def __init__(self, topics: list[str]):
        self.topics = topics


class Failed:
    """The membership ended for good: raise ``error`` to the caller."""

    def __init__(self, error: BaseException):
        self.error = error


class _Session:
    __slots__ = ("epoch", "parts", "busy")

    def __init__(self) -> None:
        self.epoch = INITIAL_SESSION_EPOCH
        self.parts: set[TopicPartition] = set()
        self.busy = False  # a request of this session in flight: one at a time, epochs in order


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


def _span(offsets: list[int]) -> str:
    if not offsets:
        return "[]"
    return f"{offsets[0]}" if len(offsets) == 1 else f"{offsets[0]}..{offsets[-1]} ({len(offsets)})"


def ack_batches(acks: dict[int, int]) -> list[tuple[int, int, list[int]]]:
    """{offset: type} as AcknowledgementBatches: runs of consecutive offsets, one type per
    run where it is the same throughout, else one per offset."""
    out: list[tuple[int, int, list[int]]] = []
    first = last = -2
    types: list[int] = []
    for offset in sorted(acks):
        t = int(acks[offset])
        if offset == last + 1:
            types.append(t)
            last = offset
            continue
        if types:
            out.append((first, last, types))
        first = last = offset
        types = [t]
    if types:
        out.append((first, last, types))
    return [(f, l, [ts[0]] if all(x == ts[0] for x in ts) else ts) for f, l, ts in out]


class ShareGroupMember:
    """One member of share group ``group_id`` (see the module docstring).

    ``acknowledgement_mode`` is "implicit" (every record a poll gave is accepted by the next
    poll or commit, unless acknowledged otherwise) or "explicit" (each record must be
    acknowledged before the next poll).  ``max_wait_ms``, ``min_bytes``, ``max_bytes`` and
    ``max_records`` shape each ShareFetch."""

    def __init__(
        self,
        group_id: str,
        *,
        member_id: str | None = None,
        rack_id: str | None = None,
        acknowledgement_mode: str = "implicit",
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 52428800,
        max_records: int = 500,
        retry_backoff_ms: int = 100,
        check_crcs: bool = True,
        key_deserializer: Any = None,
        value_deserializer: Any = None,
    ):
        if not group_id:
            raise errors.ConfigError("a share consumer needs a group_id (a non-empty string)")
        if acknowledgement_mode not in ("implicit", "explicit"):
            raise errors.ConfigError(
                f"share_acknowledgement_mode must be 'implicit' or 'explicit', not {acknowledgement_mode!r}")
        self.group_id = group_id
        self.member_id = member_id or new_member_id()
        self.rack_id = rack_id or None
        self.explicit = acknowledgement_mode == "explicit"
        self.max_wait_ms, self.min_bytes, self.max_bytes = max_wait_ms, min_bytes, max_bytes
        self.max_records = max_records
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.check_crcs = check_crcs
        self.kdes, self.vdes = key_deserializer, value_deserializer

        self.subscription: list[str] = []
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval = 5.0
        self.coordinator: int | None = None
        self._finding = False
        self._find_after = 0.0
        self._hb_busy = False
        self._hb_at: float | None = None  # None: not a member (no subscription)
        self._send_subscription = False
        self._assigned_ids: dict[Any, list[int]] = {}
        self.assignment: set[TopicPartition] = set()
        #: The acquisition lock of the latest ShareFetch answer (ms), None before one.
        self.acquisition_lock_timeout_ms: int | None = None

        self._sessions: dict[int, _Session] = {}
        self._fetch_after: dict[int, float] = {}
        self._buffer: deque[ShareConsumerRecord] = deque()
        self._delivered: dict[TopicPartition, dict[int, int | None]] = {}  # offset -> type given
        self._acks: dict[TopicPartition, dict[int, int]] = {}  # ready to go
        self._commits: list[Commit] = []  # waiting for their ShareAcknowledges
        self._completions: list[Completion] = []
        self._events: list[Any] = []
        self._need_metadata = False
        self._closing = False
        self._leaving = False
        self.closed = False
        self._failed: BaseException | None = None
        self._meta: Any = None

    # -- what the caller does -------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str, now: float) -> None:
        """Subscribe to ``topics`` (a name or names; each one Kafka accepts, else
        InvalidTopicError and nothing changes)."""
        if isinstance(topics, str):
            topics = [topics]
        topics = sorted({check_topic_name(t) for t in topics})
        if not topics:
            self.unsubscribe(now)
            return
        self.subscription = topics
        self._send_subscription = True
        self._need_metadata = True
        if self._hb_at is None or not self._hb_busy:
            self._hb_at = now

    def unsubscribe(self, now: float) -> None:
        """Leave the group (heartbeat with epoch -1), keeping the member id."""
        self.subscription = []
        self._leaving = self.member_epoch > 0
        self._hb_at = now if self._leaving else None
        self._drop_assignment()

    @property
    def topics_wanted(self) -> list[str]:
        """Topics the metadata must cover: the subscription's."""
        return list(self.subscription)

    def take_records(self, max_records: int) -> list[ShareConsumerRecord]:
        """Records for the caller's poll: first settles the last poll's (implicit: accepted
        unless acknowledged otherwise; explicit: each must have been acknowledged)."""
        self._settle_delivered()
        out: list[ShareConsumerRecord] = []
        buf = self._buffer
        topic: Any = None
        partition = -1
        offs: dict[int, int | None] = {}
        kept = False
        # Records come in runs of one partition: its bookkeeping is looked up once a run.
        while buf and len(out) < max_records:
            r = buf.popleft()
            if r.partition != partition or r.topic != topic:
                topic, partition = r.topic, r.partition
                tp = TopicPartition(topic, partition)
                # A partition gone to another member: what it held here is given back.
                kept = tp in self.assignment
                offs = self._delivered.setdefault(tp, {}) if kept else self._acks.setdefault(tp, {})
            if kept:
                out.append(r)
                offs[r.offset] = None
            else:
                offs[r.offset] = RELEASE
        return out

    def _settle_delivered(self, partial: bool = False) -> None:
        """The last poll's records into the acknowledgements to send: with ``partial``
        (an explicit-mode commit) only those acknowledged, the rest wait for theirs."""
        if not self._delivered:
            return
        if partial and self.explicit:
            for tp, offs in self._delivered.items():
                done = {o: t for o, t in offs.items() if t is not None}
                if done:
                    self._acks.setdefault(tp, {}).update(done)
                    for o in done:
                        del offs[o]
            self._delivered = {tp: offs for tp, offs in self._delivered.items() if offs}
            return
        if self.explicit:
            missing = sum(1 for offs in self._delivered.values() for t in offs.values() if t is None)
            if missing:
                raise AcknowledgementStateError(
                    f"{missing} record(s) of the last poll are not acknowledged: with "
                    f"share_acknowledgement_mode='explicit', acknowledge() each record (ACCEPT, "
                    f"RELEASE or REJECT) before the next poll or commit")
        for tp, offs in self._delivered.items():
            self._acks.setdefault(tp, {}).update({o: ACCEPT if t is None else t for o, t in offs.items()})
        self._delivered.clear()

    def acknowledge(self, record: Any, type: int = ACCEPT) -> None:
        """Acknowledge one record of the last poll (a record, or (topic, partition, offset))."""
        try:
            t = AcknowledgeType(int(type))
        except ValueError:
            raise ValueError(f"acknowledgement type must be ACCEPT (1), RELEASE (2) or REJECT (3), not {type!r}") from None
        if t == GAP:
            raise ValueError("GAP is for offsets without a record, not for a record; use ACCEPT, RELEASE or REJECT")
        if isinstance(record, tuple):
            topic, partition, offset = record
        else:
            topic, partition, offset = record.topic, record.partition, record.offset
        offs = self._delivered.get(TopicPartition(topic, partition))
        if offs is None or offset not in offs:
            raise AcknowledgementStateError(
                f"{topic}[{partition}] offset {offset} was not delivered by the last poll (or its "
                f"acknowledgement went out already): only the last poll's records can be acknowledged")
        if offs[offset] is not None and offs[offset] != t:
            raise AcknowledgementStateError(
                f"{topic}[{partition}] offset {offset} is acknowledged already ({AcknowledgeType(offs[offset]).name})")
        offs[offset] = t

    def commit(self, now: float) -> Commit:
        """Send every acknowledgement held (the last poll's too) in ShareAcknowledge
        requests; the Commit is done when their answers are in.  In explicit mode only the
        records acknowledged so far go; the others can still be acknowledged."""
        self._settle_delivered(partial=True)
        c = Commit(self._acks)
        self._acks = {}
        if not c.done:
            self._commits.append(c)
        return c

    def close(self, now: float) -> None:
        """Let go: records held and not delivered are released, the last poll's settled as
        a poll would (explicit mode: released if unacknowledged), every share session closed
        (epoch -1, carrying the acknowledgements), then the group left."""
        if self._closing:
            return
        self._closing = True
        for tp, offs in self._delivered.items():
            acks = self._acks.setdefault(tp, {})
            for offset, t in offs.items():
                acks[offset] = t if t is not None else (RELEASE if self.explicit else ACCEPT)
        self._delivered.clear()
        for r in self._buffer:
            self._acks.setdefault(TopicPartition(r.topic, r.partition), {})[r.offset] = RELEASE
        self._buffer.clear()
        self._leaving = self.member_epoch > 0 or self._hb_busy
        self._hb_at = now if self._leaving else None
        if not self._sessions and not self._leaving:
            self.closed = True

    # -- what the shell does ----------------------------------------------------------------

    def events(self) -> list[Any]:
        out, self._events = self._events, []
        if self._need_metadata:
            self._need_metadata = False
            out.append(MetadataNeeded(self.topics_wanted))
        return out

    def completions(self) -> list[Completion]:
        out, self._completions = self._completions, []
        return out

    def buffered(self) -> int:
        return len(self._buffer)

    def poll(self, now: float, meta: Any, fetch: bool = True) -> list[Send]:
        """The requests due now.  ``fetch``: the caller wants records (a ShareFetch goes to
        each leader of an assigned partition once the records held are taken)."""
        if self.closed or self._failed is not None:
            return []
        out: list[Send] = []
        self._meta = meta
        self._resolve(meta)
        hb = self._heartbeat(now)
        if hb is not None:
            out.append(hb)
        out.extend(self._session_requests(now, meta, fetch))
        return out

    def _heartbeat(self, now: float) -> Send | None:
        if self._hb_at is None or self._hb_busy or now < self._hb_at:
            return None
        if self._closing and any(s.busy or s.epoch > 0 for s in self._sessions.values()):
            return None  # the sessions close first: their acknowledgements need the membership
        if self.coordinator is None:
            if self._finding or now < self._find_after:
                return None
            self._finding = True
            return Send("find", None, FIND_COORDINATOR, find_request([self.group_id], GROUP))
        leaving = self._leaving or self._closing
        epoch = LEAVE_EPOCH if leaving else self.member_epoch
        topics = self.subscription if (epoch == JOIN_EPOCH or self._send_subscription) and not leaving else None
        req = HEARTBEAT.Request(group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                                rack_id=self.rack_id, subscribed_topic_names=topics)
        self._hb_busy = True
        return Send("leave" if leaving else "heartbeat", self.coordinator, HEARTBEAT, req)

    def _resolve(self, meta: Any) -> None:
        names = meta.topic_names
        got: set[TopicPartition] = set()
        unknown = False
        for tid, parts in self._assigned_ids.items():
            name = names.get(tid)
            if name is None:
                unknown = True
                continue
            got.update(TopicPartition(name, p) for p in parts)
        if unknown and not self._need_metadata:
            self._need_metadata = True
        self.assignment = got

    def _session_requests(self, now: float, meta: Any, fetch: bool) -> list[Send]:
        by_node: dict[int, list[TopicPartition]] = {}
        if not self._closing:
            for tp in self.assignment:
                node = meta.leader_for(tp.topic, tp.partition)
                if node is None:
                    self._need_metadata = True
                    continue
                by_node.setdefault(node, []).append(tp)
        nodes = set(by_node) | set(self._sessions)
        out: list[Send] = []
        for node in nodes:
            s = self._sessions.get(node)
            if s is not None and s.busy:
                continue
            if now < self._fetch_after.get(node, 0.0):
                continue
            if self._closing:
                if s is None:
                    continue
                if s.epoch == INITIAL_SESSION_EPOCH:
                    del self._sessions[node]  # never opened on the broker
                    continue
                acks, commits = self._commit_acks(node, meta)
                for tp in [tp for tp in self._acks if self._node_of(tp, meta) == node]:
                    for o, t in self._acks.pop(tp).items():
                        acks.setdefault(tp, {})[o] = t
                out.append(self._ack_request(node, s, acks, FINAL_SESSION_EPOCH, commits, meta))
                continue
            if s is not None and s.epoch > INITIAL_SESSION_EPOCH:
                acks, commits = self._commit_acks(node, meta)
                held = [tp for tp in self._acks if self._node_of(tp, meta) == node]
                fetched = set(by_node.get(node, ()))
                if any(tp not in fetched for tp in held):
                    # A ShareFetch naming a partition acquires records there as well: the
                    # releases for one moved away would take them again (a delivery count
                    # spent on each round until the limit archives them), so they go in a
                    # ShareAcknowledge, which acquires nothing.
                    for tp in held:
                        acks.setdefault(tp, {}).update(self._acks.pop(tp))
                if acks:
                    out.append(self._ack_request(node, s, acks, s.epoch, commits, meta))
                    continue
            wanted = by_node.get(node, [])
            if not (fetch and not self._buffer and (wanted or (s is not None and s.parts))):
                continue
            if s is None:
                s = self._sessions[node] = _Session()
            out.append(self._fetch_request(node, s, wanted, meta))
        if self._closing and not self._sessions and not self._leaving and not self._hb_busy:
            self.closed = True
        return out

    def _commit_acks(self, node: int, meta: Any) -> tuple[dict[TopicPartition, dict[int, int]], list[Commit]]:
        acks: dict[TopicPartition, dict[int, int]] = {}
        commits = []
        for c in self._commits:
            mine = [tp for tp in c.pending if self._node_of(tp, meta) == node]
            if not mine:
                continue
            for tp in mine:
                acks.setdefault(tp, {}).update(c.acks[tp])
                c.pending.discard(tp)
            c.inflight += 1
            commits.append(c)
        return acks, commits

    def _node_of(self, tp: TopicPartition, meta: Any) -> int | None:
        for node, s in self._sessions.items():
            if tp in s.parts:
                return node
        return meta.leader_for(tp.topic, tp.partition)

    def _topics_ids(self, meta: Any, tps: Iterable[TopicPartition]) -> dict[Any, list[TopicPartition]]:
        out: dict[Any, list[TopicPartition]] = {}
        for tp in tps:
            t = meta.topics.get(tp.topic)
            if t is None or t.topic_id is None:
                continue
            out.setdefault(t.topic_id, []).append(tp)
        return out

    def _fetch_request(self, node: int, s: _Session, wanted: list[TopicPartition], meta: Any) -> Send:
        acks: dict[TopicPartition, dict[int, int]] = {}
        if s.epoch > INITIAL_SESSION_EPOCH:
            # A session's opening request may not carry acknowledgements.
            for tp in [tp for tp in self._acks if self._node_of(tp, meta) == node]:
                acks[tp] = self._acks.pop(tp)
        listed = set(wanted) | set(acks)
        Topic = SHARE_FETCH.Request.FetchTopic
        Part = Topic.FetchPartition
        topics = []
        for tid, tps in self._topics_ids(meta, listed).items():
            parts = []
            for tp in sorted(tps):
                batches = [Part.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=ts)
                           for f, l, ts in ack_batches(acks.get(tp, {}))]
                parts.append(Part(partition_index=tp.partition, acknowledgement_batches=batches))
            topics.append(Topic(topic_id=tid, partitions=parts))
        forget = self._topics_ids(meta, s.parts - listed) if s.epoch > INITIAL_SESSION_EPOCH else {}
        Forgotten = SHARE_FETCH.Request.ForgottenTopic
        req = SHARE_FETCH.Request(
            group_id=self.group_id, member_id=self.member_id, share_session_epoch=s.epoch,
            max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
            max_records=self.max_records, batch_size=self.max_records, topics=topics,
            forgotten_topics_data=[Forgotten(topic_id=tid, partitions=[tp.partition for tp in tps])
                                   for tid, tps in forget.items()])
        s.parts = set(listed) if s.epoch == INITIAL_SESSION_EPOCH else (s.parts | listed) - (s.parts - listed)
        s.busy = True
        return Send("fetch", node, SHARE_FETCH, req, acks=acks, epoch=s.epoch)

    def _ack_request(self, node: int, s: _Session, acks: dict[TopicPartition, dict[int, int]], epoch: int,
                     commits: list[Commit], meta: Any) -> Send:
        Topic = SHARE_ACKNOWLEDGE.Request.AcknowledgeTopic
        Part = Topic.AcknowledgePartition
        topics = []
        for tid, tps in self._topics_ids(meta, acks).items():
            parts = [Part(partition_index=tp.partition, acknowledgement_batches=[
                Part.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=ts)
                for f, l, ts in ack_batches(acks[tp])]) for tp in sorted(tps)]
            topics.append(Topic(topic_id=tid, partitions=parts))
        req = SHARE_ACKNOWLEDGE.Request(group_id=self.group_id, member_id=self.member_id,
                                        share_session_epoch=epoch, topics=topics)
        s.busy = True
        return Send("ack", node, SHARE_ACKNOWLEDGE, req, acks=acks, epoch=epoch, commits=commits)

    # -- answers ----------------------------------------------------------------------------

    def on_answers(self, answers: Iterable[tuple[Send, Any, BaseException | None]], now: float,
                   meta: Any = None) -> None:
        """The shell's collected ``(send, response, error)`` outcomes, in the order they came."""
        for send, resp, exc in answers:
            if exc is None:
                self.on_answer(send, resp, now, meta)
            else:
                self.on_failure(send, exc, now)

    def on_answer(self, send: Send, resp: Any, now: float, meta: Any = None) -> None:
        if send.kind == "find":
            self._on_find(resp, now)
        elif send.kind in ("heartbeat", "leave"):
            self._on_heartbeat(send, resp, now)
        elif send.kind == "fetch":
            self._on_fetch(send, resp, now, meta)
        else:
            self._on_ack(send, resp, now, meta)

    def on_failure(self, send: Send, exc: BaseException, now: float) -> None:
        if send.kind == "find":
            self._finding = False
            self._find_after = now + self.retry_backoff
        elif send.kind in ("heartbeat", "leave"):
            self._hb_busy = False
            self.coordinator = None
            if send.kind == "leave" and self._closing:
                self._end_leave()  # the group drops the member after its session timeout
            else:
                self._hb_at = now + self.retry_backoff
        else:
            s = self._sessions.get(send.node)  # type: ignore[arg-type]
            if s is not None:
                s.busy = False
                # What the broker did with the request is unknown: a new session.
                s.epoch, s.parts = INITIAL_SESSION_EPOCH, set()
            self._fetch_after[send.node] = now + self.retry_backoff  # type: ignore[index]
            self._need_metadata = True
            self._acks_failed(send, exc)
            if send.epoch == FINAL_SESSION_EPOCH:
                self._sessions.pop(send.node, None)  # type: ignore[arg-type]

    def _on_find(self, resp: Any, now: float) -> None:
        self._finding = False
        a = answers(resp, [self.group_id])[0]
        if a.error_code:
            err = errors.for_code(a.error_code)(a.error_message)
            if a.error_code in _FATAL_FIX:
                self._fail(err, a.error_code)
                return
            self._find_after = now + self.retry_backoff
            return
        self.coordinator = a.node_id

    def _fail(self, err: BaseException, code: int) -> None:
        fix = _FATAL_FIX.get(code, "")
        self._failed = ShareGroupFatalError(f"share group {self.group_id!r}: {err}" + (f"; {fix}" if fix else ""), err)
        self._events.append(Failed(self._failed))

    def _on_heartbeat(self, send: Send, resp: Any, now: float) -> None:
        self._hb_busy = False
        code = resp.error_code
        if send.kind == "leave":
            if code in COORDINATOR_MOVED and not self._closing:
                self.coordinator = None
                self._hb_at = now
                return
            self._end_leave()
            return
        if code == 0:
            self._send_subscription = False
            self.member_epoch = resp.member_epoch
            if resp.member_id:
                self.member_id = resp.member_id
            self.heartbeat_interval = max(resp.heartbeat_interval_ms, 1) / 1000.0
            if resp.assignment is not None:
                self._assigned_ids = {t.topic_id: list(t.partitions) for t in resp.assignment.topic_partitions}
                if self._meta is not None:
                    self._resolve(self._meta)
            self._hb_at = now + self.heartbeat_interval
            if self._leaving or self._closing:
                self._hb_at = now
            return
        if code in _FENCED:
            self.member_epoch = JOIN_EPOCH
            self._drop_assignment()
            self._send_subscription = True
            self._hb_at = now
            return
        if code in COORDINATOR_MOVED:
            self.coordinator = None
            self._hb_at = now
            return
        err = errors.for_code(code)(resp.error_message)
        if code in _FATAL_FIX or not err.retriable:
            self._fail(err, code)
            return
        self._hb_at = now + self.retry_backoff

    def _end_leave(self) -> None:
        self._leaving = False
        self.member_epoch = JOIN_EPOCH
        self._hb_at = None
        self._drop_assignment()
        if self._closing and not self._sessions:
            self.closed = True

    def _drop_assignment(self) -> None:
        self._assigned_ids = {}
        self.assignment = set()

    def _on_fetch(self, send: Send, resp: Any, now: float, meta: Any) -> None:
        node = send.node
        assert node is not None
        s = self._sessions.get(node)
        if s is not None:
            s.busy = False
        code = resp.error_code
        if code:
            err = errors.for_code(code)(resp.error_message)
            if s is not None:
                s.epoch, s.parts = INITIAL_SESSION_EPOCH, set()
            self._acks_failed(send, err)
            if code in _FENCED:
                self._fetch_after[node] = now + self.retry_backoff
                return
            if code not in _SESSION_LOST:
                if not err.retriable:
                    self._events.append(Failed(err))
                self._fetch_after[node] = now + self.retry_backoff
            return
        if s is not None:
            s.epoch = _next_epoch(s.epoch)
        if getattr(resp, "acquisition_lock_timeout_ms", 0):
            self.acquisition_lock_timeout_ms = resp.acquisition_lock_timeout_ms
        names = meta.topic_names if meta is not None else {}
        answered: dict[TopicPartition, int] = {}
        for t in resp.responses:
            name = names.get(t.topic_id)
            if name is None:
                self._need_metadata = True
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                if tp in send.acks:
                    answered[tp] = p.acknowledge_error_code
                if p.error_code:
                    if p.error_code in _STALE_LEADER:
                        self._need_metadata = True
                        self._fetch_after[node] = now + self.retry_backoff
                    continue
                if p.acquired_records:
                    self._take(tp, p.records, p.acquired_records)
        self._acks_answered(send, answered)

    def _take(self, tp: TopicPartition, data: Any, acquired: Any) -> None:
        ranges = sorted((a.first_offset, a.last_offset, a.delivery_count) for a in acquired)
        start = ranges[0][0]
        recs = [] if data is None else codec.decode_records_with(
            data, ShareConsumerRecord, (tp.topic, tp.partition, codec.FIELD_OFFSET, codec.FIELD_TIMESTAMP,
                                        codec.FIELD_TIMESTAMP_TYPE, codec.FIELD_KEY, codec.FIELD_VALUE,
                                        codec.FIELD_HEADERS),
            init=_init_record, start_offset=start, check_crcs=self.check_crcs)
        kdes, vdes = self.kdes, self.vdes
        gaps: dict[int, int] = {}
        i = 0
        n = len(recs)
        for first, last, count in ranges:
            expect = first
            while i < n and recs[i].offset < first:
                i += 1  # a batch's records before the acquired range: another member's
            while i < n and recs[i].offset <= last:
                r = recs[i]
                i += 1
                for o in range(expect, r.offset):
                    gaps[o] = GAP
                expect = r.offset + 1
                r.delivery_count = count
                if self._closing:
                    # Fetched while closing: given back with the session's last request.
                    gaps[r.offset] = RELEASE
                    continue
                if kdes is not None and r.key is not None:
                    r.key = kdes(r.key)
                if vdes is not None and r.value is not None:
                    r.value = vdes(r.value)
                self._buffer.append(r)
            for o in range(expect, last + 1):
                # No record there (a transaction marker, a compacted one): acknowledged as such.
                gaps[o] = GAP
        if gaps:
            self._acks.setdefault(tp, {}).update(gaps)

    def _on_ack(self, send: Send, resp: Any, now: float, meta: Any) -> None:
        node = send.node
        s = self._sessions.get(node)  # type: ignore[arg-type]
        if s is not None:
            s.busy = False
        code = resp.error_code
        if send.epoch == FINAL_SESSION_EPOCH:
            self._sessions.pop(node, None)  # type: ignore[arg-type]
        if code:
            err = errors.for_code(code)(resp.error_message)
            if s is not None and send.epoch != FINAL_SESSION_EPOCH:
                s.epoch, s.parts = INITIAL_SESSION_EPOCH, set()
            self._acks_failed(send, err)
            return
        if s is not None and send.epoch != FINAL_SESSION_EPOCH:
            s.epoch = _next_epoch(s.epoch)
        names = meta.topic_names if meta is not None else {}
        answered: dict[TopicPartition, int] = {}
        for t in resp.responses:
            name = names.get(t.topic_id)
            for p in t.partitions:
                if name is not None:
                    answered[TopicPartition(name, p.partition_index)] = p.error_code
        self._acks_answered(send, answered)
        if self._closing and not self._sessions and not self._leaving and not self._hb_busy:
            self.closed = True

    def _acks_answered(self, send: Send, answered: dict[TopicPartition, int]) -> None:
        ok: dict[TopicPartition, list[int]] = {}
        for tp, offs in send.acks.items():
            real = sorted(o for o, t in offs.items() if t != GAP)
            code = answered.get(tp, 0)
            err = None
            if code:
                cls = errors.for_code(code)
                err = cls(f"acknowledging {tp.topic}[{tp.partition}] offsets {_span(real)}: {cls.name} "
                          f"({code}): {cls.meaning}")
            for c in send.commits:
                if tp in c.acks:
                    c.results[tp] = err
            if not real:
                continue
            if err is None:
                ok[tp] = real
            else:
                self._completions.append(Completion({tp: real}, err))
        if ok:
            self._completions.append(Completion(ok, None))
        self._commits_answered(send)

    def _commits_answered(self, send: Send) -> None:
        for c in send.commits:
            c.inflight -= 1
            c._check()
        self._commits = [c for c in self._commits if not c.done]

    def _acks_failed(self, send: Send, exc: BaseException) -> None:
        real = {tp: sorted(o for o, t in offs.items() if t != GAP) for tp, offs in send.acks.items()}
        real = {tp: offs for tp, offs in real.items() if offs}
        for c in send.commits:
            for tp in send.acks:
                if tp in c.acks:
                    c.results[tp] = exc
        self._commits_answered(send)
        if real:
            self._completions.append(Completion(real, exc))

    def next_wakeup(self, now: float) -> float | None:
        """When :meth:`poll` has a request due (None: only an answer moves it on)."""
        times = []
        if self._hb_at is not None and not self._hb_busy:
            if self.coordinator is not None:
                times.append(self._hb_at)
            elif not self._finding:  # (a FindCoordinator in flight: its answer moves it on)
                times.append(max(self._hb_at, self._find_after))
        times.extend(t for t in self._fetch_after.values() if t > now)
        return min(times) if times else None

