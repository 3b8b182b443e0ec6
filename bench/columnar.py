"""Columnar decode against CRC32C alone over the same bytes (issue 11).

``decode_columnar(check_crcs=True)`` of an uncompressed magic 2 record set must take at most
2.5 times as long as ``crc32c`` of the same buffer: with the CRC done, the rest is one walk
over the record headers writing the arrays, the record bytes are not copied.  One process,
interleaved rounds (each round times every case once), medians.  Run with:

    .venv/bin/python bench/columnar.py [--quick] [--markdown PATH] [--json PATH]

bench/compare_codec.py runs the same cases (so `make bench` shows them and
`make bench-check` guards the 100-byte ratio through bench/floors.json).

Workload per value size: a 1 MiB fetch of producer-sized batches (about 16 KiB each, the
Java producer's default batch.size), 16-byte keys, values of 10, 100 or 1000 bytes,
CreateTime timestamps, no headers.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time

from report import write_json, write_markdown

VALUE_SIZES = (10, 100, 1000)
KEY_SIZE = 16
SET_BYTES = 1 << 20
BATCH_BYTES = 16 << 10
TARGET = 2.5  # decode_columnar time <= 2.5x crc32c time over the same bytes


def make_set(kw, value_size: int, seed: int = 1) -> tuple[bytes, int]:
    """(a record set of about SET_BYTES of ~BATCH_BYTES batches, its record count)."""
    rng = random.Random(seed)
    per_batch = max(1, BATCH_BYTES // (value_size + KEY_SIZE + 10))
    ts = 1_700_000_000_000
    parts = []
    size = offset = 0
    while size < SET_BYTES:
        records = [(rng.randbytes(KEY_SIZE // 2).hex().encode(), rng.randbytes(value_size),
                    ts + offset + i) for i in range(per_batch)]
        batch = kw.encode_record_batch(records, base_offset=offset)
        parts.append(batch)
        size += len(batch)
        offset += per_batch
    return b"".join(parts), offset


def add_cases(bench, kw, sizes=VALUE_SIZES) -> None:
    """Register crc/colset/v{size} and col/colset/v{size} with ``bench`` (a compare_codec
    Bench-like: add(name, fn, check)); each columnar result is checked before timing."""
    for vs in sizes:
        data, n = make_set(kw, vs)

        def whole(cols, n=n, vs=vs):
            return len(cols) == n and int(cols.value_lengths.sum()) == n * vs

        bench.add(f"colset/crc32c/v{vs}", lambda d=data: kw.crc32c(d))
        bench.add(f"colset/columnar/v{vs}",
                  lambda d=data: kw.decode_columnar(d, check_crcs=True), whole)


def ratios(median, sizes=VALUE_SIZES) -> dict[str, float]:
    """{name: crc32c time / columnar time}: higher is better; the target is >= 1/2.5 = 0.4."""
    out = {}
    for vs in sizes:
        crc, col = median(f"colset/crc32c/v{vs}"), median(f"colset/columnar/v{vs}")
        if crc and col:
            out[f"columnar/m2-none/v{vs}/vs-crc32c"] = crc / col
    return out


def table(median, sizes=VALUE_SIZES) -> list[str]:
    out = [
        "## Columnar decode against CRC32C alone (same bytes)",
        "",
        f"A 1 MiB set of ~16 KiB uncompressed magic 2 batches, {KEY_SIZE}-byte keys; "
        "`decode_columnar(check_crcs=True)` against `crc32c` over the whole set. "
        f"Target: columnar <= {TARGET:g}x crc32c.",
        "",
        "| value size | crc32c | decode_columnar | columnar / crc32c | target | |",
        "|---|---|---|---|---|---|",
    ]
    for vs in sizes:
        crc, col = median(f"colset/crc32c/v{vs}"), median(f"colset/columnar/v{vs}")
        if not crc or not col:
            continue
        r = col / crc
        out.append(f"| {vs} B | {crc * 1e6:.1f} us | {col * 1e6:.1f} us | {r:.2f}x | "
                   f"<= {TARGET:g}x | {'PASS' if r <= TARGET else 'MISS'} |")
    return out


class _Bench:
    """compare_codec.Bench's interleaved timing, for running this file alone."""

    def __init__(self, budget: float):
        self.budget = budget
        self.cases: dict = {}
        self.times: dict = {}

    def add(self, name, fn, check=None):
        result = fn()
        if check is not None and not check(result):
            raise AssertionError(f"{name}: wrong result, so it is not timed")
        start = time.perf_counter()
        fn()
        once = max(time.perf_counter() - start, 1e-7)
        self.cases[name] = (fn, max(1, int(self.budget / once)))
        self.times[name] = []

    def run(self, rounds):
        for r in range(rounds):
            print(f"round {r + 1}/{rounds}", file=sys.stderr, flush=True)
            for name, (fn, number) in self.cases.items():
                gc.collect()
                gc.disable()
                try:
                    start = time.perf_counter()
                    for _ in range(number):
                        fn()
                    self.times[name].append((time.perf_counter() - start) / number)
                finally:
                    gc.enable()

    def median(self, name):
        t = self.times.get(name)
        return statistics.median(t) if t else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds, shorter measurements")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--markdown", metavar="PATH")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    try:
        from kafkawire import _codec as kw
    except ImportError as exc:
        sys.exit(f"kafkawire._codec is not built ({exc}); run `make build` first")
    bench = _Bench(budget=0.05 if args.quick else 0.2)
    add_cases(bench, kw)
    rounds = args.rounds or (3 if args.quick else 9)
    bench.run(rounds)
    lines = [
        "# kafkawire columnar decode against CRC32C",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} CPUs; crc32c: {kw.crc32c_implementation()}; "
        f"median of {rounds} interleaved rounds.",
        "",
        *table(bench.median),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    write_markdown(args.markdown, text)
    if args.json:
        write_json(args.json, ratios(bench.median))


if __name__ == "__main__":
    main()
