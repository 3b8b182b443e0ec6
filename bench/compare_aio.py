"""kafkawire's asyncio client (kafkawire.aio) against aiokafka, end to end on Tansu.

One process, one broker on loopback (started here), interleaved: every round runs every
(client, case) once, the order alternating from round to round; the table shows medians
over the rounds and the ratio kafkawire / aiokafka.  Run with:

    .venv/bin/python bench/compare_aio.py [--quick] [--records N] [--rounds R]
        [--compression none,lz4] [--markdown PATH]

Workload and settings: those of bench/compare_e2e.py (N records of 16-byte keys and
100-byte values, record i to partition i % 4; acks=1, linger 5 ms, 256 KiB batches;
polls of up to 10,000 records).  Produce cases write a fresh topic each, read back and
checked untimed; consume cases read one topic written beforehand (untimed).  Target:
kafkawire.aio at least 3x aiokafka both ways.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
import uuid

from report import finish

import compare_e2e as e2e

from kafkawire import codec
from kafkawire.aio import AsyncConsumer, AsyncProducer
from kafkawire.testing import TansuBroker

TARGET = 3.0
CLIENTS = ("kafkawire", "aiokafka")
# case -> (label, kind, {client: function})
CASES: dict[str, tuple[str, str, dict]] = {}


def kw_send(bootstrap: str, topic: str, w: e2e.Workload) -> e2e.Outcome:
    async def run() -> e2e.Outcome:
        p = AsyncProducer(bootstrap_servers=bootstrap, acks=e2e.ACKS, linger_ms=e2e.LINGER_MS,
                          batch_size=e2e.BATCH_BYTES, max_request_size=e2e.MAX_REQUEST,
                          compression_type=w.compression)
        await p.start()
        try:
            await p.partitions_for(topic)
            keys, values, n = w.keys, w.values, w.n
            send = p.send
            futures = []
            start = time.perf_counter()
            for i in range(n):
                f = await send(topic, values[i % e2e.POOL], key=keys[i % e2e.POOL], partition=i % e2e.PARTITIONS)
                if i >= n - e2e.PARTITIONS:
                    futures.append(f)
            await p.flush(300)
            elapsed = time.perf_counter() - start
            for f in futures:
                await f
            return e2e.Outcome(elapsed, n)
        finally:
            await p.close(30)

    return asyncio.run(run())


def kw_poll(bootstrap: str, topic: str, w: e2e.Workload) -> e2e.Outcome:
    async def run() -> e2e.Outcome:
        c = AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                          fetch_max_bytes=e2e.FETCH_MAX_BYTES,
                          max_partition_fetch_bytes=e2e.PARTITION_FETCH_BYTES)
        await c.start()
        try:
            c.assign([(topic, p) for p in range(e2e.PARTITIONS)])
            n = w.n
            counts = [0] * e2e.PARTITIONS
            nbytes = got = 0
            start = last = time.perf_counter()
            while got < n:
                records = await c.poll(1.0, e2e.MAX_RECORDS)
                now = time.perf_counter()
                if not records:
                    if now - last > e2e.IDLE_TIMEOUT:
                        break
                    continue
                last = now
                for r in records:
                    nbytes += len(r.value)
                    counts[r.partition] += 1
                got += len(records)
            return e2e.Outcome(last - start, got, nbytes, e2e._check_consumed(n, counts, nbytes))
        finally:
            await c.close()

    return asyncio.run(run())


CASES["send"] = ("produce: `await send()` per record + flush", "produce",
                 {"kafkawire": kw_send, "aiokafka": e2e.aio_send})
CASES["poll"] = ("consume: `poll()` / `getmany()` record objects", "consume",
                 {"kafkawire": kw_poll, "aiokafka": e2e.aio_consume})


def run(args: argparse.Namespace) -> dict:
    results: dict = {}
    with TansuBroker() as broker:
        bootstrap = broker.bootstrap
        print(f"Tansu broker pid {broker.pid} on {bootstrap}", file=sys.stderr)
        admin = e2e.Admin(bootstrap)
        try:
            for compression in args.compression:
                w = e2e.Workload(args.records, compression)
                source = f"aio-src-{uuid.uuid4().hex[:8]}"
                admin.create(source)
                out = e2e.kw_send_batch(bootstrap, source, w)
                if out.problem:
                    raise SystemExit(f"writing the consumers' topic failed: {out.problem}")
                for r in range(args.rounds):
                    order = CLIENTS if r % 2 == 0 else CLIENTS[::-1]
                    print(f"[{compression}] round {r + 1}/{args.rounds}: {', '.join(order)}",
                          file=sys.stderr, flush=True)
                    topics: list[str] = []
                    for client in order:
                        for case, (_label, kind, funcs) in CASES.items():
                            topic = source
                            if kind == "produce":
                                topic = f"aio-{case}-{uuid.uuid4().hex[:8]}"
                                admin.create(topic)
                                topics.append(topic)
                            o = e2e.timed(funcs[client], bootstrap, topic, w, broker.pid)
                            if kind == "produce" and o.problem is None:
                                problem = e2e.verify_topic(bootstrap, topic, w)
                                if problem:
                                    o.problem = f"read back: {problem}"
                            results.setdefault((compression, case, client), []).append(o)
                            e2e.show(client, case, o)
                    admin.delete(topics)
                admin.delete([source])
        finally:
            admin.close()
    return results


def report(results: dict, args: argparse.Namespace) -> list[str]:
    n = args.records
    out = [
        "# kafkawire.aio against aiokafka",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs; one Tansu broker on loopback; kafkawire codec {codec.IMPLEMENTATION}; "
        f"median of {args.rounds} interleaved rounds of {n:,} records ({e2e.KEY_SIZE}-byte keys, "
        f"{e2e.VALUE_SIZE}-byte values, {e2e.PARTITIONS} partitions); settings of bench/compare_e2e.py.",
        "",
    ]
    for compression in args.compression:
        out += [f"## compression {compression}", "",
                "| case | aiokafka records/s | kafkawire.aio records/s | ratio | target | |",
                "|---|---|---|---|---|---|"]
        for case, (label, _kind, _funcs) in CASES.items():
            base, p1 = e2e.median_rate(results.get((compression, case, "aiokafka")), n)
            mine, p2 = e2e.median_rate(results.get((compression, case, "kafkawire")), n)
            note = "; ".join(p for p in (p1, p2) if p)
            if not base or not mine:
                out.append(f"| {label} | {base or 0:,.0f} | {mine or 0:,.0f} | n/a | | {note} |")
                continue
            ratio = mine / base
            verdict = "PASS" if ratio >= TARGET else "MISS"
            out.append(f"| {label} | {base:,.0f} | {mine:,.0f} | {ratio:.2f}x | >= {TARGET:g}x | {verdict} {note} |")
        out.append("")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=None, help="records per case (500,000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (5)")
    parser.add_argument("--quick", action="store_true", help="100,000 records, 3 rounds (unless set)")
    parser.add_argument("--compression", default="none", help="comma-separated: none,lz4,...")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables to PATH")
    args = parser.parse_args()
    args.records = args.records or (100_000 if args.quick else 500_000)
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.compression = [c.strip() for c in args.compression.split(",") if c.strip()]
    bad = [c for c in args.compression if c not in e2e.CODEC_NAMES]
    if bad:
        parser.error(f"unknown compression {bad}; choose from {', '.join(e2e.CODEC_NAMES)}")
    started = time.monotonic()
    results = run(args)
    text = "\n".join(report(results, args)) + "\n"
    finish(text, started, args.markdown)


if __name__ == "__main__":
    main()
