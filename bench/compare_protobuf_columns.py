"""Protobuf into Arrow columns: kafkawire's batch decode against per-record deserializers.

Cases over the same Confluent-framed payloads (one schema id, message indexes [0]):
- ``kafkawire columns``: ``ProtobufColumnDecoder.decode`` of the payloads' binary column
  into one StructArray (what ``format("kafkawire")`` with ``value.format=protobuf`` runs);
- ``kafkawire per record``: ``kafkawire.schema.protobuf.ProtobufDeserializer`` per record,
  a list of parsed messages (fields not yet read);
- ``confluent-kafka per record``: confluent-kafka's ``ProtobufDeserializer`` per record,
  the same.
Target: the column decode faster than both per-record deserializers, although it also
reads every field into Arrow where they only parse.

One process, interleaved rounds (each round times every case once), medians.  Run with:

    .venv/bin/python bench/compare_protobuf_columns.py [--records N] [--rounds R] [--markdown PATH] [--json PATH]

``--before FILE`` adds a case ``before``: the same decode by another version of
``kafkawire/_protobuf_columns.py`` (e.g. ``git show REV:src/kafkawire/_protobuf_columns.py >
/tmp/before.py``), its rows checked equal to the current version's first.

Workload: an Order message (int64 id, string customer, uint64 amount, enum status, a
Timestamp, a nested Address message, repeated Item messages (0-3) and repeated int32
codes, a map<string, string> of 0-2 attributes, a oneof of string note or int32 priority).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import gc
import importlib.util
import os
import platform
import random
import statistics
import struct
import time

from report import write_json, write_markdown

import confluent_kafka
import google.protobuf
import pyarrow as pa
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as ConfluentDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from kafkawire._protobuf_columns import ProtobufColumnDecoder, ProtobufFiles
from kafkawire.schema.protobuf import ProtobufDeserializer

SCHEMA_ID = 42
F = descriptor_pb2.FieldDescriptorProto


def schema() -> descriptor_pb2.FileDescriptorProto:
    fp = descriptor_pb2.FileDescriptorProto(name="bench/order.proto", package="bench", syntax="proto3",
                                            dependency=["google/protobuf/timestamp.proto"])
    status = fp.enum_type.add(name="Status")
    for n, name in enumerate(["NEW", "PAID", "SHIPPED", "CANCELLED"]):
        status.value.add(name=name, number=n)
    o = fp.message_type.add(name="Order")  # first: message indexes [0]
    o.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    o.field.add(name="customer", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    o.field.add(name="amount", number=3, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
    o.field.add(name="status", number=4, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL, type_name=".bench.Status")
    o.field.add(name="created", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                type_name=".google.protobuf.Timestamp")
    o.field.add(name="ship_to", number=6, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".bench.Address")
    o.field.add(name="items", number=7, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".bench.Item")
    o.field.add(name="codes", number=8, type=F.TYPE_INT32, label=F.LABEL_REPEATED)
    entry = o.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    o.field.add(name="attrs", number=9, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                type_name=".bench.Order.AttrsEntry")
    o.oneof_decl.add(name="extra")
    o.field.add(name="note", number=10, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    o.field.add(name="priority", number=11, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, oneof_index=0)
    address = fp.message_type.add(name="Address")
    address.field.add(name="city", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    address.field.add(name="zone", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    item = fp.message_type.add(name="Item")
    item.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    item.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    item.field.add(name="price", number=3, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    return fp


def order_class(fp: descriptor_pb2.FileDescriptorProto) -> type:
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(fp.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Order"))


def make_payloads(cls: type, n: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    header = b"\x00" + struct.pack(">I", SCHEMA_ID) + b"\x00"  # message indexes [0]
    out = []
    for i in range(n):
        m = cls(id=10_000_000 + i, customer=f"customer-{rng.randrange(100_000):06d}",
                amount=rng.randrange(1 << 63), status=rng.randrange(4),
                codes=[rng.randrange(1000) for _ in range(rng.randrange(4))])
        m.created.FromDatetime(start + datetime.timedelta(microseconds=rng.randrange(10**13)))
        if rng.random() < 0.8:
            m.ship_to.city, m.ship_to.zone = rng.choice(["Oslo", "Lyon", "Porto"]), rng.randrange(10)
        for _ in range(rng.randrange(4)):
            m.items.add(sku=f"sku-{rng.randrange(10**6)}", qty=rng.randrange(1, 5), price=rng.random() * 100)
        for j in range(rng.randrange(3)):
            m.attrs[f"k{j}"] = f"v{rng.randrange(1000)}"
        if rng.random() < 0.5:
            m.note = "leave at the door"
        elif rng.random() < 0.5:
            m.priority = rng.randrange(3)
        out.append(header + m.SerializeToString())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--before", default=None, help="another version of _protobuf_columns.py to time too")
    args = ap.parse_args()
    n, rounds = args.records, args.rounds

    fp = schema()
    cls = order_class(fp)
    payloads = make_payloads(cls, n)
    column = pa.array(payloads, pa.binary())
    files = ProtobufFiles(base64.b64encode(fp.SerializeToString()).decode())
    columns = ProtobufColumnDecoder(files, files.message("bench.Order"))
    ours = ProtobufDeserializer(cls)
    theirs = ConfluentDeserializer(cls, {"use.deprecated.format": False})
    ctx = SerializationContext("orders", MessageField.VALUE)

    def run_columns():
        return columns.decode(column)

    def run_kafkawire():
        return [ours.deserialize(p) for p in payloads]

    def run_confluent():
        return [theirs(p, ctx) for p in payloads]

    # the same rows from every path before anything is timed
    decoded = run_columns()
    assert len(decoded) == n and decoded.null_count == 0
    a, b = run_kafkawire(), run_confluent()
    for row in (0, n // 2, n - 1):
        assert a[row] == b[row]
        got = decoded[row].as_py()
        assert got["id"] == a[row].id and got["amount"] == a[row].amount
        assert [i["sku"] for i in got["items"]] == [i.sku for i in a[row].items]
        assert dict(got["attrs"]) == dict(a[row].attrs)

    cases = {"kafkawire columns": run_columns, "kafkawire per record": run_kafkawire,
             "confluent-kafka per record": run_confluent}
    if args.before:
        spec = importlib.util.spec_from_file_location("before_protobuf_columns", args.before)
        before = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(before)
        old_files = before.ProtobufFiles(base64.b64encode(fp.SerializeToString()).decode())
        old = before.ProtobufColumnDecoder(old_files, old_files.message("bench.Order"))

        def sorted_maps(rows: list) -> list:
            return [dict(r, attrs=sorted(r["attrs"])) for r in rows]

        # map entries' order is the runtime's, not the wire's: compared as sets
        assert sorted_maps(old.decode(column).to_pylist()) == sorted_maps(decoded.to_pylist())
        cases["before"] = lambda: old.decode(column)
    times: dict[str, list[float]] = {k: [] for k in cases}
    gc.collect()
    for _ in range(rounds):
        for name, fn in cases.items():
            gc.disable()
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            gc.enable()
            times[name].append(dt)
    med = {k: statistics.median(v) for k, v in times.items()}
    vs_ours = med["kafkawire per record"] / med["kafkawire columns"]
    vs_confluent = med["confluent-kafka per record"] / med["kafkawire columns"]
    payload_bytes = sum(len(p) for p in payloads)
    lines = [
        "### Protobuf into Arrow columns",
        "",
        f"{n:,} records, {payload_bytes / n:.0f} bytes each on average (Confluent-framed), "
        f"{rounds} interleaved rounds, medians; Python {platform.python_version()}, "
        f"protobuf {google.protobuf.__version__}, confluent-kafka {confluent_kafka.__version__}, "
        f"pyarrow {pa.__version__}, {os.cpu_count()} CPUs",
        "",
        "| case | ms per batch | ns/record | records/s |",
        "|---|---:|---:|---:|",
    ]
    for name in cases:
        t = med[name]
        lines.append(f"| {name} | {t * 1e3:,.1f} | {t / n * 1e9:,.0f} | {n / t:,.0f} |")
    lines += [
        "",
        f"- columns vs kafkawire's per-record deserializer: **{vs_ours:.2f}x** faster",
        f"- columns vs confluent-kafka's per-record deserializer: **{vs_confluent:.2f}x** faster",
        f"- target (columns faster than both): {'met' if min(vs_ours, vs_confluent) > 1 else 'NOT met'}",
    ]
    if "before" in med:
        lines.append(f"- columns vs before: **{med['before'] / med['kafkawire columns']:.2f}x** faster")
    lines += [
        "",
    ]
    text = "\n".join(lines)
    print(text)
    write_markdown(args.markdown, text)
    write_json(args.json, {"protobuf_columns_vs_kafkawire_per_record": round(vs_ours, 2),
                           "protobuf_columns_vs_confluent_per_record": round(vs_confluent, 2)})


if __name__ == "__main__":
    main()
