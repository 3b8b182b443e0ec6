"""Chaos soak on Apache Kafka: an idempotent producer at a steady rate (with bursts at full
speed) and a group of consumer processes for N minutes against a 3-node KRaft cluster,
with a node SIGKILLed and restarted on a schedule and a group member SIGKILLed now and
then; fails if an acknowledged record is lost or the log holds a record twice.

Everything runs on loopback and is started and stopped here, each process by its pid:
kafkawire.testing.KafkaCluster (3 nodes, replication factor 3, min.insync.replicas 2), a
kafkawire Producer (acks=all, idempotent) in this process, and ``--consumers`` group
members, each a process of its own (kafkawire Consumer, auto-commit: at-least-once)
that appends the record numbers it is given to a file. Run with:

    .venv/bin/python bench/chaos_soak.py [--minutes 10] [--rate 10000] [--burst 50000]
        [--burst-every 20] [--kill-every 30] [--down-for 10] [--member-kill-every 45]
        [--consumers 3] [--partitions 6] [--progress-every 10]

or ``make soak-kafka SOAK_MINUTES=30``. At the end: records sent, acknowledged, failed,
consumed by the group, then the whole log read from the beginning by a plain consumer.
Lost: acknowledged but absent from the log or never delivered to the group. Duplicated
in the log: must be 0 with idempotence. Redelivered to the group: expected after a member
is killed (its uncommitted records go to the others) and reported, not failed.
Exit status 1 when anything was lost or duplicated in the log, or a client failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
import uuid

import numpy as np

from kafkawire.client.admin import Admin, NewTopic
from kafkawire.client.consumer import Consumer, TopicPartition
from kafkawire.client.producer import Producer
from kafkawire.testing.kafka import KafkaCluster
from report import soak_verdict

CLIENT = dict(request_timeout_ms=30000, retry_backoff_ms=100, retry_backoff_max_ms=1000,
              reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
_NUMBER = 8  # bytes per record number in a member's file


def _value(run: str, n: int) -> bytes:
    return f"{run}-{n:012d}".encode()


def _number(value: bytes | None, run: bytes) -> int | None:
    if value is None or not value.startswith(run):
        return None
    return int(value[len(run) + 1:])


class Counts:
    """Per record number: one byte each (how often seen, capped at 255), grown as needed."""

    def __init__(self) -> None:
        self.data = bytearray()

    def add(self, n: int) -> None:
        if n >= len(self.data):
            self.data.extend(bytes(max(n + 1 - len(self.data), 1 << 20)))
        if self.data[n] < 255:
            self.data[n] += 1

    def array(self, size: int) -> np.ndarray:
        """The counts of numbers 0..size-1, as uint8."""
        out = np.zeros(size, np.uint8)
        have = np.frombuffer(self.data, np.uint8)[:size]
        out[:len(have)] = have
        return out


def _member(bootstrap: str, topic: str, group: str, run: str, path: str, session_timeout_ms: int) -> None:
    """A group member process: poll until SIGTERM, append every delivered number to ``path``
    before the next poll (auto-commit commits only what an earlier poll returned, so a
    SIGKILL between the two loses nothing: the records are delivered again elsewhere)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    prefix = run.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    consumer = Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                        session_timeout_ms=session_timeout_ms,
                        heartbeat_interval_ms=max(100, session_timeout_ms // 6),
                        auto_commit_interval_ms=1000, **CLIENT)
    try:
        consumer.subscribe([topic])
        while not stop.is_set():
            records = consumer.poll(0.5)
            if records:
                out = bytearray()
                for r in records:
                    n = _number(r.value, prefix)
                    if n is not None:
                        out += n.to_bytes(_NUMBER, "little")
                os.write(fd, out)
    finally:
        consumer.close(10)
        os.close(fd)


class Group:
    """The consumer processes, their files, and the numbers they were given."""

    def __init__(self, args: argparse.Namespace, bootstrap: str, topic: str, group: str, run: str):
        self.args, self.bootstrap, self.topic, self.group, self.run = args, bootstrap, topic, group, run
        self.dir = tempfile.mkdtemp(prefix="kafkawire-chaos-")
        self.procs: list[multiprocessing.Process] = []
        self.files: list[str] = []
        self.killed = 0
        self._ctx = multiprocessing.get_context("spawn")

    def start_member(self) -> None:
        path = os.path.join(self.dir, f"member-{len(self.files)}")
        proc = self._ctx.Process(target=_member, daemon=True, args=(
            self.bootstrap, self.topic, self.group, self.run, path, self.args.session_timeout_ms))
        proc.start()
        self.procs.append(proc)
        self.files.append(path)

    def kill_one(self, index: int) -> None:
        alive = [p for p in self.procs if p.is_alive()]
        if alive:
            victim = alive[index % len(alive)]
            os.kill(victim.pid, signal.SIGKILL)  # by its own pid
            victim.join(10)
            self.killed += 1
            self.start_member()

    def delivered(self, size: int) -> np.ndarray:
        """How often each record number 0..size-1 was delivered to the group."""
        counts = np.zeros(size, np.int64)
        for path in self.files:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            numbers = np.frombuffer(data[:len(data) - len(data) % _NUMBER], "<u8")
            counts += np.bincount(numbers[numbers < size].astype(np.int64), minlength=size)[:size]
        return counts

    def stop(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(20)
            if p.is_alive():
                p.kill()
                p.join(5)


def _read_log(bootstrap: str, topic: str, partitions: int, run: str, ends: dict[int, int],
              timeout: float) -> Counts:
    """Every record number in the log, with copies, read from the beginning up to ``ends``."""
    found = Counts()
    prefix = run.encode()
    reached = {p: 0 for p in range(partitions)}
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                  **CLIENT) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while any(reached[p] < end for p, end in ends.items()) and time.monotonic() < deadline:
            for r in consumer.poll(1.0, max_records=100_000):
                reached[r.partition] = r.offset + 1
                n = _number(r.value, prefix)
                if n is not None:
                    found.add(n)
    return found


def run(args: argparse.Namespace) -> int:
    began = time.monotonic()
    run_id = uuid.uuid4().hex[:6]
    topic, group = f"chaos-{run_id}", f"chaos-group-{run_id}"
    acked_partition = bytearray()  # record number -> partition + 1 (0: not acknowledged)
    ends: dict[int, int] = {}
    failed: list[BaseException] = []
    acked_count = [0]
    lock = threading.Lock()
    sent = 0
    restarts = 0

    def on_ack(n: int):
        def done(meta, exc) -> None:
            with lock:
                if exc is not None:
                    failed.append(exc)
                    return
                acked_partition[n] = meta.partition + 1
                acked_count[0] += 1
                ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
        return done

    print(f"chaos soak {run_id}: starting a 3-node Apache Kafka cluster", flush=True)
    cluster = KafkaCluster(3, min_insync_replicas=2).start()
    members: Group | None = None
    producer: Producer | None = None
    try:
        with Admin(bootstrap_servers=cluster.bootstrap) as admin:
            admin.create_topics([NewTopic(topic, args.partitions, 3)], timeout=60)
        members = Group(args, cluster.bootstrap, topic, group, run_id)
        for _ in range(args.consumers):
            members.start_member()
        producer = Producer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5,
                            delivery_timeout_ms=300_000, **CLIENT)
        start = time.monotonic()
        end = start + args.minutes * 60
        next_kill = start + args.kill_every
        next_member_kill = start + args.member_kill_every
        next_burst = start + args.burst_every
        next_progress = start + args.progress_every
        down: tuple[int, float] | None = None  # (node index, when to restart)
        restarting: threading.Thread | None = None
        burst_total = 0
        victim = 0
        while time.monotonic() < end:
            now = time.monotonic()
            # A steady rate in 10 ms slices, measured from the start (no drift), on top of
            # the bursts sent so far (a burst does not eat into the steady rate after it).
            if now >= next_burst:
                burst_total += args.burst
                next_burst += args.burst_every
            due = int((now - start) * args.rate) + burst_total - sent
            if due > 0:
                need = sent + due
                if need > len(acked_partition):
                    acked_partition.extend(bytes(max(need - len(acked_partition), 1 << 20)))
                for n in range(sent, need):
                    producer.send(topic, _value(run_id, n), key=b"%d" % (n % 1000), callback=on_ack(n))
                sent = need
            if down is None and now >= next_kill:
                victim = (victim + 1) % 3
                cluster.kill(victim)
                down = (victim, now + args.down_for)
                print(f"[{now - start:7.1f}s] node {victim + 1} killed (SIGKILL)", flush=True)
            if down is not None and now >= down[1] and restarting is None:
                # In a thread: a node takes seconds to recover its log, and the producer's
                # steady rate must not stop meanwhile.
                restarting = threading.Thread(target=cluster.restart, args=(down[0],), daemon=True)
                restarting.start()
            if restarting is not None and not restarting.is_alive():
                restarting = None
                restarts += 1
                print(f"[{now - start:7.1f}s] node {down[0] + 1} back", flush=True)
                down = None
                next_kill = now + args.kill_every
            if now >= next_member_kill:
                members.kill_one(restarts)
                next_member_kill = now + args.member_kill_every
                print(f"[{now - start:7.1f}s] a group member killed (SIGKILL), a new one started", flush=True)
            if now >= next_progress:
                print(f"[{now - start:7.1f}s] sent {sent}, acknowledged {acked_count[0]}, "
                      f"failed {len(failed)}", flush=True)
                next_progress = now + args.progress_every
            time.sleep(0.01)
        if restarting is not None:
            restarting.join()
        elif down is not None:
            cluster.restart(down[0])
        if down is not None:
            restarts += 1
        print("producing done; flushing", flush=True)
        producer.flush(args.drain_timeout)
        acked = np.frombuffer(acked_partition, np.uint8)[:sent] > 0
        # Wait until the group has seen every acknowledged record (or the drain timeout).
        deadline = time.monotonic() + args.drain_timeout
        while True:
            delivered = members.delivered(sent)
            missing = int(np.count_nonzero(acked & (delivered == 0)))
            if not missing or time.monotonic() >= deadline:
                break
            print(f"draining: {missing} acknowledged records not yet delivered to the group", flush=True)
            time.sleep(2.0)
        time.sleep(2.0)  # late redeliveries count too
        members.stop()
        delivered = members.delivered(sent)
        in_log = _read_log(cluster.bootstrap, topic, args.partitions, run_id, dict(ends),
                           args.drain_timeout).array(sent)
    finally:
        if producer is not None:
            producer.close(10)
        if members is not None:
            members.stop()
        cluster.close()

    lost_log = set(np.flatnonzero(acked & (in_log == 0)).tolist())
    missed = set(np.flatnonzero(acked & (delivered == 0)).tolist())
    dup_log = int(np.maximum(in_log.astype(np.int64) - 1, 0).sum())
    distinct = int(np.count_nonzero(delivered))
    redelivered = int(np.maximum(delivered - 1, 0).sum())
    lost = lost_log | missed
    bad = []
    if lost:
        bad.append(f"{len(lost)} acknowledged records lost")
    if dup_log:
        bad.append(f"{dup_log} records twice in the log despite idempotence")
    if failed:
        bad.append(f"{len(failed)} sends failed")
    return soak_verdict(
        "chaos soak", f"chaos soak result ({args.minutes:g} min, 3 Kafka nodes, RF 3, min.insync 2, "
                      f"{args.rate:g}/s + {args.burst} every {args.burst_every:g}s)",
        [("records sent", sent), ("acknowledged", int(acked.sum())),
         ("failed (delivery)", f"{len(failed)}" + (f"  e.g. {failed[0]!r}" if failed else "")),
         ("consumed by the group", f"{distinct} distinct, {int(delivered.sum())} deliveries"),
         ("lost", f"{len(lost)}  (from the log {len(lost_log)}, never delivered {len(missed)})"
                  + (f"  e.g. {sorted(lost)[:5]}" if lost else "")),
         ("duplicated in the log", dup_log),
         ("redelivered to group", f"{redelivered}  (after {members.killed} members were killed)"),
         ("node restarts", restarts), ("wall time", f"{time.monotonic() - began:.0f} s")],
        bad, "nothing acknowledged was lost, nothing written twice")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to produce (10)")
    parser.add_argument("--rate", type=float, default=10_000.0, help="steady records per second (10000)")
    parser.add_argument("--burst", type=int, default=50_000, help="records sent at once in a burst (50000)")
    parser.add_argument("--burst-every", type=float, default=20.0, help="seconds between bursts (20)")
    parser.add_argument("--kill-every", type=float, default=30.0,
                        help="seconds between a node's return and the next SIGKILL (30)")
    parser.add_argument("--down-for", type=float, default=10.0, help="seconds a killed node stays down (10)")
    parser.add_argument("--member-kill-every", type=float, default=45.0,
                        help="seconds between SIGKILLs of a group member (45)")
    parser.add_argument("--consumers", type=int, default=3, help="group members (3)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--progress-every", type=float, default=10.0)
    parser.add_argument("--drain-timeout", type=float, default=300.0,
                        help="seconds to wait for the group and the log read at the end (300)")
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
