"""The admin client: topics, partitions, configs, consumer groups and their offsets.

::

    with Admin(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("events", num_partitions=3)])
        admin.list_group_offsets("billing")        # {TopicPartition: OffsetAndMetadata}
        admin.group_lag("billing").total

Results and errors
------------------
Every call takes ``timeout`` (seconds; default ``request_timeout_ms``) and returns by then.

* A call about several items (topics, groups, partitions, config resources) returns a dict
  from item to its result.  Items the broker refused hold the exception (a
  :class:`~kafkawire.errors.BrokerError` subclass carrying the Kafka ``code``), and with
  ``raise_on_error=True`` (the default) the call then raises :class:`AdminError`, whose
  message names every failed item and whose ``results`` / ``errors`` keep them all.  Pass
  ``raise_on_error=False`` to get the dict back with failures in it.  Successful items
  of calls that have nothing to return (deletes, alters) map to None.
* The whole call raises when it cannot be done at all: :class:`KafkaTimeoutError` when
  the deadline passes with work still pending (its message names what and the last
  error), :class:`~kafkawire.protocol.api.ApiVersionError` when the broker does not
  speak the API (naming the API and the broker's range), a connection error when no
  broker can be reached, and the broker's error for a group-wide refusal in the calls
  about one group.

Retriable answers (no leader yet, not the controller, coordinator moving or loading,
connection lost) are retried with backoff (``retry_backoff_ms`` doubling up to
``retry_backoff_max_ms``) until the deadline.  Requests about a group go to the group's
coordinator (FindCoordinator first); topic creation and deletion go to the controller.

Not thread-safe: call it from one thread.

After ``os.fork()`` an Admin made before the fork goes on in the child: right after the
fork the child's copy lets go of the parent's connections without touching them (see
:mod:`kafkawire.core.fork`), and connects again on its next call.  Parent and child
then each use their own connections.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from kafkawire import errors
from kafkawire.client.cluster import Cluster
from kafkawire.core.config import Config
from kafkawire.core.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    broker_error,
)
from kafkawire.protocol import apis
from kafkawire.protocol import consumer as consumer_protocol
from kafkawire.protocol.coordinator import COORDINATOR_MOVED, FIND_COORDINATOR, GROUP, find_request
from kafkawire.protocol.coordinator import answers as coordinator_answers
from kafkawire.protocol.api import Api, ApiVersionError
from kafkawire.protocol.fetcher import OffsetAndTimestamp, TopicPartition
from kafkawire.protocol.fetcher import as_topic_partition as _tp
from kafkawire.protocol.sasl import SCRAM_MECHANISM_TYPES, SCRAM_MIN_ITERATIONS, scram_credential

__all__ = [
    "Admin",
    "AdminError",
    "BrokerInfo",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "CreatedTopic",
    "DeletedRecords",
    "GroupDescription",
    "GroupLag",
    "GroupListing",
    "MemberDescription",
    "NewTopic",
    "OffsetAndMetadata",
    "PartitionInfo",
    "PartitionLag",
    "ScramCredentialInfo",
    "TopicDescription",
    "TopicPartition",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
]

CREATE_PARTITIONS = apis.get("CreatePartitions")
DELETE_RECORDS = apis.get("DeleteRecords")
ALTER_CONFIGS = apis.get("AlterConfigs")
INCREMENTAL_ALTER_CONFIGS = apis.get("IncrementalAlterConfigs")
OFFSET_DELETE = apis.get("OffsetDelete")
METADATA = apis.get("Metadata")
CREATE_TOPICS = apis.get("CreateTopics")
DELETE_TOPICS = apis.get("DeleteTopics")
DESCRIBE_CONFIGS = apis.get("DescribeConfigs")
LIST_OFFSETS = apis.get("ListOffsets")
OFFSET_COMMIT = apis.get("OffsetCommit")
OFFSET_FETCH = apis.get("OffsetFetch")
DESCRIBE_GROUPS = apis.get("DescribeGroups")
LIST_GROUPS = apis.get("ListGroups")
DELETE_GROUPS = apis.get("DeleteGroups")
DESCRIBE_USER_SCRAM_CREDENTIALS = apis.get("DescribeUserScramCredentials")
ALTER_USER_SCRAM_CREDENTIALS = apis.get("AlterUserScramCredentials")

# Answers worth asking again after a backoff: the cluster is moving (leaders, controller,
# coordinators) or was slow.  Other codes the error table calls retriable, such as
# UNKNOWN_TOPIC_OR_PARTITION, are final for an admin call: retrying a delete of a topic
# that does not exist would only run into the deadline.
_RETRY = frozenset({5, 6, 7, 13, 14, 15, 16, 41})
# Group-wide errors that OffsetFetch before v2 repeats per partition: the coordinator
# moved, or is still loading (COORDINATOR_LOAD_IN_PROGRESS).
_GROUP_WIDE = COORDINATOR_MOVED | {14}

# ListOffsets' special timestamps: -1 latest, -2 earliest, -3 max timestamp (KIP-734).
_MAX_TIMESTAMP = -3
_OFFSET_SPECS = {"latest": -1, "earliest": -2, "max_timestamp": _MAX_TIMESTAMP}

_RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8}
_RESOURCE_NAMES = {v: k for k, v in _RESOURCE_TYPES.items()}
_CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}

# -- result types --------------------------------------------------------------------------


class AdminError(errors.KafkaWireError):
    """Some items of an admin call failed (see the module docstring).

    ``errors`` maps each failed item to its exception (a BrokerError with its ``code``);
    ``results`` maps every item to its result or exception.  ``code`` and ``retriable``
    are those of the failures when they all share one code, else None and False.
    """

    def __init__(self, operation: str, results: dict[Any, Any], failed: dict[Any, BaseException]):
        self.operation = operation
        self.results = results
        self.errors = failed
        codes = {getattr(e, "code", None) for e in failed.values()}
        self.code = codes.pop() if len(codes) == 1 else None
        self.retriable = all(getattr(e, "retriable", False) for e in failed.values())
        lines = "\n  ".join(str(e) for e in failed.values())
        super().__init__(
            f"{operation}: {len(failed)} of {len(results)} failed:\n  {lines}\n"
            f"(every item's result is in .results, the failures in .errors; "
            f"pass raise_on_error=False to have them returned instead)"
        )


class ConfigResource(NamedTuple):
    """A config owner: ``("topic", name)``, ``("broker", "<node id>")`` (``""`` for the
    cluster-wide broker default) or ``("broker_logger", "<node id>")``."""

    type: str
    name: str


@dataclass(frozen=True)
class NewTopic:
    """A topic to create; -1 leaves the count to the broker's default (KIP-464)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CreatedTopic:
    """What the broker says it created (counts are -1 before CreateTopics v5)."""

    name: str
    topic_id: Any
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerInfo]


@dataclass(frozen=True)
class PartitionInfo:
    """A partition's leader (-1: none), leader epoch, replicas and in-sync replicas."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: Any
    is_internal: bool
    partitions: dict[int, PartitionInfo]


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str | None  # None before ListGroups v4


@dataclass(frozen=True)
class MemberDescription:
    """A group member.  ``assignment`` ({topic: [partitions]}) and ``subscription``
    (topics) are decoded for protocol type "consumer" (else None); ``raw_assignment``
    and ``raw_metadata`` are the bytes as the broker sent them."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: dict[str, list[int]] | None
    subscription: list[str] | None
    raw_assignment: bytes
    raw_metadata: bytes


@dataclass(frozen=True)
class GroupDescription:
    """A group as its coordinator describes it; ``protocol`` is the assignor's name."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: int


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True)
class PartitionLag:
    """``lag`` is ``end_offset - committed``, or None without a committed offset."""

    committed: int | None
    end_offset: int
    lag: int | None


@dataclass(frozen=True)
class GroupLag:
    group_id: str
    partitions: dict[TopicPartition, PartitionLag]
    total: int


@dataclass(frozen=True)
class DeletedRecords:
    low_watermark: int


@dataclass(frozen=True)
class ConfigEntry:
    """One config; ``source`` is Kafka's name for where the value comes from
    (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...; UNKNOWN before DescribeConfigs v1)."""

    name: str
    value: str | None
    source: str
    is_default: bool
    read_only: bool
    is_sensitive: bool


@dataclass(frozen=True)
class ScramCredentialInfo:
    """One SCRAM credential of a user as the broker describes it (never the password)."""

    mechanism: str  # SCRAM-SHA-256, SCRAM-SHA-512, or UNKNOWN
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Create or replace ``user``'s ``mechanism`` credential for ``password``.  The client
    salts it (RFC 5802 Hi() with ``iterations`` and a random ``salt`` unless one is given);
    only the salt and the salted password are sent."""

    user: str
    mechanism: str
    password: str = field(repr=False)
    iterations: int = SCRAM_MIN_ITERATIONS
    salt: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Remove ``user``'s ``mechanism`` credential."""

    user: str
    mechanism: str


def _scram_mechanism_type(mechanism: Any) -> int:
    name = mechanism.upper() if isinstance(mechanism, str) else mechanism
    if name not in SCRAM_MECHANISM_TYPES:
        raise ValueError(f"SCRAM credentials are for {' or '.join(SCRAM_MECHANISM_TYPES)}; got {mechanism!r}")
    return SCRAM_MECHANISM_TYPES[name]


_SCRAM_MECHANISM_NAMES = {v: k for k, v in SCRAM_MECHANISM_TYPES.items()}


# -- bookkeeping for one call --------------------------------------------------------------


class _Progress:
    """Items still to do, results so far, and the last retriable error of each."""

    def __init__(self, items: Iterable[Any]):
        self.todo: dict[Any, None] = dict.fromkeys(items)
        self.results: dict[Any, Any] = {}
        self.retry: dict[Any, BaseException] = {}

    def done(self, item: Any, value: Any) -> None:
        self.results[item] = value
        self.todo.pop(item, None)
        self.retry.pop(item, None)

    def failed(self, item: Any, exc: BaseException) -> None:
        """Record ``exc`` for ``item``: retried later when its code is worth it, else final."""
        if getattr(exc, "code", None) in _RETRY:
            self.retry[item] = exc
        else:
            self.done(item, exc)


def _label(item: Any) -> str:
    if item is None:  # the one item of a call about nothing in particular
        return "the request"
    if isinstance(item, TopicPartition):
        return f"{item.topic}[{item.partition}]"
    if isinstance(item, ConfigResource):
        return f"{item.type} {item.name!r}"
    return repr(item)


def _resource(x: Any) -> ConfigResource:
    if isinstance(x, ConfigResource):
        res = x
    else:
        try:
            res = ConfigResource(*x)
        except TypeError:
            raise TypeError(f"expected a ConfigResource or (type, name), got {x!r}") from None
    if res.type not in _RESOURCE_TYPES:
        raise ValueError(f"config resource type must be one of {', '.join(_RESOURCE_TYPES)}; "
                         f"got {res.type!r}")
    return ConfigResource(res.type, str(res.name))


def _decoded_member(protocol_type: str, m: Any) -> MemberDescription:
    assignment = subscription = None
    if protocol_type == consumer_protocol.PROTOCOL_TYPE:
        # A member between JoinGroup and SyncGroup has empty bytes: nothing assigned yet.
        try:
            if len(m.member_assignment):
                assignment = consumer_protocol.assignment_to_map(
                    consumer_protocol.decode_assignment(m.member_assignment))
            if len(m.member_metadata):
                subscription = list(consumer_protocol.decode_subscription(m.member_metadata).topics)
        except errors.CodecError:
            pass  # a client that says "consumer" but writes something else: raw bytes only
    return MemberDescription(
        m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment, subscription,
        bytes(m.member_assignment), bytes(m.member_metadata))


class Admin:
    """A Kafka admin client.  Options are the Java client's in snake_case
    (``bootstrap_servers``, ``request_timeout_ms``, ``client_id``, ...).

    See the module docstring for how results and errors come back.
    """

    def __init__(self, **config: Any):
        self.config = c = Config.client(**config)
        self.cluster = Cluster(c)
        try:
            self.cluster.bootstrap(c.request_timeout_ms / 1000.0)
        except BaseException:
            self.cluster.close()
            raise
        self._coordinators: dict[str, int] = {}
        self._closed = False

    def close(self) -> None:
        """Close every connection (idempotent)."""
        if not self._closed:
            self._closed = True
            self.cluster.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending and retrying ----------------------------------------------------------

    def _deadline(self, timeout: float | None) -> tuple[float, float]:
        if self._closed:
            raise ClientClosedError("the admin client is closed")
        t = self.config.request_timeout_ms / 1000.0 if timeout is None else float(timeout)
        if t < 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
        return t, time.monotonic() + t

    def _conn(self, node: int | None, deadline: float) -> Any:
        """The ready connection to ``node``, or to any broker for None."""
        if node is None:
            return self.cluster.any_connection(deadline)
        return self.cluster.connection(node, deadline)

    def _send(self, node: int | None, api: Api, build: Callable[[int], Any], deadline: float,
              what: str) -> tuple[int, Any]:
        """Send one request to ``node`` (None: any broker), built for the negotiated
        version by ``build(version)``; returns (version, response)."""
        conn = self._conn(node, deadline)
        try:
            version = conn.version_for(api)
        except ApiVersionError as exc:
            raise ApiVersionError(f"{what}: {conn.name} cannot answer it: {exc}") from None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaTimeoutError(f"{what}: no time left to send {api.name} to {conn.name}")
        fut = conn.send(api, build(version), version)
        if not fut.wait(remaining):
            # A broker answers a connection's requests in order: one left unanswered here
            # (Kafka holding a CreateTopics for a controller it cannot reach) would hold
            # up every later call on this connection, so the next one connects afresh.
            conn.close(KafkaTimeoutError(f"{what}: {api.name} to {conn.name} abandoned at the "
                                         f"call's deadline"))
            raise KafkaTimeoutError(f"{what}: {api.name} to {conn.name}: no response in time")
        return version, fut.result()

    def _run(self, operation: str, items: Iterable[Any], timeout: float | None,
             step: Callable[[_Progress, float], None], raise_on_error: bool) -> dict[Any, Any]:
        """Call ``step(progress, deadline)`` until every item is done, backing off between
        rounds that left retriable work, up to the deadline."""
        t, deadline = self._deadline(timeout)
        items = list(items)
        progress = _Progress(items)
        backoff = self.config.retry_backoff_ms / 1000.0
        last: BaseException | None = None
        while progress.todo:
            try:
                step(progress, deadline)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                # "No time left" says less than the error that made the round fail before.
                if last is None or not isinstance(exc, (KafkaTimeoutError, NoBrokersAvailableError)):
                    last = exc
                self.cluster.request_refresh()
            except errors.BrokerError as exc:
                if exc.code not in _RETRY:
                    raise
                last = exc
                if exc.code in COORDINATOR_MOVED:
                    self._coordinators.clear()
            if not progress.todo:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pending = "; ".join(
                    f"{_label(k)}: {progress.retry.get(k) or last or 'no answer'}"
                    for k in list(progress.todo)[:10])
                more = f" (and {len(progress.todo) - 10} more)" if len(progress.todo) > 10 else ""
                raise KafkaTimeoutError(
                    f"{operation} did not finish within {t:g}s; still pending: {pending}{more}; "
                    f"check that the brokers are up, or pass a longer timeout")
            self.cluster.poll(min(backoff, remaining))
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000.0)
            if self.cluster.refresh_due():  # a leader, controller or coordinator moved
                try:
                    self.cluster.refresh(max(0.001, deadline - time.monotonic()))
                except (KafkaConnectionError, KafkaTimeoutError):
                    pass  # the next round fails the same way, and says so
        results = {k: progress.results[k] for k in items}  # in the caller's order
        failed = {k: v for k, v in results.items() if isinstance(v, BaseException)}
        if failed and raise_on_error:
            raise AdminError(operation, results, failed)
        return results

    def _one(self, operation: str, timeout: float | None, fn: Callable[[float], Any]) -> Any:
        """Run ``fn(deadline)`` (a call without items) with the same retries as _run."""
        def step(progress: _Progress, deadline: float) -> None:
            progress.done(None, fn(deadline))

        return self._run(operation, [None], timeout, step, raise_on_error=True)[None]

    def _controller(self) -> int | None:
        cid = self.cluster.controller_id
        return cid if cid in self.cluster.brokers else None

    def _after_error(self, code: int) -> None:
        if code in (5, 6, 41):  # leaders or the controller moved: _run refreshes before retrying
            self.cluster.request_refresh()

    def _settle(self, progress: _Progress, item: Any, code: int, context: str, value: Any = None,
                message: str | None = None) -> None:
        """Record one item's answer: ``value`` when ``code`` is 0, else the broker's error."""
        if item not in progress.todo:
            return
        if code:
            self._after_error(code)
            progress.failed(item, broker_error(code, context, message))
        else:
            progress.done(item, value)

    # -- cluster and topics ------------------------------------------------------------

    def _metadata(self, topics: list[str] | None, deadline: float, what: str) -> Any:
        def build(version: int) -> Any:
            if topics is None:
                # v0 cannot say "all topics" with null: an empty array means all there.
                req_topics: Any = [] if version == 0 else None
            else:
                if version == 0 and not topics:
                    raise ValueError("Metadata v0 cannot ask for no topics")
                req_topics = [METADATA.Request.MetadataRequestTopic(name=t) for t in topics]
            return METADATA.Request(topics=req_topics, allow_auto_topic_creation=False)

        return self._send(None, METADATA, build, deadline, what)[1]

    def describe_cluster(self, timeout: float | None = None) -> ClusterDescription:
        """The cluster id, the controller's node id and every broker (from Metadata)."""
        def fetch(deadline: float) -> ClusterDescription:
            resp = self._metadata([], deadline, "describe_cluster")
            brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
            return ClusterDescription(resp.cluster_id, resp.controller_id, brokers)

        return self._one("describe_cluster", timeout, fetch)

    @staticmethod
    def _topic_description(t: Any) -> TopicDescription:
        parts = {
            p.partition_index: PartitionInfo(
                p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes),
                list(p.isr_nodes), list(p.offline_replicas))
            for p in t.partitions
        }
        return TopicDescription(t.name, t.topic_id, bool(t.is_internal), dict(sorted(parts.items())))

    def list_topics(self, timeout: float | None = None, include_internal: bool = False
                    ) -> dict[str, TopicDescription]:
        """Every topic of the cluster, by name (internal ones such as __consumer_offsets
        only with ``include_internal``)."""
        def fetch(deadline: float) -> dict[str, TopicDescription]:
            resp = self._metadata(None, deadline, "list_topics")
            out = {}
            for t in resp.topics:
                if t.name is None or t.error_code or (t.is_internal and not include_internal):
                    continue
                out[t.name] = self._topic_description(t)
            return dict(sorted(out.items()))

        return self._one("list_topics", timeout, fetch)

    def describe_topics(self, topics: Iterable[str], timeout: float | None = None,
                        raise_on_error: bool = True) -> dict[str, TopicDescription]:
        """Partitions, leaders and replicas of each topic; a missing topic holds
        UnknownTopicOrPartitionError (topics are never auto-created here)."""
        names = list(dict.fromkeys(topics))

        def step(progress: _Progress, deadline: float) -> None:
            resp = self._metadata(list(progress.todo), deadline, "describe_topics")
            for t in resp.topics:
                if t.name not in progress.todo:
                    continue
                if t.error_code:
                    progress.failed(t.name, broker_error(t.error_code, f"topic {t.name!r}"))
                else:
                    progress.done(t.name, self._topic_description(t))

        return self._run("describe_topics", names, timeout, step, raise_on_error)

    def create_topics(self, topics: Iterable[NewTopic | str], *, num_partitions: int = -1,
                      replication_factor: int = -1, configs: Mapping[str, str] | None = None,
                      validate_only: bool = False, timeout: float | None = None,
                      raise_on_error: bool = True) -> dict[str, CreatedTopic]:
        """Create topics.  Names given as strings take ``num_partitions``,
        ``replication_factor`` and ``configs`` from the keyword arguments (-1: the
        broker's default).  ``validate_only`` asks the broker to check without creating."""
        wanted: dict[str, NewTopic] = {}
        for t in topics:
            nt = NewTopic(t, num_partitions, replication_factor, dict(configs or {})) if isinstance(t, str) else t
            if not isinstance(nt, NewTopic):
                raise TypeError(f"create_topics expects topic names or NewTopic, got {t!r}")
            wanted[nt.name] = nt
        CT = CREATE_TOPICS.Request.CreatableTopic

        def step(progress: _Progress, deadline: float) -> None:
            def build(version: int) -> Any:
                if version < 4 and any(wanted[n].num_partitions < 0 or wanted[n].replication_factor < 0
                                       for n in progress.todo):
                    raise ValueError(
                        f"this broker speaks CreateTopics v{version}, which needs explicit "
                        f"num_partitions and replication_factor (broker defaults need v4, KIP-464)")
                return CREATE_TOPICS.Request(
                    topics=[CT(name=n, num_partitions=wanted[n].num_partitions,
                               replication_factor=wanted[n].replication_factor, assignments=[],
                               configs=[CT.CreatableTopicConfig(name=k, value=v)
                                        for k, v in wanted[n].configs.items()])
                            for n in progress.todo],
                    timeout_ms=self._ms_left(deadline), validate_only=validate_only)

            version, resp = self._send(self._controller(), CREATE_TOPICS, build, deadline, "create_topics")
            for r in resp.topics:
                created = CreatedTopic(r.name, r.topic_id if version >= 7 else None, r.num_partitions,
                                       r.replication_factor)
                self._settle(progress, r.name, r.error_code, f"topic {r.name!r}", created, r.error_message)

        return self._run("create_topics", wanted, timeout, step, raise_on_error)

    @staticmethod
    def _ms_left(deadline: float) -> int:
        return max(1, min(2**31 - 1, int((deadline - time.monotonic()) * 1000)))

    def delete_topics(self, topics: Iterable[str], timeout: float | None = None,
                      raise_on_error: bool = True) -> dict[str, None]:
        """Delete topics; a topic that does not exist holds UnknownTopicOrPartitionError."""
        names = list(dict.fromkeys(topics))

        def step(progress: _Progress, deadline: float) -> None:
            def build(version: int) -> Any:
                todo = list(progress.todo)
                if version >= 6:
                    state = DELETE_TOPICS.Request.DeleteTopicState
                    return DELETE_TOPICS.Request(topics=[state(name=n) for n in todo],
                                                 timeout_ms=self._ms_left(deadline))
                return DELETE_TOPICS.Request(topic_names=todo, timeout_ms=self._ms_left(deadline))

            _v, resp = self._send(self._controller(), DELETE_TOPICS, build, deadline, "delete_topics")
            for r in resp.responses:
                self._settle(progress, r.name, r.error_code, f"topic {r.name!r}", None, r.error_message)

        return self._run("delete_topics", names, timeout, step, raise_on_error)

    def create_partitions(self, new_counts: Mapping[str, int], *, validate_only: bool = False,
                          timeout: float | None = None, raise_on_error: bool = True) -> dict[str, None]:
        """Raise each topic's partition count to the given total (it can only grow)."""
        counts = dict(new_counts)
        CPT = CREATE_PARTITIONS.Request.CreatePartitionsTopic

        def step(progress: _Progress, deadline: float) -> None:
            def build(version: int) -> Any:
                return CREATE_PARTITIONS.Request(
                    topics=[CPT(name=n, count=counts[n]) for n in progress.todo],
                    timeout_ms=self._ms_left(deadline), validate_only=validate_only)

            _v, resp = self._send(self._controller(), CREATE_PARTITIONS, build, deadline, "create_partitions")
            for r in resp.results:
                self._settle(progress, r.name, r.error_code, f"topic {r.name!r}", None, r.error_message)

        return self._run("create_partitions", counts, timeout, step, raise_on_error)

    # -- partitions: offsets and records -------------------------------------------------

    def _by_leader(self, progress: _Progress, deadline: float, what: str) -> dict[int, list[TopicPartition]]:
        """The pending partitions grouped by leader, from fresh metadata; unknown ones
        are marked failed, leaderless ones left for the next round."""
        topics = sorted({tp.topic for tp in progress.todo})
        resp = self._metadata(topics, deadline, what)
        leaders: dict[TopicPartition, int] = {}
        topic_errors: dict[str, int] = {}
        for t in resp.topics:
            topic_errors[t.name] = t.error_code
            for p in t.partitions:
                leaders[TopicPartition(t.name, p.partition_index)] = p.leader_id
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in list(progress.todo):
            code = topic_errors.get(tp.topic, 3)
            if code:
                progress.failed(tp, broker_error(code, f"{_label(tp)}"))
            elif tp not in leaders:
                progress.failed(tp, broker_error(3, f"{_label(tp)} (the topic has no such partition)"))
            elif leaders[tp] < 0 or leaders[tp] not in self.cluster.brokers:
                self.cluster.request_refresh()
                progress.failed(tp, broker_error(5, _label(tp)))
            else:
                by_node.setdefault(leaders[tp], []).append(tp)
        return by_node

    def list_offsets(self, specs: Mapping[Any, str | int], *, read_committed: bool = False,
                     timeout: float | None = None, raise_on_error: bool = True
                     ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by partition: spec "earliest", "latest", "max_timestamp" (the record
        with the largest timestamp and that timestamp, KIP-734: ListOffsets v7+), or a
        timestamp in ms (the first offset with a timestamp at or after it; offset -1 when
        there is none)."""
        query: dict[TopicPartition, int] = {}
        for k, v in specs.items():
            if isinstance(v, str) and v in _OFFSET_SPECS:
                query[_tp(k)] = _OFFSET_SPECS[v]
            elif isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                query[_tp(k)] = v
            else:
                raise ValueError(f"offset spec for {k!r} must be 'earliest', 'latest', "
                                 f"'max_timestamp' or a timestamp in ms >= 0, got {v!r}")
        LOT = LIST_OFFSETS.Request.ListOffsetsTopic

        def step(progress: _Progress, deadline: float) -> None:
            for node, tps in self._by_leader(progress, deadline, "list_offsets").items():
                topics: dict[str, list[Any]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(LOT.ListOffsetsPartition(
                        partition_index=tp.partition, timestamp=query[tp], max_num_offsets=1))
                req = LIST_OFFSETS.Request(replica_id=-1, isolation_level=int(read_committed),
                                           topics=[LOT(name=t, partitions=p) for t, p in topics.items()])

                def build(version: int, tps: list[TopicPartition] = tps) -> Any:
                    # An older broker would read -3 as a timestamp and answer nonsense.
                    if version < 7 and any(query[tp] == _MAX_TIMESTAMP for tp in tps):
                        raise errors.UnsupportedVersionError(
                            f"list_offsets: 'max_timestamp' needs ListOffsets v7 (KIP-734, "
                            f"Kafka 3.0+); broker {node} speaks v{version}: ask for "
                            f"'latest' or a timestamp instead")
                    return req

                version, resp = self._send(node, LIST_OFFSETS, build, deadline, "list_offsets")
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if tp not in progress.todo:
                            continue
                        if p.error_code:
                            self._after_error(p.error_code)
                            progress.failed(tp, broker_error(p.error_code, _label(tp)))
                        elif version == 0:
                            old = p.old_style_offsets
                            progress.done(tp, OffsetAndTimestamp(old[0] if old else -1, -1))
                        else:
                            progress.done(tp, OffsetAndTimestamp(p.offset, p.timestamp))

        return self._run("list_offsets", query, timeout, step, raise_on_error)

    def delete_records(self, before: Mapping[Any, int], timeout: float | None = None,
                       raise_on_error: bool = True) -> dict[TopicPartition, DeletedRecords]:
        """Delete every record below the given offset of each partition (-1: below the
        high watermark, i.e. all); returns each partition's new low watermark."""
        offsets = {_tp(k): int(v) for k, v in before.items()}
        DRT = DELETE_RECORDS.Request.DeleteRecordsTopic

        def step(progress: _Progress, deadline: float) -> None:
            for node, tps in self._by_leader(progress, deadline, "delete_records").items():
                topics: dict[str, list[Any]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(
                        DRT.DeleteRecordsPartition(partition_index=tp.partition, offset=offsets[tp]))

                def build(version: int) -> Any:
                    return DELETE_RECORDS.Request(
                        topics=[DRT(name=t, partitions=p) for t, p in topics.items()],
                        timeout_ms=self._ms_left(deadline))

                _v, resp = self._send(node, DELETE_RECORDS, build, deadline, "delete_records")
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        self._settle(progress, tp, p.error_code, f"{_label(tp)} before offset {offsets.get(tp)}",
                                     DeletedRecords(p.low_watermark))

        return self._run("delete_records", offsets, timeout, step, raise_on_error)

    # -- groups ----------------------------------------------------------------------------

    def _find_coordinators(self, groups: list[str], deadline: float) -> dict[str, int | BaseException]:
        """Each group's coordinator node id (cached), or the error FindCoordinator gave."""
        out: dict[str, int | BaseException] = {g: self._coordinators[g] for g in groups if g in self._coordinators}
        missing = [g for g in groups if g not in out]
        if not missing:
            return out
        version = self.cluster.any_connection(deadline).version_for(FIND_COORDINATOR)
        # KIP-699 (v4+): every key in one request; before, one request per key.
        batches = [missing] if version >= 4 else [[g] for g in missing]
        found = []
        for keys in batches:
            _v, resp = self._send(None, FIND_COORDINATOR, lambda v, keys=keys: find_request(keys, GROUP),
                                  deadline, "FindCoordinator")
            found.extend(coordinator_answers(resp, keys))
        for key, node, _host, _port, code, message in found:
            if key not in missing:
                continue
            if code:
                out[key] = broker_error(code, f"finding the coordinator of group {key!r}", message)
            elif node not in self.cluster.brokers:
                self.cluster.request_refresh()
                out[key] = broker_error(15, f"group {key!r}: coordinator {node} is not in the metadata yet")
            else:
                out[key] = self._coordinators[key] = node
        return out

    def _coordinator(self, group: str, deadline: float) -> int:
        """The coordinator of ``group``; raises FindCoordinator's error (retried by _run
        when the coordinator is merely moving)."""
        node = self._find_coordinators([group], deadline).get(group)
        if node is None:
            raise broker_error(15, f"no FindCoordinator answer for group {group!r}")
        if isinstance(node, BaseException):
            raise node
        return node

    def _group_error(self, group: str, code: int, what: str) -> None:
        """Raise a group-wide error code (forgetting the coordinator if it moved)."""
        if code:
            if code in COORDINATOR_MOVED:
                self._coordinators.pop(group, None)
            raise broker_error(code, f"{what} of group {group!r}")

    def _by_coordinator(self, progress: _Progress, deadline: float) -> dict[int, list[str]]:
        by_node: dict[int, list[str]] = {}
        for g, node in self._find_coordinators(list(progress.todo), deadline).items():
            if isinstance(node, BaseException):
                progress.failed(g, node)
            else:
                by_node.setdefault(node, []).append(g)
        return by_node

    def _group_result(self, progress: _Progress, group: str, code: int, what: str, value: Any) -> None:
        if not code:
            progress.done(group, value)
            return
        if code in COORDINATOR_MOVED:
            self._coordinators.pop(group, None)
        progress.failed(group, broker_error(code, f"{what} group {group!r}"))

    def list_groups(self, timeout: float | None = None) -> dict[str, GroupListing]:
        """Every group the brokers coordinate (ListGroups to each broker), by group id."""
        t, deadline = self._deadline(timeout)
        nodes = list(self.describe_cluster(max(0.001, deadline - time.monotonic())).brokers)

        def step(progress: _Progress, deadline: float) -> None:
            for node in list(progress.todo):
                _v, resp = self._send(node, LIST_GROUPS, lambda v: LIST_GROUPS.Request(),
                                      deadline, "list_groups")
                if resp.error_code:
                    progress.failed(node, broker_error(resp.error_code, f"ListGroups on broker {node}"))
                    continue
                progress.done(node, [GroupListing(g.group_id, g.protocol_type, g.group_state or None)
                                     for g in resp.groups])

        per_node = self._run("list_groups", nodes, max(0.0, deadline - time.monotonic()), step, True)
        out = {g.group_id: g for listing in per_node.values() for g in listing}
        return dict(sorted(out.items()))

    def describe_groups(self, group_ids: Iterable[str], timeout: float | None = None,
                        raise_on_error: bool = True) -> dict[str, GroupDescription]:
        """State, protocol and members (with their decoded assignments) of each group,
        from its coordinator.  An unknown group comes back in state "Dead" (Kafka's
        answer before DescribeGroups v6) or as GroupIdNotFoundError."""
        groups = list(dict.fromkeys(group_ids))

        def step(progress: _Progress, deadline: float) -> None:
            for node, gs in self._by_coordinator(progress, deadline).items():
                _v, resp = self._send(node, DESCRIBE_GROUPS, lambda v: DESCRIBE_GROUPS.Request(
                    groups=gs, include_authorized_operations=False), deadline, "describe_groups")
                for g in resp.groups:
                    if g.group_id not in progress.todo:
                        continue
                    desc = GroupDescription(
                        g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                        [_decoded_member(g.protocol_type, m) for m in g.members], node)
                    self._group_result(progress, g.group_id, g.error_code, "describing", desc)

        return self._run("describe_groups", groups, timeout, step, raise_on_error)

    def delete_groups(self, group_ids: Iterable[str], timeout: float | None = None,
                      raise_on_error: bool = True) -> dict[str, None]:
        """Delete groups and their committed offsets; a group with members holds
        NonEmptyGroupError, an unknown one GroupIdNotFoundError."""
        groups = list(dict.fromkeys(group_ids))

        def step(progress: _Progress, deadline: float) -> None:
            for node, gs in self._by_coordinator(progress, deadline).items():
                _v, resp = self._send(node, DELETE_GROUPS, lambda v: DELETE_GROUPS.Request(
                    groups_names=gs), deadline, "delete_groups")
                for r in resp.results:
                    if r.group_id in progress.todo:
                        self._group_result(progress, r.group_id, r.error_code, "deleting", None)

        return self._run("delete_groups", groups, timeout, step, raise_on_error)

    def list_group_offsets(self, group_id: str, partitions: Iterable[Any] | None = None,
                           timeout: float | None = None, raise_on_error: bool = True
                           ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets: every partition it committed (``partitions``
        None), or the ones asked for, None where the group has no offset."""
        wanted = None if partitions is None else [_tp(x) for x in partitions]
        req_topics: dict[str, list[int]] | None = None
        if wanted is not None:
            req_topics = {}
            for tp in wanted:
                req_topics.setdefault(tp.topic, []).append(tp.partition)

        def build(version: int) -> Any:
            if version >= 8:  # KIP-709: a list of groups
                grp = OFFSET_FETCH.Request.OffsetFetchRequestGroup
                topics = None if req_topics is None else [
                    grp.OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in req_topics.items()]
                return OFFSET_FETCH.Request(groups=[grp(group_id=group_id, topics=topics)])
            if req_topics is None and version < 2:
                raise ValueError(f"OffsetFetch v{version} cannot ask for every partition; "
                                 f"pass partitions=")
            topics = None if req_topics is None else [
                OFFSET_FETCH.Request.OffsetFetchRequestTopic(name=t, partition_indexes=p)
                for t, p in req_topics.items()]
            return OFFSET_FETCH.Request(group_id=group_id, topics=topics)

        # The partitions are this call's items once the answer says which there are.
        def fetch(deadline: float) -> dict[TopicPartition, Any]:
            node = self._coordinator(group_id, deadline)
            version, resp = self._send(node, OFFSET_FETCH, build, deadline, "list_group_offsets")
            if version >= 8:
                answer = next((g for g in resp.groups if g.group_id == group_id), None)
                if answer is None:
                    raise broker_error(-1, f"OffsetFetch answered without group {group_id!r}")
                self._group_error(group_id, answer.error_code, "committed offsets")
                topics = answer.topics
            else:
                self._group_error(group_id, resp.error_code, "committed offsets")
                topics = resp.topics
            # librdkafka's mock answers a request for every partition with a null array.
            topics = topics or []
            out: dict[TopicPartition, Any] = {}
            for t in topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    # Before v2, coordinator errors come per partition.
                    self._group_error(group_id, p.error_code if p.error_code in _GROUP_WIDE else 0,
                                      "committed offsets")
                    if p.error_code:
                        out[tp] = broker_error(p.error_code, f"group {group_id!r} {_label(tp)}")
                    elif p.committed_offset >= 0:
                        out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                    p.committed_leader_epoch)
                    elif wanted is not None:
                        out[tp] = None
            if wanted is not None:
                out = {tp: out.get(tp) for tp in wanted}
            return dict(sorted(out.items()))

        out = self._one("list_group_offsets", timeout, fetch)
        failed = {k: v for k, v in out.items() if isinstance(v, BaseException)}
        if failed and raise_on_error:
            raise AdminError("list_group_offsets", out, failed)
        return out

    def alter_group_offsets(self, group_id: str, offsets: Mapping[Any, int | OffsetAndMetadata],
                            timeout: float | None = None, raise_on_error: bool = True
                            ) -> dict[TopicPartition, None]:
        """Commit these offsets for the group, as an outsider (generation -1, no member
        id, as Kafka's admin does).  The broker refuses while the group has members
        (UNKNOWN_MEMBER_ID or similar, per partition): stop its consumers first."""
        commits: dict[TopicPartition, OffsetAndMetadata] = {}
        for k, v in offsets.items():
            om = v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
            if om.offset < 0:
                raise ValueError(f"offset for {k!r} must be >= 0, got {om.offset}")
            commits[_tp(k)] = om
        OCT = OFFSET_COMMIT.Request.OffsetCommitRequestTopic

        def step(progress: _Progress, deadline: float) -> None:
            node = self._coordinator(group_id, deadline)

            def build(version: int) -> Any:
                topics: dict[str, list[Any]] = {}
                for tp in progress.todo:
                    om = commits[tp]
                    topics.setdefault(tp.topic, []).append(OCT.OffsetCommitRequestPartition(
                        partition_index=tp.partition, committed_offset=om.offset,
                        committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
                return OFFSET_COMMIT.Request(
                    group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                    topics=[OCT(name=t, partitions=p) for t, p in topics.items()])

            _v, resp = self._send(node, OFFSET_COMMIT, build, deadline, "alter_group_offsets")
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp not in progress.todo:
                        continue
                    if p.error_code in COORDINATOR_MOVED:
                        self._coordinators.pop(group_id, None)
                    self._settle(progress, tp, p.error_code, f"group {group_id!r} {_label(tp)}")

        return self._run("alter_group_offsets", commits, timeout, step, raise_on_error)

    def delete_group_offsets(self, group_id: str, partitions: Iterable[Any],
                             timeout: float | None = None, raise_on_error: bool = True
                             ) -> dict[TopicPartition, None]:
        """Forget the group's committed offsets of these partitions (OffsetDelete,
        KIP-496); a partition the group still consumes holds GroupSubscribedToTopicError."""
        tps = [_tp(x) for x in partitions]
        ODT = OFFSET_DELETE.Request.OffsetDeleteRequestTopic

        def step(progress: _Progress, deadline: float) -> None:
            node = self._coordinator(group_id, deadline)
            topics: dict[str, list[Any]] = {}
            for tp in progress.todo:
                topics.setdefault(tp.topic, []).append(ODT.OffsetDeleteRequestPartition(partition_index=tp.partition))
            _v, resp = self._send(node, OFFSET_DELETE, lambda v: OFFSET_DELETE.Request(
                group_id=group_id, topics=[ODT(name=t, partitions=p) for t, p in topics.items()]),
                deadline, "delete_group_offsets")
            self._group_error(group_id, resp.error_code, "deleting offsets")
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    self._settle(progress, tp, p.error_code, f"group {group_id!r} {_label(tp)}")

        return self._run("delete_group_offsets", tps, timeout, step, raise_on_error)

    def group_lag(self, group_id: str, partitions: Iterable[Any] | None = None,
                  timeout: float | None = None) -> GroupLag:
        """Committed offset, end offset (ListOffsets latest) and their difference for
        every partition the group committed (or each of ``partitions``), and the sum of
        the lags; a partition without a committed offset has lag None."""
        _t, deadline = self._deadline(timeout)
        committed = self.list_group_offsets(group_id, partitions, timeout=max(0.0, deadline - time.monotonic()))
        ends = self.list_offsets({tp: "latest" for tp in committed},
                                 timeout=max(0.0, deadline - time.monotonic())) if committed else {}
        parts = {}
        for tp, om in committed.items():
            end = ends[tp].offset
            done = None if om is None else om.offset
            parts[tp] = PartitionLag(done, end, None if done is None else max(0, end - done))
        return GroupLag(group_id, parts, sum(p.lag or 0 for p in parts.values()))

    # -- configs ---------------------------------------------------------------------------

    def _config_node(self, res: ConfigResource) -> int | None:
        # Broker and broker-logger configs are answered by that broker only.
        if res.type != "topic" and res.name:
            if not res.name.isdigit():
                raise ValueError(f"{res.type} config resources are named by node id, got {res.name!r}")
            return int(res.name)
        return None

    def describe_configs(self, resources: Iterable[Any], keys: Iterable[str] | None = None,
                         timeout: float | None = None, raise_on_error: bool = True
                         ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Configs of each resource (all of them, or only ``keys``), by name."""
        wanted = [_resource(r) for r in resources]
        only = None if keys is None else list(keys)
        DCR = DESCRIBE_CONFIGS.Request.DescribeConfigsResource

        def step(progress: _Progress, deadline: float) -> None:
            by_node: dict[int | None, list[ConfigResource]] = {}
            for res in progress.todo:
                by_node.setdefault(self._config_node(res), []).append(res)
            for node, group in by_node.items():
                version, resp = self._send(node, DESCRIBE_CONFIGS, lambda v: DESCRIBE_CONFIGS.Request(
                    resources=[DCR(resource_type=_RESOURCE_TYPES[r.type], resource_name=r.name,
                                   configuration_keys=only) for r in group]),
                    deadline, "describe_configs")
                for r in resp.results:
                    res = ConfigResource(_RESOURCE_NAMES.get(r.resource_type, str(r.resource_type)),
                                         r.resource_name)
                    if res not in progress.todo:
                        continue
                    if r.error_code:
                        progress.failed(res, broker_error(r.error_code, _label(res), r.error_message))
                        continue
                    entries = {}
                    for c in r.configs:
                        source = _CONFIG_SOURCES.get(c.config_source, "UNKNOWN")
                        is_default = c.is_default if version == 0 else c.config_source == 5
                        entries[c.name] = ConfigEntry(c.name, c.value, source, bool(is_default),
                                                      bool(c.read_only), bool(c.is_sensitive))
                    progress.done(res, dict(sorted(entries.items())))

        return self._run("describe_configs", wanted, timeout, step, raise_on_error)

    def alter_configs(self, changes: Mapping[Any, Mapping[str, str | None]], *,
                      validate_only: bool = False, timeout: float | None = None,
                      raise_on_error: bool = True) -> dict[ConfigResource, None]:
        """Set configs (a value) or reset them to their default (None), per resource;
        other configs of the resource are left as they are.

        Uses IncrementalAlterConfigs (KIP-339).  On a broker without it, falls back to
        AlterConfigs, which replaces the resource's whole dynamic config: the current
        dynamic configs are read first and sent along, and a resource with a sensitive
        one (its value cannot be read back) fails rather than lose it."""
        wanted = {_resource(r): dict(c) for r, c in changes.items()}

        def step(progress: _Progress, deadline: float) -> None:
            by_node: dict[int | None, list[ConfigResource]] = {}
            for res in progress.todo:
                by_node.setdefault(self._config_node(res), []).append(res)
            for node, group in by_node.items():
                conn = self._conn(node, deadline)
                try:
                    conn.version_for(INCREMENTAL_ALTER_CONFIGS)
                    incremental = True
                except ApiVersionError as exc:
                    first = exc
                    try:
                        conn.version_for(ALTER_CONFIGS)
                        incremental = False
                    except ApiVersionError as exc2:
                        raise ApiVersionError(
                            f"alter_configs: {conn.name} cannot answer it: {first}; nor {exc2}") from None
                req = (self._incremental_request(group, wanted, validate_only) if incremental
                       else self._legacy_request(group, wanted, validate_only, progress, deadline))
                if req is None:
                    continue
                api = INCREMENTAL_ALTER_CONFIGS if incremental else ALTER_CONFIGS
                _v, resp = self._send(node, api, lambda v: req, deadline, "alter_configs")
                for r in resp.responses:
                    res = ConfigResource(_RESOURCE_NAMES.get(r.resource_type, str(r.resource_type)),
                                         r.resource_name)
                    self._settle(progress, res, r.error_code, _label(res), None, r.error_message)

        return self._run("alter_configs", wanted, timeout, step, raise_on_error)

    @staticmethod
    def _incremental_request(group: list[ConfigResource], wanted: dict[ConfigResource, dict[str, str | None]],
                             validate_only: bool) -> Any:
        ACR = INCREMENTAL_ALTER_CONFIGS.Request.AlterConfigsResource
        return INCREMENTAL_ALTER_CONFIGS.Request(validate_only=validate_only, resources=[
            ACR(resource_type=_RESOURCE_TYPES[r.type], resource_name=r.name, configs=[
                ACR.AlterableConfig(name=k, config_operation=1 if v is None else 0, value=v)
                for k, v in wanted[r].items()])
            for r in group])

    def _legacy_request(self, group: list[ConfigResource], wanted: dict[ConfigResource, dict[str, str | None]],
                        validate_only: bool, progress: _Progress, deadline: float) -> Any:
        current = self.describe_configs(group, timeout=max(0.001, deadline - time.monotonic()),
                                        raise_on_error=False)
        ACR = ALTER_CONFIGS.Request.AlterConfigsResource
        resources = []
        for r in group:
            now = current[r]
            if isinstance(now, BaseException):
                progress.failed(r, now)
                continue
            # The resource's own dynamic values; a broker's default ("") has its own source.
            own = {"topic": "DYNAMIC_TOPIC_CONFIG", "broker_logger": "DYNAMIC_BROKER_LOGGER_CONFIG",
                   "broker": "DYNAMIC_BROKER_CONFIG" if r.name else "DYNAMIC_DEFAULT_BROKER_CONFIG"}[r.type]
            merged = {e.name: e.value for e in now.values() if e.source == own}
            lost = [k for k in merged if now[k].is_sensitive and k not in wanted[r]]
            if lost:
                progress.done(r, errors.UnsupportedVersionError(
                    f"{_label(r)}: the broker lacks IncrementalAlterConfigs, and AlterConfigs "
                    f"replaces every config, but the sensitive {', '.join(sorted(lost))} cannot "
                    f"be read back to keep: set it in the same call, or upgrade the broker"))
                continue
            for k, v in wanted[r].items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
            resources.append(ACR(resource_type=_RESOURCE_TYPES[r.type], resource_name=r.name, configs=[
                ACR.AlterableConfig(name=k, value=v) for k, v in sorted(merged.items())]))
        if not resources:
            return None
        return ALTER_CONFIGS.Request(resources=resources, validate_only=validate_only)

    # -- SCRAM credentials (KIP-554) -------------------------------------------------------

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None,
                                        timeout: float | None = None, raise_on_error: bool = True
                                        ) -> dict[str, list[ScramCredentialInfo]]:
        """Each user's SCRAM credentials (mechanism and iterations, sorted by mechanism), by
        user name; every user that has one when ``users`` is None.  A named user without a credential fails
        with RESOURCE_NOT_FOUND (see the module docstring for ``raise_on_error``)."""
        names = None if users is None else list(dict.fromkeys(users))
        UN = DESCRIBE_USER_SCRAM_CREDENTIALS.Request.UserName

        def fetch(deadline: float) -> dict[str, Any]:
            # Any broker answers: Kafka's brokers read the credentials from the metadata log.
            _v, resp = self._send(None, DESCRIBE_USER_SCRAM_CREDENTIALS, lambda v: DESCRIBE_USER_SCRAM_CREDENTIALS.Request(
                users=None if names is None else [UN(name=n) for n in names]),
                deadline, "describe_user_scram_credentials")
            if resp.error_code:
                raise broker_error(resp.error_code, "describe_user_scram_credentials", resp.error_message)
            out: dict[str, Any] = {}
            for r in resp.results:
                out[r.user] = (broker_error(r.error_code, f"SCRAM credentials of user {r.user!r}", r.error_message)
                               if r.error_code else
                               # Kafka lists them in no fixed order: by mechanism here.
                               sorted((ScramCredentialInfo(_SCRAM_MECHANISM_NAMES.get(c.mechanism, "UNKNOWN"),
                                                           c.iterations) for c in r.credential_infos),
                                      key=lambda info: info.mechanism))
            return out

        results = self._one("describe_user_scram_credentials", timeout, fetch)
        if names is not None:
            # Kafka answers for every user named; a broker that left one out gets asked again.
            results = {n: results[n] if n in results else errors.KafkaWireError(
                f"user {n!r}: the broker left it out of its DescribeUserScramCredentials "
                f"answer; ask again") for n in names}
        failed = {k: v for k, v in results.items() if isinstance(v, BaseException)}
        if failed and raise_on_error:
            raise AdminError("describe_user_scram_credentials", results, failed)
        return results

    def alter_user_scram_credentials(
        self, alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        timeout: float | None = None, raise_on_error: bool = True,
    ) -> dict[str, None]:
        """Create, replace or delete SCRAM credentials; returns None per user once all of
        that user's alterations are done, or the first one's error (the later ones of that
        user are then not sent).  One (user, mechanism) pair may appear once per call.

        The passwords are salted here, SASLprepped as kafkawire's own login preps them
        (see :func:`kafkawire.protocol.sasl.scram_credential`), and never sent.  A user name
        may hold any character Kafka stores, but Kafka's SCRAM login accepts ASCII user names
        only (its client-first message grammar), so a non-ASCII name cannot log in."""
        req_type = ALTER_USER_SCRAM_CREDENTIALS.Request
        Del, Ups = req_type.ScramCredentialDeletion, req_type.ScramCredentialUpsertion
        queues: dict[str, list[Any]] = {}  # per user, the alterations still to send, in order
        seen: set[tuple[str, int]] = set()
        for a in alterations:
            if isinstance(a, UserScramCredentialUpsertion):
                # Salted once, before any retry: the same credential goes every time.
                cred = scram_credential(a.mechanism, a.password, iterations=a.iterations, salt=a.salt)
                item: Any = Ups(name=a.user, mechanism=cred.mechanism_type, iterations=cred.iterations,
                                salt=cred.salt, salted_password=cred.salted_password)
            elif isinstance(a, UserScramCredentialDeletion):
                item = Del(name=a.user, mechanism=_scram_mechanism_type(a.mechanism))
            else:
                raise TypeError(f"expected a UserScramCredentialUpsertion or UserScramCredentialDeletion, got {a!r}")
            if (a.user, item.mechanism) in seen:
                raise ValueError(f"user {a.user!r} has more than one alteration of its "
                                 f"{_SCRAM_MECHANISM_NAMES[item.mechanism]} credential in this call; keep one")
            seen.add((a.user, item.mechanism))
            queues.setdefault(a.user, []).append(item)

        def step(progress: _Progress, deadline: float) -> None:
            # Kafka answers DUPLICATE_RESOURCE for a user named twice in one request, even for
            # two mechanisms (KRaft's SCRAM control manager, KIP-554): one alteration per user
            # per request, the user's next one in the next.
            while True:
                heads = {u: q[0] for u, q in queues.items() if u in progress.todo and q}
                if not heads:
                    return
                request = req_type(deletions=[x for x in heads.values() if isinstance(x, Del)],
                                   upsertions=[x for x in heads.values() if isinstance(x, Ups)])
                # Any broker: Kafka forwards it to the active controller.
                _v, resp = self._send(None, ALTER_USER_SCRAM_CREDENTIALS, lambda v: request, deadline,
                                      "alter_user_scram_credentials")
                advanced = False
                for r in resp.results:
                    if r.user not in heads:
                        continue
                    if r.error_code:
                        self._settle(progress, r.user, r.error_code, f"SCRAM credentials of user {r.user!r}",
                                     None, r.error_message)
                        continue
                    queues[r.user].pop(0)
                    advanced = True
                    if not queues[r.user]:
                        progress.done(r.user, None)
                if not advanced or progress.retry:
                    return  # _run backs off before what is left

        return self._run("alter_user_scram_credentials", queues, timeout, step, raise_on_error)
