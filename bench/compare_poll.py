"""kafkawire's Consumer.poll() (record objects) against confluent-kafka's consume(), on one Tansu broker.

The consume half of bench/compare_e2e.py on its own: one topic is written once (untimed,
kafkawire's per-record send, compare_e2e's workload: 16-byte keys, 100-byte values, record i to
partition i % 4), then read from offset 0 by both consumers in turn, R interleaved rounds,
the order alternating; the tables show medians.  Reading one topic again and again leaves
out the producers' time and noise, so the ratio moves with the consumers alone.  Each
consumer is compare_e2e's own (kw_poll, ck_consume).  Run with:

    .venv/bin/python bench/compare_poll.py [--quick] [--records N] [--rounds R]
        [--compression none] [--profile PATH] [--json PATH] [--markdown PATH]

``--profile PATH`` also runs kafkawire's poll once more under cProfile (untimed) and
writes the stats to PATH (read them with ``python -m pstats PATH``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import platform
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from report import finish  # noqa: E402

from compare_e2e import (  # noqa: E402 - the bench directory is on the path now
    CODEC_NAMES,
    PARTITIONS,
    Admin,
    Workload,
    ck_consume,
    kw_poll,
    kw_send,
    timed,
)

from kafkawire import codec  # noqa: E402
from kafkawire.testing import TansuBroker  # noqa: E402

CASES = (("kafkawire", "poll", kw_poll), ("confluent", "consume", ck_consume))


def fill(bootstrap: str, topic: str, w: Workload) -> None:
    # compare_e2e's per-record producer, so the topic's batches are the ones its poll reads.
    out = kw_send(bootstrap, topic, w)
    if out.problem:
        raise RuntimeError(f"writing {topic}: {out.problem}")


def run(args: argparse.Namespace) -> dict[str, list]:
    results: dict[str, list] = {}
    with TansuBroker() as broker:
        print(f"Tansu broker pid {broker.pid} on {broker.bootstrap}", file=sys.stderr)
        admin = Admin(broker.bootstrap)
        try:
            w = Workload(args.records, args.compression)
            topic = f"poll-{uuid.uuid4().hex[:8]}"
            admin.create(topic)
            fill(broker.bootstrap, topic, w)
            for r in range(args.rounds):
                order = CASES if r % 2 == 0 else CASES[::-1]
                for client, case, fn in order:
                    out = timed(fn, broker.bootstrap, topic, w, broker.pid)
                    results.setdefault(client, []).append(out)
                    rate = out.count / out.seconds if out.seconds > 0 else 0
                    note = f"  <-- {out.problem}" if out.problem else ""
                    print(f"  round {r + 1}/{args.rounds} {client:9s} {case:8s} {out.seconds:6.2f}s "
                          f"{rate:12,.0f} rec/s{note}", file=sys.stderr, flush=True)
            if args.profile:
                gc.collect()
                prof = cProfile.Profile()
                prof.enable()
                kw_poll(broker.bootstrap, topic, w)
                prof.disable()
                prof.dump_stats(args.profile)
                print(f"profile of one kafkawire poll run: {args.profile}", file=sys.stderr)
        finally:
            admin.close()
    return results


def median_rate(outs: list, n: int) -> float:
    # A round with a problem counts as 0 records/s, as compare_e2e's tables do.
    return statistics.median([0.0 if o.problem else n / o.seconds for o in outs])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=None, help="records in the topic (1,000,000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (5)")
    parser.add_argument("--quick", action="store_true", help="200,000 records (5 rounds unless --rounds)")
    parser.add_argument("--compression", default="none", choices=sorted(CODEC_NAMES))
    parser.add_argument("--profile", metavar="PATH", help="also profile one kafkawire poll run into PATH")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    parser.add_argument("--json", metavar="PATH", help="also write {ratio name: ratio} to PATH")
    args = parser.parse_args()
    args.records = args.records or (200_000 if args.quick else 1_000_000)
    args.rounds = args.rounds or 5
    if args.records < PARTITIONS:
        parser.error(f"--records must be at least {PARTITIONS}")
    started = time.monotonic()
    results = run(args)
    kw = median_rate(results["kafkawire"], args.records)
    ck = median_rate(results["confluent"], args.records)
    ratio = kw / ck if ck else 0.0
    lines = [
        "# kafkawire poll() against confluent-kafka consume()",
        "",
        f"CPython {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
        f"codec {codec.IMPLEMENTATION}; one Tansu broker on loopback; {args.records:,} records "
        f"(16-byte keys, 100-byte values, compression {args.compression}) in 4 partitions, read "
        f"from offset 0 by each consumer in turn; median of {args.rounds} interleaved rounds.",
        "",
        "| consumer | records/s |",
        "|---|---|",
        f"| kafkawire `Consumer.poll` (record objects) | {kw:,.0f} |",
        f"| confluent-kafka `Consumer.consume(10000)` | {ck:,.0f} |",
        "",
        f"poll / consume: **{ratio:.2f}x**",
    ]
    text = "\n".join(lines) + "\n"
    finish(text, started, args.markdown, args.json, {f"{args.compression}/poll/vs-confluent-consume": ratio})


if __name__ == "__main__":
    main()
