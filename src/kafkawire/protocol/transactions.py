"""The transactional producer's conversation with its transaction coordinator (KIP-98),
with no I/O.

States follow the Java client: UNINITIALIZED -> (init_transactions) READY ->
(begin_transaction) IN_TRANSACTION -> (commit/abort) READY.  A batch that fails inside a
transaction makes it ABORTABLE: only abort_transaction is allowed then.  A fenced
producer (another instance took its transactional id) or an authorization failure is
FATAL: the producer can only be closed.

Each coordinator exchange is a generator (``*_steps``) of protocol/steps.py's Request
and Sleep steps, run by the shell's sender; its return value resolves the caller's
future.  Before a partition gets its
first batch of a transaction it is added with AddPartitionsToTxn: the accumulator holds
its batches until then (:meth:`TransactionManager.may_send`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from kafkawire import errors
from kafkawire.errors import KafkaConnectionError, KafkaTimeoutError, KafkaWireError
from kafkawire.protocol import apis
from kafkawire.protocol.coordinator import COORDINATOR_MOVED, FIND_COORDINATOR, GROUP, TRANSACTION, answers, find_request
from kafkawire.protocol.idempotence import INIT_PRODUCER_ID, ProducerIdentity
from kafkawire.protocol.steps import Request, Sleep

__all__ = ["ConsumerGroupMetadata", "TransactionManager", "TransactionStateError", "TransactionAbortedError",
           "UNINITIALIZED", "READY", "IN_TRANSACTION", "ABORTABLE", "FATAL"]

ADD_PARTITIONS_TO_TXN = apis.get("AddPartitionsToTxn")
ADD_OFFSETS_TO_TXN = apis.get("AddOffsetsToTxn")
END_TXN = apis.get("EndTxn")
TXN_OFFSET_COMMIT = apis.get("TxnOffsetCommit")



@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """Who a consumer is in its group, as ``Consumer.group_metadata()`` gives it, for
    ``send_offsets_to_transaction``: TxnOffsetCommit (v3+, KIP-447) carries it, and the
    group coordinator refuses the offsets of a member that is no longer this one (a zombie:
    ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID in a classic group, FENCED_INSTANCE_ID for a
    replaced static member, STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID in a KIP-848 group).
    ``generation_id`` is the classic generation or KIP-848's member epoch; -1 and an empty
    ``member_id`` commit as an outsider, as a bare group id does."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    @classmethod
    def of(cls, group: Any) -> "ConsumerGroupMetadata":
        """``group``: a group id, or a consumer's group_metadata() (or any object with the
        same attributes)."""
        if isinstance(group, cls):
            return group
        if isinstance(group, str):
            return cls(group)
        group_id = getattr(group, "group_id", None)
        if not isinstance(group_id, str):
            raise TypeError(f"send_offsets_to_transaction() takes the group id (a str) or the consumer's "
                            f"group_metadata(), got {group!r}")
        return cls(group_id, int(getattr(group, "generation_id", -1)), getattr(group, "member_id", "") or "",
                   getattr(group, "group_instance_id", None))


UNINITIALIZED = "UNINITIALIZED"
INITIALIZING = "INITIALIZING"
READY = "READY"
IN_TRANSACTION = "IN_TRANSACTION"
COMMITTING = "COMMITTING"
ABORTING = "ABORTING"
ABORTABLE = "ABORTABLE_ERROR"
FATAL = "FATAL_ERROR"

# Answers meaning "ask the coordinator again later" (COORDINATOR_MOVED: find it again).
_RETRY_LATER = frozenset({7, 14, 51})  # REQUEST_TIMED_OUT, *_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS
# The producer cannot go on after these: another instance owns the transactional id, or
# it may not use it.
_FATAL = frozenset({47, 53, 90, 31, 52})  # INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
# PRODUCER_FENCED, CLUSTER_AUTHORIZATION_FAILED, TRANSACTION_COORDINATOR_FENCED
INVALID_PRODUCER_EPOCH = 47
PRODUCER_FENCED = 90
_MAX_ADD_PARTITIONS_VERSION = 3  # v4+ is the brokers' batched form (KIP-890)
TRANSACTION_VERSION = "transaction.version"


def _v4_before_transactions_v2(features: dict[str, int]) -> int | None:
    """The cap on EndTxn and TxnOffsetCommit: v5 only where the cluster's finalized
    transaction.version is 2 or more (KIP-890 part 2).  Kafka 4 offers v5 in ApiVersions
    whatever that level, and at level 0 answers EndTxn v5 with UNSUPPORTED_VERSION after
    leaving the transaction half ended (Kafka 4.4 answered every EndTxn v4 after it with
    CONCURRENT_TRANSACTIONS for 100 s, past the transaction timeout), so the level is read
    first, as the Java client does."""
    return None if features.get(TRANSACTION_VERSION, 0) >= 2 else 4


class TransactionStateError(KafkaWireError):
    """A transactional call made in the wrong state (e.g. send() outside a transaction,
    commit after a failed batch); the message says which call is allowed now."""


class TransactionAbortedError(KafkaWireError):
    """The record was queued in a transaction that was aborted before it was sent."""


def _error_code(resp: Any) -> int:
    return resp.error_code


# ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, STALE_MEMBER_EPOCH: the
# coordinator no longer knows the member the offsets were read as.
_FENCED_MEMBER = dict.fromkeys((22, 25, 82, 113), (
    ": the consumer is no longer that member of the group (a rebalance moved on, or it was "
    "expelled or replaced), so its partitions may be another member's now; abort the "
    "transaction, poll() to rejoin, and process from the committed offsets"))


def _as_member(member: ConsumerGroupMetadata) -> str:
    if member.generation_id < 0 and not member.member_id:
        return ""
    instance = f", instance {member.group_instance_id!r}" if member.group_instance_id else ""
    return f" as member {member.member_id!r} (generation/epoch {member.generation_id}{instance})"


def _first_error(codes: Iterable[int]) -> int:
    """The error code that decides a per-partition answer, 0 if none failed: one that
    ends the producer first, then one that cannot be retried, then the lowest; a
    partition the broker did not try because another failed (55, OPERATION_NOT_ATTEMPTED)
    is not an error of its own."""
    failed = set(codes) - {0, 55}
    return min(failed, key=lambda c: (c not in _FATAL, errors.broker_error(c, "").retriable, c), default=0)


class TransactionManager:
    """One transactional producer's transaction state (see the module docstring)."""

    def __init__(self, identity: ProducerIdentity, retry_backoff_ms: int):
        assert identity.transactional_id is not None
        self.identity = identity
        self.transactional_id: str = identity.transactional_id
        self.backoff = retry_backoff_ms / 1000.0
        self.state = UNINITIALIZED
        self.coordinator: int | None = None
        self.added: set[tuple[str, int]] = set()
        self.to_add: set[tuple[str, int]] = set()
        self.offsets_added = False
        self.error: BaseException | None = None

    # -- the caller's side -----------------------------------------------------------------

    def _require(self, call: str, *states: str) -> None:
        if self.state in states:
            return
        if self.state == FATAL:
            raise TransactionStateError(f"{call}: the producer failed for good ({self.error}); close it") \
                from self.error
        if self.state == ABORTABLE:
            raise TransactionStateError(
                f"{call}: a record of this transaction failed ({self.error}); call abort_transaction()"
            ) from self.error
        hint = {UNINITIALIZED: "call init_transactions() first",
                READY: "call begin_transaction() first",
                IN_TRANSACTION: "commit_transaction() or abort_transaction() first"}.get(self.state, "")
        raise TransactionStateError(f"{call} is not allowed in state {self.state}" + (f"; {hint}" if hint else ""))

    def begin(self) -> None:
        self._require("begin_transaction()", READY)
        self.state = IN_TRANSACTION

    def check_send(self) -> None:
        if self.state != IN_TRANSACTION:
            self._require("send()", IN_TRANSACTION)

    def partition_used(self, tp: tuple[str, int]) -> None:
        if tp not in self.added:
            self.to_add.add(tp)

    def wants_add(self) -> bool:
        return bool(self.to_add) and self.state in (IN_TRANSACTION, COMMITTING)

    def topics_to_look_up(self, leader_for: Callable[[str, int], Any]) -> set[str]:
        """Topics of the partitions waiting to be added whose leader is not known.  A
        batch held for AddPartitionsToTxn never asks for its leader, and a send() to a
        chosen partition asks for no metadata, but Kafka's coordinator answers
        UNKNOWN_TOPIC_OR_PARTITION until a Metadata request has auto-created the topic:
        the shell asks for these."""
        if not self.wants_add():
            return set()
        return {t for t, p in self.to_add if leader_for(t, p) is None}

    def may_send(self, tp: tuple[str, int]) -> bool:
        return tp in self.added

    def batch_failed(self, exc: BaseException) -> None:
        """A batch of the open transaction failed: only an abort can end it now."""
        self._abortable(exc)

    def _abortable(self, exc: BaseException) -> BaseException:
        """Only abort_transaction() may end the open transaction now; returns ``exc``."""
        if self.state in (IN_TRANSACTION, COMMITTING):
            self.state = ABORTABLE
            self.error = exc
        return exc

    def _fatal(self, exc: BaseException) -> BaseException:
        self.state = FATAL
        self.error = exc
        self.identity.fatal = exc
        return exc

    # -- exchanges with the coordinators ---------------------------------------------------

    def _find_coordinator(self, key: str, key_type: int) -> Any:
        while True:
            try:
                resp = yield Request(None, FIND_COORDINATOR, lambda v: find_request([key], key_type))
            except (KafkaConnectionError, KafkaTimeoutError):
                yield Sleep(self.backoff)
                continue
            answer = answers(resp, [key])[0]
            code, node = answer.error_code, answer.node_id
            if code == 0:
                return node
            err = errors.broker_error(code, f"FindCoordinator for {key!r}")
            if not err.retriable:
                raise self._fatal(err) if code in _FATAL else err
            yield Sleep(self.backoff)

    def _ask(self, what: str, api: Any, build: Callable[[int], Any], code_of: Callable[[Any], int],
             max_version: Any = None, group: str | None = None) -> Any:
        """Send to the transaction coordinator (or ``group``'s) until an answer other
        than "later" or "elsewhere" comes; returns it and its code (which may be an
        error's)."""
        node = None
        while True:
            if group is None and self.coordinator is None:
                self.coordinator = yield from self._find_coordinator(self.transactional_id, TRANSACTION)
            if group is not None and node is None:
                node = yield from self._find_coordinator(group, GROUP)
            try:
                resp = yield Request(self.coordinator if group is None else node, api, build, max_version)
            except (KafkaConnectionError, KafkaTimeoutError):
                if group is None:
                    self.coordinator = None
                node = None
                yield Sleep(self.backoff)
                continue
            code = code_of(resp)
            if code in COORDINATOR_MOVED:
                if group is None:
                    self.coordinator = None
                node = None
                continue
            if code in _RETRY_LATER:
                yield Sleep(self.backoff)
                continue
            if code in _FATAL:
                context = f"{what} for transactional_id {self.transactional_id!r}"
                if code == INVALID_PRODUCER_EPOCH:
                    # Coordinators answer the versions before KIP-588 (EndTxn v0-v1 and
                    # friends) with INVALID_PRODUCER_EPOCH where later ones say
                    # PRODUCER_FENCED: one typed error for a fenced producer, whatever the version.
                    code, context = PRODUCER_FENCED, context + " (answered INVALID_PRODUCER_EPOCH)"
                raise self._fatal(errors.broker_error(code, context))
            return resp, code

    def init_steps(self) -> Any:
        """init_transactions(): a producer id and epoch from the coordinator, fencing any
        earlier producer with this transactional id (and finishing its open transaction)."""
        if self.state == READY:
            return None
        self._require("init_transactions()", UNINITIALIZED, INITIALIZING)
        self.state = INITIALIZING
        yield from self._new_epoch("InitProducerId")
        self.state = READY
        return None

    def _new_epoch(self, what: str) -> Any:
        ident = self.identity
        resp, _ = yield from self._ask(what, INIT_PRODUCER_ID, ident.init_request, _error_code)
        ident.apply_init(resp, None, 0.0, f"the coordinator of {self.transactional_id!r}")
        if ident.fatal is not None:
            raise self._fatal(ident.fatal)

    def add_partitions_steps(self) -> Any:
        """Add the partitions that have batches waiting to the transaction."""
        tps = sorted(self.to_add)
        if not tps or self.state not in (IN_TRANSACTION, COMMITTING):
            return None
        ident = self.identity
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        req_topic = ADD_PARTITIONS_TO_TXN.Request.AddPartitionsToTxnTopic

        def build(version: int) -> Any:
            return ADD_PARTITIONS_TO_TXN.Request(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=ident.producer_id, v3_and_below_producer_epoch=ident.epoch,
                v3_and_below_topics=[req_topic(name=t, partitions=ps) for t, ps in topics.items()])

        def code_of(resp: Any) -> int:
            return _first_error(r.partition_error_code for t in resp.results_by_topic_v3_and_below
                                for r in t.results_by_partition)

        while True:
            _, code = yield from self._ask("AddPartitionsToTxn", ADD_PARTITIONS_TO_TXN, build, code_of,
                                           _MAX_ADD_PARTITIONS_VERSION)
            if not code:
                break
            err = errors.broker_error(code, f"AddPartitionsToTxn of {tps}")
            if not err.retriable:
                self.batch_failed(err)
                return None
            # A retriable answer, such as UNKNOWN_TOPIC_OR_PARTITION from a coordinator that
            # has not yet heard of a topic just created: ask again, as the Java client does
            # (the held batches' delivery deadline bounds this), unless the caller aborted.
            yield Sleep(self.backoff)
            if self.state not in (IN_TRANSACTION, COMMITTING):
                return None
        self.added.update(tps)
        self.to_add.difference_update(tps)
        return None

    def send_offsets_steps(self, offsets: dict[tuple[str, int], int], group: Any) -> Any:
        """send_offsets_to_transaction(): the consumer's offsets commit with the transaction."""
        self._require("send_offsets_to_transaction()", IN_TRANSACTION)
        ident = self.identity
        member = ConsumerGroupMetadata.of(group)
        group_id = member.group_id
        _, code = yield from self._ask(
            "AddOffsetsToTxn", ADD_OFFSETS_TO_TXN,
            lambda v: ADD_OFFSETS_TO_TXN.Request(transactional_id=self.transactional_id, producer_id=ident.producer_id,
                                                 producer_epoch=ident.epoch, group_id=group_id),
            _error_code)
        if code:
            raise self._abortable(errors.broker_error(code, f"AddOffsetsToTxn for group {group_id!r}"))
        self.offsets_added = True
        topics: dict[str, list[Any]] = {}
        part = TXN_OFFSET_COMMIT.Request.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition
        for (t, p), off in sorted(offsets.items()):
            topics.setdefault(t, []).append(part(partition_index=p, committed_offset=off, committed_metadata=""))
        topic = TXN_OFFSET_COMMIT.Request.TxnOffsetCommitRequestTopic

        def build(version: int) -> Any:
            return TXN_OFFSET_COMMIT.Request(
                transactional_id=self.transactional_id, group_id=group_id, producer_id=ident.producer_id,
                producer_epoch=ident.epoch, generation_id_or_member_epoch=member.generation_id,
                member_id=member.member_id, group_instance_id=member.group_instance_id,
                topics=[topic(name=t, partitions=ps) for t, ps in topics.items()])

        while True:
            _, code = yield from self._ask(
                "TxnOffsetCommit", TXN_OFFSET_COMMIT, build,
                lambda r: _first_error(p.error_code for t in r.topics for p in t.partitions),
                _v4_before_transactions_v2, group=group_id)
            if not code:
                return None
            err = errors.broker_error(code, f"TxnOffsetCommit for group {group_id!r}"
                                            + _as_member(member) + _FENCED_MEMBER.get(code, ""))
            if not err.retriable:
                # The offsets cannot go with this transaction: committing it without them
                # would lose the consumer's progress, so only an abort may end it.
                raise self._abortable(err)
            # Retriable, such as UNKNOWN_TOPIC_OR_PARTITION while the group coordinator
            # has not heard of a topic just created: the Java client asks again too, until
            # the caller ends the transaction (then without these offsets: abort only).
            yield Sleep(self.backoff)
            if self.state != IN_TRANSACTION:
                raise self._abortable(err)

    def commit_or_abort(self, commit: bool) -> None:
        """The caller asks to end the transaction (its batches are flushed, or dropped)."""
        if commit:
            self._require("commit_transaction()", IN_TRANSACTION, COMMITTING)
            self.state = COMMITTING
        else:
            self._require("abort_transaction()", IN_TRANSACTION, ABORTABLE, ABORTING)
            self.state = ABORTING

    def end_steps(self, commit: bool) -> Any:
        """EndTxn (when partitions or offsets were added), then READY for the next one.
        A commit that finds a failed batch raises; abort bumps the epoch when sequences
        were lost (KIP-360)."""
        if commit and self.state == ABORTABLE:  # a batch failed while flushing
            self._require("commit_transaction()", COMMITTING)
        ident = self.identity
        if self.added or self.offsets_added:  # an empty transaction has nothing to end
            resp, code = yield from self._ask(
                "EndTxn", END_TXN,
                lambda v: END_TXN.Request(transactional_id=self.transactional_id, producer_id=ident.producer_id,
                                          producer_epoch=ident.epoch, committed=commit),
                _error_code, _v4_before_transactions_v2)
            if code:
                err = errors.broker_error(code, f"EndTxn({'commit' if commit else 'abort'}) for "
                                                           f"transactional_id {self.transactional_id!r}")
                self.state = ABORTABLE
                self.error = err
                raise err
            if getattr(resp, "producer_id", -1) >= 0:  # v5 bumps the epoch with every end (KIP-890)
                ident.apply_init(resp, None, 0.0, "EndTxn")
        self.added.clear()
        self.to_add.clear()
        self.offsets_added = False
        if not commit and ident.bump_wanted is not None:
            yield from self._new_epoch("InitProducerId (epoch bump after abort)")
        self.state = READY
        self.error = None
        return None
