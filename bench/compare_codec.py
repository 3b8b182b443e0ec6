"""kafkawire's codec side by side with aiokafka's Cython records and kafka-python.

One process, interleaved: every round runs each (benchmark, implementation) pair once, in
the same order, so drift of a shared machine hits every implementation alike; the table
shows medians over the rounds.  Run with `make bench` or:

    .venv/bin/python bench/compare_codec.py [--quick] [--markdown PATH]

Workload: sets of 10,000 records, 16-byte keys, 100-byte values (JSON-like text with a
random part, so the compressors have realistic work), CreateTime timestamps.
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
import zlib

from report import write_json, write_markdown

import numpy as np

try:
    from kafkawire import _codec as kw
except ImportError as exc:
    sys.exit(f"kafkawire._codec is not built ({exc}); run `make build` first")

import columnar  # bench/columnar.py: decode_columnar against crc32c over the same bytes
from aiokafka.record import _crecords as aio
from kafka.record.default_records import DefaultRecordBatchBuilder as KpDefaultBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

N_RECORDS = 10_000
KEY_SIZE = 16
VALUE_SIZE = 100
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
FORMATS = [(0, c) for c in (0, 1, 2, 3)] + [(1, c) for c in (0, 1, 2, 3)] + [
    (2, c) for c in (0, 1, 2, 3, 4)
]
BIG = 1 << 30  # builders' batch_size: never full

TARGET_DECODE = 2.0  # kafkawire object decode >= 2x aiokafka
TARGET_ENCODE = 2.0
TARGET_COLUMNAR = 20.0  # columnar decode >= 20x aiokafka's object decode
TARGET_CRC32C_GBS = 10.0
TARGET_COMPRESSED = 1.2  # compression part of a kafkawire path <= 1.2x the library alone


def make_records(seed: int = 1) -> list[tuple[bytes, bytes, int]]:
    rng = random.Random(seed)
    base_ts = 1_700_000_000_000
    out = []
    for i in range(N_RECORDS):
        key = rng.randbytes(KEY_SIZE // 2).hex().encode()
        head = b'{"id":%d,"user":"u%05d","event":"%s","pad":"' % (
            i, rng.randrange(50_000), rng.choice([b"view", b"click", b"buy"]))
        pad = rng.randbytes(VALUE_SIZE).hex().encode()[: VALUE_SIZE - len(head) - 2]
        value = head + pad + b'"}'
        assert len(key) == KEY_SIZE and len(value) == VALUE_SIZE
        out.append((key, value, base_ts + i))
    return out


# ---------------------------------------------------------------------------------------
# The implementations under test
# ---------------------------------------------------------------------------------------


def kw_encode(records, magic, codec):
    if magic == 2:
        return lambda: kw.encode_record_batch(records, compression=codec)
    return lambda: kw.encode_message_set(records, magic=magic, compression=codec)


def peer_encode(default_builder, legacy_builder, records, magic, codec):
    if magic == 2:
        def run():
            b = default_builder(2, codec, 0, -1, -1, -1, BIG)
            for i, (k, v, ts) in enumerate(records):
                b.append(i, ts, k, v, [])
            return b.build()
    else:
        def run():
            b = legacy_builder(magic, codec, BIG)
            for i, (k, v, ts) in enumerate(records):
                b.append(i, ts, k, v)
            return b.build()
    return run


def kw_decode(data):
    return lambda: kw.decode_records(data, check_crcs=True)


def aio_read_records(data, out: list) -> None:
    # aiokafka's fetcher: batch.validate_crc() for every batch, then iterate its records.
    records = aio.MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if not batch.validate_crc():
            raise ValueError("crc")
        out.extend(batch)


def kp_read_records(data, out: list) -> None:
    # kafka-python's fetcher: batch.validate_crc(), then record.validate_crc() per record.
    records = KpMemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if not batch.validate_crc():
            raise ValueError("crc")
        for record in batch:
            if not record.validate_crc():
                raise ValueError("crc")
            out.append(record)


def aio_decode(data):
    def run():
        out: list = []
        aio_read_records(data, out)
        return out
    return run


def kp_decode(data):
    def run():
        out: list = []
        kp_read_records(data, out)
        return out
    return run


def library_pair(codec):
    """The compression library alone, with the settings kafkawire.compression uses."""
    if codec == 1:
        return (lambda d: zlib.compress(d, -1, 31)), (lambda c: zlib.decompress(c, 31))
    if codec == 2:
        import cramjam

        return (lambda d: bytes(cramjam.snappy.compress_raw(d))), (
            lambda c: bytes(cramjam.snappy.decompress_raw(c)))
    if codec == 3:
        import lz4.frame as f

        return (lambda d: f.compress(d, compression_level=0, block_size=f.BLOCKSIZE_MAX64KB,
                                     block_linked=False, content_checksum=False,
                                     store_size=False)), f.decompress
    import zstandard

    c, d = zstandard.ZstdCompressor(level=3), zstandard.ZstdDecompressor()
    return c.compress, d.decompress


# ---------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------


class Bench:
    def __init__(self, budget: float):
        self.budget = budget  # seconds per measurement
        self.cases: dict[str, tuple] = {}  # name -> (fn, number)
        self.times: dict[str, list[float]] = {}

    def add(self, name: str, fn, check=None) -> None:
        """Time `fn`; `check(result)` must hold for its first result, or nothing is timed."""
        result = fn()  # warm up, and fail early
        if check is not None and not check(result):
            raise AssertionError(f"{name}: wrong result, so it is not timed")
        start = time.perf_counter()
        fn()
        once = max(time.perf_counter() - start, 1e-7)
        self.cases[name] = (fn, max(1, int(self.budget / once)))
        self.times[name] = []

    def run(self, rounds: int) -> None:
        names = list(self.cases)
        for r in range(rounds):
            print(f"round {r + 1}/{rounds}", file=sys.stderr, flush=True)
            for name in names:
                fn, number = self.cases[name]
                gc.collect()
                gc.disable()  # same for every implementation: time the codec, not the GC
                try:
                    start = time.perf_counter()
                    for _ in range(number):
                        fn()
                    self.times[name].append((time.perf_counter() - start) / number)
                finally:
                    gc.enable()

    def median(self, name: str) -> float | None:
        t = self.times.get(name)
        return statistics.median(t) if t else None


def fmt_ms(t: float | None, n: int | None = N_RECORDS) -> str:
    if t is None:
        return "n/a"
    text = f"{t * 1e3:.2f} ms"
    if n:
        text += f" ({n / t / 1e6:.2f} M rec/s)"
    return text


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "MISS")


# ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds, shorter measurements")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    parser.add_argument("--json", metavar="PATH",
                        help="also write {case: ratio} (peer time / kafkawire time) to PATH")
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 7)
    bench = Bench(budget=0.05 if args.quick else 0.2)

    records = make_records()
    encoded: dict[tuple[int, int], bytes] = {}
    for magic, codec in FORMATS:
        encoded[magic, codec] = kw_encode(records, magic, codec)()

    # Legacy lz4 in magic 0 is the broken-checksum form (KIP-57) that aiokafka refuses.
    aio_supports = {(m, c) for m, c in FORMATS if not (m == 0 and c == 3)}

    # Every case's first result is checked before it is timed: encoders' sets must decode
    # (with kafkawire) to the workload's records, decoders must return all of them.
    expected = [(k, v) for k, v, _ts in records]

    def same_records(out) -> bool:
        return [(r.key, r.value) for r in out] == expected

    def encodes_records(data) -> bool:
        # Producers write wrapper offset 0 (the broker assigns offsets), so magic 1's relative
        # inner offsets (KIP-31) resolve below 0: keep them all.
        return same_records(kw.decode_records(data, start_offset=-(2**63)))

    def all_columns(cols) -> bool:
        return len(cols) == N_RECORDS and int(cols.value_lengths.sum()) == N_RECORDS * VALUE_SIZE

    print("preparing (checks, warm-up and calibration)...", file=sys.stderr, flush=True)
    for magic, codec in FORMATS:
        tag = f"m{magic}-{CODEC_NAMES[codec]}"
        data = encoded[magic, codec]
        bench.add(f"enc/kw/{tag}", kw_encode(records, magic, codec), encodes_records)
        bench.add(f"dec/kw/{tag}", kw_decode(data), same_records)
        bench.add(f"col/kw/{tag}", lambda d=data: kw.decode_columnar(d, check_crcs=True),
                  all_columns)
        if (magic, codec) in aio_supports:
            bench.add(f"enc/aio/{tag}", peer_encode(
                aio.DefaultRecordBatchBuilder, aio.LegacyRecordBatchBuilder, records, magic,
                codec), encodes_records)
            bench.add(f"dec/aio/{tag}", aio_decode(data), same_records)
        bench.add(f"enc/kp/{tag}", peer_encode(KpDefaultBuilder, KpLegacyBuilder, records,
                                               magic, codec), encodes_records)
        bench.add(f"dec/kp/{tag}", kp_decode(data), same_records)

    # Compression libraries alone, on the same inner bytes kafkawire compresses.
    for magic, codec in FORMATS:
        if codec == 0:
            continue
        plain = encoded[magic, 0]
        inner = plain[61:] if magic == 2 else plain
        compress, decompress = library_pair(codec)
        packed = compress(inner)
        tag = f"m{magic}-{CODEC_NAMES[codec]}"
        bench.add(f"lib-c/{tag}", lambda c=compress, i=inner: c(i),
                  lambda out, d=decompress, i=inner: d(out) == i)
        bench.add(f"lib-d/{tag}", lambda d=decompress, p=packed: d(p),
                  lambda out, i=inner: out == i)

    # Checksums and memory copies over 64 MiB.
    big = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8)
    big_bytes = big.tobytes()
    crc32c_ref, crc32_ref = aio.crc32c_cython(big_bytes), zlib.crc32(big_bytes)
    bench.add("crc/kw-crc32c", lambda: kw.crc32c(big_bytes), crc32c_ref.__eq__)
    bench.add("crc/kw-crc32", lambda: kw.crc32(big_bytes), crc32_ref.__eq__)
    bench.add("crc/zlib-crc32", lambda: zlib.crc32(big_bytes))
    bench.add("crc/aio-crc32c", lambda: aio.crc32c_cython(big_bytes))
    bench.add("copy/bytes", lambda: bytes(memoryview(big_bytes)))
    bench.add("copy/numpy", lambda: big.copy())

    # decode_columnar against crc32c alone over the same 1 MiB sets (value sizes 10-1000)
    columnar.add_cases(bench, kw)

    bench.run(rounds)
    lines = report(bench, aio_supports, rounds)
    text = "\n".join(lines) + "\n"
    print(text)
    write_markdown(args.markdown, text)
    if args.json:
        write_json(args.json, ratios(bench, aio_supports))


def ratios(bench: Bench, aio_supports) -> dict[str, float]:
    """The table's peer ratios, machine-readable (bench/check.py reads them): peer median
    time / kafkawire median time, so higher is better for kafkawire."""
    m = bench.median
    out: dict[str, float] = {}

    def put(name, peer, ours):
        if peer is not None and ours is not None and ours > 0:
            out[name] = peer / ours

    for kind, label in (("enc", "encode"), ("dec", "decode")):
        for magic, codec in FORMATS:
            tag = f"m{magic}-{CODEC_NAMES[codec]}"
            ours = m(f"{kind}/kw/{tag}")
            if (magic, codec) in aio_supports:
                put(f"{label}/{tag}/vs-aiokafka", m(f"{kind}/aio/{tag}"), ours)
            put(f"{label}/{tag}/vs-kafka-python", m(f"{kind}/kp/{tag}"), ours)
    for magic, codec in FORMATS:
        tag = f"m{magic}-{CODEC_NAMES[codec]}"
        if (magic, codec) in aio_supports:
            put(f"columnar/{tag}/vs-aiokafka-objects", m(f"dec/aio/{tag}"), m(f"col/kw/{tag}"))
    put("crc32c/vs-aiokafka", m("crc/aio-crc32c"), m("crc/kw-crc32c"))
    out.update(columnar.ratios(m))  # crc32c time / columnar time: >= 0.4 is the target
    return out


def report(bench: Bench, aio_supports, rounds: int) -> list[str]:
    m = bench.median
    out = [
        "# kafkawire codec benchmark",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} CPUs; kafkawire crc32c: "
        f"{kw.crc32c_implementation()}; median of {rounds} interleaved rounds; "
        f"{N_RECORDS:,} records of {KEY_SIZE}-byte keys and {VALUE_SIZE}-byte values per set.",
        "",
        "What each row measures:",
        "- **encode**: records (prepared tuples) to one set: kafkawire `encode_record_batch` / "
        "`encode_message_set`; aiokafka and kafka-python: their record-batch builder, "
        "`append` per record, then `build()`.",
        "- **decode**: one set to Python record objects with CRC checking, as each client's "
        "consumer does it: kafkawire `decode_records(check_crcs=True)`; aiokafka: "
        "`MemoryRecords`, `validate_crc()` per batch, iterate records; kafka-python: the same "
        "plus `validate_crc()` per record. All decode the same bytes (kafkawire's encoding).",
        "- **columnar**: kafkawire `decode_columnar(check_crcs=True)`, compared with "
        "aiokafka's object decode of the same set.",
        "- ratio = peer time / kafkawire time (higher is better for kafkawire).",
        "",
        "| benchmark | kafkawire | aiokafka (Cython) | kafka-python | vs aiokafka | vs kafka-python "
        "| target | |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def ratio(a, b):
        return None if a is None or b is None else a / b

    def rx(r):
        return "n/a" if r is None else f"{r:.2f}x"

    for kind, label, target in (("enc", "encode", TARGET_ENCODE),
                                ("dec", "decode objects + CRC", TARGET_DECODE)):
        for magic, codec in FORMATS:
            tag = f"m{magic}-{CODEC_NAMES[codec]}"
            t_kw, t_aio, t_kp = (m(f"{kind}/{impl}/{tag}") for impl in ("kw", "aio", "kp"))
            r_aio, r_kp = ratio(t_aio, t_kw), ratio(t_kp, t_kw)
            out.append(
                f"| {label}, magic {magic}, {CODEC_NAMES[codec]} | {fmt_ms(t_kw)} | "
                f"{fmt_ms(t_aio)} | {fmt_ms(t_kp)} | {rx(r_aio)} | {rx(r_kp)} | "
                f">= {target:g}x aiokafka | {verdict(None if r_aio is None else r_aio >= target)} |"
            )
    for magic, codec in FORMATS:
        tag = f"m{magic}-{CODEC_NAMES[codec]}"
        t_col, t_aio = m(f"col/kw/{tag}"), m(f"dec/aio/{tag}")
        r = ratio(t_aio, t_col)
        out.append(
            f"| columnar decode + CRC, magic {magic}, {CODEC_NAMES[codec]} | {fmt_ms(t_col)} | "
            f"{fmt_ms(t_aio)} (objects) | | {rx(r)} | | >= {TARGET_COLUMNAR:g}x aiokafka "
            f"objects | {verdict(None if r is None else r >= TARGET_COLUMNAR)} |"
        )

    size = 64 << 20

    def gbs(name):
        t = m(name)
        return None if t is None else size / t / 1e9

    crc32c, crc32 = gbs("crc/kw-crc32c"), gbs("crc/kw-crc32")
    out += [
        "",
        "## Checksums and memory copy (64 MiB buffer)",
        "",
        "| what | GB/s | target | |",
        "|---|---|---|---|",
        f"| kafkawire crc32c ({kw.crc32c_implementation()}) | {crc32c:.2f} | "
        f">= {TARGET_CRC32C_GBS:g} GB/s | {verdict(crc32c >= TARGET_CRC32C_GBS)} |",
        f"| kafkawire crc32 | {crc32:.2f} | | |",
        f"| zlib.crc32 | {gbs('crc/zlib-crc32'):.2f} | | |",
        f"| aiokafka crc32c_cython | {gbs('crc/aio-crc32c'):.2f} | | |",
        f"| memory copy: bytes(memoryview) | {gbs('copy/bytes'):.2f} | | |",
        f"| memory copy: numpy copy | {gbs('copy/numpy'):.2f} | | |",
        "",
        "## Compressed paths against the compression library alone",
        "",
        "Compression part of a kafkawire path = kafkawire time with the codec minus kafkawire "
        "time without compression; library = the codec's package alone on the same inner "
        "bytes with the same settings. Ratio = compression part / library (1.0 = no overhead).",
        "",
        "| path | kafkawire total | compression part | library alone | ratio | target | |",
        "|---|---|---|---|---|---|---|",
    ]
    for magic, codec in FORMATS:
        if codec == 0:
            continue
        tag = f"m{magic}-{CODEC_NAMES[codec]}"
        base = f"m{magic}-none"
        for kind, lib, label in (("enc", "lib-c", "encode"), ("dec", "lib-d", "decode")):
            total, plain, alone = m(f"{kind}/kw/{tag}"), m(f"{kind}/kw/{base}"), m(f"{lib}/{tag}")
            part = total - plain
            r = part / alone
            out.append(
                f"| {label}, magic {magic}, {CODEC_NAMES[codec]} | {fmt_ms(total, None)} | "
                f"{fmt_ms(part, None)} | {fmt_ms(alone, None)} | {r:.2f}x | "
                f"<= {TARGET_COMPRESSED:g}x | {verdict(r <= TARGET_COMPRESSED)} |"
            )
    out += ["", *columnar.table(m)]
    return out


if __name__ == "__main__":
    main()
