"""Avro into Arrow columns: kafkawire's batch decode against fastavro's per-record reader,
and against the raw transport of the same records.

Cases over the same Confluent-framed payloads (one schema id):
- ``fastavro``: ``fastavro.schemaless_reader`` per record (the 5-byte header cut off), a
  list of dicts: what a Python consumer or a Spark UDF does today;
- ``kafkawire``: ``AvroColumnDecoder.decode`` of the payloads' binary column into one
  StructArray (compiled; ``twin`` is the pure-Python twin, shown for scale);
- ``transport``: the same records as Kafka batches (about 16 KiB each, uncompressed)
  decoded to Arrow bytes columns by ``codec.decode_columnar(...).to_arrow()``, CRCs checked:
  what delivering the payloads costs before any Avro decoding.
Targets: kafkawire >= 10x fastavro, and kafkawire's time <= 3x the transport's.

One process, interleaved rounds (each round times every case once), medians.  Run with:

    .venv/bin/python bench/compare_avro_columns.py [--quick] [--markdown PATH] [--json PATH]

Workload: an order-like record (long id, string customer and uuid, decimal(12,2) amount,
timestamp-millis, enum status, nullable string note, double score, array of 0-4 strings,
map of 0-2 strings, a nested record of int and nullable long): about 150 bytes a record.
"""

from __future__ import annotations

import argparse
import decimal
import gc
import io
import os
import platform
import random
import statistics
import struct
import sys
import time
import uuid
import datetime

from report import write_json, write_markdown

import fastavro
import pyarrow as pa

from kafkawire import codec
from kafkawire._avro_columns import AvroColumnDecoder

try:
    from kafkawire import _avro
except ImportError as exc:
    sys.exit(f"kafkawire._avro is not built ({exc}); run `make build` first")
from kafkawire import _pyavro

TARGET_FASTAVRO = 10.0  # kafkawire >= 10x fastavro's per-record reader
TARGET_TRANSPORT = 3.0  # kafkawire's time <= 3x the transport's over the same records
BATCH_BYTES = 16 << 10
SCHEMA_ID = 42

SCHEMA = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "customer_id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12,
                                "scale": 2}},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "Status",
                                "symbols": ["NEW", "PAID", "SHIPPED", "CANCELLED"]}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "score", "type": "double"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "string"}},
    {"name": "shipping", "type": {"type": "record", "name": "Shipping", "fields": [
        {"name": "zone", "type": "int"}, {"name": "weight_g", "type": ["null", "long"]}]}},
]}


def make_payloads(n: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    parsed = fastavro.parse_schema(SCHEMA)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    header = b"\x00" + struct.pack(">I", SCHEMA_ID)
    out = []
    for i in range(n):
        value = {
            "id": 10_000_000 + i,
            "customer": f"customer-{rng.randrange(100_000):06d}",
            "customer_id": str(uuid.UUID(int=rng.getrandbits(128))),
            "amount": decimal.Decimal(rng.randrange(1, 10**8)).scaleb(-2),
            "created": start + datetime.timedelta(milliseconds=rng.randrange(10**10)),
            "status": rng.choice(["NEW", "PAID", "SHIPPED", "CANCELLED"]),
            "note": None if rng.random() < 0.7 else "leave at the door",
            "score": rng.random(),
            "tags": [rng.choice(["gift", "express", "fragile", "bulk"])
                     for _ in range(rng.randrange(5))],
            "attrs": {f"k{j}": f"v{rng.randrange(1000)}" for j in range(rng.randrange(3))},
            "shipping": {"zone": rng.randrange(10),
                         "weight_g": None if rng.random() < 0.2 else rng.randrange(10**6)},
        }
        fo = io.BytesIO()
        fastavro.schemaless_writer(fo, parsed, value)
        out.append(header + fo.getvalue())
    return out


def make_batches(payloads: list[bytes]) -> bytes:
    """The payloads as Kafka record batches of about BATCH_BYTES each."""
    out, batch, size, offset = [], [], 0, 0
    for p in payloads:
        batch.append((None, p))
        size += len(p) + 8
        if size >= BATCH_BYTES:
            out.append(codec.encode_record_batch(batch, base_offset=offset))
            offset += len(batch)
            batch, size = [], 0
    if batch:
        out.append(codec.encode_record_batch(batch, base_offset=offset))
    return b"".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10,000 records, 5 rounds")
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    n = args.records or (10_000 if args.quick else 100_000)
    rounds = args.rounds or (5 if args.quick else 11)

    payloads = make_payloads(n)
    column = pa.array(payloads, pa.binary())
    fetched = make_batches(payloads)
    parsed = fastavro.parse_schema(SCHEMA)
    compiled = AvroColumnDecoder(SCHEMA, {SCHEMA_ID: SCHEMA}, implementation=_avro)
    twin = AvroColumnDecoder(SCHEMA, {SCHEMA_ID: SCHEMA}, implementation=_pyavro)
    reader = fastavro.schemaless_reader
    n_twin = min(n, 10_000)
    twin_column = column.slice(0, n_twin)

    def run_fastavro():
        return [reader(io.BytesIO(memoryview(p)[5:]), parsed, None) for p in payloads]

    def run_kafkawire():
        return compiled.decode(column)

    def run_twin():
        return twin.decode(twin_column)

    def run_transport():
        return codec.decode_columnar(fetched).to_arrow().column("value")

    def run_both():
        return compiled.decode(codec.decode_columnar(fetched).to_arrow().column("value"))

    # the same rows from every path before anything is timed
    decoded = run_kafkawire()
    assert len(decoded) == n and decoded.null_count == 0
    assert run_transport().equals(column)
    assert run_both().equals(decoded)
    assert run_twin().equals(decoded.slice(0, n_twin))
    first = run_fastavro()[:3]
    assert [r["id"] for r in first] == decoded.field("id").to_pylist()[:3]

    cases = {"fastavro": run_fastavro, "kafkawire": run_kafkawire, "twin": run_twin,
             "transport": run_transport, "transport+kafkawire": run_both}
    counts = {"twin": n_twin}
    times: dict[str, list[float]] = {k: [] for k in cases}
    gc.collect()
    for _ in range(rounds):
        for name, fn in cases.items():
            gc.disable()
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            gc.enable()
            times[name].append(dt / counts.get(name, n))
    med = {k: statistics.median(v) for k, v in times.items()}
    payload_bytes = sum(len(p) for p in payloads)
    vs_fastavro = med["fastavro"] / med["kafkawire"]
    vs_transport = med["kafkawire"] / med["transport"]
    lines = [
        "### Avro into Arrow columns",
        "",
        f"{n:,} records, {payload_bytes / n:.0f} bytes each on average (Confluent-framed), "
        f"{rounds} interleaved rounds, medians; Python {platform.python_version()}, "
        f"fastavro {fastavro.__version__}, pyarrow {pa.__version__}, "
        f"{os.cpu_count()} CPUs",
        "",
        "| case | ns/record | MB/s of payload | records/s |",
        "|---|---:|---:|---:|",
    ]
    for name in cases:
        t = med[name]
        lines.append(f"| {name} | {t * 1e9:,.0f} | {payload_bytes / n / t / 1e6:,.0f} | "
                     f"{1 / t:,.0f} |")
    lines += [
        "",
        f"- kafkawire vs fastavro per record: **{vs_fastavro:.1f}x** faster "
        f"(target >= {TARGET_FASTAVRO:.0f}x: {'met' if vs_fastavro >= TARGET_FASTAVRO else 'NOT met'})",
        f"- kafkawire's time / the transport's over the same records: **{vs_transport:.2f}x** "
        f"(target <= {TARGET_TRANSPORT:.0f}x: "
        f"{'met' if vs_transport <= TARGET_TRANSPORT else 'NOT met'})",
        f"- the compiled decoder vs its pure-Python twin: {med['twin'] / med['kafkawire']:.0f}x",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    write_markdown(args.markdown, text)
    # bench/check.py guards ratios where higher is better: the transport's time over
    # kafkawire's (target >= 1/3) beside the lower-is-better one the table shows.
    write_json(args.json, {"avro_columns_vs_fastavro": round(vs_fastavro, 2),
                           "avro_columns_vs_transport": round(vs_transport, 2),
                           "avro_columns/transport_over_kafkawire": round(1 / vs_transport, 3)})


if __name__ == "__main__":
    main()
