"""Where the broker's turnaround goes, seen by the scheduler: which CPU the broker's thread
runs on after a client's write, how long it waits for it, and how long the answer takes.

latency_split.py times each record on the wire; this one traces the kernel's scheduler
(``perf record`` of every CPU's sched_waking, sched_switch and sched_stat_runtime) while
compare_latency.py's producers run in this process, and splits each request at the
wake-ups between the two processes:

    write:       a client thread wakes a broker thread (the request reached its socket);
                 whether another CPU was idle then (a CPU's idle task is pid 0)
    on CPU:      that broker thread starts to run; "on the writer's CPU" when the kernel
                 put it on the CPU the client wrote from (a loopback socket's wake-up asks
                 for that: the writer is expected to sleep next), where it waits for
                 whatever the writer does after its write
    answer:      a broker thread wakes a client thread (the answer reached its socket)
    reader:      that client thread starts to run

On a machine with few cores every microsecond a client spends on a CPU while the broker
works is a microsecond the broker may wait: the per-record CPU of both processes is
reported too.

    .venv/bin/python bench/sched_split.py [--broker kafka|tansu | --bootstrap HOST:PORT]
        [--rate 1000|serial] [--records 3000] [--rounds 2]
        [--clients kafkawire,confluent-kafka] [--warmup SECONDS] [--markdown PATH]

Needs perf (``apt-get install -y linux-perf``), a mounted tracefs and the right to trace
every CPU (root).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

import compare_latency as cl
from report import finish

_LINE = re.compile(r"\s*(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):(.*)")
_WAKEE = re.compile(r" pid=(\d+)")
_SWITCH = re.compile(r"prev_pid=(\d+) .*==> .*next_pid=(\d+)")
_RUNTIME = re.compile(r" pid=(\d+) runtime=(\d+)")


def listener_pid(port: int) -> int:
    """The pid of the process listening on 127.0.0.1:``port`` (the broker)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):  # a JVM listens on an IPv6 socket
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                    inodes.add(f"socket:[{cols[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return int(pid)
            except OSError:
                continue
    raise SystemExit(f"no process on this machine listens on port {port}: is the broker up?")


@contextmanager
def traced(path: str):
    """perf's trace of every CPU's scheduler into ``path`` while the block runs (timestamps
    on CLOCK_MONOTONIC, time.monotonic()'s clock)."""
    rec = subprocess.Popen(
        ["perf", "record", "-a", "-q", "-k", "CLOCK_MONOTONIC", "-o", path,
         "-e", "sched:sched_waking", "-e", "sched:sched_switch", "-e", "sched:sched_stat_runtime"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # perf opens every CPU's buffers before the first record goes
    if rec.poll() is not None:
        raise SystemExit(f"perf record did not start: {rec.stderr.read().strip()}")
    try:
        yield
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(60)


def events(path: str):
    """(time, cpu, current tgid, current tid, kind, fields) of each traced event."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "pid,tid,cpu,time,event,trace"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        m = _LINE.match(line)
        if m:
            yield float(m[4]), int(m[3]), int(m[1]), int(m[2]), m[5], m[6]


def split(path: str, client: int, broker: int, start: float, end: float) -> dict:
    """Each request between ``start`` and ``end`` (monotonic seconds) split at the
    wake-ups between the ``client`` and ``broker`` processes, and the CPU each used
    meanwhile (the client's calling thread, ``client`` itself, apart)."""
    evs = list(events(path))
    tgid = {tid: g for _t, _c, g, tid, _k, _f in evs}
    running: dict[int, int] = {}  # cpu -> tid on it
    # CPU seconds from the scheduler's own runtime accounting: a task's switch-in is not
    # always traced (seen when a halted virtual CPU wakes), so intervals between switches
    # would overcount.
    busy = {"caller": 0.0, "client": 0.0, "broker": 0.0}
    rows, cur, writes = [], None, 0
    for t, cpu, _g, tid, kind, f in evs:
        if kind == "sched_stat_runtime":
            m = _RUNTIME.search(f)
            if m and start <= t <= end:
                who = int(m[1])
                g = tgid.get(who)
                key = "caller" if who == client else "client" if g == client else "broker" if g == broker else None
                if key:
                    busy[key] += int(m[2]) / 1e9
            continue
        if kind == "sched_switch":
            m = _SWITCH.search(f)
            if not m:
                continue
            nxt = int(m[2])
            running[cpu] = nxt
            if cur is not None:
                if "on" not in cur and nxt == cur["net"]:
                    cur["on"], cur["same"] = t, cpu == cur["cpu"]
                if "answer" in cur and nxt == cur["reader"]:
                    cur["read"] = t
                    rows.append(cur)
                    cur = None
            continue
        m = _WAKEE.search(f)
        if not m or not start <= t <= end:
            continue
        wakee = int(m[1])
        if tgid.get(tid) == client and tgid.get(wakee) == broker:
            # The first wake-up of the broker since the last answer is the write (one whose
            # reader was never seen to run is left out).
            if cur is None or "answer" in cur:
                writes += 1
                cur = {"write": t, "net": wakee, "cpu": cpu,
                       "idle": any(other == 0 for c, other in running.items() if c != cpu)}
                if wakee in running.values():  # still on a CPU: nothing to wait for
                    cur["on"], cur["same"] = t, running.get(cpu) == wakee
        elif cur is not None and tgid.get(tid) == broker and tgid.get(wakee) == client and "answer" not in cur:
            cur["answer"], cur["reader"] = t, wakee
            if wakee in running.values():
                cur["read"] = t
                rows.append(cur)
                cur = None
    # Left out: a request whose broker thread or reader was never traced starting to run.
    return {"rows": [r for r in rows if "on" in r], "writes": writes, **busy}


def run_one(admin, bootstrap: str, broker: int, client: str, rate: str, n: int) -> dict:
    topic = cl.new_topic(admin)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sched.data")
            with traced(path):
                start = time.monotonic()
                acks, _took, _cpu = cl.PRODUCERS[client](bootstrap, topic, rate, n)
                end = time.monotonic()
            out = split(path, os.getpid(), broker, start, end)
    finally:
        cl.drop_topic(admin, topic)
    out["records"] = sum(1 for a in acks if a == a)
    return out


@contextmanager
def _broker(args: argparse.Namespace):
    """The bootstrap address of ``--bootstrap``, or of a ``--broker`` started for the run."""
    if args.bootstrap:
        yield args.bootstrap
        return
    with cl.start_broker(args.broker) as broker:
        yield broker.bootstrap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cl.add_split_arguments(parser)
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="a broker already running on this machine (else --broker starts one)")
    parser.add_argument("--clients", default="kafkawire,confluent-kafka",
                        help=f"comma-separated from {','.join(cl.PRODUCERS)}")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    args = parser.parse_args()
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    bad = [c for c in clients if c not in cl.PRODUCERS]
    if bad:
        parser.error(f"unknown client {bad}; choose from {', '.join(cl.PRODUCERS)}")
    if shutil.which("perf") is None:
        sys.exit("sched_split.py needs perf: apt-get install -y linux-perf")
    if not os.path.exists("/sys/kernel/tracing/events/sched"):
        sys.exit("sched_split.py needs tracefs: mount -t tracefs nodev /sys/kernel/tracing")
    warm = cl.WARM_UP[args.broker] if args.warmup is None else args.warmup
    from kafkawire import Admin

    started = time.monotonic()
    got: dict[str, list[dict]] = {c: [] for c in clients}
    with _broker(args) as bootstrap:
        bpid = listener_pid(int(bootstrap.rsplit(":", 1)[1]))
        admin = Admin(bootstrap_servers=bootstrap)
        try:
            cl.warm_up(admin, bootstrap, clients, warm)
            for r in range(args.rounds):
                for client in clients if r % 2 == 0 else clients[::-1]:
                    out = run_one(admin, bootstrap, bpid, client, args.rate, args.records)
                    got[client].append(out)
                    print(f"  [r{r + 1}] {client:<22} {len(out['rows']):,} of {out['writes']:,} requests split",
                          file=sys.stderr, flush=True)
        finally:
            admin.close()
    us = lambda xs: f"{statistics.median(xs) * 1e6:.0f}" if xs else "-"  # noqa: E731
    lines = [f"# The broker's turnaround, by the scheduler: {args.bootstrap or args.broker}, "
             f"{cl.rate_label(args.rate)}", "",
             f"{args.rounds} interleaved rounds of {args.records:,} records per client; medians in µs.", "",
             "| client | requests split | another CPU idle at the write | broker thread on the writer's CPU "
             "| its wait there | its wait elsewhere "
             "| write -> answer | answer -> reader on CPU | CPU / record: caller | client's threads | broker |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for client in clients:
        rows = [r for out in got[client] for r in out["rows"]]
        records = sum(out["records"] for out in got[client]) or 1
        same = [r["on"] - r["write"] for r in rows if r["same"]]
        other = [r["on"] - r["write"] for r in rows if not r["same"]]
        share = lambda n: f"{n / len(rows):.0%}" if rows else "-"  # noqa: E731
        writes = sum(out["writes"] for out in got[client])
        lines.append(
            f"| {client} | {len(rows):,} of {writes:,} | {share(sum(r['idle'] for r in rows))} "
            f"| {share(len(same))} | {us(same)} | {us(other)} "
            f"| {us([r['answer'] - r['write'] for r in rows])} | {us([r['read'] - r['answer'] for r in rows])} "
            + "".join(f"| {sum(o[k] for o in got[client]) / records * 1e6:.0f} "
                      for k in ("caller", "client", "broker")) + "|")
    lines += ["", "\"write\": a client thread wakes a broker thread; \"answer\": a broker thread wakes a "
              "client thread; \"requests split\": those whose broker thread and reader were both traced "
              "starting to run, of the writes that woke a broker thread.  CPU per record (µs): \"caller\" is the thread calling send(), pacer "
              "included (the same loop for every client); \"client's threads\" its others (a sender, "
              "librdkafka's, a thread serving delivery reports); \"broker\" every broker thread's "
              "while that client ran."]
    finish("\n".join(lines) + "\n", started, args.markdown)


if __name__ == "__main__":
    main()
