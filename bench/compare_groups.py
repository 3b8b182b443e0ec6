"""kafkawire's consumer groups against confluent-kafka: group throughput and rebalance time.

One broker on loopback (started here: Tansu by default, ``--broker mock`` for librdkafka's
mock cluster), every group member a child process of its own (this script, run with
``--member``), so two members really run in parallel on the machine's cores.  Every round
runs every (client, case) once, the client order rotating from round to round, so drift of
a shared machine hits every client alike; the tables show medians over the rounds.  Run with:

    .venv/bin/python bench/compare_groups.py [--quick] [--broker tansu|mock] [--records N]
        [--rounds R] [--partitions P] [--session-timeout-ms MS] [--cases throughput,rebalance]
        [--markdown PATH]

Cases:

- ``throughput``: one topic of P partitions (default 4) is filled once, before the rounds,
  with N records (default 2,000,000 on Tansu, 100,000 on the mock, which keeps only about
  5 MB per partition) of 16-byte keys and 100-byte values, record i to partition i % P.
  Two members of a fresh group (one per round and client) subscribe at the same moment and
  read everything from the earliest offset.  Each member holds its partitions until both
  are assigned (kafkawire: pause() in the rebalance listener and no poll() until the start;
  confluent-kafka: assign([]) in on_assign, assign(partitions) at the start), then both
  start together; the rate is N over the time from that start to the last record, start
  offset lookups and first fetch included.  Why hold: the members of one group are not
  always assigned at the same instant (on Tansu a follower whose SyncGroup arrives before
  the leader's is answered about a second later), and a member that started alone would
  read its share alone, which is not the two-member throughput.  Why not pause() for
  confluent-kafka too: librdkafka resumes a paused partition only at its broker thread's
  next wakeup, up to a second later.  A member knows how many records each partition
  holds and stops counting there; a round whose counts or value bytes are off, or whose
  group rebalanced mid-read, is reported (and fails the run), never dropped.  kafkawire
  is measured with ``poll()`` (record objects, up to 10,000 a call) and ``poll_batch()``
  (columnar), confluent-kafka with ``consume(num_messages=...)`` (up to 10,000, never
  more than the records still due, so the last call does not wait out its timeout).
- ``rebalance``: a fresh topic of P partitions per round, produced to all the time (one
  record per partition every 5 ms, from this process); two members consume it; once both
  have records, one member commits and then closes (a graceful leave: LeaveGroup).  Measured
  from the close() call (in the leaving member) to the moment the surviving member is
  assigned every partition, and to its first record from a partition it newly got.  Both
  members poll one at a time here (confluent-kafka: poll(), which returns a message as
  soon as there is one; consume(n) would wait for n).

Both clients use the same group settings: the range assignor (eager), the same session
timeout and heartbeat interval, auto-commit off, fetch max 50 MiB, 1 MiB per partition,
OS-default socket buffers.  On the mock, kafkawire pins JoinGroup v5, SyncGroup v3 and
LeaveGroup v2 (see MOCK_OVERRIDES).  Tansu completes a JoinGroup only after half the
session timeout, so on Tansu a rebalance takes at least that long for every client.

A member that fails (an exception, a stall, a wrong assignment, a hang on close) is
reported with its reports, traceback and stderr, and makes the script exit with status 1
after the tables.  COMPARE_GROUPS_LOG=INFO shows kafkawire's group log in those reports,
COMPARE_GROUPS_RDKAFKA_DEBUG=cgrp,fetch librdkafka's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from typing import Any, Callable

from report import finish

KEY_SIZE = 16
VALUE_SIZE = 100
POOL = 4096  # distinct keys/values, cycled
MAX_RECORDS = 10_000  # records per poll()/consume() call
FETCH_MAX_BYTES = 50 * 1024 * 1024
PARTITION_FETCH_BYTES = 1024 * 1024
MEMBERS = 2

TARGET_THROUGHPUT = 1.5  # kafkawire group consumption >= 1.5x confluent-kafka's
TARGET_REBALANCE = 1.0  # kafkawire rebalance time <= confluent-kafka's

START_TIMEOUT = 30.0  # a member process must be up (imports, client built) within this
JOIN_TIMEOUT = 45.0  # both members assigned within this after "go"
IDLE_TIMEOUT = 20.0  # a member that is assigned but gets no record for this long has stalled
CLOSE_TIMEOUT = 30.0  # close() must return (and the process exit) within this
REBALANCE_TIMEOUT = 60.0  # the survivor must own everything and consume within this
PRODUCE_EVERY = 0.005  # the rebalance case's producer: one record per partition this often
MEMBER_LIFETIME = 900.0  # a member process ends itself after this, whatever happens

# (client, api) -> label
THROUGHPUT_CASES = {
    ("kafkawire", "poll"): "Consumer.poll() record objects, 10,000 a call",
    ("kafkawire", "poll_batch"): "Consumer.poll_batch() columnar",
    ("confluent", "consume"): "Consumer.consume(num_messages=10,000)",
}
REBALANCE_CASES = {
    ("kafkawire", "poll"): "Consumer.poll()",
    ("confluent", "poll"): "Consumer.poll() (one message a call: no batch wait)",
}
CLIENTS = ("kafkawire", "confluent")
# The mock closes the connection on JoinGroup v6 / SyncGroup v4.  It advertises LeaveGroup
# v0-v4 but answers v3+ without the members array (a truncated response) and leaves the
# member in the group, which then waits for the session timeout: v2 it is.
MOCK_OVERRIDES = {"JoinGroup": 5, "SyncGroup": 3, "LeaveGroup": 2}


def make_pool(seed: int = 1) -> tuple[list[bytes], list[bytes]]:
    # The pool of compare_e2e.py (the same bytes), written out so a member process needs
    # nothing from the other benchmarks.
    rng = random.Random(seed)
    keys, values = [], []
    for i in range(POOL):
        keys.append(rng.randbytes(KEY_SIZE // 2).hex().encode())
        head = b'{"id":%d,"user":"u%05d","event":"%s","pad":"' % (
            i, rng.randrange(50_000), rng.choice([b"view", b"click", b"buy"]))
        pad = rng.randbytes(VALUE_SIZE).hex().encode()[: VALUE_SIZE - len(head) - 2]
        values.append(head + pad + b'"}')
    return keys, values


# =======================================================================================
# The member: a child process running one consumer.  It reports JSON lines on stdout
# (each with "t", time.monotonic(): CLOCK_MONOTONIC is one clock for every process on
# Linux) and reads commands on stdin: "go" (subscribe), "close", "state".
# =======================================================================================


class _Member:
    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg
        self.topic: str = cfg["topic"]
        self.mode: str = cfg["mode"]  # "drain" (throughput) or "follow" (rebalance)
        self.expect: list[int] | None = cfg.get("expect")
        self.commands: queue.Queue[str] = queue.Queue()
        self.out_lock = threading.Lock()
        self.assignment: set[int] = set()
        self.epoch = 0  # assignment changes so far
        self.first_seen: set[int] = set()  # partitions with a record in this epoch
        self.counts: dict[int, int] = {}
        self.nbytes = 0
        self.got = 0
        self.timeline: list[tuple[float, int]] = []
        self.done = False
        # drain mode: partitions are paused as they are assigned, until "start" comes.
        self.hold = self.mode == "drain"
        self.deadline = time.monotonic() + MEMBER_LIFETIME
        threading.Thread(target=self._stdin, daemon=True).start()

    def _stdin(self) -> None:
        for raw in sys.stdin:
            self.commands.put(raw.strip())
        self.commands.put("close")  # EOF: the parent is gone

    def emit(self, kind: str, **fields: Any) -> None:
        fields["ev"] = kind
        fields.setdefault("t", time.monotonic())
        line = json.dumps(fields) + "\n"
        with self.out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def command(self, timeout: float = 0.0) -> str | None:
        """The next command, waiting up to ``timeout`` seconds for one (None if none)."""
        try:
            return self.commands.get(timeout=timeout) if timeout > 0 else self.commands.get_nowait()
        except queue.Empty:
            return None

    # -- assignment changes (from either client's callbacks) -----------------------------

    def assigned(self, parts: list[int]) -> None:
        now = time.monotonic()
        self.assignment |= set(parts)
        self.epoch += 1
        self.first_seen = set()
        self.emit("assigned", t=now, epoch=self.epoch, added=sorted(parts),
                  partitions=sorted(self.assignment))

    def revoked(self, parts: list[int], kind: str = "revoked") -> None:
        self.assignment -= set(parts)
        self.emit(kind, removed=sorted(parts), partitions=sorted(self.assignment))

    # -- bookkeeping after each poll --------------------------------------------------------

    def seen(self, partition: int, offset: int) -> None:
        """(follow mode) A record from ``partition``: report the first one of each epoch."""
        if partition not in self.first_seen:
            self.first_seen.add(partition)
            self.emit("first", epoch=self.epoch, partition=partition, offset=offset)

    def remaining(self) -> int:
        if self.expect is None or not self.assignment:
            return MAX_RECORDS
        return sum(max(0, self.expect[p] - self.counts.get(p, 0)) for p in self.assignment)

    def check_done(self, now: float) -> None:
        if self.mode == "drain" and not self.done and self.assignment and self.remaining() == 0:
            self.done = True
            self.emit("done", t=now, got=self.got, nbytes=self.nbytes, counts=self.counts,
                      timeline=self.timeline, partitions=sorted(self.assignment))


def _member_kafkawire(m: _Member) -> None:
    from kafkawire.client.consumer import Consumer
    from kafkawire.client.group import ConsumerRebalanceListener

    cfg = m.cfg
    options: dict[str, Any] = dict(
        bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"], client_id=cfg["name"],
        auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=cfg["session_ms"], heartbeat_interval_ms=cfg["heartbeat_ms"],
        partition_assignment_strategy=("range",),
        fetch_max_bytes=FETCH_MAX_BYTES, max_partition_fetch_bytes=PARTITION_FETCH_BYTES,
        # The OS defaults, as the peers have (see compare_e2e.py).
        send_buffer_bytes=-1, receive_buffer_bytes=-1)
    if cfg.get("overrides"):
        options["api_version_overrides"] = cfg["overrides"]
    c = Consumer(**options)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions: list[Any]) -> None:
            m.revoked([tp.partition for tp in partitions])

        def on_partitions_assigned(self, partitions: list[Any]) -> None:
            if m.hold:
                c.pause(partitions)  # before poll() sends any fetch for them
            m.assigned([tp.partition for tp in partitions])

        def on_partitions_lost(self, partitions: list[Any]) -> None:
            m.revoked([tp.partition for tp in partitions], "lost")

    m.emit("ready", client="kafkawire")
    if m.commands.get(timeout=START_TIMEOUT * 2) != "go":
        return
    c.subscribe([m.topic], listener=Listener())
    columnar = cfg["api"] == "poll_batch"
    follow = m.mode == "follow"
    last = time.monotonic()
    idle = False  # holding its partitions: wait for a command instead of polling
    try:
        while time.monotonic() < m.deadline:
            cmd = m.command(0.1 if idle else 0.0)
            if cmd == "close":
                break
            if cmd == "state":
                m.emit("state", state=_jsonable(c.group_state()))
            if cmd == "commit":
                c.commit()
                m.emit("committed")
            if cmd == "start":
                m.hold = False
                last = time.monotonic()
                c.resume(c.assignment())
                m.emit("started", t=last)
            if m.hold and m.assignment:
                # Assigned (and paused): no poll until "start", so the start offsets are
                # looked up after it, as confluent-kafka does once it is given its
                # partitions; unless the group wants this member to rejoin (the other
                # member joined a generation later), which only poll() does.
                st = c.group_state()
                idle = st.get("state") == "stable" and not st.get("rejoin_needed")
                if idle:
                    continue
            idle = False
            got_any = False
            if columnar:
                batches = c.poll_batch(0.1 if m.done or m.hold or follow else 1.0)
                now = time.monotonic()
                if batches:
                    got_any = True
                    for b in batches:
                        k = len(b)
                        m.counts[b.partition] = m.counts.get(b.partition, 0) + k
                        m.nbytes += int(b.columns.value_lengths.sum())
                        m.got += k
                    m.timeline.append((now, m.got))
            else:
                records = c.poll(0.1 if m.done or m.hold or follow else 1.0, MAX_RECORDS)
                now = time.monotonic()
                if records:
                    got_any = True
                    counts = m.counts
                    nbytes = 0
                    if follow:
                        for r in records:
                            m.seen(r.partition, r.offset)
                    for r in records:
                        nbytes += len(r.value)
                        counts[r.partition] = counts.get(r.partition, 0) + 1
                    m.nbytes += nbytes
                    m.got += len(records)
                    m.timeline.append((now, m.got))
            if got_any:
                last = now
                m.check_done(now)
            elif m.assignment and not (m.done or m.hold or follow) and now - last > IDLE_TIMEOUT:
                raise RuntimeError(f"no record for {IDLE_TIMEOUT:.0f}s while assigned "
                                   f"{sorted(m.assignment)} with {m.remaining():,} records due; "
                                   f"group_state() = {_jsonable(c.group_state())}")
            elif not m.assignment or m.hold:
                last = now
        m.emit("closing", got=m.got, counts=m.counts, nbytes=m.nbytes)
        c.close(CLOSE_TIMEOUT)
        m.emit("closed", got=m.got, counts=m.counts, nbytes=m.nbytes)
    except BaseException:
        try:
            m.emit("state", state=_jsonable(c.group_state()))
        except Exception:  # noqa: BLE001 - best effort, the error below matters
            pass
        raise


def _member_confluent(m: _Member) -> None:
    import confluent_kafka

    cfg = m.cfg
    debug = os.environ.get("COMPARE_GROUPS_RDKAFKA_DEBUG")  # e.g. "cgrp,fetch": librdkafka's logs
    c = confluent_kafka.Consumer({
        **({"debug": debug} if debug else {}),
        "bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"], "client.id": cfg["name"],
        "partition.assignment.strategy": "range", "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": cfg["session_ms"], "heartbeat.interval.ms": cfg["heartbeat_ms"],
        "fetch.max.bytes": FETCH_MAX_BYTES, "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
        # As in compare_e2e.py: librdkafka's default pre-fetch queue, and a 10 ms backoff
        # instead of 1 s after Tansu's oversized fetch answers overshoot that queue.
        "queued.min.messages": 100_000, "queued.max.messages.kbytes": 65_536,
        "fetch.queue.backoff.ms": 10,
        "enable.partition.eof": False, "log_level": 7 if debug else 3,
        "error_cb": lambda err: m.emit("client_error", error=str(err), fatal=bool(err.fatal())),
    })

    held: list[Any] = []

    def on_assign(consumer: Any, parts: list[Any]) -> None:
        if m.hold:
            held.extend(parts)
            consumer.assign([])  # (then confluent-kafka does not assign them itself)
        m.assigned([tp.partition for tp in parts])

    def on_revoke(_c: Any, parts: list[Any]) -> None:
        gone = {tp.partition for tp in parts}
        held[:] = [tp for tp in held if tp.partition not in gone]
        m.revoked(sorted(gone))

    def on_lost(_c: Any, parts: list[Any]) -> None:
        gone = {tp.partition for tp in parts}
        held[:] = [tp for tp in held if tp.partition not in gone]
        m.revoked(sorted(gone), "lost")

    m.emit("ready", client="confluent", version=confluent_kafka.version()[0],
           librdkafka=confluent_kafka.libversion()[0])
    if m.commands.get(timeout=START_TIMEOUT * 2) != "go":
        return
    c.subscribe([m.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    follow = m.mode == "follow"
    last = time.monotonic()
    while time.monotonic() < m.deadline:
        cmd = m.command()
        if cmd == "close":
            break
        if cmd == "state":
            m.emit("state", state={"assignment": sorted(m.assignment)})
        if cmd == "commit":
            try:
                c.commit(asynchronous=False)
            except confluent_kafka.KafkaException as exc:
                if exc.args[0].code() != confluent_kafka.KafkaError._NO_OFFSET:
                    raise
            m.emit("committed")
        if cmd == "start":
            m.hold = False
            last = time.monotonic()
            c.assign(held)
            m.emit("started", t=last)
        if follow:
            # poll(): one message, returned as soon as there is one.  consume(n) would wait
            # for n messages (or its timeout) and hide when the first one came.
            msg = c.poll(0.1)
            msgs = [msg] if msg is not None else []
        else:
            # Never ask for more than is still due: consume(n) waits for n messages (or the
            # timeout), which at the end would time the wait, not the client.
            msgs = c.consume(min(MAX_RECORDS, max(1, m.remaining())), 0.1 if m.done or m.hold else 1.0)
        now = time.monotonic()
        if msgs:
            counts = m.counts
            nbytes = got = 0
            for msg in msgs:
                if msg.error():
                    raise RuntimeError(f"consume: {msg.error()}")
                p = msg.partition()
                if follow:
                    m.seen(p, msg.offset())
                nbytes += len(msg.value())
                counts[p] = counts.get(p, 0) + 1
                got += 1
            m.nbytes += nbytes
            m.got += got
            m.timeline.append((now, m.got))
            last = now
            m.check_done(now)
        elif m.assignment and not (m.done or m.hold or follow) and now - last > IDLE_TIMEOUT:
            raise RuntimeError(f"no record for {IDLE_TIMEOUT:.0f}s while assigned "
                               f"{sorted(m.assignment)} with {m.remaining():,} records due")
        elif not m.assignment or m.hold:
            last = now
    m.emit("closing", got=m.got, counts=m.counts, nbytes=m.nbytes)
    c.close()  # leaves the group
    m.emit("closed", got=m.got, counts=m.counts, nbytes=m.nbytes)


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=repr))


def member_main(config_json: str) -> int:
    import logging

    # COMPARE_GROUPS_LOG=INFO (or DEBUG) shows the clients' group logs in a failing
    # member's report.
    logging.basicConfig(level=os.environ.get("COMPARE_GROUPS_LOG", "WARNING").upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg = json.loads(config_json)
    m = _Member(cfg)
    try:
        if cfg["client"] == "kafkawire":
            _member_kafkawire(m)
        else:
            _member_confluent(m)
        return 0
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then the exit status
        m.emit("error", error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
        return 2


# =======================================================================================
# The parent side
# =======================================================================================


class MemberFailed(RuntimeError):
    """A member process failed, stalled, hung or saw something it should not have."""


class Member:
    """Handle on one member process: its reports, and commands to it."""

    def __init__(self, name: str, cfg: dict[str, Any]):
        self.name = name
        self.cfg = dict(cfg, name=name)
        self.cond = threading.Condition()
        self.events: list[dict[str, Any]] = []
        self.eof = False
        self.stderr = tempfile.TemporaryFile(prefix=f"compare-groups-{name}-")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--member", json.dumps(self.cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            start_new_session=True)  # Ctrl-C reaches the parent only, which ends us by pid
        _LIVE.append(self)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                event = {"ev": "garbage", "line": raw.decode("utf-8", "replace")}
            with self.cond:
                self.events.append(event)
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def send(self, command: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(command.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self.cond:
            return [e for e in self.events if e.get("ev") == kind]

    def last(self, kind: str) -> dict[str, Any] | None:
        found = self.of(kind)
        return found[-1] if found else None

    def current(self) -> set[int]:
        """The partitions the member owns now, as last reported."""
        with self.cond:
            changes = [e for e in self.events if e.get("ev") in ("assigned", "revoked", "lost")]
        return set(changes[-1]["partitions"]) if changes else set()

    def error(self) -> str | None:
        err = self.last("error")
        if err:
            return err["error"]
        fatal = [e for e in self.of("client_error") if e.get("fatal")]
        if fatal:
            return f"fatal client error: {fatal[0]['error']}"
        return None

    def stderr_tail(self, limit: int = 3000) -> str:
        self.stderr.flush()
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - limit))
        return self.stderr.read().decode("utf-8", "replace")

    def describe(self) -> str:
        with self.cond:
            tail = [e for e in self.events if e.get("ev") not in ("done",)][-12:]
        status = "running" if self.proc.poll() is None else f"exited with {self.proc.returncode}"
        err = self.last("error")
        trace = f"\n    traceback:\n{err['trace']}" if err and err.get("trace") else ""
        lines = "\n      ".join(json.dumps(e)[:600] for e in tail) or "(none)"
        return (f"  {self.name} ({self.cfg['client']}, pid {self.proc.pid}, {status}); last reports:\n"
                f"      {lines}{trace}\n    stderr ends with:\n{self.stderr_tail() or '(empty)'}")

    def wait(self, condition: Callable[[], Any], timeout: float, what: str,
             others: list[Member] = ()) -> Any:
        """Wait until ``condition()`` holds; MemberFailed if this member (or one of
        ``others``) reports an error or exits first, or after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        everyone = [self, *others]
        with self.cond:
            while True:
                result = condition()
                if result:
                    return result
                for mb in everyone:
                    if mb.error():
                        raise MemberFailed(f"{mb.name} failed while waiting for {what}: {mb.error()}")
                    if mb.proc.poll() is not None and mb.eof:
                        raise MemberFailed(f"{mb.name} exited ({mb.proc.returncode}) while waiting for {what}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    for mb in everyone:  # ask for their group state, for the report
                        mb.send("state")
                    until = time.monotonic() + 1.5
                    while time.monotonic() < until:
                        self.cond.wait(0.1)
                    raise MemberFailed(f"no {what} within {timeout:.0f}s")
                self.cond.wait(min(remaining, 0.1))

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        if self.proc.poll() is None:
            self.send("close")
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise MemberFailed(f"{self.name} did not close within {timeout:.0f}s; killed it") from None
        if self.error():
            raise MemberFailed(f"{self.name} failed: {self.error()}")
        if self.proc.returncode != 0:
            raise MemberFailed(f"{self.name} exited with status {self.proc.returncode}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)


_LIVE: list[Member] = []


def end_members(members: list[Member]) -> None:
    for mb in members:
        mb.kill()
        try:
            _LIVE.remove(mb)
        except ValueError:
            pass


def start_members(cfg: dict[str, Any], tag: str) -> list[Member]:
    members = [Member(f"{tag}-{chr(ord('a') + i)}", cfg) for i in range(MEMBERS)]
    try:
        for mb in members:
            mb.wait(lambda mb=mb: mb.last("ready"), START_TIMEOUT, "start", others=members)
    except BaseException:
        end_members(members)
        raise
    return members


class Outcome:
    __slots__ = ("value", "extra", "problem", "detail")

    def __init__(self, value: float, extra: dict[str, float] | None = None,
                 problem: str | None = None, detail: str = ""):
        self.value = value  # records/s (throughput) or seconds (rebalance)
        self.extra = extra or {}
        self.problem = problem
        self.detail = detail


def failed(exc: BaseException, members: list[Member]) -> Outcome:
    detail = "\n".join(mb.describe() for mb in members)
    return Outcome(float("nan"), problem=f"{type(exc).__name__}: {exc}"[:300], detail=detail)


# -- the broker -----------------------------------------------------------------------------


class Broker:
    """Tansu (started here, CreateTopics through kafkawire) or librdkafka's mock cluster."""

    def __init__(self, kind: str):
        self.kind = kind
        self.overrides = MOCK_OVERRIDES if kind == "mock" else None
        self.pid: int | None = None
        if kind == "tansu":
            from kafkawire.testing import TansuBroker

            self._broker = TansuBroker().start()
            self.bootstrap = self._broker.bootstrap
            self.pid = self._broker.pid
            self.name = f"Tansu (pid {self.pid}, in-memory storage)"
            from kafkawire.client.cluster import Cluster
            from kafkawire.client.config import Config

            self._cluster = Cluster(Config.client(bootstrap_servers=self.bootstrap))
            self._cluster.bootstrap(15)
        else:
            from kafkawire.testing.mock import MockCluster

            self._broker = MockCluster(1)
            self.bootstrap = self._broker.bootstrap
            self.name = "librdkafka's mock cluster (1 broker, in this process)"

    def create(self, topic: str, partitions: int) -> None:
        if self.kind == "mock":
            self._broker.create_topic(topic, partitions)
            return
        from kafkawire.protocol import apis

        create = apis.get("CreateTopics")
        req = create.Request(topics=[create.Request.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=1, assignments=[],
            configs=[])], timeout_ms=15000)
        code = self._cluster.request(None, create, req, 15).topics[0].error_code
        if code not in (0, 36):  # 36 TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"CreateTopics {topic}: error code {code}")
        if self._cluster.partitions_for(topic, 15) != list(range(partitions)):
            raise RuntimeError(f"{topic} does not have {partitions} partitions")

    def delete(self, topics: list[str]) -> None:
        if self.kind == "mock" or not topics:
            return
        from kafkawire.protocol import apis

        delete = apis.get("DeleteTopics")
        try:
            req = delete.Request(topic_names=list(topics), timeout_ms=15000, topics=[
                delete.Request.DeleteTopicState(name=t, topic_id=uuid.UUID(int=0)) for t in topics])
            self._cluster.request(None, delete, req, 15)
        except Exception as exc:  # noqa: BLE001 - freeing broker memory is best effort
            print(f"  (DeleteTopics failed: {exc})", file=sys.stderr)

    def close(self) -> None:
        if self.kind == "tansu":
            self._cluster.close()
            self._broker.stop()
        else:
            self._broker.close()


def fill(broker: Broker, topic: str, n: int, partitions: int) -> list[int]:
    """Produce n records, record i to partition i % partitions; the count per partition."""
    from kafkawire.client.producer import Producer

    keys, values = make_pool()
    per = [[(keys[i % POOL], values[i % POOL]) for i in range(p, n, partitions)]
           for p in range(partitions)]
    producer = Producer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5,
                        batch_size=1_000_000, max_request_size=1024 * 1024)
    try:
        started = time.monotonic()
        futures = [producer.send_batch(topic, p, recs) for p, recs in enumerate(per)]
        producer.flush(300)
        acked = [sum(md.count for md in f.result(0)) for f in futures]
    finally:
        producer.close(30)
    expect = [len(recs) for recs in per]
    if acked != expect:
        raise RuntimeError(f"filling {topic}: acknowledged {acked}, sent {expect}")
    print(f"filled {topic}: {n:,} records in {partitions} partitions in "
          f"{time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
    return expect


class TrickleProducer:
    """One record per partition every PRODUCE_EVERY seconds, on a thread, until stopped."""

    def __init__(self, broker: Broker, topic: str, partitions: int):
        from kafkawire.client.producer import Producer

        self.producer = Producer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=1)
        self.producer.partitions_for(topic)
        self.topic, self.partitions = topic, partitions
        self.stop_event = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        _keys, values = make_pool()
        try:
            while not self.stop_event.wait(PRODUCE_EVERY):
                for p in range(self.partitions):
                    self.producer.send(self.topic, values[self.sent % POOL], partition=p)
                    self.sent += 1
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(10)
        self.producer.close(10)
        if self.error is not None:
            raise RuntimeError(f"the rebalance case's producer failed: {self.error!r}")


# -- the cases --------------------------------------------------------------------------------


def member_config(args: argparse.Namespace, broker: Broker, client: str, api: str, topic: str,
                  mode: str, expect: list[int] | None) -> dict[str, Any]:
    return {
        "client": client, "api": api, "mode": mode, "bootstrap": broker.bootstrap,
        "topic": topic, "group": f"bench-groups-{client}-{api}-{uuid.uuid4().hex[:8]}",
        "session_ms": args.session_timeout_ms, "heartbeat_ms": args.heartbeat_interval_ms,
        "expect": expect, "overrides": broker.overrides if client == "kafkawire" else None,
    }


def count_at(timeline: list[list[float]], t: float) -> int:
    """Records a member had consumed by time t (its timeline: [time, cumulative] per poll)."""
    got = 0
    for when, cumulative in timeline:
        if when > t:
            break
        got = cumulative
    return got


def run_throughput(args: argparse.Namespace, broker: Broker, client: str, api: str,
                   topic: str, expect: list[int]) -> Outcome:
    n = sum(expect)
    every = set(range(len(expect)))
    cfg = member_config(args, broker, client, api, topic, "drain", expect)
    members: list[Member] = []
    try:
        members = start_members(cfg, f"{client}-{api}")
        a, b = members
        t_go = time.monotonic()
        for mb in members:
            mb.send("go")
        # Both assigned, between them every partition, each partition once.
        def both_assigned() -> bool:
            parts = [mb.current() for mb in members]
            return all(parts) and set().union(*parts) == every and sum(map(len, parts)) == len(every)
        a.wait(both_assigned, JOIN_TIMEOUT, "assignment of every partition to both members", [b])
        # Both hold their partitions paused until now: they start reading together.
        for mb in members:
            mb.send("start")
        a.wait(lambda: all(mb.last("started") for mb in members), 15, "both members to start", [b])
        budget = 60 + n / 20_000  # at 20k records/s something is badly wrong
        a.wait(lambda: all(mb.last("done") for mb in members), budget,
               f"all {n:,} records consumed", [b])
        dones = [mb.last("done") for mb in members]
        t0 = min(mb.last("started")["t"] for mb in members)
        t1 = max(d["t"] for d in dones)
        before = sum(count_at(d["timeline"], t0) for d in dones)  # 0: paused until t0
        first_assigned = [[e["t"] for e in mb.of("assigned") if e["t"] <= mb.last("started")["t"]][-1]
                          for mb in members]  # the assignment each member started with
        skew = max(first_assigned) - min(first_assigned)
        first_record = min(d["timeline"][0][0] for d in dones) - t0
        for mb in members:
            mb.close()
        closed = [mb.last("closed") for mb in members]
        counts = [0] * len(expect)
        for c in closed:
            for p, k in c["counts"].items():
                counts[int(p)] += k
        nbytes = sum(c["nbytes"] for c in closed)
        problem = None
        # A rebalance while the members held their partitions is harmless; one after the
        # start would have them read some partitions twice (or not at all).
        moves = [[e["ev"] for e in mb.events if e.get("ev") in ("assigned", "revoked", "lost")
                  and mb.last("started")["t"] < e["t"] <= mb.last("done")["t"]] for mb in members]
        if any(moves):
            problem = f"the group rebalanced while reading (assignment changes per member: {moves})"
        elif counts != expect:
            problem = f"per-partition counts {counts} != {expect}"
        elif nbytes != n * VALUE_SIZE:
            problem = f"value bytes {nbytes:,} != {n * VALUE_SIZE:,}"
        rate = (n - before) / (t1 - t0) if t1 > t0 else float("nan")
        detail = "\n".join(mb.describe() for mb in members) if problem else ""
        return Outcome(rate, {"seconds": t1 - t0, "skew": skew, "before": before,
                              "join": max(first_assigned) - t_go, "first": first_record},
                       problem, detail)
    except MemberFailed as exc:
        return failed(exc, members)
    finally:
        end_members(members)


def run_rebalance(args: argparse.Namespace, broker: Broker, client: str, api: str) -> Outcome:
    parts = args.partitions
    every = set(range(parts))
    topic = f"groups-rebalance-{client}-{uuid.uuid4().hex[:8]}"
    broker.create(topic, parts)
    producer = TrickleProducer(broker, topic, parts)
    cfg = member_config(args, broker, client, api, topic, "follow", None)
    members: list[Member] = []
    try:
        members = start_members(cfg, f"{client}-rebalance")
        a, b = members
        for mb in members:
            mb.send("go")

        def consuming() -> bool:
            for mb in members:
                asg, now = mb.last("assigned"), mb.current()
                if not asg or not now or set(asg["partitions"]) != now:
                    return False
                firsts = {e["partition"] for e in mb.of("first") if e["epoch"] == asg["epoch"]}
                if firsts != now:
                    return False
            return a.current() | b.current() == every and not a.current() & b.current()
        a.wait(consuming, JOIN_TIMEOUT, "both members assigned and consuming every partition", [b])
        time.sleep(1.0)  # a second of steady consumption
        a.wait(consuming, JOIN_TIMEOUT, "both members assigned and consuming every partition", [b])
        before = a.current()
        b.send("commit")
        b.wait(lambda: b.last("committed"), 15, "the leaving member's commit")
        b.send("close")
        b.wait(lambda: b.last("closing"), 15, "the leaving member's close() call")
        t_close = b.last("closing")["t"]

        def taken_over() -> dict[str, Any] | None:
            for e in a.of("assigned"):
                if e["t"] >= t_close and set(e["partitions"]) == every:
                    return e
            return None
        asg = a.wait(taken_over, REBALANCE_TIMEOUT, "the survivor assigned every partition")
        # When the survivor learnt of the rebalance: its eager revoke (before it rejoins).
        revokes = [e for e in a.of("revoked") if e["t"] >= t_close]
        t_revoked = revokes[0]["t"] - t_close if revokes else float("nan")
        new = every - before

        def first_new() -> dict[str, Any] | None:
            found = [e for e in a.of("first") if e["epoch"] == asg["epoch"] and e["partition"] in new]
            return min(found, key=lambda e: e["t"]) if found else None
        first = a.wait(first_new, REBALANCE_TIMEOUT, "the survivor's first record from a new partition")
        b.close()
        closed = b.last("closed")
        a.close()
        producer.stop()
        return Outcome(first["t"] - t_close, {"assigned": asg["t"] - t_close, "revoked": t_revoked,
                                              "close": closed["t"] - t_close})
    except MemberFailed as exc:
        return failed(exc, members)
    finally:
        end_members(members)
        if not producer.stop_event.is_set():
            try:
                producer.stop()
            except Exception:  # noqa: BLE001 - the case's outcome is what matters
                pass
        broker.delete([topic])


# -- the run ------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[tuple[str, str, str], list[Outcome]]:
    results: dict[tuple[str, str, str], list[Outcome]] = {}
    fails: dict[tuple[str, str, str], int] = {}
    broker = Broker(args.broker)
    args.broker_name = broker.name
    print(f"broker: {broker.name} on {broker.bootstrap}", file=sys.stderr, flush=True)
    try:
        expect: list[int] = []
        topic = f"groups-throughput-{uuid.uuid4().hex[:8]}"
        if "throughput" in args.cases:
            broker.create(topic, args.partitions)
            expect = fill(broker, topic, args.records, args.partitions)
        for r in range(args.rounds):
            order = list(CLIENTS[r % len(CLIENTS):] + CLIENTS[: r % len(CLIENTS)])
            print(f"round {r + 1}/{args.rounds}: {', '.join(order)}", file=sys.stderr, flush=True)
            for case in args.cases:
                table = THROUGHPUT_CASES if case == "throughput" else REBALANCE_CASES
                for client in order:
                    for (cl, api) in table:
                        if cl != client:
                            continue
                        key = (case, client, api)
                        if fails.get(key, 0) >= 2:
                            print(f"  {case:>10} {client:>9} {api:<10} skipped (failed twice)",
                                  file=sys.stderr, flush=True)
                            continue
                        if case == "throughput":
                            out = run_throughput(args, broker, client, api, topic, expect)
                        else:
                            out = run_rebalance(args, broker, client, api)
                        results.setdefault(key, []).append(out)
                        if out.problem:
                            fails[key] = fails.get(key, 0) + 1
                        show(case, client, api, out)
    finally:
        broker.close()
    return results


def show(case: str, client: str, api: str, out: Outcome) -> None:
    if case == "throughput":
        what = (f"{out.value:>12,.0f} rec/s  ({out.extra['seconds']:.2f}s; first record after "
                f"{out.extra['first'] * 1000:.0f} ms; both assigned {out.extra['join']:.2f}s after "
                f"subscribe, {out.extra['skew'] * 1000:.0f} ms apart)"
                if out.value == out.value else "")
    else:
        what = (f"first new record {out.value:5.2f}s after close(), all assigned "
                f"{out.extra['assigned']:5.2f}s, revoked {out.extra['revoked']:5.2f}s, "
                f"close() took {out.extra['close'] * 1000:3.0f} ms"
                if out.value == out.value else "")
    note = f"  <-- {out.problem}" if out.problem else ""
    print(f"  {case:>10} {client:>9} {api:<10} {what}{note}", file=sys.stderr, flush=True)
    if out.problem and out.detail:
        print(out.detail, file=sys.stderr, flush=True)


def values(outs: list[Outcome] | None, field: str | None = None) -> list[float]:
    vals = [o.value if field is None else o.extra.get(field) for o in outs or () if not o.problem]
    return [v for v in vals if v is not None and v == v]


def med(outs: list[Outcome] | None, field: str | None = None) -> float | None:
    vals = values(outs, field)
    return statistics.median(vals) if vals else None


def spread(outs: list[Outcome] | None, fmt: str, field: str | None = None) -> str:
    vals = values(outs, field)
    return f"{fmt.format(min(vals))} - {fmt.format(max(vals))}" if vals else ""


def report(results: dict, args: argparse.Namespace) -> list[str]:
    import confluent_kafka

    from kafkawire import codec

    out = [
        "# kafkawire consumer-group benchmark",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs; {args.broker_name}; kafkawire codec {codec.IMPLEMENTATION}; "
        f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]}); "
        f"median of {args.rounds} interleaved rounds. Every member is a process of its own; "
        f"group settings shared by both clients: range assignor (eager), session timeout "
        f"{args.session_timeout_ms} ms, heartbeat {args.heartbeat_interval_ms} ms, auto-commit off, "
        f"fetch max 50 MiB, 1 MiB per partition"
        + (", kafkawire pinned to JoinGroup v5 / SyncGroup v3 / LeaveGroup v2 (the mock's limits)" if args.broker == "mock" else "")
        + ".",
        "",
    ]
    problems: list[str] = []

    def note(outs: list[Outcome] | None) -> str:
        bad = [o.problem for o in outs or () if o.problem]
        if not outs:
            return "not run"
        if bad:
            return f"{len(bad)} of {len(outs)} rounds failed: {sorted(set(bad))[0]}"
        return ""

    if "throughput" in args.cases:
        out += [
            f"## Group consumption: two members, {args.records:,} records in {args.partitions} partitions",
            "",
            f"{KEY_SIZE}-byte keys, {VALUE_SIZE}-byte values, read from the earliest offset by a fresh "
            f"group. Each member holds its partitions until both are assigned (kafkawire: paused, "
            f"no poll; confluent-kafka: assign([]) in on_assign), then both start together; "
            f"records/s from that start to the last record, which includes looking up the start "
            f"offsets (OffsetFetch, ListOffsets) and the first fetch (the start -> first record "
            f"column). Subscribe -> both assigned: the join, for context (Tansu answers a JoinGroup "
            f"after half the session timeout).",
            "",
            "| client | API | records/s | min - max | MB/s (values) | seconds | start -> first record (ms) | subscribe -> both assigned (s) | note |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        rates = {}
        for (client, api), label in THROUGHPUT_CASES.items():
            outs = results.get(("throughput", client, api))
            r = med(outs)
            rates[client, api] = r
            secs, first, join = med(outs, "seconds"), med(outs, "first"), med(outs, "join")
            out.append(f"| {client} | `{label}` | {'n/a' if r is None else f'{r:,.0f}'} | "
                       f"{spread(outs, '{:,.0f}')} | "
                       f"{'' if r is None else f'{r * VALUE_SIZE / 1e6:.1f}'} | "
                       f"{'' if secs is None else f'{secs:.2f}'} | "
                       f"{'' if first is None else f'{first * 1000:.0f}'} | "
                       f"{'' if join is None else f'{join:.2f}'} | {note(outs)} |")
            if note(outs) and note(outs) != "not run":
                problems.append(f"throughput {client} {api}: {note(outs)}")
        ck = rates.get(("confluent", "consume"))
        out += ["", "| target | kafkawire | confluent-kafka | ratio | target | |", "|---|---|---|---|---|---|"]
        for api in ("poll", "poll_batch"):
            kw = rates.get(("kafkawire", api))
            if kw and ck:
                ratio = kw / ck
                out.append(f"| group consumption, `{api}()` | {kw:,.0f}/s | {ck:,.0f}/s | {ratio:.2f}x | "
                           f">= {TARGET_THROUGHPUT:g}x | {'PASS' if ratio >= TARGET_THROUGHPUT else 'MISS'} |")
            else:
                out.append(f"| group consumption, `{api}()` | n/a | n/a | n/a | >= {TARGET_THROUGHPUT:g}x | n/a |")
        out.append("")
    if "rebalance" in args.cases:
        out += [
            f"## Rebalance: one of two members leaves ({args.partitions} partitions, produced to all along)",
            "",
            "Seconds from the leaving member's close() call (after its commit) to the survivor's first "
            "record from a partition it newly got (the leaver's committed offset onwards); on the way: "
            "the survivor revoking its partitions (it learnt of the rebalance from a heartbeat: up to "
            "one heartbeat interval) and being assigned every partition (the rejoin). The leaver's "
            "close() time for reference.",
            "",
            "| client | API | close -> first new record (s) | min - max | close -> survivor revokes (s) | close -> all assigned (s) | close() took (ms) | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        times = {}
        for (client, api), label in REBALANCE_CASES.items():
            outs = results.get(("rebalance", client, api))
            t = med(outs)
            times[client] = t
            asg, cl, rev = med(outs, "assigned"), med(outs, "close"), med(outs, "revoked")
            out.append(f"| {client} | `{label}` | {'n/a' if t is None else f'{t:.2f}'} | "
                       f"{spread(outs, '{:.2f}')} | {'' if rev is None else f'{rev:.2f}'} | "
                       f"{'' if asg is None else f'{asg:.2f}'} | {'' if cl is None else f'{cl * 1000:.0f}'} | "
                       f"{note(outs)} |")
            if note(outs) and note(outs) != "not run":
                problems.append(f"rebalance {client}: {note(outs)}")
        kw, ck = times.get("kafkawire"), times.get("confluent")
        out += ["", "| target | kafkawire | confluent-kafka | ratio | target | |", "|---|---|---|---|---|---|"]
        if kw and ck:
            ratio = kw / ck
            out.append(f"| rebalance, close -> first new record | {kw:.2f}s | {ck:.2f}s | {ratio:.2f}x | "
                       f"<= {TARGET_REBALANCE:g}x | {'PASS' if ratio <= TARGET_REBALANCE else 'MISS'} |")
        else:
            out.append(f"| rebalance, close -> first new record | n/a | n/a | n/a | <= {TARGET_REBALANCE:g}x | n/a |")
        out.append("")
    args.problems = problems
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", choices=("tansu", "mock"), default="tansu")
    parser.add_argument("--records", type=int, default=None,
                        help="records in the throughput topic (2,000,000 on Tansu, 100,000 on the mock)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (5; 1 with --quick)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions per topic (4)")
    parser.add_argument("--session-timeout-ms", type=int, default=None,
                        help="both clients' session timeout (6000; 4000 with --quick)")
    parser.add_argument("--heartbeat-interval-ms", type=int, default=None,
                        help="both clients' heartbeat interval (a sixth of the session timeout)")
    parser.add_argument("--cases", default="throughput,rebalance", help="throughput,rebalance")
    parser.add_argument("--quick", action="store_true", help="CI smoke: 200,000 records (20,000 on "
                        "the mock), 1 round, a 4 s session timeout; well under a minute")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables to PATH")
    args = parser.parse_args()
    if args.records is None:
        big = args.broker == "tansu"
        args.records = (200_000 if big else 20_000) if args.quick else (2_000_000 if big else 100_000)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 5
    if args.session_timeout_ms is None:
        args.session_timeout_ms = 4000 if args.quick else 6000
    if args.heartbeat_interval_ms is None:
        args.heartbeat_interval_ms = max(1, args.session_timeout_ms // 6)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in args.cases if c not in ("throughput", "rebalance")]
    if bad:
        parser.error(f"unknown case(s) {bad}; choose from throughput, rebalance")
    if args.partitions < MEMBERS:
        parser.error(f"--partitions must be at least {MEMBERS}")
    if args.records < args.partitions:
        parser.error("--records must be at least --partitions")
    started = time.monotonic()
    try:
        results = run(args)
    finally:
        end_members(list(_LIVE))
    text = "\n".join(report(results, args)) + "\n"
    finish(text, started, args.markdown)
    if args.problems:
        print("compare_groups: FAILED: a group member failed or misbehaved (details above):\n  "
              + "\n  ".join(args.problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--member":
        sys.exit(member_main(sys.argv[2]))
    sys.exit(main())
