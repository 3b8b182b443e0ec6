"""Batches of a partition in flight together against one at a time (kafkawire alone).

Per-record ``send`` + ``flush`` on one Tansu broker, the producer idempotent (the default)
or not, with max_in_flight_requests_per_connection 5 and 1 in interleaved rounds; medians.
On loopback the gain is what the broker's and the client's work overlap; over a network
each round trip saved counts too.  Run with:

    .venv/bin/python bench/pipelining.py [--records N] [--rounds R] [--batch-size B] [--no-idempotence]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

from kafkawire import Producer
from kafkawire.testing import TansuBroker

PARTITIONS = 4
DEPTHS = (5, 1)


def one_round(bootstrap: str, depth: int, args: argparse.Namespace, values: list[bytes]) -> float:
    """Records per second of one send + flush of ``args.records`` records to a new topic."""
    topic = f"pipe-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=args.batch_size,
                  enable_idempotence=args.idempotence, acks="all" if args.idempotence else 1,
                  max_in_flight_requests_per_connection=depth) as p:
        p.partitions_for(topic)
        send = p.send
        start = time.perf_counter()
        for i in range(args.records):
            send(topic, values[i % len(values)], partition=i % PARTITIONS)
        p.flush(120)
        elapsed = time.perf_counter() - start
        if p.metrics().get("idempotent", False) != args.idempotence:
            raise SystemExit("the producer's idempotence is not what was asked for")
    return args.records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16384, help="bytes (the Java default)")
    parser.add_argument("--no-idempotence", dest="idempotence", action="store_false")
    args = parser.parse_args()
    values = [os.urandom(50).hex().encode() for _ in range(256)]  # 100-byte values
    rates: dict[int, list[float]] = {d: [] for d in DEPTHS}
    with TansuBroker() as broker:
        for r in range(args.rounds):
            for depth in DEPTHS if r % 2 == 0 else DEPTHS[::-1]:
                rates[depth].append(one_round(broker.bootstrap, depth, args, values))
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
    med = {d: statistics.median(v) for d, v in rates.items()}
    kind = "idempotent" if args.idempotence else "not idempotent (acks=1)"
    print(f"| batches in flight per partition | send + flush, records/s ({kind}, "
          f"batch_size={args.batch_size:,}, median of {args.rounds}) |\n|---|---|")
    for d in DEPTHS:
        print(f"| {d} | {med[d]:,.0f} |")
    print(f"\n{DEPTHS[0]} in flight / 1: {med[DEPTHS[0]] / med[DEPTHS[1]]:.2f}x")


if __name__ == "__main__":
    main()
