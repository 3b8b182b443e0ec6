"""What the client knows of the cluster, with no I/O: brokers, topics, partition leaders,
when to ask for metadata again, and how long to wait before reconnecting to a broker.

The sync :class:`~kafkawire.client.cluster.Cluster` and the asyncio cluster both keep one
:class:`ClusterMetadata` and one :class:`Backoffs`; they send the request it builds and
feed back the answer.  What both decide the same way lives here too: which broker to ask
(:func:`candidates`), how long a failed refresh waits and which failures end it
(:func:`refresh_wait`), what a failure to reach any broker says (:class:`BrokerAttempts`),
and bootstrap, refresh and ``partitions_for`` as step generators (:func:`bootstrap_steps`,
:func:`refresh_steps`, :func:`partitions_steps`; see protocol/steps.py) that each shell's
cluster runs.  :class:`ClusterView` shows the metadata as the clusters' attributes.
Time is passed in (monotonic seconds).
"""

from __future__ import annotations

import random
from typing import Any, Callable, Generator

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.steps import NOW, Await, Refresh, Request, Sleep

__all__ = ["ClusterMetadata", "ClusterView", "TopicMetadata", "PartitionMetadata", "Backoff", "Backoffs", "reconnect_delay_ms",
           "check_topic_name", "check_partition_in_range", "unknown_partition", "missing_partitions_steps", "list_topics_steps", "MAX_TOPIC_NAME_LENGTH", "bootstrap_failure",
           "BrokerAttempts", "refresh_timeout", "refresh_wait", "candidates", "partitions_steps",
           "bootstrap_steps", "refresh_steps", "ends_at_once", "unreached", "rebootstrap_due", "REBOOTSTRAP_REQUIRED"]

METADATA = apis.get("Metadata")

#: Kafka's limit on a topic name (Topic.MAX_NAME_LENGTH: room for the partition suffix of
#: its log directory inside a 255-byte file name).
MAX_TOPIC_NAME_LENGTH = 249
_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_topic_name(topic: Any) -> str:
    """``topic``, if it is a name Kafka accepts; else InvalidTopicError at once (a broker
    would refuse it too, and waiting for metadata cannot change that)."""
    if type(topic) is not str:
        raise errors.InvalidTopicError(f"topic must be a str, got {type(topic).__name__} {topic!r}")
    problem = None
    if not topic:
        problem = "it is empty"
    elif topic in (".", ".."):
        problem = f"{topic!r} is not allowed"
    elif len(topic) > MAX_TOPIC_NAME_LENGTH:
        problem = f"it has {len(topic)} characters, more than {MAX_TOPIC_NAME_LENGTH}"
    else:
        bad = sorted({c for c in topic if c not in _TOPIC_CHARS})
        if bad:
            problem = "it contains " + ", ".join(repr(c) for c in bad)
    if problem is not None:
        raise errors.InvalidTopicError(
            f"invalid topic name {topic!r}: {problem}; a topic name is 1-{MAX_TOPIC_NAME_LENGTH} "
            f"ASCII letters, digits, '.', '_' and '-' (not '.' or '..')")
    return topic


def bootstrap_failure(failures: list[str], spent: float, timeout: float) -> str:
    """The message of a bootstrap that reached no address: each address's attempts and
    last failure, and the time spent (an address that cannot be resolved, or refuses
    for good, ends it at once, before the limit)."""
    took = f"{spent * 1000:.0f} ms" if spent < 1 else f"{spent:.1f} s"
    return (f"could not bootstrap from bootstrap_servers (gave up after {took} of the "
            f"{timeout:.3g} s allowed); tried:\n  " + "\n  ".join(failures or ["(no time to try any)"])
            + "\ncheck the addresses and that the brokers are running")


class BrokerAttempts:
    """The failures of a connection to any broker (each :func:`candidates` in turn),
    and the error when none connects."""

    def __init__(self) -> None:
        self.tried: list[str] = []
        self.errors: list[BaseException] = []
        self.final = True  # every failure so far is one waiting does not fix

    def failed(self, host: str, port: int, exc: BaseException) -> None:
        self.tried.append(f"{host}:{port}: {type(exc).__name__}: {exc}")
        self.errors.append(exc)
        self.final = self.final and ends_at_once(exc)

    def error(self) -> errors.NoBrokersAvailableError:
        """NoBrokersAvailableError listing each attempt; not retriable when every broker
        refused for a reason waiting does not fix (a TLS certificate, a protocol
        mismatch), so that a refresh ends at once instead of at its deadline."""
        return errors.NoBrokersAvailableError.summing(
            "no broker could be reached; tried:\n  " + "\n  ".join(self.tried)
            + "\ncheck bootstrap_servers and that the brokers are running",
            self.errors, final=self.final and bool(self.tried))  # final: each one ends_at_once


def refresh_timeout(timeout: float, last: BaseException | None) -> errors.KafkaTimeoutError:
    took = f"{timeout:g}s" if timeout >= 1 else f"{timeout * 1000:.3g} ms"
    err = errors.KafkaTimeoutError(f"cluster metadata not refreshed within {took}"
                                   + (f"; last error: {last}" if last else ""))
    err.errors = [last] if last is not None else []  # type: ignore[attr-defined]
    if last is not None:
        err.__cause__ = last  # a wrong CA met by the last try stays catchable by its class
    return err


def refresh_wait(exc: BaseException, remaining: float, retry_backoff: float, connect_delay: float) -> float:
    """How long a metadata refresh that failed with ``exc`` waits before it tries again
    (never past ``remaining``).  Raises ``exc`` when waiting cannot help (every broker
    refused for a reason that does not pass: a TLS certificate, a protocol mismatch).
    When no broker could be reached the wait ends as one leaves its reconnect backoff,
    in ``connect_delay`` seconds; after another failure it is ``retry_backoff``."""
    if not getattr(exc, "retriable", True):
        raise exc
    wait = max(connect_delay, 0.01) if isinstance(exc, errors.NoBrokersAvailableError) else retry_backoff
    return max(0.0, min(wait, remaining))


def unknown_partition(topic: str, partition: int, count: int, fix: str) -> errors.UnknownPartitionError:
    """The error for a ``partition`` that ``topic``'s ``count`` partitions do not have;
    ``fix`` says what the caller can do instead."""
    return errors.UnknownPartitionError(
        f"topic {topic!r} has {count} partition{'s' if count != 1 else ''} "
        f"(0-{count - 1}), so partition {partition} does not exist; {fix}, or add partitions "
        f"(Admin.create_partitions)", topic=topic, partition=partition, count=count)


def check_partition_in_range(topic: str, partition: int, count: int) -> None:
    """Refuse an explicit ``partition`` that ``topic``'s ``count`` partitions do not have,
    before the record is queued (it could never be delivered)."""
    if partition >= count:
        raise unknown_partition(topic, partition, count, "pass partition=None to let the partitioner choose")


class PartitionMetadata:
    __slots__ = ("partition", "leader", "leader_epoch", "error_code", "replicas", "isr")

    def __init__(self, partition: int, leader: int, leader_epoch: int, error_code: int,
                 replicas: list[int], isr: list[int]):
        self.partition = partition
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.error_code = error_code
        self.replicas = replicas
        self.isr = isr

    def __repr__(self) -> str:
        return f"<Partition {self.partition} leader={self.leader} error={self.error_code}>"


class TopicMetadata:
    __slots__ = ("name", "error_code", "topic_id", "partitions")

    def __init__(self, name: str, error_code: int, topic_id: Any, partitions: dict[int, PartitionMetadata]):
        self.name = name
        self.error_code = error_code
        self.topic_id = topic_id
        self.partitions = partitions

    def __repr__(self) -> str:
        return f"<Topic {self.name} partitions={len(self.partitions)} error={self.error_code}>"


def reconnect_delay_ms(failures: int, base_ms: int, max_ms: int, jitter: float) -> float:
    """The wait before reconnecting after ``failures`` failures in a row: ``base_ms``
    doubling per failure up to ``max_ms``, times ``jitter`` (the caller draws it from
    0.8-1.2, so clients that failed together do not retry together)."""
    return min(base_ms * 2 ** min(failures - 1, 30), max_ms) * jitter


class Backoff:
    """Reconnect state of one broker address: failures in a row, when it may be tried
    again, and the last error (raised again to a caller that may not wait)."""

    __slots__ = ("failures", "next_attempt", "last_error", "since")

    def __init__(self) -> None:
        self.failures = 0
        self.next_attempt = 0.0
        self.last_error: BaseException | None = None
        self.since = 0.0  # when the current run of failures began

    def failed(self, exc: BaseException, now: float, base_ms: int, max_ms: int, jitter: float) -> None:
        if self.failures == 0:
            self.since = now
        self.failures += 1
        self.next_attempt = now + reconnect_delay_ms(self.failures, base_ms, max_ms, jitter) / 1000.0
        self.last_error = exc

    def succeeded(self) -> None:
        self.failures = 0
        self.next_attempt = 0.0
        self.last_error = None


class Backoffs:
    """The reconnect :class:`Backoff` of every broker address (host, port) of a client:
    ``reconnect_backoff_ms`` doubling per failure up to ``reconnect_backoff_max_ms``,
    with +-20% jitter."""

    def __init__(self, base_ms: int, max_ms: int, jitter: Callable[[], float] | None = None):
        self.base_ms, self.max_ms = base_ms, max_ms
        self.jitter = jitter or (lambda: random.uniform(0.8, 1.2))
        self.by_address: dict[tuple[str, int], Backoff] = {}
        # Failures recorded so far: a caller waiting on another thread for the first
        # answer compares it to learn that an attempt failed (it may have refused for good).
        self.failures = 0

    def get(self, host: str, port: int) -> Backoff:
        return self.by_address.setdefault((host, port), Backoff())

    def failed(self, b: Backoff, exc: BaseException, now: float) -> None:
        self.failures += 1
        b.failed(exc, now, self.base_ms, self.max_ms, self.jitter())

    def remaining(self, host: str, port: int, now: float) -> float:
        b = self.by_address.get((host, port))
        return 0.0 if b is None else max(0.0, b.next_attempt - now)

    def refusal(self, host: str, port: int, now: float) -> BaseException | None:
        """The last error of an address still in its backoff: a caller that may not try
        it now gets that error at once."""
        b = self.by_address.get((host, port))
        return b.last_error if b is not None and b.next_attempt > now else None

    def next_delay(self, now: float) -> float:
        """Seconds until some address leaves its backoff (0.0: none is in one)."""
        waits = [b.next_attempt - now for b in self.by_address.values() if b.next_attempt > now]
        return min(waits) if waits else 0.0


def candidates(brokers: dict[int, tuple[str, int]], bootstrap: list[tuple[str, int]], backoffs: Backoffs,
               now: float, recovery: str = "rebootstrap") -> list[tuple[Any, str, int, int | None]]:
    """Every broker to ask when any will do, as (connection key, host, port, node id):
    known ones first, then bootstrap addresses (keyed ("bootstrap", host, port)), least
    recently failed first (one in backoff is tried last), one per address.  With
    metadata_recovery_strategy ``recovery`` "none", a client that knows its brokers
    never goes back to the bootstrap addresses (as the Java client)."""
    out: list[tuple[Any, str, int, int | None]] = [(nid, h, p, nid) for nid, (h, p) in brokers.items()]
    if recovery != "none" or not brokers:
        out += [(("bootstrap", h, p), h, p, None) for h, p in bootstrap]
    out.sort(key=lambda c: backoffs.remaining(c[1], c[2], now))
    seen: set[tuple[str, int]] = set()
    unique = []
    for c in out:
        if (c[1], c[2]) not in seen:
            seen.add((c[1], c[2]))
            unique.append(c)
    return unique


REBOOTSTRAP_REQUIRED = 129


def rebootstrap_due(brokers: dict[int, tuple[str, int]], backoffs: Backoffs, now: float, trigger: float) -> bool:
    """KIP-1102: whether every broker the metadata names has failed every attempt to
    reach it for ``trigger`` seconds or more (metadata_recovery_rebootstrap_trigger_ms),
    so that the client should forget them and bootstrap again.  A broker not tried
    yet, or reached since, is not known to be gone."""
    if not brokers:
        return False
    for host, port in brokers.values():
        b = backoffs.by_address.get((host, port))
        if b is None or b.failures == 0 or now - b.since < trigger:
            return False
    return True


def ends_at_once(exc: BaseException) -> bool:
    """Whether a failure to reach a broker is one no wait fixes: a host name that does
    not resolve, or a refusal that is not retriable (a TLS certificate, a protocol
    mismatch, an authentication).  A refused or reset connection (a broker still
    starting, a pod whose sidecar is not up yet) is retried."""
    return isinstance(exc, errors.BrokerResolutionError) or not getattr(exc, "retriable", True)


def unreached(backoffs: Backoffs, addresses: list[tuple[str, int]], spent: float, timeout: float,
              at_deadline: bool, now: float | None = None) -> BaseException | None:
    """For a client whose connections (made elsewhere, by its sender thread) have reached
    no bootstrap address yet: NoBrokersAvailableError naming each address's failures, at
    the deadline (``at_deadline``, retriable), or before it once every address failed for
    good (:func:`ends_at_once`, not retriable); else None (wait on).  A login refused at
    any address (or a token provider's own error) is returned as it is, at once: every
    address shares the credentials, and :func:`bootstrap_steps` ends on it too.  Given
    ``now``, an address's failure counts only while it is in its reconnect backoff (as
    :meth:`Backoffs.refusal`): for a caller whose own polls make the next attempt, which
    then decides, rather than a sender thread that keeps trying anyway."""
    tried = [(h, p, backoffs.by_address.get((h, p))) for h, p in addresses]
    if now is not None:
        tried = [(h, p, b if b is not None and b.next_attempt > now else None) for h, p, b in tried]
    for _h, _p, b in tried:
        if b is not None and b.last_error is not None and not isinstance(
                b.last_error, (errors.KafkaConnectionError, errors.KafkaTimeoutError)):
            return b.last_error
    final = all(b is not None and b.last_error is not None and ends_at_once(b.last_error) for _h, _p, b in tried)
    if not (final or at_deadline):
        return None
    failures = [f"{h}:{p}: " + ("no answer in time" if b is None or b.last_error is None else
                                (f"{b.failures} attempts, the last " if b.failures > 1 else "")
                                + f"{type(b.last_error).__name__}: {b.last_error}") for h, p, b in tried]
    # The sender thread's Backoffs keep each address's last error only: one per address.
    last = [b.last_error for _h, _p, b in tried if b is not None and b.last_error is not None]
    return errors.NoBrokersAvailableError.summing(bootstrap_failure(failures, spent, timeout), last, final=final)


def bootstrap_steps(addresses: list[tuple[str, int]], timeout: float,
                    attempt: Callable[[str, int, float], Any],
                    backoffs: Backoffs | None = None
                    ) -> Generator[Any, Any, errors.NoBrokersAvailableError | None]:
    """Bootstrap: the addresses in turn until one answers Metadata, within ``timeout``
    seconds (a step generator).  ``attempt(host, port, deadline)`` connects there and
    asks; it returns the answer's future (or raises).  An address whose connection is
    refused or reset is tried again once it leaves its reconnect backoff in
    ``backoffs`` (reconnect_backoff_ms doubling up to reconnect_backoff_max_ms; the
    shell records each failure there), until the deadline; one that cannot be resolved,
    or that refuses for good (:func:`ends_at_once`), is not tried again, and when no
    address is left the bootstrap ends at once.  Without ``backoffs``, each address is
    tried once.  Returns None once one
    answered, else NoBrokersAvailableError (for the shell to raise) naming each
    address's attempts and last error, and the time spent: retriable when it gave up at
    the deadline, not when every address refused for good."""
    start = yield NOW
    deadline = start + timeout
    tried: dict[tuple[str, int], list[Any]] = {}  # address -> [attempts, last error]
    every: list[BaseException] = []  # each attempt's error, in order
    left = list(dict.fromkeys(addresses))
    now = start
    while left and now < deadline:
        waits = []
        for host, port in list(left):
            if now >= deadline:
                break
            wait = backoffs.remaining(host, port, now) if backoffs is not None else 0.0
            if wait > 0:
                waits.append(wait)
                continue
            try:
                yield Await(attempt(host, port, deadline))
                return None
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
                entry = tried.setdefault((host, port), [0, exc])
                entry[0] += 1
                entry[1] = exc
                every.append(exc)
                if backoffs is None or ends_at_once(exc):
                    left.remove((host, port))
                elif backoffs.remaining(host, port, now) <= 0:
                    backoffs.failed(backoffs.get(host, port), exc, now)  # the shell did not
            now = yield NOW
            waits.append(backoffs.remaining(host, port, now) if backoffs is not None else 0.0)
        if left and now < deadline:
            # Every address was tried or is backing off: sleep until the first may be tried
            # again (at least 10 ms, even with reconnect_backoff_ms=0: never a busy loop).
            yield Sleep(min(max(min(waits, default=0.0), 0.01), deadline - now))
            now = yield NOW
    failures = [f"{h}:{p}: {n} attempt{'s' if n != 1 else ''}, the last {type(e).__name__}: {e}"
                if n > 1 else f"{h}:{p}: {type(e).__name__}: {e}" for (h, p), (n, e) in tried.items()]
    return errors.NoBrokersAvailableError.summing(
        bootstrap_failure(failures, now - start, timeout), every,
        final=bool(tried) and all(ends_at_once(e) for _n, e in tried.values()),
        decisive=next((e for e in every if ends_at_once(e)), None))


def refresh_steps(timeout: float, retry_backoff: float, attempt: Callable[[float], Any],
                  connect_delay: Callable[[], float]) -> Generator[Any, Any, None]:
    """A metadata refresh within ``timeout`` seconds (a step generator):
    ``attempt(deadline)`` gives the future of a Metadata answer (the shell's refresh in
    flight, or a new one to any broker; it may raise); failures wait as
    :func:`refresh_wait` says (``connect_delay()``: the shell's next_connect_delay)."""
    now = yield NOW
    deadline = now + timeout
    last: BaseException | None = None
    while now < deadline:
        try:
            yield Await(attempt(deadline))
            return
        except (errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
            last = exc
            now = yield NOW
            yield Sleep(refresh_wait(exc, deadline - now, retry_backoff, connect_delay()))
        now = yield NOW
    raise refresh_timeout(timeout, last)


def missing_partitions_steps(meta: ClusterMetadata, tps: Any, timeout: float) -> Generator[Any, Any, None]:
    """Refuse a (topic, partition) of ``tps`` that its topic lacks, by one Metadata answer
    received after the call began (a step generator): UnknownPartitionError, naming the
    topic's partitions.  Nothing is asked when every partition has a known leader; no
    answer within ``timeout`` is no error here (the call that follows says what is wrong)."""
    asked = yield NOW
    unknown = [tp for tp in tps if meta.leader_for(tp[0], tp[1]) is None]
    if not unknown:
        return
    meta.interest.update(tp[0] for tp in unknown)
    meta.need_refresh = True
    try:
        yield Refresh(timeout)
    except errors.KafkaTimeoutError:
        return
    for topic, partition in unknown:
        exc = meta.missing_partition(topic, partition, asked)
        if exc is not None:
            raise exc


def list_topics_steps(include_internal: bool = False) -> Generator[Any, Any, dict[str, list[int]]]:
    """Every topic of the cluster with its partition ids, by one Metadata request for all
    topics to any broker (a step generator); internal topics (__consumer_offsets, ...)
    only with ``include_internal``.  Nothing is created (allow_auto_topic_creation off),
    and the client's own metadata is left as it was."""
    def build(version: int) -> Any:
        # v0 says "every topic" with [], later versions with null.
        return METADATA.Request(topics=[] if version == 0 else None, allow_auto_topic_creation=False)

    resp = yield Request(None, METADATA, build)
    return {t.name: sorted(p.partition_index for p in t.partitions)
            for t in sorted(resp.topics, key=lambda t: t.name or "")
            if t.name is not None and t.error_code == 0
            and (include_internal or not getattr(t, "is_internal", False))}


def partitions_steps(meta: ClusterMetadata, topic: str, timeout: float, retry_backoff: float
                     ) -> Generator[Any, Any, list[int]]:
    """``topic``'s partition ids, refreshing its metadata (and waiting ``retry_backoff``
    between tries while a new topic has no leader yet) within ``timeout`` seconds: a
    step generator (protocol/steps.py).  A permanent topic error in an answer received
    after the call began is raised at once."""
    asked = yield NOW
    deadline = asked + timeout
    meta.interest.add(topic)
    now = asked
    while True:
        parts = meta.partitions(topic, asked)
        if parts is not None:
            return parts
        remaining = deadline - now
        if remaining <= 0:
            raise errors.KafkaTimeoutError(f"topic {topic!r} not available within {timeout:g}s: "
                                           f"{meta.why_unavailable(topic)}")
        if topic in meta.topics:  # UNKNOWN_TOPIC or LEADER_NOT_AVAILABLE: retry soon
            yield Sleep(min(retry_backoff, remaining))
            now = yield NOW
        meta.need_refresh = True
        try:
            yield Refresh(max(0.001, deadline - now))
        except errors.KafkaTimeoutError:
            pass  # out of time: the check above says what the topic lacks
        now = yield NOW


class ClusterView:
    """What both cluster shells show of their :class:`ClusterMetadata` (``meta``), as
    attributes of the cluster: the clients read them so."""

    meta: ClusterMetadata
    brokers = property(lambda self: self.meta.brokers)
    topics = property(lambda self: self.meta.topics)
    cluster_id = property(lambda self: self.meta.cluster_id)
    controller_id = property(lambda self: self.meta.controller_id)
    interest = property(lambda self: self.meta.interest)
    #: leader_for(topic, partition): the partition's leader's node id, None if unknown.
    leader_for = property(lambda self: self.meta.leader_for)

    @property
    def all_topics(self) -> bool:
        return self.meta.all_topics

    @all_topics.setter
    def all_topics(self, value: bool) -> None:
        self.meta.all_topics = value

    def request_refresh(self) -> None:
        self.meta.need_refresh = True


class ClusterMetadata:
    """The latest Metadata answer and the topics the client cares about
    (``interest``, or every topic with ``all_topics``)."""

    def __init__(self, metadata_max_age_ms: int, retry_backoff_ms: int, recovery: str = "rebootstrap",
                 rebootstrap_trigger_ms: int = 300000):
        self.max_age = metadata_max_age_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        #: metadata_recovery_strategy and its trigger (seconds): see maybe_rebootstrap.
        self.recovery = recovery
        self.rebootstrap_trigger = rebootstrap_trigger_ms / 1000
        #: A broker answered REBOOTSTRAP_REQUIRED: bootstrap again before the next request.
        self.rebootstrap_required = False
        #: How many times the known brokers were forgotten for the bootstrap addresses.
        self.rebootstraps = 0
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.interest: set[str] = set()
        #: Ask for every topic (a consumer subscribed to a pattern needs them all).
        self.all_topics = False
        self.last_refresh = 0.0
        self.need_refresh = True
        #: When each topic was last in an answer: an error it carries is the broker's
        #: current word only for callers who asked after that (see topic_error).
        self.topic_seen: dict[str, float] = {}
        #: {topic: partition count} for the topics whose latest answer lists partitions
        #: and no error.  Updated in place, never rebound: a producer's compiled send()
        #: path (Appender) holds this very dict to choose keyed and sticky partitions.
        self.partition_counts: dict[str, int] = {}
        #: {topic id: name} of the topics that have an id: a Fetch v13+ answer names its
        #: topics by id, and a pattern subscription's metadata holds every topic of the
        #: cluster (a look at each cost 250 µs an answer with 1,000 of them).
        self.topic_names: dict[Any, str] = {}
        self._errors_taken: dict[str, float | None] = {}  # see take_topic_error
        self._looked_at = -1.0  # see raise_new_topic_error

    def maybe_rebootstrap(self, backoffs: Backoffs, now: float) -> bool:
        """KIP-1102, with metadata_recovery_strategy "rebootstrap": when a broker answered
        REBOOTSTRAP_REQUIRED, or every known broker has been unreachable for the trigger
        (:func:`rebootstrap_due`), forget the brokers (and the cluster id: the addresses
        may now lead to another cluster) so that the next Metadata request goes to the
        bootstrap addresses, and return True: the shell then closes its connections to
        the forgotten brokers.  The topics stay, to be refreshed."""
        if self.recovery != "rebootstrap" or not self.brokers:
            self.rebootstrap_required = False
            return False
        if not (self.rebootstrap_required or rebootstrap_due(self.brokers, backoffs, now, self.rebootstrap_trigger)):
            return False
        self.brokers = {}
        self.cluster_id = None
        self.controller_id = -1
        self.need_refresh = True
        self.rebootstrap_required = False
        self.rebootstraps += 1
        return True

    def request(self, version: int) -> tuple[Any, frozenset[str]]:
        """The Metadata request for ``version`` and the topics it asks about."""
        topics: Any
        if self.all_topics:
            topics = [] if version == 0 else None  # v0 says "all" with [], later versions with null
        elif version == 0 and not self.interest:
            topics = []  # v0 cannot ask for no topics; [] means all
        else:
            topics = [METADATA.Request.MetadataRequestTopic(name=t) for t in sorted(self.interest)]
        return METADATA.Request(topics=topics, allow_auto_topic_creation=True), frozenset(self.interest)

    def apply(self, resp: Any, now: float) -> None:
        """Take in a Metadata answer.  One whose top-level error is REBOOTSTRAP_REQUIRED
        (KIP-1102) is not taken in: the brokers are forgotten at the next
        :meth:`maybe_rebootstrap`, or, with metadata_recovery_strategy "none", the
        error is raised."""
        if getattr(resp, "error_code", 0) == REBOOTSTRAP_REQUIRED:
            self.need_refresh = True
            if self.recovery == "none":
                raise errors.for_code(REBOOTSTRAP_REQUIRED)(
                    "a broker answered Metadata with REBOOTSTRAP_REQUIRED and metadata_recovery_strategy "
                    "is 'none': set it to 'rebootstrap' (the default) to have the client go back to "
                    "bootstrap_servers, or create the client again")
            self.rebootstrap_required = True
            return
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        self.cluster_id = getattr(resp, "cluster_id", None)
        self.controller_id = getattr(resp, "controller_id", -1)
        for t in resp.topics:
            if t.name is None:
                continue
            topic_id = getattr(t, "topic_id", None)
            has_id = topic_id is not None and int(topic_id) != 0
            old = self.topics.get(t.name)
            # The same topic (not one deleted and made again under its name) only when
            # both answers carry its id: leader epochs start again in a new topic.
            same = has_id and old is not None and old.topic_id == topic_id
            parts = {}
            for p in t.partitions:
                epoch = getattr(p, "leader_epoch", -1)
                known = old.partitions.get(p.partition_index) if same else None
                if known is not None and epoch >= 0 and known.leader_epoch > epoch:
                    # KIP-320: a broker that has not caught up with the controller yet
                    # names an older leader (one just killed): keep the newer one known.
                    parts[p.partition_index] = known
                    continue
                parts[p.partition_index] = PartitionMetadata(
                    p.partition_index, p.leader_id, epoch, p.error_code,
                    list(p.replica_nodes), list(p.isr_nodes),
                )
            self.topics[t.name] = TopicMetadata(t.name, t.error_code, topic_id, parts)
            if old is not None and old.topic_id != topic_id:
                self.topic_names.pop(old.topic_id, None)  # made again: a new id
            if has_id:
                self.topic_names[topic_id] = t.name
            self.topic_seen[t.name] = now
            if t.error_code == 0 and parts:
                self.partition_counts[t.name] = len(parts)
            else:
                self.partition_counts.pop(t.name, None)
        self.last_refresh = now
        self.need_refresh = False

    def answered(self, asked: frozenset[str]) -> None:
        """After :meth:`apply` of the answer to a request that named the topics ``asked``
        (:meth:`request`): a topic of interest added while it was in flight (a send()
        right after the client was made, during its first Metadata exchange) still needs
        a refresh of its own, or whoever waits for it would wait for metadata_max_age_ms."""
        if not self.all_topics and not self.interest <= asked:
            self.need_refresh = True

    def refresh_due(self, now: float) -> bool:
        """True when asked to refresh, or the metadata is older than metadata_max_age_ms."""
        return self.need_refresh or now - self.last_refresh >= self.max_age

    def refresh_allowed(self, now: float) -> bool:
        """Whether a due refresh may go out now: refreshes after an error wait
        retry_backoff_ms, so a flapping leader costs little."""
        return not (self.need_refresh and now - self.last_refresh < self.retry_backoff)

    def leader_for(self, topic: str, partition: int) -> int | None:
        meta = self.topics.get(topic)
        if meta is None:
            return None
        p = meta.partitions.get(partition)
        if p is None or p.leader < 0:
            return None
        return p.leader

    def partitions(self, topic: str, since: float | None = None) -> list[int] | None:
        """``topic``'s partition ids; None while unknown or leaderless (ask again); raises
        the topic's error when waiting cannot fix it (see :meth:`topic_error`)."""
        meta = self.topics.get(topic)
        if meta is not None and meta.error_code == 0 and meta.partitions:
            return sorted(meta.partitions)
        exc = self.topic_error(topic, since)
        if exc is not None:
            raise exc
        return None

    def topic_error(self, topic: str, since: float | None = None) -> errors.BrokerError | None:
        """The error of ``topic``'s metadata if it is not retriable (INVALID_TOPIC_EXCEPTION,
        TOPIC_AUTHORIZATION_FAILED, ...) and came in an answer received at ``since`` or
        later (None: any answer): an older one may be out of date (an ACL granted since),
        so the caller asks again first.  Retriable errors (UNKNOWN_TOPIC_OR_PARTITION,
        LEADER_NOT_AVAILABLE, ...) give None: those callers wait."""
        meta = self.topics.get(topic)
        if meta is None or meta.error_code == 0 or errors.for_code(meta.error_code).retriable:
            return None
        if since is not None and self.topic_seen.get(topic, since - 1) < since:
            return None
        return errors.broker_error(meta.error_code, f"metadata for topic {topic!r}")

    def take_topic_error(self, topics: Any) -> errors.BrokerError | None:
        """The permanent error (see :meth:`topic_error`) of the first of ``topics`` whose
        latest answer carries one not handed out yet: a poll raises each answer's error
        once, and the next poll waits for a new answer (an ACL granted since clears it)."""
        for topic in topics:
            exc = self.topic_error(topic)
            if exc is not None and self._errors_taken.get(topic) != self.topic_seen.get(topic):
                self._errors_taken[topic] = self.topic_seen.get(topic)
                return exc
        return None

    def raise_new_topic_error(self, topics: Any) -> None:
        """Raise :meth:`take_topic_error`'s error for ``topics`` (None: none), looking only
        when an answer came since the last look, so a poll loop may call it every time."""
        if topics and self.last_refresh != self._looked_at:
            self._looked_at = self.last_refresh
            exc = self.take_topic_error(topics)
            if exc is not None:
                raise exc

    def missing_partition(self, topic: str, partition: int, since: float | None = None
                          ) -> errors.UnknownPartitionError | None:
        """UnknownPartitionError when the latest answer for ``topic``, received at
        ``since`` or later (None: any), lists its partitions and ``partition`` is not
        among them: the topic exists without it, and no wait brings it (an older answer
        may predate partitions added since, so the caller asks again first)."""
        meta = self.topics.get(topic)
        if meta is None or meta.error_code != 0 or not meta.partitions or partition in meta.partitions:
            return None
        if since is not None and self.topic_seen.get(topic, since - 1) < since:
            return None
        return unknown_partition(topic, partition, len(meta.partitions),
                                 "assign() or seek() one of those")

    def why_unavailable(self, topic: str) -> str:
        meta = self.topics.get(topic)
        if meta is None or meta.error_code == 3:
            return ("it does not exist, and the broker did not create it (auto.create.topics.enable "
                    "is off, or the topic is being made); create it (Admin.create_topics) or check "
                    "the name")
        return "its partitions have no leader yet (a new topic, or brokers down); try again"
