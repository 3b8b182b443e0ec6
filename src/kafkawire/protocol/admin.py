"""The admin client's requests and answers, with no I/O: the result types, the request
for each call, the reading of each answer and the decisions between them (which errors
are worth another round, when the controller, a leader or a group's coordinator moved,
what each item's outcome is).

Each call is an :class:`Op`: a name and a generator of protocol/steps.py's steps
(Request, Sleep, Refresh, NOW) whose return value is the call's result.
:class:`AdminCore` makes them; the sync :class:`kafkawire.Admin` and the asyncio
:class:`kafkawire.aio.AsyncAdmin` run them on their cluster's one runner (``Cluster.run``,
``AsyncCluster.run``): a shell only connects, sends, waits and sleeps.  The steps read the
time with NOW, the runner's clock, which the call's deadline is on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Iterable, Mapping, NamedTuple

from kafkawire import errors
from kafkawire.errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailableError, broker_error
from kafkawire.protocol import apis
from kafkawire.protocol import consumer as consumer_protocol
from kafkawire.protocol.api import Api, ApiVersionError
from kafkawire.protocol.coordinator import COORDINATOR_MOVED, FIND_COORDINATOR, GROUP, TRANSACTION, find_request
from kafkawire.protocol.coordinator import answers as coordinator_answers
from kafkawire.protocol.fetcher import OffsetAndTimestamp, TopicPartition
from kafkawire.protocol.fetcher import as_topic_partition as _tp
from kafkawire.protocol.metadata import ClusterMetadata
from kafkawire.protocol.sasl import SCRAM_MECHANISM_TYPES, SCRAM_MIN_ITERATIONS, scram_credential
from kafkawire.protocol.steps import NOW, Refresh, Request, Sleep

# The calls' results and errors: kafkawire.client.admin and kafkawire.aio.admin hand them out.
RESULT_TYPES = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AdminError",
    "ClientQuotaEntity",
    "BrokerInfo",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "CreatedTopic",
    "DeletedRecords",
    "FeatureMetadata",
    "GroupDescription",
    "GroupLag",
    "GroupListing",
    "LogDirDescription",
    "MemberDescription",
    "NewTopic",
    "OffsetAndMetadata",
    "PartitionInfo",
    "PartitionLag",
    "PartitionReassignment",
    "PatternType",
    "ReplicaInfo",
    "ProducerState",
    "ResourceType",
    "ScramCredentialInfo",
    "TopicDescription",
    "TopicPartition",
    "TopicPartitionReplica",
    "TransactionDescription",
    "TransactionListing",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
]
__all__ = ["AdminCore", "Budget", "Op", "RESULT_TYPES", *RESULT_TYPES]

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
CONSUMER_GROUP_DESCRIBE = apis.get("ConsumerGroupDescribe")
LIST_GROUPS = apis.get("ListGroups")
DELETE_GROUPS = apis.get("DeleteGroups")
DESCRIBE_USER_SCRAM_CREDENTIALS = apis.get("DescribeUserScramCredentials")
ALTER_USER_SCRAM_CREDENTIALS = apis.get("AlterUserScramCredentials")
DESCRIBE_ACLS = apis.get("DescribeAcls")
CREATE_ACLS = apis.get("CreateAcls")
DELETE_ACLS = apis.get("DeleteAcls")
WRITE_TXN_MARKERS = apis.get("WriteTxnMarkers")
DESCRIBE_PRODUCERS = apis.get("DescribeProducers")
DESCRIBE_TRANSACTIONS = apis.get("DescribeTransactions")
LIST_TRANSACTIONS = apis.get("ListTransactions")
ELECT_LEADERS = apis.get("ElectLeaders")
ALTER_PARTITION_REASSIGNMENTS = apis.get("AlterPartitionReassignments")
LIST_PARTITION_REASSIGNMENTS = apis.get("ListPartitionReassignments")
DESCRIBE_CLIENT_QUOTAS = apis.get("DescribeClientQuotas")
ALTER_CLIENT_QUOTAS = apis.get("AlterClientQuotas")
DESCRIBE_LOG_DIRS = apis.get("DescribeLogDirs")
ALTER_REPLICA_LOG_DIRS = apis.get("AlterReplicaLogDirs")
DESCRIBE_CLUSTER = apis.get("DescribeCluster")
UPDATE_FEATURES = apis.get("UpdateFeatures")
API_VERSIONS = apis.get("ApiVersions")
DESCRIBE_TOPIC_PARTITIONS = apis.get("DescribeTopicPartitions")

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
    fenced: bool = False  # from describe_cluster(include_fenced_brokers=True) only


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
    # From describe_topic_partitions (KIP-966): the replicas that may still be elected
    # cleanly though out of the ISR, and the last ones known when none is left.
    eligible_leader_replicas: list[int] | None = None
    last_known_elr: list[int] | None = None


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
    and ``raw_metadata`` are the bytes as the broker sent them (empty for a member of a
    KIP-848 group, which the coordinator describes field by field).

    A member of a KIP-848 group (GroupDescription.group_type "consumer") also has its
    ``member_epoch``, ``rack_id``, ``subscribed_topic_regex`` (the RE2/J pattern it
    subscribed with, else None), ``target_assignment`` (what the coordinator is moving it
    to; equal to ``assignment`` once reconciled) and ``member_type`` ("consumer", or
    "classic" for a JoinGroup member of an upgraded group; None when the broker does not
    say: ConsumerGroupDescribe v0)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: dict[str, list[int]] | None
    subscription: list[str] | None
    raw_assignment: bytes
    raw_metadata: bytes
    member_epoch: int | None = None
    rack_id: str | None = None
    subscribed_topic_regex: str | None = None
    target_assignment: dict[str, list[int]] | None = None
    member_type: str | None = None


@dataclass(frozen=True)
class GroupDescription:
    """A group as its coordinator describes it; ``protocol`` is the assignor's name.

    ``group_type`` is "classic" (JoinGroup/SyncGroup, described by DescribeGroups) or
    "consumer" (KIP-848, described by ConsumerGroupDescribe: ``state`` is then one of
    Kafka's Empty, Assigning, Reconciling, Stable; ``protocol`` the server-side assignor,
    such as "uniform"; ``group_epoch`` and ``assignment_epoch`` the coordinator's
    epochs, equal once the target assignment is computed); None for a group the
    coordinator does not know (state "Dead")."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: int
    group_type: str | None = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None


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


# -- ACLs (KIP-140): Kafka's codes, and bindings and filters in its terms ---------------------


class ResourceType(enum.IntEnum):
    """What an ACL is on.  ANY (filters only) matches every type; UNKNOWN stands for a
    code this client does not know."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """How an ACL's resource name matches (KIP-290).  A binding is LITERAL (the name, or
    ``*`` for every resource of its type) or PREFIXED; a filter may also say MATCH (every
    binding that would apply to the named resource: literal, wildcard and prefixes) or ANY
    (every binding whatever its pattern)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """What an ACL allows or denies.  ANY matches every operation in a filter."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    """Whether an ACL allows or denies.  ANY matches both in a filter."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _acl_enum(cls: Any, value: Any, what: str) -> Any:
    """``value`` (a member, its code, or its name in any case, ``-`` for ``_``) as a
    member of ``cls``."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.strip().upper().replace("-", "_")]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return cls(value)
        except ValueError:
            pass
    names = ", ".join(m.name for m in cls if m.name != "UNKNOWN")
    raise ValueError(f"{what} must be one of {names}; got {value!r}")


def _acl_code(cls: Any, code: int) -> Any:
    # A newer broker may answer with a code added after this client: kept as UNKNOWN.
    try:
        return cls(code)
    except ValueError:
        return cls.UNKNOWN


@dataclass(frozen=True)
class AclBinding:
    """One ACL: ``principal`` (``User:alice``, or ``User:*`` for everyone) from ``host``
    (``*``: any) is allowed or denied ``operation`` on the resources ``resource_type`` /
    ``name`` / ``pattern_type`` name (``name`` ``*`` with LITERAL: all of that type; the
    cluster's one resource is named ``kafka-cluster``).  The enums may be given by name
    (``"topic"``, ``"read"``) or code."""

    resource_type: ResourceType
    name: str
    principal: str
    operation: AclOperation
    permission_type: AclPermissionType = AclPermissionType.ALLOW
    host: str = "*"
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        for attr, cls in (("resource_type", ResourceType), ("operation", AclOperation),
                          ("permission_type", AclPermissionType), ("pattern_type", PatternType)):
            object.__setattr__(self, attr, _acl_enum(cls, getattr(self, attr), attr))

    def _sort_key(self) -> tuple[Any, ...]:
        return (self.resource_type, self.name, self.pattern_type, self.principal, self.host,
                self.operation, self.permission_type)

    def _check(self) -> None:
        """Refuse what only a filter may say, before anything is sent."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"{self}: a binding needs a resource type, not {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"{self}: a binding's pattern type is LITERAL or PREFIXED, "
                             f"not {self.pattern_type.name} (that is for filters)")
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"{self}: a binding needs an operation, not {self.operation.name}")
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise ValueError(f"{self}: a binding is ALLOW or DENY, not {self.permission_type.name}")
        if not self.name or not self.principal or not self.host:
            raise ValueError(f"{self}: name, principal and host must not be empty")


@dataclass(frozen=True)
class AclBindingFilter:
    """Which ACLs to describe or delete: every field left at its default (ANY, or None
    for the strings) matches everything; ``pattern_type`` MATCH with a ``name`` matches the
    bindings that apply to that resource (its literal name, ``*``, and prefixes of it)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def __post_init__(self) -> None:
        for attr, cls in (("resource_type", ResourceType), ("operation", AclOperation),
                          ("permission_type", AclPermissionType), ("pattern_type", PatternType)):
            value = _acl_enum(cls, getattr(self, attr), attr)
            if value is cls.UNKNOWN:
                raise ValueError(f"{attr} UNKNOWN matches nothing; use ANY to match every {attr}")
            object.__setattr__(self, attr, value)

    @classmethod
    def of(cls, binding: AclBinding) -> AclBindingFilter:
        """The filter that matches exactly ``binding``."""
        return cls(binding.resource_type, binding.name, binding.pattern_type, binding.principal,
                   binding.host, binding.operation, binding.permission_type)


def _acl_binding(x: Any) -> AclBinding:
    """A binding from the broker's answer (any struct with the binding's fields)."""
    return AclBinding(_acl_code(ResourceType, x.resource_type), x.resource_name, x.principal,
                      _acl_code(AclOperation, x.operation), _acl_code(AclPermissionType, x.permission_type),
                      x.host, _acl_code(PatternType, x.pattern_type))


def _acl_version_check(version: int, what: str, pattern: PatternType, resource: ResourceType) -> None:
    # v0 has no pattern type (every name literal); USER resources need v3.
    if version < 1 and pattern not in (PatternType.LITERAL, PatternType.ANY):
        raise errors.UnsupportedVersionError(
            f"{what}: pattern type {pattern.name} needs v1 (Kafka 2.0), the broker speaks v0 only")
    if version < 3 and resource is ResourceType.USER:
        raise errors.UnsupportedVersionError(
            f"{what}: ACLs on USER resources need v3 (Kafka 2.8), the broker speaks v{version}")


# -- transactions (KIP-664) ------------------------------------------------------------------


@dataclass(frozen=True)
class TransactionListing:
    """One transactional id as its coordinator lists it; ``state`` is Kafka's name
    (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead,
    PrepareEpochFence)."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    """A transactional id's state at its ``coordinator`` (node id): its producer id and
    epoch, timeout, when its latest transaction began (ms since the epoch; None before its
    first) and the partitions the open one has written to."""

    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None
    partitions: list[TopicPartition]


@dataclass(frozen=True)
class ProducerState:
    """A producer a partition's leader remembers: its last sequence and timestamp, and the
    offset where its open transaction began (None: no transaction open there).
    ``coordinator_epoch`` is what an abort of that transaction must carry."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int | None


# -- client quotas (KIP-546), reassignments and elections --------------------------------------


class ClientQuotaEntity(tuple):
    """Whom a quota is for: entity type (``"user"``, ``"client-id"``, ``"ip"``) to name,
    None naming that type's default, as in ``ClientQuotaEntity({"user": "alice"})`` or
    ``ClientQuotaEntity(user="alice", client_id=None)`` (alice's default for any client
    id).  Hashable; ``dict(entity)`` gives the mapping back."""

    #: In :meth:`kafkawire.Admin.describe_client_quotas`' ``match``: any name of that type.
    ANY: Any = type("AnyName", (), {"__repr__": lambda self: "ClientQuotaEntity.ANY"})()

    def __new__(cls, entity: Mapping[str, str | None] | None = None, **names: str | None) -> ClientQuotaEntity:
        items = dict(entity or {})
        items.update({k.replace("_", "-"): v for k, v in names.items()})
        if not items:
            raise ValueError("a client quota entity names at least one of user, client-id, ip")
        return super().__new__(cls, tuple(sorted(items.items())))

    def __repr__(self) -> str:
        return f"ClientQuotaEntity({dict(self)!r})"


@dataclass(frozen=True)
class PartitionReassignment:
    """A reassignment in progress: the partition's replicas now, and of them the ones being
    added and the ones to be removed once the added have caught up."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


_ELECTION_TYPES = {"preferred": 0, "unclean": 1}


# -- log directories --------------------------------------------------------------------------


class TopicPartitionReplica(NamedTuple):
    """One replica: a partition on one broker (by node id)."""

    topic: str
    partition: int
    broker_id: int


@dataclass(frozen=True)
class ReplicaInfo:
    """A replica in a log directory: its size on disk, how far it lags the leader's log end
    (or the current replica, for a future one) and whether it is the copy a move is making."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """One log directory of a broker: its error (an offline directory holds
    KafkaStorageError), its replicas, and its total and usable bytes (None before
    DescribeLogDirs v4)."""

    path: str
    error: BaseException | None
    replicas: dict[TopicPartition, ReplicaInfo]
    total_bytes: int | None
    usable_bytes: int | None


@dataclass(frozen=True)
class FeatureMetadata:
    """The cluster's features as a broker sees them: ``finalized`` (name: (min, max) level
    in force, with the ``epoch`` of that state) and ``supported`` (name: (min, max) level
    the broker could run)."""

    finalized: dict[str, tuple[int, int]]
    epoch: int | None
    supported: dict[str, tuple[int, int]]


_UPGRADE_TYPES = {"upgrade": 1, "safe_downgrade": 2, "unsafe_downgrade": 3}


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


def _partitions_by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """The partition numbers of ``tps`` under their topics, in the order given: how the
    requests name partitions."""
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


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


# ConsumerGroupDescribe v1's member_type (KIP-1099).
_MEMBER_TYPES = {0: "classic", 1: "consumer"}
_GROUP_ID_NOT_FOUND = 69
_UNSUPPORTED_VERSION = 35


def _described_partitions(assignment: Any) -> dict[str, list[int]]:
    return {t.topic_name: sorted(t.partitions) for t in sorted(assignment.topic_partitions, key=lambda t: t.topic_name)}


def _consumer_group_description(g: Any, node: int) -> GroupDescription:
    """A KIP-848 group as ConsumerGroupDescribe gives it."""
    members = [MemberDescription(
        m.member_id, m.instance_id, m.client_id, m.client_host,
        _described_partitions(m.assignment), list(m.subscribed_topic_names), b"", b"",
        member_epoch=m.member_epoch, rack_id=m.rack_id, subscribed_topic_regex=m.subscribed_topic_regex or None,
        target_assignment=_described_partitions(m.target_assignment),
        member_type=_MEMBER_TYPES.get(m.member_type)) for m in g.members]
    return GroupDescription(g.group_id, g.group_state, consumer_protocol.PROTOCOL_TYPE, g.assignor_name,
                            members, node, "consumer", g.group_epoch, g.assignment_epoch)


# -- the calls as steps ----------------------------------------------------------------------

Steps = Generator[Any, Any, Any]


class Budget(NamedTuple):
    """A call's time: ``timeout`` seconds, ending at ``deadline`` on the runner's clock."""

    timeout: float
    deadline: float


class Op(NamedTuple):
    """One admin call: its ``name`` (for messages) and ``steps(budget)``, the generator
    that does it."""

    name: str
    steps: Callable[[Budget], Steps]


class _Speaks(Exception):
    """Raised by a probe's build: the broker has the API (the probe is never sent)."""


def _probe(version: int) -> Any:
    raise _Speaks(version)


class AdminCore:
    """The admin calls, as :class:`Op` s, over a cluster's metadata (``meta``: brokers
    and controller; the steps ask for a Refresh when it is due) and the group
    coordinators found so far."""

    def __init__(self, config: Any, meta: ClusterMetadata):
        self.config = config
        self.meta = meta
        self.coordinators: dict[str, int] = {}
        self.txn_coordinators: dict[str, int] = {}  # by transactional id
        #: The type ("classic" or "consumer") each group was last described as: the API
        #: asked first for it next time.
        self.group_types: dict[str, str] = {}

    # -- what a shell asks of the core ---------------------------------------------------

    def budget(self, timeout: float | None, now: float) -> Budget:
        """The budget of a call given ``timeout`` (None: request_timeout_ms) at ``now``."""
        t = self.config.request_timeout_ms / 1000.0 if timeout is None else float(timeout)
        if t < 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
        return Budget(t, now + t)

    def prepare(self, what: str, step: Request, broker: str, protocol: Any, deadline: float,
                now: float) -> tuple[int, Any]:
        """The version and the request to send for ``step`` on a ready connection
        (``broker`` its name, ``protocol`` its protocol.connection.Connection)."""
        try:
            version = step.version(protocol.version_for(step.api), protocol.finalized_features)
        except ApiVersionError as exc:
            err = ApiVersionError(f"{what}: {broker} cannot answer it: {exc}")
            err.broker, err.reason = broker, str(exc)  # type: ignore[attr-defined]
            raise err from None
        if deadline - now <= 0:
            raise KafkaTimeoutError(f"{what}: no time left to send {step.api.name} to {broker}")
        return version, step.build(version)

    @staticmethod
    def late(what: str, api: Api, broker: str) -> tuple[KafkaTimeoutError, KafkaTimeoutError]:
        """For an answer not in by the call's deadline: the error to close its connection
        with, and the one for the call.  A broker answers a connection's requests in
        order: one left unanswered (Kafka holding a CreateTopics for a controller it
        cannot reach) would hold up every later call on it, so the next connects afresh."""
        return (KafkaTimeoutError(f"{what}: {api.name} to {broker} abandoned at the call's deadline"),
                KafkaTimeoutError(f"{what}: {api.name} to {broker}: no response in time"))

    # -- rounds and retries ----------------------------------------------------------------

    @staticmethod
    def _rest(deadline: float, now: float, least: float = 0.0) -> Budget:
        """What is left at ``now`` of a call's budget (at least ``least`` seconds), for a
        part of it."""
        t = max(least, deadline - now)
        return Budget(t, max(deadline, now + t))

    @staticmethod
    def _ms_left(deadline: float, now: float) -> int:
        return max(1, min(2**31 - 1, int((deadline - now) * 1000)))

    def _rounds(self, operation: str, items: Iterable[Any], step: Callable[[_Progress, float], Steps],
                raise_on_error: bool) -> Op:
        """The call that runs ``step(progress, deadline)`` until every item is done,
        backing off between rounds that left retriable work, up to the deadline."""
        items = list(items)
        return Op(operation, lambda budget: self._rounds_steps(operation, items, step, raise_on_error, budget))

    def _rounds_steps(self, operation: str, items: list[Any], step: Callable[[_Progress, float], Steps],
                      raise_on_error: bool, budget: Budget) -> Steps:
        t, deadline = budget
        progress = _Progress(items)
        backoff = self.config.retry_backoff_ms / 1000.0
        last: BaseException | None = None
        while progress.todo:
            try:
                yield from step(progress, deadline)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                # "No time left" or "no broker reachable" says less than the error that
                # made the round fail before.
                if last is None or not isinstance(exc, (KafkaTimeoutError, NoBrokersAvailableError)):
                    last = exc
                self.meta.need_refresh = True
            except errors.BrokerError as exc:
                if exc.code not in _RETRY:
                    raise
                last = exc
                if exc.code in COORDINATOR_MOVED:
                    self.coordinators.clear()
            if not progress.todo:
                break
            remaining = deadline - (yield NOW)
            if remaining <= 0:
                pending = "; ".join(
                    f"{_label(k)}: {progress.retry.get(k) or last or 'no answer'}"
                    for k in list(progress.todo)[:10])
                more = f" (and {len(progress.todo) - 10} more)" if len(progress.todo) > 10 else ""
                raise KafkaTimeoutError(
                    f"{operation} did not finish within {t:g}s; still pending: {pending}{more}; "
                    f"check that the brokers are up, or pass a longer timeout")
            yield Sleep(min(backoff, remaining))
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000.0)
            now = yield NOW
            if self.meta.refresh_due(now):  # a leader, controller or coordinator moved
                try:
                    yield Refresh(max(0.001, deadline - now))
                except (KafkaConnectionError, KafkaTimeoutError):
                    pass  # the next round fails the same way, and says so
        results = {k: progress.results[k] for k in items}  # in the caller's order
        return _outcome(operation, results, raise_on_error)

    def _one(self, operation: str, fetch: Callable[[float], Steps]) -> Op:
        """The call that runs ``fetch(deadline)`` (a call without items) with the same
        retries as _rounds."""
        def step(progress: _Progress, deadline: float) -> Steps:
            progress.done(None, (yield from fetch(deadline)))

        op = self._rounds(operation, [None], step, raise_on_error=True)

        def steps(budget: Budget) -> Steps:
            return (yield from op.steps(budget))[None]

        return Op(operation, steps)

    def _per_broker(self, operation: str, api: Api, build: Callable[[int], Any],
                    answer: Callable[[int, Any], Any], brokers: Iterable[int] | None, raise_on_error: bool,
                    check: Callable[[int, Any], None] | None = None) -> Op:
        """The call that asks ``api`` of each of ``brokers`` (None: every broker of the
        cluster) and returns ``answer(node, response)`` by node id.  ``check(node,
        response)`` sees each answer first; a broker's error code fails that broker's part."""
        def step(progress: _Progress, deadline: float) -> Steps:
            for node in list(progress.todo):
                _v, resp = yield from self._send(node, api, build)
                if check is not None:
                    check(node, resp)
                if resp.error_code:
                    progress.failed(node, broker_error(resp.error_code, f"{api.name} on broker {node}"))
                    continue
                progress.done(node, answer(node, resp))

        def steps(budget: Budget) -> Steps:
            cluster = yield from self.describe_cluster().steps(self._rest(budget.deadline, (yield NOW), 0.001))
            nodes = sorted(cluster.brokers if brokers is None else {int(n) for n in brokers})
            # A node id the cluster does not have would only wait for the deadline.
            unknown = {n: ValueError(f"broker {n} is not in the cluster (its brokers: "
                                     f"{', '.join(map(str, sorted(cluster.brokers)))})")
                       for n in nodes if n not in cluster.brokers}
            found = yield from self._rounds(operation, [n for n in nodes if n not in unknown], step,
                                            False).steps(self._rest(budget.deadline, (yield NOW)))
            return _outcome(operation, {n: unknown.get(n) or found[n] for n in nodes}, raise_on_error)

        return Op(operation, steps)

    def _every_broker(self, operation: str, api: Api, build: Callable[[int], Any],
                      listing: Callable[[Any], Iterable[Any]], key: Callable[[Any], Any],
                      check: Callable[[int, Any], None] | None = None) -> Op:
        """The call that asks ``api`` of every broker of the cluster (each knows only its
        own part: the groups or transactions it coordinates) and merges the answers'
        ``listing(response)`` into one dict by ``key``, sorted (see _per_broker)."""
        op = self._per_broker(operation, api, build, lambda _node, resp: list(listing(resp)), None, True, check)

        def steps(budget: Budget) -> Steps:
            per_node = yield from op.steps(budget)
            out = {key(x): x for listing in per_node.values() for x in listing}
            return dict(sorted(out.items()))

        return Op(operation, steps)

    @staticmethod
    def _send(node: int | None, api: Api, build: Callable[[int], Any]) -> Steps:
        """One request to ``node`` (None: any broker), built by ``build(version)`` for the
        version the broker negotiates; returns (version, response)."""
        sent: list[int] = []

        def at(version: int) -> Any:
            request = build(version)
            sent.append(version)
            return request

        resp = yield Request(node, api, at)
        return sent[-1], resp

    def _controller(self) -> int | None:
        cid = self.meta.controller_id
        return cid if cid in self.meta.brokers else None

    def _after_error(self, code: int) -> None:
        if code in (5, 6, 41):  # leaders or the controller moved: refreshed before the next round
            self.meta.need_refresh = True

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

    def _metadata(self, topics: list[str] | None) -> Steps:
        def build(version: int) -> Any:
            if topics is None:
                # v0 cannot say "all topics" with null: an empty array means all there.
                req_topics: Any = [] if version == 0 else None
            else:
                if version == 0 and not topics:
                    raise ValueError("Metadata v0 cannot ask for no topics")
                req_topics = [METADATA.Request.MetadataRequestTopic(name=t) for t in topics]
            return METADATA.Request(topics=req_topics, allow_auto_topic_creation=False)

        return (yield from self._send(None, METADATA, build))[1]

    def describe_cluster(self, include_fenced_brokers: bool = False) -> Op:
        if include_fenced_brokers:
            return self._one("describe_cluster", self._described_cluster)

        def fetch(deadline: float) -> Steps:
            resp = yield from self._metadata([])
            brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
            return ClusterDescription(resp.cluster_id, resp.controller_id, brokers)

        return self._one("describe_cluster", fetch)

    def _described_cluster(self, deadline: float) -> Steps:
        def build(version: int) -> Any:
            if version < 2:
                raise errors.UnsupportedVersionError(
                    f"describe_cluster: listing fenced brokers needs DescribeCluster v2 (Kafka 4.0); "
                    f"the broker speaks v{version}")
            return DESCRIBE_CLUSTER.Request(include_cluster_authorized_operations=False, endpoint_type=1,
                                            include_fenced_brokers=True)

        _v, resp = yield from self._send(None, DESCRIBE_CLUSTER, build)
        if resp.error_code:
            raise broker_error(resp.error_code, "describe_cluster", resp.error_message)
        brokers = {b.broker_id: BrokerInfo(b.broker_id, b.host, b.port, b.rack, bool(b.is_fenced))
                   for b in resp.brokers}
        return ClusterDescription(resp.cluster_id, resp.controller_id, dict(sorted(brokers.items())))

    def list_topics(self, include_internal: bool) -> Op:
        def fetch(deadline: float) -> Steps:
            resp = yield from self._metadata(None)
            out = {}
            for t in resp.topics:
                if t.name is None or t.error_code or (t.is_internal and not include_internal):
                    continue
                out[t.name] = _topic_description(t)
            return dict(sorted(out.items()))

        return self._one("list_topics", fetch)

    def describe_topics(self, topics: Iterable[str], raise_on_error: bool) -> Op:
        names = list(dict.fromkeys(topics))

        def step(progress: _Progress, deadline: float) -> Steps:
            resp = yield from self._metadata(list(progress.todo))
            for t in resp.topics:
                if t.name not in progress.todo:
                    continue
                if t.error_code:
                    progress.failed(t.name, broker_error(t.error_code, f"topic {t.name!r}"))
                else:
                    progress.done(t.name, _topic_description(t))

        return self._rounds("describe_topics", names, step, raise_on_error)

    def create_topics(self, topics: Iterable[NewTopic | str], num_partitions: int, replication_factor: int,
                      configs: Mapping[str, str] | None, validate_only: bool, raise_on_error: bool) -> Op:
        wanted: dict[str, NewTopic] = {}
        for t in topics:
            nt = NewTopic(t, num_partitions, replication_factor, dict(configs or {})) if isinstance(t, str) else t
            if not isinstance(nt, NewTopic):
                raise TypeError(f"create_topics expects topic names or NewTopic, got {t!r}")
            wanted[nt.name] = nt
        CT = CREATE_TOPICS.Request.CreatableTopic

        def step(progress: _Progress, deadline: float) -> Steps:
            now = yield NOW

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
                    timeout_ms=self._ms_left(deadline, now), validate_only=validate_only)

            version, resp = yield from self._send(self._controller(), CREATE_TOPICS, build)
            for r in resp.topics:
                created = CreatedTopic(r.name, r.topic_id if version >= 7 else None, r.num_partitions,
                                       r.replication_factor)
                self._settle(progress, r.name, r.error_code, f"topic {r.name!r}", created, r.error_message)

        return self._rounds("create_topics", wanted, step, raise_on_error)

    def delete_topics(self, topics: Iterable[str], raise_on_error: bool) -> Op:
        names = list(dict.fromkeys(topics))

        def step(progress: _Progress, deadline: float) -> Steps:
            now = yield NOW

            def build(version: int) -> Any:
                todo = list(progress.todo)
                if version >= 6:
                    state = DELETE_TOPICS.Request.DeleteTopicState
                    return DELETE_TOPICS.Request(topics=[state(name=n) for n in todo],
                                                 timeout_ms=self._ms_left(deadline, now))
                return DELETE_TOPICS.Request(topic_names=todo, timeout_ms=self._ms_left(deadline, now))

            _v, resp = yield from self._send(self._controller(), DELETE_TOPICS, build)
            for r in resp.responses:
                self._settle(progress, r.name, r.error_code, f"topic {r.name!r}", None, r.error_message)

        return self._rounds("delete_topics", names, step, raise_on_error)

    def create_partitions(self, new_counts: Mapping[str, int], validate_only: bool, raise_on_error: bool) -> Op:
        counts = dict(new_counts)
        CPT = CREATE_PARTITIONS.Request.CreatePartitionsTopic

        def step(progress: _Progress, deadline: float) -> Steps:
            now = yield NOW

            def build(version: int) -> Any:
                return CREATE_PARTITIONS.Request(
                    topics=[CPT(name=n, count=counts[n], assignments=None) for n in progress.todo],
                    timeout_ms=self._ms_left(deadline, now), validate_only=validate_only)

            _v, resp = yield from self._send(self._controller(), CREATE_PARTITIONS, build)
            for r in resp.results:
                self._settle(progress, r.name, r.error_code, f"topic {r.name!r}", None, r.error_message)

        return self._rounds("create_partitions", counts, step, raise_on_error)

    # -- partitions: offsets and records -------------------------------------------------

    def _by_leader(self, progress: _Progress) -> Generator[Any, Any, dict[int, list[TopicPartition]]]:
        """The pending partitions grouped by leader, from fresh metadata; unknown ones
        are marked failed, leaderless ones left for the next round."""
        topics = sorted({tp.topic for tp in progress.todo})
        resp = yield from self._metadata(topics)
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
            elif leaders[tp] < 0 or leaders[tp] not in self.meta.brokers:
                self.meta.need_refresh = True
                progress.failed(tp, broker_error(5, _label(tp)))
            else:
                by_node.setdefault(leaders[tp], []).append(tp)
        return by_node

    def list_offsets(self, specs: Mapping[Any, str | int], read_committed: bool, raise_on_error: bool) -> Op:
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

        def step(progress: _Progress, deadline: float) -> Steps:
            for node, tps in (yield from self._by_leader(progress)).items():
                topics: dict[str, list[Any]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(LOT.ListOffsetsPartition(
                        partition_index=tp.partition, timestamp=query[tp], max_num_offsets=1))
                req = LIST_OFFSETS.Request(replica_id=-1, isolation_level=int(read_committed),
                                           topics=[LOT(name=t, partitions=p) for t, p in topics.items()])

                def build(version: int, tps: list[TopicPartition] = tps, node: int = node) -> Any:
                    # An older broker would read -3 as a timestamp and answer nonsense.
                    if version < 7 and any(query[tp] == _MAX_TIMESTAMP for tp in tps):
                        raise errors.UnsupportedVersionError(
                            f"list_offsets: 'max_timestamp' needs ListOffsets v7 (KIP-734, "
                            f"Kafka 3.0+); broker {node} speaks v{version}: ask for "
                            f"'latest' or a timestamp instead")
                    return req

                version, resp = yield from self._send(node, LIST_OFFSETS, build)
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

        return self._rounds("list_offsets", query, step, raise_on_error)

    def delete_records(self, before: Mapping[Any, int], raise_on_error: bool) -> Op:
        offsets = {_tp(k): int(v) for k, v in before.items()}
        DRT = DELETE_RECORDS.Request.DeleteRecordsTopic

        def step(progress: _Progress, deadline: float) -> Steps:
            for node, tps in (yield from self._by_leader(progress)).items():
                topics: dict[str, list[Any]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(
                        DRT.DeleteRecordsPartition(partition_index=tp.partition, offset=offsets[tp]))

                now = yield NOW

                def build(version: int, topics: dict[str, list[Any]] = topics, now: float = now) -> Any:
                    return DELETE_RECORDS.Request(
                        topics=[DRT(name=t, partitions=p) for t, p in topics.items()],
                        timeout_ms=self._ms_left(deadline, now))

                _v, resp = yield from self._send(node, DELETE_RECORDS, build)
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        self._settle(progress, tp, p.error_code, f"{_label(tp)} before offset {offsets.get(tp)}",
                                     DeletedRecords(p.low_watermark))

        return self._rounds("delete_records", offsets, step, raise_on_error)

    # -- groups ----------------------------------------------------------------------------

    def _find_coordinators(self, keys: list[str], key_type: int = GROUP
                           ) -> Generator[Any, Any, dict[str, int | BaseException]]:
        """Each key's coordinator node id (cached), or the error FindCoordinator gave: of
        groups (``key_type`` GROUP) or of transactional ids (TRANSACTION)."""
        known, what = ((self.coordinators, "group") if key_type == GROUP
                       else (self.txn_coordinators, "transactional id"))
        out: dict[str, int | BaseException] = {k: known[k] for k in keys if k in known}
        missing = [k for k in keys if k not in out]
        found = []
        todo = missing
        while todo:
            # KIP-699 (v4+): every key in one request; before, one request per key.
            version, resp = yield from self._send(
                None, FIND_COORDINATOR, lambda v: find_request(todo if v >= 4 else todo[:1], key_type))
            keys_sent, todo = (todo, []) if version >= 4 else (todo[:1], todo[1:])
            found.extend(coordinator_answers(resp, keys_sent))
        for key, node, _host, _port, code, message in found:
            if key not in missing:
                continue
            if code:
                out[key] = broker_error(code, f"finding the coordinator of {what} {key!r}", message)
            elif node not in self.meta.brokers:
                self.meta.need_refresh = True
                out[key] = broker_error(15, f"{what} {key!r}: coordinator {node} is not in the metadata yet")
            else:
                out[key] = known[key] = node
        return out

    def _coordinator(self, group: str) -> Generator[Any, Any, int]:
        """The coordinator of ``group``; raises FindCoordinator's error (retried by the
        rounds when the coordinator is merely moving)."""
        node = (yield from self._find_coordinators([group])).get(group)
        if node is None:
            raise broker_error(15, f"no FindCoordinator answer for group {group!r}")
        if isinstance(node, BaseException):
            raise node
        return node

    def _group_error(self, group: str, code: int, what: str) -> None:
        """Raise a group-wide error code (forgetting the coordinator if it moved)."""
        if code:
            if code in COORDINATOR_MOVED:
                self.coordinators.pop(group, None)
            raise broker_error(code, f"{what} of group {group!r}")

    def _by_coordinator(self, progress: _Progress, key_type: int = GROUP
                        ) -> Generator[Any, Any, dict[int, list[str]]]:
        """The pending keys (groups, or transactional ids) grouped by coordinator; those
        FindCoordinator failed for are marked failed."""
        by_node: dict[int, list[str]] = {}
        for g, node in (yield from self._find_coordinators(list(progress.todo), key_type)).items():
            if isinstance(node, BaseException):
                progress.failed(g, node)
            else:
                by_node.setdefault(node, []).append(g)
        return by_node

    def _group_result(self, progress: _Progress, group: str, code: int, what: str, value: Any,
                      message: str | None = None) -> None:
        if not code:
            progress.done(group, value)
            return
        if code in COORDINATOR_MOVED:
            self.coordinators.pop(group, None)
        progress.failed(group, broker_error(code, f"{what} group {group!r}", message))

    def list_groups(self) -> Op:
        return self._every_broker(
            "list_groups", LIST_GROUPS, lambda v: LIST_GROUPS.Request(),
            lambda resp: (GroupListing(g.group_id, g.protocol_type, g.group_state or None) for g in resp.groups),
            key=lambda g: g.group_id)

    def describe_groups(self, group_ids: Iterable[str], raise_on_error: bool) -> Op:
        groups = list(dict.fromkeys(group_ids))

        def step(progress: _Progress, deadline: float) -> Steps:
            for node, gs in (yield from self._by_coordinator(progress)).items():
                yield from self._describe_at(progress, node, gs)

        return self._rounds("describe_groups", groups, step, raise_on_error)

    def _describe_at(self, progress: _Progress, node: int, groups: list[str]) -> Steps:
        """Describe ``groups`` at their coordinator ``node``.  A KIP-848 group is known
        only to ConsumerGroupDescribe and a classic one only to DescribeGroups: each
        answers GROUP_ID_NOT_FOUND for the other's groups (Kafka 4; DescribeGroups
        before v6 describes them as "Dead" instead), so a group is asked with the API
        that described it last (ConsumerGroupDescribe at first, as KIP-848 is Kafka 4's
        default), then with the other.  Not found by either: "Dead", as Kafka described
        an unknown group before DescribeGroups v6."""
        asked: dict[str, set[str]] = {g: set() for g in groups}
        apis_lacking: dict[str, BaseException] = {}
        todo = list(groups)

        def next_api(g: str) -> str | None:
            order = ("classic", "consumer") if self.group_types.get(g) == "classic" else ("consumer", "classic")
            return next((a for a in order if a not in asked[g] and a not in apis_lacking), None)

        def not_found(g: str) -> None:
            if next_api(g) is not None:
                todo.append(g)
            elif g in progress.todo:
                self.group_types.pop(g, None)
                progress.done(g, GroupDescription(g, "Dead", "", "", [], node, None))

        while todo:
            by_api: dict[str, list[str]] = {}
            for g in dict.fromkeys(todo):
                if g not in progress.todo:
                    continue
                api = next_api(g)
                if api is not None:
                    by_api.setdefault(api, []).append(g)
                elif asked[g] - set(apis_lacking):  # the one API the broker has knows no such group
                    not_found(g)
                else:  # the broker has neither API: say DescribeGroups' refusal
                    raise apis_lacking.get("classic") or apis_lacking["consumer"]
            todo = []
            for api, gs in by_api.items():
                for g in gs:
                    asked[g].add(api)
                try:
                    if api == "consumer":
                        version, resp = yield from self._send(
                            node, CONSUMER_GROUP_DESCRIBE, lambda v, gs=gs: CONSUMER_GROUP_DESCRIBE.Request(
                                group_ids=gs, include_authorized_operations=False))
                    else:
                        version, resp = yield from self._send(
                            node, DESCRIBE_GROUPS, lambda v, gs=gs: DESCRIBE_GROUPS.Request(
                                groups=gs, include_authorized_operations=False))
                except ApiVersionError as exc:
                    # A broker before KIP-848 (Kafka < 3.7) has classic groups only.
                    apis_lacking[api] = exc
                    todo.extend(gs)
                    continue
                for g in resp.groups:
                    gid = g.group_id
                    if gid not in progress.todo or gid not in asked:
                        continue
                    # Tansu answers ConsumerGroupDescribe for a classic group too, with no
                    # error and epoch -1: no consumer group has a negative epoch.
                    if api == "consumer" and g.error_code == _UNSUPPORTED_VERSION:
                        # Kafka 3.7-3.9 list the API but answer it so unless the consumer
                        # protocol is turned on (group.coordinator.rebalance.protocols).
                        apis_lacking[api] = broker_error(g.error_code, f"describing group {gid!r}", g.error_message)
                        todo.append(gid)
                        continue
                    if g.error_code == _GROUP_ID_NOT_FOUND or (
                            api == "consumer" and not g.error_code and g.group_epoch < 0):
                        not_found(gid)
                        continue
                    if api == "consumer":
                        desc = _consumer_group_description(g, node)
                    else:
                        if (not g.error_code and version < 6 and g.group_state == "Dead" and not g.members):
                            # Before v6 a KIP-848 group is "Dead" to DescribeGroups, as is
                            # a group that does not exist.
                            not_found(gid)
                            continue
                        desc = GroupDescription(
                            gid, g.group_state, g.protocol_type, g.protocol_data,
                            [_decoded_member(g.protocol_type, m) for m in g.members], node)
                    if not g.error_code:
                        self.group_types[gid] = desc.group_type or api
                    self._group_result(progress, gid, g.error_code, "describing", desc,
                                       getattr(g, "error_message", None))

    def delete_groups(self, group_ids: Iterable[str], raise_on_error: bool) -> Op:
        groups = list(dict.fromkeys(group_ids))

        def step(progress: _Progress, deadline: float) -> Steps:
            for node, gs in (yield from self._by_coordinator(progress)).items():
                _v, resp = yield from self._send(node, DELETE_GROUPS, lambda v, gs=gs: DELETE_GROUPS.Request(
                    groups_names=gs))
                for r in resp.results:
                    if r.group_id in progress.todo:
                        self._group_result(progress, r.group_id, r.error_code, "deleting", None)

        return self._rounds("delete_groups", groups, step, raise_on_error)

    def list_group_offsets(self, group_id: str, partitions: Iterable[Any] | None, raise_on_error: bool) -> Op:
        wanted = None if partitions is None else [_tp(x) for x in partitions]
        req_topics = None if wanted is None else _partitions_by_topic(wanted)

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
        def fetch(deadline: float) -> Steps:
            node = yield from self._coordinator(group_id)
            version, resp = yield from self._send(node, OFFSET_FETCH, build)
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

        return self._checked(self._one("list_group_offsets", fetch), raise_on_error)

    @staticmethod
    def _checked(op: Op, raise_on_error: bool) -> Op:
        """``op``, whose dict result holds the failed items' errors, under raise_on_error."""
        def steps(budget: Budget) -> Steps:
            return _outcome(op.name, (yield from op.steps(budget)), raise_on_error)

        return Op(op.name, steps)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[Any, int | OffsetAndMetadata],
                            raise_on_error: bool) -> Op:
        commits: dict[TopicPartition, OffsetAndMetadata] = {}
        for k, v in offsets.items():
            om = v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
            if om.offset < 0:
                raise ValueError(f"offset for {k!r} must be >= 0, got {om.offset}")
            commits[_tp(k)] = om
        OCT = OFFSET_COMMIT.Request.OffsetCommitRequestTopic

        def step(progress: _Progress, deadline: float) -> Steps:
            node = yield from self._coordinator(group_id)

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

            _v, resp = yield from self._send(node, OFFSET_COMMIT, build)
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp not in progress.todo:
                        continue
                    if p.error_code in COORDINATOR_MOVED:
                        self.coordinators.pop(group_id, None)
                    self._settle(progress, tp, p.error_code, f"group {group_id!r} {_label(tp)}")

        return self._rounds("alter_group_offsets", commits, step, raise_on_error)

    def delete_group_offsets(self, group_id: str, partitions: Iterable[Any], raise_on_error: bool) -> Op:
        tps = [_tp(x) for x in partitions]
        ODT = OFFSET_DELETE.Request.OffsetDeleteRequestTopic

        def step(progress: _Progress, deadline: float) -> Steps:
            node = yield from self._coordinator(group_id)
            topics: dict[str, list[Any]] = {}
            for tp in progress.todo:
                topics.setdefault(tp.topic, []).append(ODT.OffsetDeleteRequestPartition(partition_index=tp.partition))
            _v, resp = yield from self._send(node, OFFSET_DELETE, lambda v: OFFSET_DELETE.Request(
                group_id=group_id, topics=[ODT(name=t, partitions=p) for t, p in topics.items()]))
            self._group_error(group_id, resp.error_code, "deleting offsets")
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    self._settle(progress, tp, p.error_code, f"group {group_id!r} {_label(tp)}")

        return self._rounds("delete_group_offsets", tps, step, raise_on_error)

    def group_lag(self, group_id: str, partitions: Iterable[Any] | None) -> Op:
        def steps(budget: Budget) -> Steps:
            deadline = budget.deadline
            committed = yield from self.list_group_offsets(group_id, partitions, True).steps(
                self._rest(deadline, (yield NOW)))
            ends = (yield from self.list_offsets({tp: "latest" for tp in committed}, False, True).steps(
                self._rest(deadline, (yield NOW)))) if committed else {}
            parts = {}
            for tp, om in committed.items():
                end = ends[tp].offset
                done = None if om is None else om.offset
                parts[tp] = PartitionLag(done, end, None if done is None else max(0, end - done))
            return GroupLag(group_id, parts, sum(p.lag or 0 for p in parts.values()))

        return Op("group_lag", steps)

    # -- configs ---------------------------------------------------------------------------

    @staticmethod
    def _config_node(res: ConfigResource) -> int | None:
        # Broker and broker-logger configs are answered by that broker only.
        if res.type != "topic" and res.name:
            if not res.name.isdigit():
                raise ValueError(f"{res.type} config resources are named by node id, got {res.name!r}")
            return int(res.name)
        return None

    def _by_config_node(self, progress: _Progress) -> dict[int | None, list[ConfigResource]]:
        by_node: dict[int | None, list[ConfigResource]] = {}
        for res in progress.todo:
            by_node.setdefault(self._config_node(res), []).append(res)
        return by_node

    def describe_configs(self, resources: Iterable[Any], keys: Iterable[str] | None, raise_on_error: bool) -> Op:
        wanted = [_resource(r) for r in resources]
        only = None if keys is None else list(keys)
        DCR = DESCRIBE_CONFIGS.Request.DescribeConfigsResource

        def step(progress: _Progress, deadline: float) -> Steps:
            for node, group in self._by_config_node(progress).items():
                version, resp = yield from self._send(node, DESCRIBE_CONFIGS, lambda v, group=group: DESCRIBE_CONFIGS.Request(
                    resources=[DCR(resource_type=_RESOURCE_TYPES[r.type], resource_name=r.name,
                                   configuration_keys=only) for r in group]))
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

        return self._rounds("describe_configs", wanted, step, raise_on_error)

    def alter_configs(self, changes: Mapping[Any, Mapping[str, str | None]], validate_only: bool,
                      raise_on_error: bool) -> Op:
        wanted = {_resource(r): dict(c) for r, c in changes.items()}

        def step(progress: _Progress, deadline: float) -> Steps:
            for node, group in self._by_config_node(progress).items():
                incremental = _incremental_request(group, wanted, validate_only)
                try:
                    _v, resp = yield from self._send(node, INCREMENTAL_ALTER_CONFIGS, lambda v: incremental)
                except ApiVersionError as first:
                    try:  # AlterConfigs, if the broker has it: asked before reading the configs to keep
                        yield Request(node, ALTER_CONFIGS, _probe)
                    except _Speaks:
                        pass
                    except ApiVersionError as second:
                        raise ApiVersionError(
                            f"alter_configs: {getattr(first, 'broker', 'the broker')} cannot answer it: "
                            f"{getattr(first, 'reason', first)}; nor {getattr(second, 'reason', second)}") from None
                    req = yield from self._legacy_request(group, wanted, validate_only, progress, deadline)
                    if req is None:
                        continue
                    _v, resp = yield from self._send(node, ALTER_CONFIGS, lambda v: req)
                for r in resp.responses:
                    res = ConfigResource(_RESOURCE_NAMES.get(r.resource_type, str(r.resource_type)),
                                         r.resource_name)
                    self._settle(progress, res, r.error_code, _label(res), None, r.error_message)

        return self._rounds("alter_configs", wanted, step, raise_on_error)

    def _legacy_request(self, group: list[ConfigResource], wanted: dict[ConfigResource, dict[str, str | None]],
                        validate_only: bool, progress: _Progress, deadline: float) -> Steps:
        current = yield from self.describe_configs(group, None, False).steps(self._rest(deadline, (yield NOW), 0.001))
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

    def describe_user_scram_credentials(self, users: Iterable[str] | None, raise_on_error: bool) -> Op:
        names = None if users is None else list(dict.fromkeys(users))
        UN = DESCRIBE_USER_SCRAM_CREDENTIALS.Request.UserName

        def fetch(deadline: float) -> Steps:
            # Any broker answers: Kafka's brokers read the credentials from the metadata log.
            _v, resp = yield from self._send(None, DESCRIBE_USER_SCRAM_CREDENTIALS,
                                             lambda v: DESCRIBE_USER_SCRAM_CREDENTIALS.Request(
                                                 users=None if names is None else [UN(name=n) for n in names]))
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
            if names is not None:
                # Kafka answers for every user named; a broker that left one out gets asked again.
                out = {n: out[n] if n in out else errors.KafkaWireError(
                    f"user {n!r}: the broker left it out of its DescribeUserScramCredentials "
                    f"answer; ask again") for n in names}
            return out

        return self._checked(self._one("describe_user_scram_credentials", fetch), raise_on_error)

    def alter_user_scram_credentials(
        self, alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        raise_on_error: bool,
    ) -> Op:
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

        def step(progress: _Progress, deadline: float) -> Steps:
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
                _v, resp = yield from self._send(None, ALTER_USER_SCRAM_CREDENTIALS, lambda v: request)
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
                    return  # the rounds back off before what is left

        return self._rounds("alter_user_scram_credentials", queues, step, raise_on_error)

    # -- ACLs (KIP-140) ----------------------------------------------------------------------
    # Any broker answers: Kafka's brokers forward the changes to the active controller and
    # describe from the metadata log.

    def create_acls(self, bindings: Iterable[AclBinding], raise_on_error: bool) -> Op:
        wanted = list(dict.fromkeys(bindings))
        for b in wanted:
            if not isinstance(b, AclBinding):
                raise TypeError(f"expected an AclBinding, got {b!r}")
            b._check()
        AC = CREATE_ACLS.Request.AclCreation

        def step(progress: _Progress, deadline: float) -> Steps:
            todo = list(progress.todo)

            def build(version: int) -> Any:
                for b in todo:
                    _acl_version_check(version, f"create_acls {b}", b.pattern_type, b.resource_type)
                return CREATE_ACLS.Request(creations=[AC(
                    resource_type=int(b.resource_type), resource_name=b.name,
                    resource_pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
                    operation=int(b.operation), permission_type=int(b.permission_type)) for b in todo])

            _v, resp = yield from self._send(None, CREATE_ACLS, build)
            # One result per creation, in the request's order.
            for b, r in zip(todo, resp.results):
                self._settle(progress, b, r.error_code, f"ACL {_acl_label(b)}", None, r.error_message)

        return self._rounds("create_acls", wanted, step, raise_on_error)

    def describe_acls(self, acl_filter: AclBindingFilter | None) -> Op:
        f = AclBindingFilter() if acl_filter is None else acl_filter  # None: every ACL

        def fetch(deadline: float) -> Steps:
            def build(version: int) -> Any:
                _acl_version_check(version, "describe_acls", f.pattern_type, f.resource_type)
                return DESCRIBE_ACLS.Request(**_acl_filter_fields(f))

            _v, resp = yield from self._send(None, DESCRIBE_ACLS, build)
            if resp.error_code:
                raise broker_error(resp.error_code, f"describe_acls {f}", resp.error_message)
            found = [_described_binding(res, a) for res in resp.resources for a in res.acls]
            return sorted(found, key=AclBinding._sort_key)

        return self._one("describe_acls", fetch)

    def delete_acls(self, filters: Iterable[AclBindingFilter], raise_on_error: bool) -> Op:
        wanted = list(dict.fromkeys(filters))
        for f in wanted:
            if not isinstance(f, AclBindingFilter):
                raise TypeError(f"expected an AclBindingFilter, got {f!r}")
        DF = DELETE_ACLS.Request.DeleteAclsFilter

        def step(progress: _Progress, deadline: float) -> Steps:
            todo = list(progress.todo)

            def build(version: int) -> Any:
                for f in todo:
                    _acl_version_check(version, f"delete_acls {f}", f.pattern_type, f.resource_type)
                return DELETE_ACLS.Request(filters=[DF(**_acl_filter_fields(f)) for f in todo])

            _v, resp = yield from self._send(None, DELETE_ACLS, build)
            for f, r in zip(todo, resp.filter_results):
                if r.error_code:
                    self._settle(progress, f, r.error_code, f"delete_acls {f}", None, r.error_message)
                    continue
                deleted, failed = [], []
                for m in r.matching_acls:
                    b = _acl_binding(m)
                    if m.error_code:
                        failed.append(broker_error(m.error_code, f"deleting ACL {_acl_label(b)}", m.error_message))
                    else:
                        deleted.append(b)
                if failed:
                    # The filter's result is its first failure; the rest of its bindings
                    # were deleted (describe_acls shows what is left).
                    progress.done(f, failed[0])
                else:
                    progress.done(f, sorted(deleted, key=AclBinding._sort_key))

        return self._rounds("delete_acls", wanted, step, raise_on_error)

    # -- transactions (KIP-664) ----------------------------------------------------------------

    def list_transactions(self, states: Iterable[str] | None, producer_ids: Iterable[int] | None,
                          min_duration_ms: int | None) -> Op:
        state_filters = [] if states is None else list(states)
        pid_filters = [] if producer_ids is None else [int(p) for p in producer_ids]
        duration = -1 if min_duration_ms is None else int(min_duration_ms)
        if duration < -1:
            raise ValueError(f"min_duration_ms must be >= 0, got {min_duration_ms!r}")

        def build(version: int) -> Any:
            if version < 1 and duration >= 0:
                raise errors.UnsupportedVersionError(
                    "list_transactions: the duration filter needs ListTransactions v1 (Kafka 3.8)")
            return LIST_TRANSACTIONS.Request(state_filters=state_filters, producer_id_filters=pid_filters,
                                             duration_filter=duration)

        def check(node: int, resp: Any) -> None:
            if resp.unknown_state_filters:
                raise ValueError(f"list_transactions: broker {node} knows no transaction state "
                                 f"{', '.join(resp.unknown_state_filters)}; Kafka's states are Empty, "
                                 f"Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, "
                                 f"Dead and PrepareEpochFence")

        # Each broker coordinates the transactional ids of its transaction log partitions.
        return self._every_broker(
            "list_transactions", LIST_TRANSACTIONS, build,
            lambda resp: (TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                          for t in resp.transaction_states),
            key=lambda t: t.transactional_id, check=check)

    def describe_transactions(self, transactional_ids: Iterable[str], raise_on_error: bool) -> Op:
        wanted = list(dict.fromkeys(transactional_ids))

        def step(progress: _Progress, deadline: float) -> Steps:
            for node, tids in (yield from self._by_coordinator(progress, TRANSACTION)).items():
                _v, resp = yield from self._send(node, DESCRIBE_TRANSACTIONS,
                                                 lambda v, tids=tids: DESCRIBE_TRANSACTIONS.Request(transactional_ids=tids))
                for t in resp.transaction_states:
                    if t.error_code in COORDINATOR_MOVED:
                        self.txn_coordinators.pop(t.transactional_id, None)
                    parts = sorted(TopicPartition(x.topic, p) for x in t.topics for p in x.partitions)
                    value = TransactionDescription(
                        t.transactional_id, node, t.transaction_state, t.producer_id, t.producer_epoch,
                        t.transaction_timeout_ms,
                        None if t.transaction_start_time_ms < 0 else t.transaction_start_time_ms, parts)
                    self._settle(progress, t.transactional_id, t.error_code,
                                 f"transactional id {t.transactional_id!r}", value)

        return self._rounds("describe_transactions", wanted, step, raise_on_error)

    def describe_producers(self, partitions: Iterable[Any], raise_on_error: bool) -> Op:
        wanted = list(dict.fromkeys(_tp(p) for p in partitions))
        TR = DESCRIBE_PRODUCERS.Request.TopicRequest

        def step(progress: _Progress, deadline: float) -> Steps:
            # The partition's leader keeps its producers' state.
            for node, tps in (yield from self._by_leader(progress)).items():
                topics = _partitions_by_topic(tps)
                _v, resp = yield from self._send(node, DESCRIBE_PRODUCERS, lambda v, topics=topics: DESCRIBE_PRODUCERS.Request(
                    topics=[TR(name=t, partition_indexes=ps) for t, ps in topics.items()]))
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        value = sorted((ProducerState(
                            s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
                            None if s.current_txn_start_offset < 0 else s.current_txn_start_offset)
                            for s in p.active_producers), key=lambda s: s.producer_id)
                        self._settle(progress, tp, p.error_code, _label(tp), value, p.error_message)

        return self._rounds("describe_producers", wanted, step, raise_on_error)

    def abort_transaction(self, partition: Any, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int) -> Op:
        tp = _tp(partition)
        M = WRITE_TXN_MARKERS.Request.WritableTxnMarker

        def step(progress: _Progress, deadline: float) -> Steps:
            # The abort marker goes straight to the partition's leader, as the coordinator
            # would write it: the way to end a transaction its coordinator lost (KIP-664).
            for node, tps in (yield from self._by_leader(progress)).items():
                request = WRITE_TXN_MARKERS.Request(markers=[M(
                    producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
                    topics=[M.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])],
                    coordinator_epoch=coordinator_epoch)])
                _v, resp = yield from self._send(node, WRITE_TXN_MARKERS, lambda v: request)
                for m in resp.markers:
                    for t in m.topics:
                        for p in t.partitions:
                            self._settle(progress, TopicPartition(t.name, p.partition_index), p.error_code,
                                         f"aborting producer {producer_id}'s transaction on {_label(tp)}")

        def steps(budget: Budget) -> Steps:
            result = (yield from self._rounds("abort_transaction", [tp], step, False).steps(budget))[tp]
            if isinstance(result, BaseException):
                raise result
            return None

        return Op("abort_transaction", steps)

    # -- client quotas (KIP-546) ------------------------------------------------------------------
    # Any broker answers: Kafka's brokers forward the changes to the active controller.

    def describe_client_quotas(self, match: Mapping[str, Any] | None, strict: bool) -> Op:
        CD = DESCRIBE_CLIENT_QUOTAS.Request.ComponentData
        components = []
        for etype, name in (match or {}).items():
            etype = etype.replace("_", "-")
            if name is ClientQuotaEntity.ANY:
                components.append(CD(entity_type=etype, match_type=2, match=None))
            elif name is None:
                components.append(CD(entity_type=etype, match_type=1, match=None))
            else:
                components.append(CD(entity_type=etype, match_type=0, match=str(name)))

        def fetch(deadline: float) -> Steps:
            _v, resp = yield from self._send(None, DESCRIBE_CLIENT_QUOTAS, lambda v: DESCRIBE_CLIENT_QUOTAS.Request(
                components=components, strict=strict))
            if resp.error_code:
                raise broker_error(resp.error_code, "describe_client_quotas", resp.error_message)
            out = {ClientQuotaEntity({e.entity_type: e.entity_name for e in entry.entity}):
                   dict(sorted((v.key, v.value) for v in entry.values))
                   for entry in resp.entries or []}
            return dict(sorted(out.items(), key=lambda kv: [(t, n is not None, n or "") for t, n in kv[0]]))

        return self._one("describe_client_quotas", fetch)

    def alter_client_quotas(self, changes: Mapping[Any, Mapping[str, float | None]], validate_only: bool,
                            raise_on_error: bool) -> Op:
        wanted = {e if isinstance(e, ClientQuotaEntity) else ClientQuotaEntity(dict(e)): dict(ops)
                  for e, ops in changes.items()}
        ED = ALTER_CLIENT_QUOTAS.Request.EntryData

        def step(progress: _Progress, deadline: float) -> Steps:
            request = ALTER_CLIENT_QUOTAS.Request(validate_only=validate_only, entries=[ED(
                entity=[ED.EntityData(entity_type=t, entity_name=n) for t, n in e],
                # A None value removes the quota: the entity falls back to the next default.
                ops=[ED.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                     for k, v in wanted[e].items()]) for e in progress.todo])
            _v, resp = yield from self._send(None, ALTER_CLIENT_QUOTAS, lambda v: request)
            for r in resp.entries:
                e = ClientQuotaEntity({x.entity_type: x.entity_name for x in r.entity})
                self._settle(progress, e, r.error_code, f"client quotas of {dict(e)}", None, r.error_message)

        return self._rounds("alter_client_quotas", wanted, step, raise_on_error)

    # -- partition reassignments and leader elections ----------------------------------------------

    def alter_partition_reassignments(self, changes: Mapping[Any, Iterable[int] | None], raise_on_error: bool) -> Op:
        wanted = {_tp(k): None if v is None else [int(x) for x in v] for k, v in changes.items()}
        RT = ALTER_PARTITION_REASSIGNMENTS.Request.ReassignableTopic

        def step(progress: _Progress, deadline: float) -> Steps:
            topics: dict[str, list[Any]] = {}
            for tp in progress.todo:
                # Null replicas cancel the partition's reassignment in progress.
                topics.setdefault(tp.topic, []).append(
                    RT.ReassignablePartition(partition_index=tp.partition, replicas=wanted[tp]))
            now = yield NOW
            _v, resp = yield from self._send(None, ALTER_PARTITION_REASSIGNMENTS, lambda v: ALTER_PARTITION_REASSIGNMENTS.Request(
                timeout_ms=self._ms_left(deadline, now), topics=[RT(name=t, partitions=ps) for t, ps in topics.items()]))
            if resp.error_code:
                for tp in list(progress.todo):
                    self._settle(progress, tp, resp.error_code, f"reassigning {_label(tp)}", None, resp.error_message)
                return
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    self._settle(progress, tp, p.error_code, f"reassigning {_label(tp)}", None, p.error_message)

        return self._rounds("alter_partition_reassignments", wanted, step, raise_on_error)

    def list_partition_reassignments(self, partitions: Iterable[Any] | None) -> Op:
        wanted = None if partitions is None else list(dict.fromkeys(_tp(p) for p in partitions))
        LT = LIST_PARTITION_REASSIGNMENTS.Request.ListPartitionReassignmentsTopics

        def fetch(deadline: float) -> Steps:
            topics = None
            if wanted is not None:
                topics = [LT(name=t, partition_indexes=ps) for t, ps in _partitions_by_topic(wanted).items()]
            now = yield NOW
            _v, resp = yield from self._send(None, LIST_PARTITION_REASSIGNMENTS, lambda v: LIST_PARTITION_REASSIGNMENTS.Request(
                timeout_ms=self._ms_left(deadline, now), topics=topics))
            if resp.error_code:
                raise broker_error(resp.error_code, "list_partition_reassignments", resp.error_message)
            out = {TopicPartition(t.name, p.partition_index): PartitionReassignment(
                       list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                   for t in resp.topics for p in t.partitions}
            return dict(sorted(out.items()))

        return self._one("list_partition_reassignments", fetch)

    def elect_leaders(self, election_type: str, partitions: Iterable[Any] | None, raise_on_error: bool) -> Op:
        try:
            etype = _ELECTION_TYPES[election_type.lower()]
        except (KeyError, AttributeError):
            raise ValueError(f"election_type is 'preferred' or 'unclean', not {election_type!r}") from None
        wanted = None if partitions is None else list(dict.fromkeys(_tp(p) for p in partitions))
        TPS = ELECT_LEADERS.Request.TopicPartitions

        def fetch(deadline: float) -> Steps:
            topics = None
            if wanted is not None:
                topics = [TPS(topic=t, partitions=ps) for t, ps in _partitions_by_topic(wanted).items()]
            now = yield NOW

            def build(version: int) -> Any:
                if version < 1 and etype:
                    raise errors.UnsupportedVersionError("elect_leaders: unclean election needs ElectLeaders v1 (Kafka 2.4)")
                return ELECT_LEADERS.Request(election_type=etype, topic_partitions=topics,
                                             timeout_ms=self._ms_left(deadline, now))

            _v, resp = yield from self._send(None, ELECT_LEADERS, build)
            if resp.error_code:
                raise broker_error(resp.error_code, f"elect_leaders ({election_type})")
            out: dict[TopicPartition, Any] = {}
            for t in resp.replica_election_results:
                for p in t.partition_result:
                    tp = TopicPartition(t.topic, p.partition_id)
                    out[tp] = (broker_error(p.error_code, f"{election_type} election of {_label(tp)}", p.error_message)
                               if p.error_code else None)
            return dict(sorted(out.items()))

        return self._checked(self._one("elect_leaders", fetch), raise_on_error)

    # -- log directories --------------------------------------------------------------------------

    def describe_log_dirs(self, brokers: Iterable[int] | None, raise_on_error: bool) -> Op:
        def answer(node: int, resp: Any) -> dict[str, LogDirDescription]:
            dirs = {}
            for d in resp.results:
                replicas = {TopicPartition(t.name, p.partition_index): ReplicaInfo(p.partition_size, p.offset_lag,
                                                                                   bool(p.is_future_key))
                            for t in d.topics for p in t.partitions}
                dirs[d.log_dir] = LogDirDescription(
                    d.log_dir, broker_error(d.error_code, f"log directory {d.log_dir!r} of broker {node}")
                    if d.error_code else None, dict(sorted(replicas.items())),
                    None if d.total_bytes < 0 else d.total_bytes, None if d.usable_bytes < 0 else d.usable_bytes)
            return dict(sorted(dirs.items()))

        # Null topics: every replica of every directory.
        return self._per_broker("describe_log_dirs", DESCRIBE_LOG_DIRS, lambda v: DESCRIBE_LOG_DIRS.Request(topics=None),
                                answer, brokers, raise_on_error)

    def alter_replica_log_dirs(self, moves: Mapping[Any, str], raise_on_error: bool) -> Op:
        wanted = {TopicPartitionReplica(*r): str(path) for r, path in moves.items()}
        D = ALTER_REPLICA_LOG_DIRS.Request.AlterReplicaLogDir

        def step(progress: _Progress, deadline: float) -> Steps:
            # Each broker moves its own replicas between its directories.
            by_node: dict[int, dict[str, dict[str, list[int]]]] = {}
            for r in progress.todo:
                by_node.setdefault(r.broker_id, {}).setdefault(wanted[r], {}).setdefault(r.topic, []).append(r.partition)
            for node, paths in by_node.items():
                request = ALTER_REPLICA_LOG_DIRS.Request(dirs=[D(path=path, topics=[
                    D.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()])
                    for path, topics in paths.items()])
                _v, resp = yield from self._send(node, ALTER_REPLICA_LOG_DIRS, lambda v, request=request: request)
                for t in resp.results:
                    for p in t.partitions:
                        r = TopicPartitionReplica(t.topic_name, p.partition_index, node)
                        self._settle(progress, r, p.error_code,
                                     f"moving {t.topic_name}[{p.partition_index}] on broker {node} to {wanted.get(r)!r}")

        return self._rounds("alter_replica_log_dirs", wanted, step, raise_on_error)

    # -- features ---------------------------------------------------------------------------------

    def describe_features(self) -> Op:
        def fetch(deadline: float) -> Steps:
            # ApiVersions v3+ carries them; kafkawire's client name goes along as on connecting.
            _v, resp = yield from self._send(None, API_VERSIONS, lambda v: API_VERSIONS.Request(
                client_software_name="kafkawire", client_software_version="0"))
            if resp.error_code:
                raise broker_error(resp.error_code, "describe_features")
            return FeatureMetadata(
                dict(sorted((f.name, (f.min_version_level, f.max_version_level)) for f in resp.finalized_features or [])),
                None if resp.finalized_features_epoch < 0 else resp.finalized_features_epoch,
                dict(sorted((f.name, (f.min_version, f.max_version)) for f in resp.supported_features or [])))

        return self._one("describe_features", fetch)

    def update_features(self, levels: Mapping[str, int], upgrade_type: str, validate_only: bool,
                        raise_on_error: bool) -> Op:
        try:
            kind = _UPGRADE_TYPES[upgrade_type]
        except KeyError:
            raise ValueError(f"upgrade_type is one of {', '.join(_UPGRADE_TYPES)}, not {upgrade_type!r}") from None
        wanted = {str(k): int(v) for k, v in levels.items()}
        FU = UPDATE_FEATURES.Request.FeatureUpdateKey

        def step(progress: _Progress, deadline: float) -> Steps:
            now = yield NOW
            todo = list(progress.todo)

            def build(version: int) -> Any:
                if version < 1 and (kind == 3 or validate_only):
                    raise errors.UnsupportedVersionError(
                        "update_features: an unsafe downgrade or validate_only needs UpdateFeatures v1 (Kafka 3.3)")
                return UPDATE_FEATURES.Request(timeout_ms=self._ms_left(deadline, now), validate_only=validate_only,
                                               feature_updates=[FU(feature=f, max_version_level=wanted[f],
                                                                   allow_downgrade=kind != 1, upgrade_type=kind)
                                                                for f in todo])

            # Any broker: Kafka forwards it to the active controller.
            version, resp = yield from self._send(None, UPDATE_FEATURES, build)
            if resp.error_code or version >= 2:
                # From v2 the one error is the whole request's: no feature changed if any failed.
                for f in todo:
                    self._settle(progress, f, resp.error_code, f"feature {f!r} to level {wanted[f]}", None,
                                 resp.error_message)
                return
            for r in resp.results:
                self._settle(progress, r.feature, r.error_code, f"feature {r.feature!r} to level {wanted.get(r.feature)}",
                             None, r.error_message)

        return self._rounds("update_features", wanted, step, raise_on_error)

    # -- topics a page at a time ------------------------------------------------------------------

    def describe_topic_partitions(self, topics: Iterable[str], page_size: int, raise_on_error: bool) -> Op:
        wanted = list(dict.fromkeys(topics))
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size!r}")
        R = DESCRIBE_TOPIC_PARTITIONS.Request

        def step(progress: _Progress, deadline: float) -> Steps:
            todo = sorted(progress.todo)
            parts: dict[str, dict[int, PartitionInfo]] = {}
            heads: dict[str, Any] = {}
            cursor = None
            while True:
                # The broker walks the topics in name order from the cursor, at most page_size
                # partitions per answer, and says where to go on.
                _v, resp = yield from self._send(None, DESCRIBE_TOPIC_PARTITIONS, lambda v, cursor=cursor: R(
                    topics=[R.TopicRequest(name=t) for t in todo], response_partition_limit=page_size, cursor=cursor))
                for t in resp.topics:
                    if t.error_code:
                        self._settle(progress, t.name, t.error_code, f"topic {t.name!r}")
                        continue
                    heads[t.name] = t
                    for p in t.partitions:
                        parts.setdefault(t.name, {})[p.partition_index] = PartitionInfo(
                            p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes),
                            list(p.offline_replicas),
                            None if p.eligible_leader_replicas is None else list(p.eligible_leader_replicas),
                            None if p.last_known_elr is None else list(p.last_known_elr))
                nxt = resp.next_cursor
                if nxt is None:
                    break
                if (yield NOW) >= deadline:
                    raise KafkaTimeoutError(f"describe_topic_partitions: no time left for the pages after "
                                            f"{nxt.topic_name}[{nxt.partition_index}]; pass a longer timeout "
                                            f"or a larger page_size")
                cursor = R.Cursor(topic_name=nxt.topic_name, partition_index=nxt.partition_index)
            for name, t in heads.items():
                progress.done(name, TopicDescription(name, t.topic_id, bool(t.is_internal),
                                                     dict(sorted(parts.get(name, {}).items()))))

        return self._rounds("describe_topic_partitions", wanted, step, raise_on_error)


def _described_binding(res: Any, a: Any) -> AclBinding:
    """One ACL of a DescribeAcls answer, its resource's fields beside its own."""
    return AclBinding(_acl_code(ResourceType, res.resource_type), res.resource_name, a.principal,
                      _acl_code(AclOperation, a.operation), _acl_code(AclPermissionType, a.permission_type),
                      a.host, _acl_code(PatternType, res.pattern_type))


def _acl_filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    """A filter as DescribeAcls' request and each of DeleteAcls' filters spell it."""
    return dict(resource_type_filter=int(f.resource_type), resource_name_filter=f.name,
                pattern_type_filter=int(f.pattern_type), principal_filter=f.principal, host_filter=f.host,
                operation=int(f.operation), permission_type=int(f.permission_type))


def _acl_label(b: AclBinding) -> str:
    return (f"{b.permission_type.name} {b.principal} from {b.host} {b.operation.name} on "
            f"{b.resource_type.name} {b.pattern_type.name} {b.name!r}")


def _outcome(operation: str, results: dict[Any, Any], raise_on_error: bool) -> dict[Any, Any]:
    """``results``, or AdminError when some failed and ``raise_on_error``."""
    failed = {k: v for k, v in results.items() if isinstance(v, BaseException)}
    if failed and raise_on_error:
        raise AdminError(operation, results, failed)
    return results


def _topic_description(t: Any) -> TopicDescription:
    parts = {
        p.partition_index: PartitionInfo(
            p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes),
            list(p.isr_nodes), list(p.offline_replicas))
        for p in t.partitions
    }
    return TopicDescription(t.name, t.topic_id, bool(t.is_internal), dict(sorted(parts.items())))


def _incremental_request(group: list[ConfigResource], wanted: dict[ConfigResource, dict[str, str | None]],
                         validate_only: bool) -> Any:
    ACR = INCREMENTAL_ALTER_CONFIGS.Request.AlterConfigsResource
    return INCREMENTAL_ALTER_CONFIGS.Request(validate_only=validate_only, resources=[
        ACR(resource_type=_RESOURCE_TYPES[r.type], resource_name=r.name, configs=[
            ACR.AlterableConfig(name=k, config_operation=1 if v is None else 0, value=v)
            for k, v in wanted[r].items()])
        for r in group])
