"""Produce -> acknowledgement, one record at a time or at a fixed rate, for kafkawire from
several source trees side by side with confluent-kafka: the same-run A/B of a change to
the per-record path.  A tree before a change is a ``git worktree`` (with the compiled
modules built or copied into its ``src/kafkawire/``).

Each tree's producer runs in a child process of its own, importing kafkawire from that
tree; confluent-kafka runs in this one.  They take turns in slices of ``--records``
records (the order reversed every slice), each record sent and waited for before the
next (acks=1, linger 0, 100-byte values, one partition), after ``--warmup`` seconds of
sends that let a new broker's JIT settle.  With ``--rate R`` each slice is instead
bench/compare_latency.py's run at that rate (a producer of its own, each record due at
start + i/R, its latency counted from that due time, delivered to a callback):

    .venv/bin/python bench/latency_trees.py --tree before=/tmp/before/src --tree after=src
        [--client kafkawire|kafkawire.aio] [--broker kafka|tansu | --bootstrap HOST:PORT]
        [--rate serial|R] [--slices 16] [--records 500] [--warmup 20] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from typing import Callable

import compare_latency as cl
import latency_floor
from report import finish

_VALUE = latency_floor.VALUE
_ANSWER_WITHIN = latency_floor.ANSWER_WITHIN  # seconds: a record not acknowledged by then ends the run


def _at_rate(client: str, bootstrap: str, topic: str, rate: str) -> Callable[[int], list[float]]:
    """A slice at a fixed rate: compare_latency's run of ``client`` (``n`` records), the
    latencies of those acknowledged (a record the run gave up on has none)."""
    def run(n: int) -> list[float]:
        acks, _took, _cpu = cl.PRODUCERS[client](bootstrap, topic, rate, n)
        return [a for a in acks if not math.isnan(a)]

    return run


def _child(client: str, bootstrap: str, topic: str, rate: str) -> None:
    """A tree's producer: for each count read from stdin, that many records one at a time
    (or at ``rate``), their latencies (seconds) written back as one JSON line."""
    if rate != "serial":
        run_slice = _at_rate(client, bootstrap, topic, rate)
        for line in sys.stdin:
            print(json.dumps(run_slice(int(line))), flush=True)
        return
    if client == "kafkawire":
        from kafkawire import Producer

        p = Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
        run_slice = latency_floor.timed(lambda: p.send(topic, _VALUE, partition=0).result(_ANSWER_WITHIN))
        for line in sys.stdin:
            print(json.dumps(run_slice(int(line))), flush=True)
        p.close(10)
        return

    perf = time.perf_counter

    from kafkawire.aio import AsyncProducer

    async def run() -> None:
        loop = asyncio.get_running_loop()
        # Its delivery timeout bounds each wait, as result()'s timeout does above.
        async with AsyncProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0,
                                 delivery_timeout_ms=int(_ANSWER_WITHIN * 1000)) as p:
            while line := await loop.run_in_executor(None, sys.stdin.readline):
                out = []
                for _ in range(int(line)):
                    t = perf()
                    await (await p.send(topic, _VALUE, partition=0))  # no wait_for: a task per record
                    out.append(perf() - t)
                print(json.dumps(out), flush=True)

    asyncio.run(run())


class _Tree:
    """A child process producing with kafkawire from ``src``."""

    def __init__(self, client: str, src: str, bootstrap: str, topic: str, rate: str):
        env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", client, bootstrap, topic, rate],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def send(self, n: int) -> list[float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a tree's producer exited (status {self.proc.wait(10)})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def measure(bootstrap: str, client: str, trees: dict[str, str], slices: int, per_slice: int,
            warmup: float, rate: str) -> dict[str, list[float]]:
    from kafkawire import Admin

    admin = Admin(bootstrap_servers=bootstrap)
    topic = cl.new_topic(admin)
    children = {name: _Tree(client, src, bootstrap, topic, rate) for name, src in trees.items()}
    runs = {name: child.send for name, child in children.items()}
    confluent_close = None
    if rate == "serial":
        confluent, confluent_close = latency_floor.confluent_one_at_a_time(bootstrap, topic)
        runs["confluent-kafka"] = latency_floor.timed(confluent)
    else:  # a producer of its own every slice, as the trees' children have
        runs["confluent-kafka"] = _at_rate("confluent-kafka", bootstrap, topic, rate)
    try:
        return latency_floor.interleave(runs, slices, per_slice, warmup)
    finally:
        for child in children.values():
            child.close()
        if confluent_close is not None:
            confluent_close()
        cl.drop_topic(admin, topic)
        admin.close()


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(*sys.argv[2:6])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=SRC",
                        help="a row: kafkawire imported from the source tree SRC (repeat)")
    parser.add_argument("--client", default="kafkawire", choices=("kafkawire", "kafkawire.aio"))
    parser.add_argument("--broker", default="kafka", choices=("kafka", "tansu"))
    parser.add_argument("--bootstrap", help="a broker already running (else one is started)")
    parser.add_argument("--rate", default="serial",
                        help="serial (one at a time, the default) or records per second")
    parser.add_argument("--slices", type=int, default=16)
    parser.add_argument("--records", type=int, default=500, help="records per slice per producer")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds of sends before measuring")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    args = parser.parse_args()
    trees = {}
    for spec in args.tree:
        name, sep, src = spec.partition("=")
        if not sep or not name or not os.path.isdir(os.path.join(src, "kafkawire")):
            parser.error(f"--tree {spec!r}: give NAME=SRC, SRC a directory holding kafkawire/")
        trees[name] = src
    if args.rate != "serial" and not (args.rate.isdigit() and int(args.rate) > 0):
        parser.error(f"--rate {args.rate!r}: give serial or a whole number of records per second")
    started = time.monotonic()
    run = (args.client, trees, args.slices, args.records, args.warmup, args.rate)
    if args.bootstrap:
        lat = measure(args.bootstrap, *run)
    else:
        with cl.start_broker(args.broker) as broker:
            lat = measure(broker.bootstrap, *run)
    pace = "one at a time" if args.rate == "serial" else f"at {args.rate}/s"
    title = (f"{args.client}, {pace} on {args.bootstrap or args.broker}: {args.slices} "
             f"interleaved slices of {args.records} records each")
    finish(latency_floor.table(lat, title, floor=None), started, args.markdown)


if __name__ == "__main__":
    main()
