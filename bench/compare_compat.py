"""Peer clients end to end on Tansu, with and without kafkawire's codec installed (compat/).

One process, one broker on loopback (started here), interleaved: every round runs each
client's producer and consumer once plain and once with ``kafkawire.compat.<client>``
installed, the order rotating from round to round, so drift of a shared machine hits both
alike; the table shows medians over the rounds and the ratios.  Run with:

    .venv/bin/python bench/compare_compat.py [--quick] [--records N] [--rounds R]
        [--clients kafka-python,aiokafka] [--cases produce,consume] [--compression none,lz4]
        [--markdown PATH]

Workload (bench/compare_e2e.py's): N records (default 300,000) of 16-byte keys and
100-byte values, produced to a fresh 4-partition topic, record i to partition i % 4, then
read back from offset 0 and counted per partition with the value bytes summed.  Both
consumer modes of a round read the topic the plain producer wrote, so they decode the
very same bytes.  A case whose count or bytes are off is reported, never dropped.

kafka-python also has a keyed produce case (``produce keyed``): the same records with no
partition given, so its DefaultPartitioner places each by the murmur2 of its key (the
path kafkawire's send() shortcuts for that partitioner), to a topic of its own; no target,
its own row.  ``--cases`` picks cases (produce, "produce keyed", consume).

Each client is one entry of CLIENTS: how to install/uninstall its codec adapter, its
produce/consume functions and the targets (issue 23: kafka-python's consumer >= 3x,
aiokafka's getmany >= 2x, either producer >= 1.5x faster with the codec installed).
aiokafka's adapter is installed with its batch builders (``install(builders=True)``), so
its producer case measures them even while they are off by default.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import uuid
from typing import Callable, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from report import write_markdown  # noqa: E402

import compare_e2e as e2e  # noqa: E402 - the shared workload, topics and kafka-python cases

from kafkawire import codec  # noqa: E402
from kafkawire.testing import TansuBroker  # noqa: E402

Fn = Callable[[str, str, "e2e.Workload"], "e2e.Outcome"]


class Client(NamedTuple):
    install: Callable[[], None]
    uninstall: Callable[[], None]
    produce: Fn
    consume: Fn
    targets: dict[str, float]  # case -> ratio the codec must reach (issue 23)
    produce_keyed: Fn | None = None  # the keyed case, where the client has one


CASES = ("produce", "produce keyed", "consume")


# -- kafka-python ---------------------------------------------------------------------------


def kp_send_keyed(bootstrap: str, topic: str, w: e2e.Workload) -> e2e.Outcome:
    """compare_e2e.kp_send's records, keyed: no partition, the DefaultPartitioner picks."""
    return e2e.kp_send(bootstrap, topic, w, keyed=True)


def kafka_python_client() -> Client:
    """KafkaProducer.send per record + flush (pinned to partition i % 4, and keyed);
    KafkaConsumer.poll(max_records=10000)."""
    from kafkawire.compat import kafka_python

    return Client(kafka_python.install, kafka_python.uninstall, e2e.kp_send, e2e.kp_consume,
                  {"produce": 1.5, "consume": 3.0}, kp_send_keyed)


# -- aiokafka -------------------------------------------------------------------------------


def aiokafka_client() -> Client:
    """await send() per record + flush; getmany(max_records=10000)."""
    from kafkawire.compat import aiokafka

    return Client(lambda: aiokafka.install(builders=True), aiokafka.uninstall, e2e.aio_send,
                  e2e.aio_consume, {"produce": 1.5, "consume": 2.0})


CLIENTS: dict[str, Callable[[], Client]] = {
    "kafka-python": kafka_python_client,
    "aiokafka": aiokafka_client,
}
MODES = ("plain", "kafkawire")


def timed(client: Client, mode: str, fn: Fn, bootstrap: str, topic: str,
          w: e2e.Workload) -> tuple[e2e.Outcome, float]:
    """The case's outcome, and the CPU seconds this process spent on it (every thread,
    the client's start and close included): a measure a loaded machine disturbs less than
    the wall clock, since waiting for a core does not count."""
    gc.collect()
    if mode == "kafkawire":
        client.install()
    cpu = time.process_time()
    try:
        out = fn(bootstrap, topic, w)
    except Exception as exc:  # noqa: BLE001 - a failed case is reported, not fatal
        out = e2e.Outcome(0.0, 0, -1, f"ERROR {type(exc).__name__}: {exc}")
    finally:
        client.uninstall()
    return out, time.process_time() - cpu


def run(args: argparse.Namespace) -> tuple[dict, dict]:
    """({(compression, client, case, mode): [Outcome per round]}, the same keys: [CPU
    seconds per round])."""
    results: dict[tuple[str, str, str, str], list[e2e.Outcome]] = {}
    cpus: dict[tuple[str, str, str, str], list[float]] = {}
    with TansuBroker() as broker:
        bootstrap = broker.bootstrap
        print(f"Tansu broker pid {broker.pid} on {bootstrap}", file=sys.stderr)
        admin = e2e.Admin(bootstrap)
        try:
            for compression in args.compression:
                w = e2e.Workload(args.records, compression)
                for r in range(args.rounds):
                    for name in args.clients:
                        client = CLIENTS[name]()
                        order = MODES if r % 2 == 0 else MODES[::-1]
                        topics = {}
                        # (case, function, whether it writes a topic of its own)
                        runs = [("produce", client.produce, True),
                                ("produce keyed", client.produce_keyed, True),
                                ("consume", client.consume, False)]
                        for case, fn, writes in runs:
                            if fn is None or case not in args.cases:
                                continue
                            for mode in order:
                                if writes:
                                    topic = f"compat-{name}-{mode}-{uuid.uuid4().hex[:8]}"
                                    topics[(case, mode)] = topic
                                    admin.create(topic)
                                else:  # both consumers read what the plain producer wrote
                                    topic = topics[("produce", "plain")]
                                out, cpu = timed(client, mode, fn, bootstrap, topic, w)
                                key = (compression, name, case, mode)
                                results.setdefault(key, []).append(out)
                                cpus.setdefault(key, []).append(cpu)
                                show(r, compression, name, case, mode, out)
                        admin.delete(list(topics.values()))
        finally:
            admin.close()
    return results, cpus


def show(r: int, compression: str, name: str, case: str, mode: str, out: e2e.Outcome) -> None:
    rate = out.count / out.seconds if out.seconds else 0.0
    note = f"  [{out.problem}]" if out.problem else ""
    print(f"  round {r + 1} [{compression}] {name:>12} {case:<13} {mode:<9} "
          f"{out.seconds:7.2f}s {rate:>10,.0f} rec/s{note}", file=sys.stderr)


def report(results: dict, cpus: dict, args: argparse.Namespace) -> list[str]:
    lines = [
        f"Peer clients with kafkawire's codec installed, Tansu on loopback: {args.records:,} "
        f"records x {e2e.VALUE_SIZE}-byte values, medians of {args.rounds} interleaved rounds "
        f"(codec: {codec.IMPLEMENTATION}); the ratio is the median of each round's own ratio, "
        f"its two runs side by side, so the machine's drift between rounds does not enter it; "
        f"CPU ratio: the process's CPU seconds plain / with kafkawire, median of the rounds",
        "",
        "| client | compression | case | plain rec/s | with kafkawire rec/s | ratio | CPU ratio "
        "| target |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for compression in args.compression:
        for name in args.clients:
            for case in CASES:
                if not results.get((compression, name, case, MODES[0])):
                    continue  # a case this client has not, or not asked for
                rates = {}
                per_round = {}  # mode -> rate of each round, None where it failed
                problems = []
                for mode in MODES:
                    outs = results.get((compression, name, case, mode), [])
                    per_round[mode] = [o.count / o.seconds if not o.problem and o.seconds
                                       else None for o in outs]
                    good = [r for r in per_round[mode] if r is not None]
                    problems += [o.problem for o in outs if o.problem]
                    rates[mode] = statistics.median(good) if good else None
                plain, ours = rates["plain"], rates["kafkawire"]
                paired = [b / a for a, b in zip(per_round["plain"], per_round["kafkawire"])
                          if a and b]
                ratio = statistics.median(paired) if paired else None
                key = (compression, name, case)
                cpu_paired = [a / b for a, b, p, k in zip(
                    cpus.get(key + ("plain",), []), cpus.get(key + ("kafkawire",), []),
                    per_round["plain"], per_round["kafkawire"]) if p and k and b]
                cpu_ratio = statistics.median(cpu_paired) if cpu_paired else None
                goal = CLIENTS[name]().targets.get(case)
                met = ratio is not None and goal is not None and ratio >= goal
                target = "-" if goal is None else f">= {goal:g}x: {'met' if met else 'NOT met'}"
                cell = lambda v: "-" if v is None else f"{v:,.0f}"  # noqa: E731
                note = f" ({'; '.join(problems)})" if problems else ""
                lines.append(
                    f"| {name} | {compression} | {case} | {cell(plain)} | {cell(ours)} | "
                    f"{'-' if ratio is None else f'{ratio:.2f}x'} | "
                    f"{'-' if cpu_ratio is None else f'{cpu_ratio:.2f}x'} | {target}{note} |"
                )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=None, help="records per case (300,000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (3)")
    parser.add_argument("--quick", action="store_true", help="50,000 records (3 rounds unless --rounds)")
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help=f"comma-separated subset of {','.join(CLIENTS)}")
    parser.add_argument("--compression", default="none", help="comma-separated: none,lz4,...")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    args = parser.parse_args()
    args.records = args.records or (50_000 if args.quick else 300_000)
    args.rounds = args.rounds or 3
    args.clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    bad = [c for c in args.clients if c not in CLIENTS]
    if bad:
        parser.error(f"unknown client(s) {bad}; choose from {', '.join(CLIENTS)}")
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in args.cases if c not in CASES]
    if bad:
        parser.error(f"unknown case(s) {bad}; choose from {', '.join(CASES)}")
    if "consume" in args.cases and "produce" not in args.cases:
        parser.error("consume reads the topic the produce case writes: add produce to --cases")
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
