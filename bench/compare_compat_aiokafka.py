"""aiokafka end to end on Tansu, with and without kafkawire's codec installed in it.

One process, one broker on loopback (started here), interleaved: every round runs every
case once with aiokafka's own record layer and once with ``kafkawire.compat.aiokafka``
installed, the order alternating from round to round; the table shows medians over the
rounds, the ratio (the median of each round's own ratio, installed / aiokafka's own, so
drift between rounds does not enter it) and this process's CPU per record in each mode
(every thread, the client's start and close included; waiting for a core does not
count, so a loaded machine disturbs it less than the wall clock).  Run with:

    .venv/bin/python bench/compare_compat_aiokafka.py [--quick] [--records N] [--rounds R]
        [--cases getmany,send,send_batch] [--compression none,lz4] [--markdown PATH]

Workload and settings: those of bench/compare_e2e.py (N records of 16-byte keys and
100-byte values over 4 partitions; acks=1, linger 5 ms, 256 KiB batches; getmany of up to
10,000 records).  The consumer cases read one topic written beforehand (untimed) by
kafkawire's ``send_batch``, the same bytes in both modes; the producer cases write a fresh
topic each and are read back untimed.  Target: aiokafka's consumer at least 2x faster
with the codec installed.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
import uuid

from report import write_markdown

import compare_e2e as e2e

from kafkawire import codec
from kafkawire.compat import aiokafka as compat
from kafkawire.testing import TansuBroker

TARGET_CONSUME = 2.0  # issue 23: getmany >= 2x faster with the codec installed
MODES = ("aiokafka", "kafkawire")  # aiokafka's own record layer / the codec installed
CASES = [
    ("getmany", "consume: `getmany(max_records=10000)`", "consume"),
    ("send", "produce: `await send()` per record + flush", "produce"),
    ("send_batch", "produce: `create_batch/append + send_batch`", "produce"),
]
FUNCS = {"getmany": e2e.aio_consume, "send": e2e.aio_send, "send_batch": e2e.aio_send_batch}


def set_mode(mode: str) -> None:
    if mode == "kafkawire":
        compat.install()
    else:
        compat.uninstall()


def run(args: argparse.Namespace) -> tuple[dict, dict]:
    """({(compression, case, mode): [Outcome per round]}, the same keys: [CPU seconds of
    this process per round])."""
    results: dict[tuple[str, str, str], list[e2e.Outcome]] = {}
    cpus: dict[tuple[str, str, str], list[float]] = {}
    with TansuBroker() as broker:
        bootstrap = broker.bootstrap
        print(f"Tansu broker pid {broker.pid} on {bootstrap}", file=sys.stderr)
        admin = e2e.Admin(bootstrap)
        try:
            for compression in args.compression:
                w = e2e.Workload(args.records, compression)
                source = f"compat-aio-src-{uuid.uuid4().hex[:8]}"
                admin.create(source)
                compat.uninstall()
                out = e2e.kw_send_batch(bootstrap, source, w)
                if out.problem:
                    raise SystemExit(f"writing the consumer's topic failed: {out.problem}")
                for r in range(args.rounds):
                    order = MODES if r % 2 == 0 else MODES[::-1]
                    print(f"[{compression}] round {r + 1}/{args.rounds}: {', '.join(order)}",
                          file=sys.stderr, flush=True)
                    topics: list[str] = []
                    for mode in order:
                        set_mode(mode)
                        try:
                            for case, _label, kind in args.cases:
                                topic = source
                                if kind == "produce":
                                    topic = f"compat-aio-{case}-{uuid.uuid4().hex[:8]}"
                                    admin.create(topic)
                                    topics.append(topic)
                                gc.collect()  # not counted: the last case's garbage
                                cpu = time.process_time()
                                o = e2e.timed(FUNCS[case], bootstrap, topic, w, broker.pid)
                                cpus.setdefault((compression, case, mode), []).append(
                                    time.process_time() - cpu)
                                if kind == "produce" and o.problem is None:
                                    problem = e2e.verify_topic(bootstrap, topic, w, False)
                                    if problem:
                                        o.problem = f"read back: {problem}"
                                results.setdefault((compression, case, mode), []).append(o)
                                e2e.show(mode, case, o)
                        finally:
                            compat.uninstall()
                    admin.delete(topics)
                admin.delete([source])
        finally:
            admin.close()
    return results, cpus


def _paired(a: list, b: list) -> float | None:
    """The median over rounds of b / a, rounds where either is missing left out."""
    ratios = [y / x for x, y in zip(a, b) if x and y]
    return statistics.median(ratios) if ratios else None


def report(results: dict, cpus: dict, args: argparse.Namespace) -> list[str]:
    n = args.records
    out = [
        "# aiokafka with kafkawire's codec installed (kafkawire.compat.aiokafka)",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} CPUs; one Tansu broker on loopback; "
        f"kafkawire codec {codec.IMPLEMENTATION}; median of {args.rounds} interleaved rounds "
        f"(ratios: the median of each round's own) of {n:,} records ({e2e.KEY_SIZE}-byte keys, {e2e.VALUE_SIZE}-byte values, "
        f"{e2e.PARTITIONS} partitions); settings of bench/compare_e2e.py.",
        "",
    ]
    for compression in args.compression:
        out += [f"## compression {compression}", "",
                "| API | aiokafka records/s | with kafkawire records/s | ratio | "
                "CPU ns/record (aiokafka / with kafkawire) | CPU ratio | target | |",
                "|---|---|---|---|---|---|---|---|"]
        for case, label, kind in args.cases:
            outs = {m: results.get((compression, case, m), []) for m in MODES}
            base, p1 = e2e.median_rate(outs["aiokafka"], n)
            mine, p2 = e2e.median_rate(outs["kafkawire"], n)
            note = "; ".join(p for p in (p1, p2) if p)
            ok = {m: [None if o.problem or not o.seconds > 0 else o.count / o.seconds
                      for o in outs[m]] for m in MODES}
            cpu = {m: [c if r else None for c, r in zip(cpus.get((compression, case, m), []),
                                                        ok[m])] for m in MODES}
            per = {m: [c for c in cpu[m] if c] for m in MODES}
            ns = " / ".join(f"{statistics.median(per[m]) / n * 1e9:,.0f}" if per[m] else "-"
                            for m in MODES)
            cpu_ratio = _paired(cpu["kafkawire"], cpu["aiokafka"])
            ratio = _paired(ok["aiokafka"], ok["kafkawire"])
            if not base or not mine or ratio is None:
                out.append(f"| {label} | {base or 0:,.0f} | {mine or 0:,.0f} | n/a | {ns} | | | "
                           f"{note} |")
                continue
            target = f">= {TARGET_CONSUME:g}x" if kind == "consume" else ""
            verdict = ("PASS" if ratio >= TARGET_CONSUME else "MISS") if kind == "consume" else ""
            out.append(f"| {label} | {base:,.0f} | {mine:,.0f} | {ratio:.2f}x | {ns} | "
                       f"{'-' if cpu_ratio is None else f'{cpu_ratio:.2f}x'} | {target} | "
                       f"{verdict} {note} |")
        out.append("")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=None, help="records per case (500,000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (5)")
    parser.add_argument("--quick", action="store_true",
                        help="100,000 records, 3 rounds (unless --records/--rounds)")
    parser.add_argument("--cases", default=",".join(c[0] for c in CASES),
                        help="comma-separated subset of " + ",".join(c[0] for c in CASES))
    parser.add_argument("--compression", default="none", help="comma-separated: none,lz4,...")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables to PATH")
    args = parser.parse_args()
    args.records = args.records or (100_000 if args.quick else 500_000)
    args.rounds = args.rounds or (3 if args.quick else 5)
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in wanted if c not in FUNCS]
    if bad:
        parser.error(f"unknown case(s) {bad}; choose from {', '.join(FUNCS)}")
    args.cases = [c for c in CASES if c[0] in wanted]
    args.compression = [c.strip() for c in args.compression.split(",") if c.strip()]
    bad = [c for c in args.compression if c not in e2e.CODEC_NAMES]
    if bad:
        parser.error(f"unknown compression {bad}; choose from {', '.join(e2e.CODEC_NAMES)}")
    if args.records < e2e.PARTITIONS:
        parser.error(f"--records must be at least {e2e.PARTITIONS}")
    started = time.monotonic()
    text = "\n".join(report(*run(args), args)) + "\n"
    print(text)
    print(f"(took {time.monotonic() - started:.0f}s)", file=sys.stderr)
    write_markdown(args.markdown, text)


if __name__ == "__main__":
    main()
