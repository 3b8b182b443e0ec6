"""Soak: a producer and a group consumer for N minutes against Tansu brokers sharing S3,
one broker restarted on a schedule; fails if an acknowledged record is lost.

Everything runs on loopback and is started and stopped here: a moto S3 server, two Tansu
brokers on one bucket (kafkawire.testing.brokers.TansuCluster), a kafkawire Producer
(acks=all) sending at a steady rate, and a kafkawire Consumer(group_id=...).subscribe()
in a thread of its own. Every ``--restart-every`` seconds one broker is killed (SIGKILL by
default) and started again on its port, the two in turn, so the clients lose the broker
they use every other time and must move to the other one. Run with:

    .venv/bin/python bench/soak.py [--minutes 10] [--restart-every 30]
        [--restart-signal kill|term] [--rate 100] [--partitions 4] [--linger-ms 500]
        [--idempotence] [--progress-every 10]

or ``make soak SOAK_MINUTES=2``. A progress line every ``--progress-every`` seconds;
at the end: records sent, acknowledged, failed, consumed by the group, then a check of
the whole log read from the beginning by a plain consumer. Lost means acknowledged but
absent: from the log (the broker lost it) or never delivered to the group (the consumer
missed it). Duplicated means extra copies: in the log (a retried batch the dying broker
had written) and in the group's deliveries (at-least-once redelivery after a rebalance or
a broker change). Exit status 1 when anything was lost or a client failed; Ctrl-C or
an error stops everything it started, each process by its own pid.

The rate is modest and batches linger on purpose: Tansu writes one S3 object per batch,
lists a partition's objects and GETs each batch on every fetch, and moto keeps them all
in memory in one process.
Without ``--idempotence`` the producer is the plain one: Tansu 0.6's idempotent produce
is not crash-safe on shared storage (see tests/integration/test_failover.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
import uuid
from collections import Counter

from kafkawire.client.admin import Admin
from kafkawire.client.consumer import Consumer, TopicPartition
from kafkawire.client.producer import Producer
from kafkawire.testing.brokers import TansuCluster
from kafkawire.testing.s3 import MotoS3Server
from report import soak_verdict

CLIENT = dict(
    request_timeout_ms=30000,
    retry_backoff_ms=100,
    retry_backoff_max_ms=1000,
    reconnect_backoff_ms=50,
    reconnect_backoff_max_ms=1000,
)
# Tansu answers a Fetch with one S3 GET per stored batch until the partition's byte budget
# is spent: with Java's 1 MiB, a consumer far behind asks for thousands of small objects
# at once and the answer can outlast the request timeout.
FETCH = dict(max_partition_fetch_bytes=65536, fetch_max_bytes=262144, fetch_max_wait_ms=200)


class Stats:
    """Counters shared by the producer's callbacks, the consumer thread and the reporter."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = 0
        self.acked: dict[int, tuple[int, int]] = {}  # record number -> (partition, offset)
        self.failed: list[BaseException] = []
        self.consumed: Counter[int] = Counter()  # record number -> deliveries to the group
        self.restarts = 0
        self.rebalances = 0
        self.consumer_error: BaseException | None = None

    def on_ack(self, n: int):
        def done(meta, exc) -> None:
            with self.lock:
                if exc is not None:
                    self.failed.append(exc)
                else:
                    self.acked[n] = (meta.partition, meta.offset)
        return done


def _number(value: bytes, run: str) -> int | None:
    head, _, n = value.decode("ascii", "replace").rpartition("-")
    return int(n) if head == run and n.isdigit() else None


def _consume(bootstrap: str, topic: str, group: str, run: str, stats: Stats,
             stop: threading.Event, session_timeout_ms: int) -> None:
    """The group member: subscribe, poll until ``stop``, count every delivery."""
    from kafkawire.client.group import ConsumerRebalanceListener

    class Count(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions) -> None:
            with stats.lock:
                stats.rebalances += 1

    consumer = Consumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=max(100, session_timeout_ms // 6),
        auto_commit_interval_ms=1000, **FETCH, **CLIENT,
    )
    try:
        consumer.subscribe([topic], listener=Count())
        while not stop.is_set():
            records = consumer.poll(0.5)
            if records:
                with stats.lock:
                    for r in records:
                        n = _number(r.value, run)
                        if n is not None:
                            stats.consumed[n] += 1
    except BaseException as exc:  # noqa: BLE001 - reported by the main thread
        stats.consumer_error = exc
    finally:
        consumer.close(10)


def _read_log(bootstrap: str, topic: str, partitions: int, run: str, ends: dict[int, int],
              timeout: float) -> tuple[Counter[int], dict[int, int]]:
    """Every record number in the log (with copies), read from the beginning up to ``ends``."""
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                        enable_auto_commit=False, **FETCH, **CLIENT)
    found: Counter[int] = Counter()
    reached = {p: 0 for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning(timeout=30)
        deadline = time.monotonic() + timeout
        while any(reached[p] < end for p, end in ends.items()) and time.monotonic() < deadline:
            for r in consumer.poll(1.0):
                reached[r.partition] = r.offset + 1
                n = _number(r.value, run)
                if n is not None:
                    found[n] += 1
        for r in consumer.poll(1.0):
            n = _number(r.value, run)
            if n is not None:
                found[n] += 1
    finally:
        consumer.close(5)
    return found, reached


def _progress(start: float, stats: Stats) -> str:
    with stats.lock:
        unique = len(stats.consumed)
        return (f"[{time.monotonic() - start:7.1f}s] sent {stats.sent}, acknowledged "
                f"{len(stats.acked)}, failed {len(stats.failed)}, consumed {unique} "
                f"(+{sum(stats.consumed.values()) - unique} again), lag {len(stats.acked) - unique}, "
                f"restarts {stats.restarts}, assignments {stats.rebalances}")


def run(args: argparse.Namespace) -> int:
    began = time.monotonic()
    stats = Stats()
    stop = threading.Event()
    run_id = uuid.uuid4().hex[:6]
    topic, group = f"soak-{run_id}", f"soak-group-{run_id}"
    signal_name = {"kill": "SIGKILL", "term": "SIGTERM"}[args.restart_signal]
    sig = getattr(signal, signal_name)
    s3 = MotoS3Server()
    cluster = None
    producer = None
    consumer_thread = None
    print(f"soak: {args.minutes:g} min, {args.rate:g} records/s over {args.partitions} partitions, "
          f"a broker restarted ({signal_name}) every {args.restart_every:g} s, "
          f"idempotence {'on' if args.idempotence else 'off'}", flush=True)
    try:
        s3.start()
        cluster = TansuCluster(args.brokers, s3=s3).start()
        print(f"soak: moto S3 on {s3.endpoint} (pid {s3.pid}), brokers "
              f"{[(b.bootstrap, b.pid) for b in cluster.brokers]}, bucket {cluster.bucket}", flush=True)
        admin = Admin(bootstrap_servers=cluster.bootstrap, **CLIENT)
        try:
            admin.create_topics([topic], num_partitions=args.partitions, replication_factor=1, timeout=30)
        finally:
            admin.close()
        producer = Producer(
            bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=args.idempotence,
            linger_ms=args.linger_ms, delivery_timeout_ms=300000, max_block_ms=120000, **CLIENT,
        )
        consumer_thread = threading.Thread(
            target=_consume, name="soak-consumer", daemon=True,
            args=(cluster.bootstrap, topic, group, run_id, stats, stop, args.session_timeout_ms))
        consumer_thread.start()

        start = time.monotonic()
        end = start + args.minutes * 60
        next_restart = start + args.restart_every
        next_progress = start + args.progress_every
        victim = 0
        interval = 1.0 / args.rate
        while True:
            now = time.monotonic()
            if now >= end:
                break
            # Sends keep to the schedule (a late loop catches up, never beyond the rate).
            due = int((now - start) * args.rate)
            while stats.sent < due:
                n = stats.sent
                producer.send(topic, f"{run_id}-{n}".encode(), partition=n % args.partitions,
                              callback=stats.on_ack(n))
                stats.sent += 1
            if args.restart_every > 0 and now >= next_restart:
                t = time.monotonic()
                cluster.restart(victim, sig)
                stats.restarts += 1
                print(f"[{now - start:7.1f}s] restarted broker {victim} ({signal_name}) in "
                      f"{time.monotonic() - t:.2f} s", flush=True)
                victim = (victim + 1) % args.brokers
                next_restart = now + args.restart_every
            if now >= next_progress:
                print(_progress(start, stats), flush=True)
                next_progress = now + args.progress_every
            if stats.consumer_error is not None:
                raise RuntimeError(f"the group consumer failed: {stats.consumer_error!r}")
            time.sleep(min(interval, 0.05))

        print(f"soak: producing stopped after {time.monotonic() - start:.1f} s; flushing", flush=True)
        producer.flush(timeout=args.drain_timeout)
        producer.close(10)
        producer = None
        # Let the group catch up with everything acknowledged.
        deadline = time.monotonic() + args.drain_timeout
        while time.monotonic() < deadline and stats.consumer_error is None:
            with stats.lock:
                missing = sum(1 for n in stats.acked if n not in stats.consumed)
            if not missing:
                break
            if time.monotonic() >= next_progress:
                print(_progress(start, stats) + f" (draining, {missing} still due)", flush=True)
                next_progress = time.monotonic() + args.progress_every
            time.sleep(0.5)
        time.sleep(2.0)  # late redeliveries count as duplicates
        stop.set()
        consumer_thread.join(30)
        print(_progress(start, stats), flush=True)

        ends: dict[int, int] = {}
        for p, offset in stats.acked.values():
            ends[p] = max(ends.get(p, 0), offset + 1)
        in_log, _ = _read_log(cluster.bootstrap, topic, args.partitions, run_id, ends, args.drain_timeout)
    except KeyboardInterrupt:
        print("soak: interrupted; stopping everything", file=sys.stderr, flush=True)
        return 130
    finally:
        stop.set()
        if producer is not None:
            producer.close(5)
        if consumer_thread is not None:
            consumer_thread.join(15)
        if cluster is not None:
            cluster.close()
        s3.close()

    acked = stats.acked
    lost_log = [n for n in acked if in_log[n] == 0]
    missed = [n for n in acked if stats.consumed[n] == 0]
    dup_log = sum(c - 1 for c in in_log.values() if c > 1)
    dup_group = sum(c - 1 for c in stats.consumed.values() if c > 1)
    bad = []
    if lost_log or missed:
        bad.append(f"{len(set(lost_log) | set(missed))} acknowledged records lost")
    if stats.failed:
        bad.append(f"{len(stats.failed)} sends failed")
    if stats.consumer_error is not None:
        bad.append(f"the consumer failed: {stats.consumer_error!r}")
    return soak_verdict("soak", "soak result", [
        ("records sent", stats.sent), ("acknowledged", len(acked)),
        ("failed (delivery)", f"{len(stats.failed)}" + (f"  e.g. {stats.failed[0]!r}" if stats.failed else "")),
        ("consumed by the group", f"{len(stats.consumed)} distinct, {sum(stats.consumed.values())} deliveries"),
        ("lost from the log", f"{len(lost_log)}" + (f"  e.g. {sorted(lost_log)[:5]}" if lost_log else "")),
        ("missed by the group", f"{len(missed)}" + (f"  e.g. {sorted(missed)[:5]}" if missed else "")),
        ("duplicated in the log", dup_log), ("redelivered to group", dup_group),
        ("broker restarts", f"{stats.restarts}, group assignments {stats.rebalances}"),
        ("wall time", f"{time.monotonic() - began:.0f} s")], bad, "nothing acknowledged was lost")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to produce (10)")
    parser.add_argument("--restart-every", type=float, default=30.0,
                        help="seconds between broker restarts, 0 for none (30)")
    parser.add_argument("--restart-signal", choices=("kill", "term"), default="kill",
                        help="how a restarted broker is stopped (kill: SIGKILL)")
    parser.add_argument("--brokers", type=int, default=2, help="Tansu brokers on the bucket (2)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=float, default=100.0, help="records per second (100)")
    parser.add_argument("--linger-ms", type=int, default=500,
                        help="the producer's linger_ms (500: fewer, larger S3 objects)")
    parser.add_argument("--idempotence", action="store_true",
                        help="enable_idempotence=True (Tansu 0.6 may lose records with it)")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--progress-every", type=float, default=10.0)
    parser.add_argument("--drain-timeout", type=float, default=180.0,
                        help="seconds to flush, to let the group catch up, and to read the log back")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.rate <= 0 or args.brokers < 1 or args.partitions < 1:
        parser.error("--minutes, --rate, --brokers and --partitions must be positive")

    def terminate(signum, frame):  # SIGTERM: stop as on Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
