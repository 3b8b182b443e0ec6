"""Peer clients (confluent-kafka, kafka-python) run as consumer-group members in child processes.

A group test needs other members beside kafkawire's: to share partitions with, to leave
gracefully, or to die without a LeaveGroup (SIGKILL).  Each member here is a child Python
process running one peer consumer; it reports what happens to it as JSON lines on its
stdout (assignment changes, records consumed, commits, errors), and takes commands on its
stdin.  The parent keeps the reports in a :class:`Groupmate` handle::

    with Groupmates() as mates:
        a = mates.start("confluent", broker.bootstrap, topic, group, assignor="range")
        b = mates.start("confluent", broker.bootstrap, topic, group, assignor="range")
        a.wait_for(lambda: a.partitions() and b.partitions()
                   and a.partitions() | b.partitions() == {0, 1, 2, 3}, timeout=30)
        b.kill()                       # SIGKILL: no LeaveGroup, no commit
        a.wait_partitions({0, 1, 2, 3}, timeout=30)

or the ``groupmates`` pytest fixture (import it into the test module).

Every wait takes a timeout and raises :class:`GroupmateTimeout` (with the child's recent
reports and stderr) when it passes.  Children are ended by their own pid when the
:class:`Groupmates` closes, at interpreter exit, and end themselves when their stdin
closes (the parent died) or their ``max_lifetime`` passes: none can outlive a test run.

Child reports (one JSON object a line, each with ``"t"``, ``time.time()`` in the child):
``started``, ``assigned`` / ``revoked`` / ``lost`` (``"partitions"``: [[topic, p], ...], the
change) each followed by ``assignment`` (the whole current assignment), ``consumed``
(``topic``, ``partition``, ``offset``, ``value``), ``committed`` (``offsets``: [[topic, p,
offset], ...]), ``error`` (``"error"``: text, ``"fatal"``), ``closing``, ``closed``.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

__all__ = [
    "CLIENTS",
    "Groupmate",
    "GroupmateError",
    "GroupmateTimeout",
    "Groupmates",
    "TopicPartition",
    "groupmates",
    "set_mock_consumer_group_timeouts",
    "set_mock_initial_rebalance_delay",
    "start_member",
]

#: The peer clients a member can run.
CLIENTS = ("confluent", "kafka-python")

# Assignor names as each client spells them.
_CONFLUENT_ASSIGNORS = {"range": "range", "roundrobin": "roundrobin",
                        "cooperative-sticky": "cooperative-sticky"}
_KAFKA_PYTHON_ASSIGNORS = {"range": "RangePartitionAssignor",
                           "roundrobin": "RoundRobinPartitionAssignor",
                           "sticky": "StickyPartitionAssignor",
                           "cooperative-sticky": "CooperativeStickyAssignor"}


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class GroupmateError(RuntimeError):
    """A member child failed (bad options, a client error it reported as fatal, a crash)."""


class GroupmateTimeout(GroupmateError, TimeoutError):
    """A wait on a member did not see what it waited for before its timeout."""


# ---------------------------------------------------------------------------------------
# The parent side
# ---------------------------------------------------------------------------------------


class Groupmate:
    """A handle on one member child process; see the module docstring.

    Made by :func:`start_member` or :meth:`Groupmates.start`.  The query methods
    (:meth:`assignment`, :meth:`consumed`, :meth:`committed`, :meth:`events`) return what
    the child has reported so far; the ``wait_*`` methods block until a condition holds,
    up to their ``timeout`` in seconds.
    """

    def __init__(self, name: str, config: dict[str, Any], *, start_timeout: float = 30.0):
        self.name = name
        self.config = config
        self._cond = threading.Condition()
        self._events: list[dict[str, Any]] = []
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._consumed: list[tuple[str, int, int, bytes | None]] = []
        self._committed: dict[TopicPartition, int] = {}
        self._eof = False
        self._stderr = tempfile.TemporaryFile(prefix=f"groupmate-{name}-")
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            # Its own session: a Ctrl-C reaches pytest only, which then ends the children.
            start_new_session=True,
        )
        self.started_at = time.monotonic()
        _LIVE.add(self)
        self._reader = threading.Thread(target=self._read, name=f"groupmate-{name}", daemon=True)
        self._reader.start()
        try:
            self.wait_for(lambda: self._seen("started"), start_timeout, "the child to start")
        except BaseException:
            self.kill()  # no handle reaches the caller: end the child here
            raise

    # -- reports ----------------------------------------------------------------------

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                event = {"event": "garbage", "line": raw.decode("utf-8", "replace")}
            event["received"] = time.monotonic()
            with self._cond:
                self._apply(event)
                self._events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "assignment":
            self._assignment = frozenset(TopicPartition(t, p) for t, p in event["partitions"])
        elif kind == "consumed":
            value = event.get("value")
            self._consumed.append((event["topic"], event["partition"], event["offset"],
                                   value.encode("latin-1") if value is not None else None))
        elif kind == "committed":
            for t, p, o in event["offsets"]:
                self._committed[TopicPartition(t, p)] = o

    def _seen(self, kind: str) -> bool:
        return any(e.get("event") == kind for e in self._events)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Every report so far (of one ``kind``, if given), oldest first."""
        with self._cond:
            return [dict(e) for e in self._events if kind is None or e.get("event") == kind]

    def assignment(self) -> frozenset[TopicPartition]:
        """The member's current assignment, as last reported (empty when not assigned)."""
        with self._cond:
            return self._assignment

    def partitions(self, topic: str | None = None) -> frozenset[int]:
        """The partition numbers of :meth:`assignment` in ``topic`` (default: the only one
        subscribed)."""
        topic = topic or self._only_topic()
        return frozenset(tp.partition for tp in self.assignment() if tp.topic == topic)

    def consumed(self, topic: str | None = None) -> list[tuple[int, int]]:
        """``(partition, offset)`` of every record consumed, in order, in ``topic`` (default:
        the only one subscribed)."""
        topic = topic or self._only_topic()
        with self._cond:
            return [(p, o) for t, p, o, _v in self._consumed if t == topic]

    def consumed_records(self) -> list[tuple[str, int, int, bytes | None]]:
        """``(topic, partition, offset, value)`` of every record consumed, in order."""
        with self._cond:
            return list(self._consumed)

    def committed(self) -> dict[TopicPartition, int]:
        """The offsets this member reported committing (the last one per partition)."""
        with self._cond:
            return dict(self._committed)

    def errors(self) -> list[str]:
        """The client errors the member reported (fatal or not)."""
        return [e["error"] for e in self.events("error")]

    def rebalances(self) -> int:
        """How many assignment changes (assigned, revoked, lost, of at least one partition)
        the member has seen."""
        return len([e for e in self.events()
                    if e.get("event") in ("assigned", "revoked", "lost") and e["partitions"]])

    def stderr(self, limit: int = 4000) -> str:
        """The tail of the child's stderr (client logs, tracebacks)."""
        self._stderr.flush()
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace")

    def _only_topic(self) -> str:
        topics = self.config["topics"]
        if len(topics) != 1:
            raise ValueError(f"{self.name} subscribes to {topics}: name the topic")
        return topics[0]

    def describe(self, last: int = 15) -> str:
        with self._cond:
            tail = self._events[-last:]
        lines = [json.dumps({k: v for k, v in e.items() if k != "received"}) for e in tail]
        state = "running" if self.alive else f"exited with {self.returncode}"
        return (f"{self!r} ({state}); last reports:\n  " + "\n  ".join(lines or ["(none)"])
                + f"\nstderr ends with:\n{self.stderr(2000) or '(empty)'}")

    def __repr__(self) -> str:
        return f"<Groupmate {self.name} {self.config['client']} pid {self.pid}>"

    # -- waits --------------------------------------------------------------------------

    def wait_for(self, condition: Callable[[], Any], timeout: float, what: str = "") -> Any:
        """Wait until ``condition()`` is truthy, re-checked on each report (and every 0.1 s,
        so it may look at other members too); return its value.

        Raises :class:`GroupmateTimeout` after ``timeout`` seconds, and
        :class:`GroupmateError` when the member reports a fatal error or exits first.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                result = condition()
                if result:
                    return result
                fatal = [e for e in self._events if e.get("event") == "error" and e.get("fatal")]
                if fatal:
                    raise GroupmateError(f"{self.name} failed: {fatal[0]['error']}\n{self.describe()}")
                if self._eof and self._proc.poll() is not None and not condition():
                    raise GroupmateError(f"{self.name} exited while waiting for "
                                         f"{what or condition}\n{self.describe()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise GroupmateTimeout(
                        f"{self.name}: no {what or 'condition'} within {timeout}s\n{self.describe()}")
                self._cond.wait(min(remaining, 0.1))

    def wait_assignment(self, expected: Iterable[tuple[str, int]], timeout: float) -> frozenset[TopicPartition]:
        """Wait until the assignment is exactly ``expected`` ((topic, partition) pairs)."""
        want = frozenset(TopicPartition(*tp) for tp in expected)
        self.wait_for(lambda: self._assignment == want, timeout, f"assignment {sorted(want)}")
        return self.assignment()

    def wait_partitions(self, expected: Iterable[int] | None, timeout: float,
                        topic: str | None = None) -> frozenset[int]:
        """Wait until the partitions assigned in ``topic`` are exactly ``expected``; with
        ``expected=None``, until there is at least one."""
        topic = topic or self._only_topic()

        def current() -> frozenset[int]:
            return frozenset(tp.partition for tp in self._assignment if tp.topic == topic)

        if expected is None:
            self.wait_for(lambda: current(), timeout, "assignment")
        else:
            want = frozenset(expected)
            self.wait_for(lambda: current() == want, timeout, f"partitions {sorted(want)}")
        return self.partitions(topic)

    def wait_consumed(self, count: int, timeout: float) -> list[tuple[int, int]]:
        """Wait until at least ``count`` records have been consumed (all topics)."""
        self.wait_for(lambda: len(self._consumed) >= count, timeout, f"{count} records consumed")
        return [(p, o) for _t, p, o, _v in self.consumed_records()]

    def wait_event(self, kind: str, timeout: float, after: int = 0) -> dict[str, Any]:
        """Wait for the first report of ``kind`` among reports number ``after`` onwards
        (``after=len(m.events())`` waits for a new one); return it."""
        def find() -> dict[str, Any] | None:
            for e in self._events[after:]:
                if e.get("event") == kind:
                    return dict(e)
            return None

        return self.wait_for(find, timeout, f"a {kind!r} report")

    # -- ending ------------------------------------------------------------------------

    def _command(self, line: str) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line.encode() + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def commit(self, timeout: float = 15.0) -> dict[TopicPartition, int]:
        """Ask the member to commit its positions now (synchronously); wait for its report."""
        after = len(self.events())
        self._command("commit")
        self.wait_for(lambda: any(e.get("event") in ("committed", "commit_failed")
                                  for e in self._events[after:]), timeout, "a commit")
        failed = [e for e in self.events()[after:] if e.get("event") == "commit_failed"]
        if failed:
            raise GroupmateError(f"{self.name}: commit failed: {failed[0]['error']}")
        return self.committed()

    def close(self, timeout: float = 20.0) -> int:
        """Graceful: the member commits (if it commits at all), closes its consumer (which
        sends LeaveGroup) and exits.  Killed if it has not exited within ``timeout``.
        Returns its exit status."""
        if self.alive:
            self._command("close")
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise GroupmateTimeout(f"{self.name} did not close within {timeout}s; killed it\n"
                                       f"{self.describe()}") from None
        self._finish()
        return self._proc.returncode

    def kill(self) -> int:
        """SIGKILL the member by its pid: no commit, no LeaveGroup.  Returns its status."""
        if self._proc.poll() is None:
            try:
                os.kill(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._proc.wait(timeout=10)
        self._finish()
        return self._proc.returncode

    def _finish(self) -> None:
        _LIVE.discard(self)
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        self._reader.join(timeout=5)


def start_member(
    client: str,
    bootstrap: str,
    topic: str | Sequence[str],
    group_id: str,
    assignor: str | Sequence[str] | None = "range",
    *,
    group_protocol: str = "classic",
    instance_id: str | None = None,
    commit: bool = True,
    auto_offset_reset: str = "earliest",
    session_timeout_ms: int | None = 6000,
    heartbeat_interval_ms: int | None = 500,
    max_poll_interval_ms: int = 30000,
    api_version: tuple[int, ...] | None = None,
    extra: dict[str, Any] | None = None,
    name: str | None = None,
    max_lifetime: float = 300.0,
    start_timeout: float = 30.0,
) -> Groupmate:
    """Start one member child that subscribes to ``topic`` in ``group_id``; return its handle
    once the child is running (not yet assigned: see :meth:`Groupmate.wait_partitions`).

    ``client``: one of :data:`CLIENTS`.  ``assignor``: ``range``, ``roundrobin``,
    ``cooperative-sticky``, and ``sticky`` (kafka-python only); a list offers several in
    preference order; None leaves the client's default.  ``group_protocol="consumer"``
    (confluent only): the KIP-848 protocol (ConsumerGroupHeartbeat), where the assignor is
    the broker's (``assignor`` becomes ``group.remote.assignor``: ``uniform`` or ``range``)
    and the session and heartbeat timings are the broker's (theirs are not sent).
    ``commit``: commit positions synchronously after each batch consumed, on each revoke
    and on :meth:`Groupmate.close` (auto-commit is always off).  ``instance_id``: static
    membership (KIP-345, ``group.instance.id``).  ``session_timeout_ms`` or
    ``heartbeat_interval_ms`` None: the client's default.  ``api_version`` (kafka-python
    only): skip its version probe; ``(2, 0)`` is needed on the mock cluster, whose answer
    to ApiVersions v3 kafka-python cannot decode.  ``extra``: more client options, in the
    client's own spelling, applied last.  The child exits by itself after ``max_lifetime``
    seconds.
    """
    if client not in CLIENTS:
        raise ValueError(f"client must be one of {CLIENTS}, got {client!r}")
    topics = [topic] if isinstance(topic, str) else list(topic)
    if group_protocol not in ("classic", "consumer"):
        raise ValueError(f"group_protocol must be 'classic' or 'consumer', got {group_protocol!r}")
    if group_protocol == "consumer" and client != "confluent":
        raise ValueError("only confluent members speak the KIP-848 consumer group protocol")
    assignors = [] if assignor is None else [assignor] if isinstance(assignor, str) else list(assignor)
    if group_protocol == "consumer":
        table = {"uniform": "uniform", "range": "range"}
        if len(assignors) > 1:
            raise ValueError("a KIP-848 member names one server-side assignor")
    else:
        table = _CONFLUENT_ASSIGNORS if client == "confluent" else _KAFKA_PYTHON_ASSIGNORS
    unknown = [a for a in assignors if a not in table]
    if unknown:
        raise ValueError(f"{client} members take assignors {sorted(table)}, not {unknown}")
    if api_version is not None and client != "kafka-python":
        raise ValueError("api_version is a kafka-python option")
    for host_port in bootstrap.split(","):
        if not host_port.startswith(("127.", "localhost:")):
            raise ValueError(f"members connect to loopback brokers only, not {host_port!r}")
    name = name or f"{client}-{next(_COUNTER)}"
    config = {
        "client": client,
        "name": name,
        "bootstrap": bootstrap,
        "topics": topics,
        "group_id": group_id,
        "assignors": [table[a] for a in assignors],
        "group_protocol": group_protocol,
        "instance_id": instance_id,
        "commit": commit,
        "auto_offset_reset": auto_offset_reset,
        "session_timeout_ms": session_timeout_ms,
        "heartbeat_interval_ms": heartbeat_interval_ms,
        "max_poll_interval_ms": max_poll_interval_ms,
        "api_version": list(api_version) if api_version is not None else None,
        "extra": dict(extra or {}),
        "max_lifetime": max_lifetime,
    }
    return Groupmate(name, config, start_timeout=start_timeout)


class Groupmates:
    """Starts members and ends every one of them (by pid) on :meth:`close`."""

    def __init__(self) -> None:
        self.members: list[Groupmate] = []

    def start(self, client: str, bootstrap: str, topic: str | Sequence[str], group_id: str,
              assignor: str | Sequence[str] | None = "range", **options: Any) -> Groupmate:
        """:func:`start_member` with the same arguments; the member is ended on close()."""
        member = start_member(client, bootstrap, topic, group_id, assignor, **options)
        self.members.append(member)
        return member

    def wait_for(self, condition: Callable[[], Any], timeout: float, what: str = "") -> Any:
        """Wait until ``condition()`` (over any members) is truthy; raise
        :class:`GroupmateTimeout` naming every member's state after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            result = condition()
            if result:
                return result
            if time.monotonic() >= deadline:
                states = "\n".join(m.describe(8) for m in self.members)
                raise GroupmateTimeout(f"no {what or 'condition'} within {timeout}s\n{states}")
            time.sleep(0.05)

    def close(self) -> None:
        for member in self.members:
            if member.alive:
                member.kill()
            else:
                member._finish()

    def __enter__(self) -> Groupmates:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Groupmate]:
        return iter(self.members)


# -- librdkafka mock cluster group timings --------------------------------------------


def set_mock_initial_rebalance_delay(cluster: Any, delay_ms: int) -> None:
    """The mock's group.initial.rebalance.delay.ms (see MockCluster); use it on a cluster
    of your own (``mock_cluster_factory``), not the shared one."""
    cluster.set_group_initial_rebalance_delay(delay_ms)


def set_mock_consumer_group_timeouts(cluster: Any, session_timeout_ms: int,
                                     heartbeat_interval_ms: int) -> None:
    """KIP-848 group timeouts on the mock (a killed KIP-848 member otherwise keeps its
    partitions for over 30 s)."""
    cluster.set_consumer_group_timeouts(session_timeout_ms, heartbeat_interval_ms)


def _counter() -> Iterator[int]:
    n = 0
    while True:
        n += 1
        yield n


_COUNTER = _counter()
_LIVE: weakref.WeakSet[Groupmate] = weakref.WeakSet()


@atexit.register
def _kill_all() -> None:
    # Members still running when the test process exits are ended by their own pid.
    for member in list(_LIVE):
        try:
            member.kill()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


if __name__ != "__main__":  # the child needs no pytest
    import pytest

    @pytest.fixture
    def groupmates() -> Iterator[Groupmates]:
        """A :class:`Groupmates`; every member started through it is killed at teardown."""
        with Groupmates() as mates:
            yield mates


# ---------------------------------------------------------------------------------------
# The child side: one peer consumer, reporting on stdout, obeying stdin
# ---------------------------------------------------------------------------------------


class _Child:
    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.topics: list[str] = config["topics"]
        self.assignment: set[tuple[str, int]] = set()
        self.commands: list[str] = []
        self.lock = threading.Lock()
        self.out_lock = threading.Lock()
        self.deadline = time.monotonic() + float(config["max_lifetime"])
        threading.Thread(target=self._stdin, daemon=True).start()

    def emit(self, kind: str, **fields: Any) -> None:
        fields["event"] = kind
        fields["t"] = time.time()
        line = json.dumps(fields) + "\n"
        with self.out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def _stdin(self) -> None:
        for raw in sys.stdin:
            with self.lock:
                self.commands.append(raw.strip())
        with self.lock:  # EOF: the parent is gone or done with us
            self.commands.append("close")

    def next_command(self) -> str | None:
        with self.lock:
            return self.commands.pop(0) if self.commands else None

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def changed(self, kind: str, partitions: Iterable[tuple[str, int]]) -> None:
        parts = sorted(set(partitions))
        if kind == "assigned":
            self.assignment |= set(parts)
        else:
            self.assignment -= set(parts)
        self.emit(kind, partitions=[list(tp) for tp in parts])
        self.emit("assignment", partitions=[list(tp) for tp in sorted(self.assignment)])


def _value(raw: bytes | None) -> str | None:
    return raw.decode("latin-1") if raw is not None else None


def _run_confluent(child: _Child) -> int:
    import confluent_kafka

    cfg = child.config
    conf: dict[str, Any] = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group_id"],
        "client.id": cfg["name"],
        "enable.auto.commit": False,
        "auto.offset.reset": cfg["auto_offset_reset"],
        "max.poll.interval.ms": cfg["max_poll_interval_ms"],
        "topic.metadata.refresh.interval.ms": 1000,
        "log_level": 4,
        "error_cb": lambda err: child.emit("error", error=str(err), fatal=bool(err.fatal())),
    }
    if cfg["group_protocol"] == "consumer":
        # KIP-848: the broker assigns and times the session; the classic options are refused.
        conf["group.protocol"] = "consumer"
        if cfg["assignors"]:
            conf["group.remote.assignor"] = cfg["assignors"][0]
    else:
        if cfg["assignors"]:
            conf["partition.assignment.strategy"] = ",".join(cfg["assignors"])
        if cfg["session_timeout_ms"] is not None:
            conf["session.timeout.ms"] = cfg["session_timeout_ms"]
        if cfg["heartbeat_interval_ms"] is not None:
            conf["heartbeat.interval.ms"] = cfg["heartbeat_interval_ms"]
    if cfg["instance_id"]:
        conf["group.instance.id"] = cfg["instance_id"]
    conf.update(cfg["extra"])
    consumer = confluent_kafka.Consumer(conf)

    def commit() -> None:
        try:
            result = consumer.commit(asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            # _NO_OFFSET: nothing consumed since the last commit.
            if exc.args[0].code() != confluent_kafka.KafkaError._NO_OFFSET:
                child.emit("commit_failed", error=str(exc))
            else:
                child.emit("committed", offsets=[])
            return
        child.emit("committed", offsets=[[tp.topic, tp.partition, tp.offset]
                                         for tp in result or [] if tp.offset >= 0])

    def on_assign(c: Any, parts: list[Any]) -> None:
        child.changed("assigned", [(tp.topic, tp.partition) for tp in parts])

    def on_revoke(c: Any, parts: list[Any]) -> None:
        if cfg["commit"]:
            commit()
        child.changed("revoked", [(tp.topic, tp.partition) for tp in parts])

    def on_lost(c: Any, parts: list[Any]) -> None:
        child.changed("lost", [(tp.topic, tp.partition) for tp in parts])

    consumer.subscribe(child.topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    child.emit("started", client="confluent", version=confluent_kafka.version()[0],
               librdkafka=confluent_kafka.libversion()[0])
    while not child.expired():
        command = child.next_command()
        if command == "close":
            break
        if command == "commit":
            commit()
        msgs = consumer.consume(num_messages=500, timeout=0.1)
        got = False
        for m in msgs:
            if m.error():
                err = m.error()
                if err.code() != confluent_kafka.KafkaError._PARTITION_EOF:
                    child.emit("error", error=str(err), fatal=bool(err.fatal()))
                continue
            got = True
            child.emit("consumed", topic=m.topic(), partition=m.partition(), offset=m.offset(),
                       value=_value(m.value()))
        if got and cfg["commit"]:
            commit()
    child.emit("closing")
    if cfg["commit"]:
        commit()
    consumer.close()  # leaves the group (LeaveGroup; not for static members, KIP-345)
    child.emit("closed")
    return 0


def _run_kafka_python(child: _Child) -> int:
    import kafka
    import kafka.coordinator.assignors.range as ranges
    import kafka.coordinator.assignors.roundrobin as roundrobin

    classes: dict[str, Any] = {
        "RangePartitionAssignor": ranges.RangePartitionAssignor,
        "RoundRobinPartitionAssignor": roundrobin.RoundRobinPartitionAssignor,
    }
    try:
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        classes["StickyPartitionAssignor"] = StickyPartitionAssignor
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        classes["CooperativeStickyAssignor"] = CooperativeStickyAssignor
    except ImportError:  # older kafka-python: the member fails when asked for one
        pass
    cfg = child.config
    options: dict[str, Any] = {
        "bootstrap_servers": cfg["bootstrap"].split(","),
        "group_id": cfg["group_id"],
        "client_id": cfg["name"],
        "enable_auto_commit": False,
        "auto_offset_reset": cfg["auto_offset_reset"],
        "max_poll_interval_ms": cfg["max_poll_interval_ms"],
        "metadata_max_age_ms": 1000,
    }
    if cfg["assignors"]:
        options["partition_assignment_strategy"] = [classes[a] for a in cfg["assignors"]]
    if cfg["session_timeout_ms"] is not None:
        options["session_timeout_ms"] = cfg["session_timeout_ms"]
    if cfg["heartbeat_interval_ms"] is not None:
        options["heartbeat_interval_ms"] = cfg["heartbeat_interval_ms"]
    if cfg["api_version"] is not None:
        options["api_version"] = tuple(cfg["api_version"])
    if cfg["instance_id"]:
        options["group_instance_id"] = cfg["instance_id"]
    options.update(cfg["extra"])
    if isinstance(options.get("api_version"), list):  # a tuple that went through JSON
        options["api_version"] = tuple(options["api_version"])
    consumer = kafka.KafkaConsumer(**options)

    def commit() -> None:
        try:
            positions = {tp: kafka.structs.OffsetAndMetadata(consumer.position(tp), "", -1)
                         for tp in consumer.assignment()}
            consumer.commit(positions)
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            child.emit("commit_failed", error=f"{type(exc).__name__}: {exc}")
            return
        child.emit("committed", offsets=[[tp.topic, tp.partition, om.offset]
                                         for tp, om in positions.items()])

    async def commit_on_revoke() -> None:
        # kafka-python 3 runs listeners on its I/O loop, where the blocking commit() is
        # refused ("Cannot block on net.run() from the IO thread"): awaited here instead,
        # as its own commit before a rebalance does.
        positions = consumer._subscription.all_consumed_offsets()
        try:
            await consumer._coordinator._commit_offsets_sync_async(positions)
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            child.emit("commit_failed", error=f"{type(exc).__name__}: {exc}")
            return
        child.emit("committed", offsets=[[tp.topic, tp.partition, om.offset]
                                         for tp, om in positions.items()])

    class Listener(kafka.AsyncConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            if cfg["commit"] and revoked:
                await commit_on_revoke()
            child.changed("revoked", [(tp.topic, tp.partition) for tp in revoked])

        async def on_partitions_assigned(self, assigned: Any) -> None:
            child.changed("assigned", [(tp.topic, tp.partition) for tp in assigned])

    consumer.subscribe(child.topics, listener=Listener())
    child.emit("started", client="kafka-python", version=kafka.__version__)
    while not child.expired():
        command = child.next_command()
        if command == "close":
            break
        if command == "commit":
            commit()
        try:
            batches = consumer.poll(timeout_ms=100, max_records=500)
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            child.emit("error", error=f"{type(exc).__name__}: {exc}", fatal=False)
            time.sleep(0.2)
            continue
        for records in batches.values():
            for r in records:
                child.emit("consumed", topic=r.topic, partition=r.partition, offset=r.offset,
                           value=_value(r.value))
        if batches and cfg["commit"]:
            commit()
    child.emit("closing")
    if cfg["commit"] and consumer.assignment():
        commit()
    consumer.close(autocommit=False)  # sends LeaveGroup
    child.emit("closed")
    return 0


def _child_main(config_json: str) -> int:
    config = json.loads(config_json)
    child = _Child(config)
    try:
        if config["client"] == "confluent":
            return _run_confluent(child)
        return _run_kafka_python(child)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, then re-raised
        child.emit("error", error=f"{type(exc).__name__}: {exc}", fatal=True)
        raise


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--child":
    sys.exit(_child_main(sys.argv[2]))
