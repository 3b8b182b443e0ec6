"""kafkawire's Avro serializer and deserializer beside confluent-kafka's, per record in
Python: the same schema, the same records, one process, one real Schema Registry
(Apicurio, started here), rounds interleaved (each round times every case once), medians.

    .venv/bin/python bench/compare_schemas.py [--records N] [--rounds R] [--quick] [--markdown PATH] [--json PATH]

Both sides ask the registry once (the first record); what is timed is the per-record
path after that: serialize each record to framed bytes, deserialize each framed payload
back (with no reader schema, and with a reader schema one version newer than the
writer's).  Times are the process's CPU time (time.process_time: all of this is one
thread's Python), so that other work on a shared machine does not count.
ratio = confluent-kafka's time / kafkawire's (higher is better for kafkawire).
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import json
import platform
import statistics
import sys
import time
import uuid
from typing import Any, Callable

from report import write_json, write_markdown

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "bench.kw",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "ship", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": "int"}]}},
    ],
}
# The reader's version: one more field, with a default.
READER = dict(SCHEMA, fields=SCHEMA["fields"] + [{"name": "channel", "type": "string", "default": "web"}])


def records(n: int) -> list[dict[str, Any]]:
    base = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    return [{
        "id": i, "customer": f"customer-{i % 977:05d}", "status": ("NEW", "PAID", "SHIPPED")[i % 3],
        "amount": decimal.Decimal(i % 100000) / 100, "created": base + datetime.timedelta(milliseconds=i * 37),
        "note": None if i % 2 else f"note {i}", "tags": [f"t{i % 7}", "x"], "attrs": {"a": i, "b": -i},
        "ship": {"city": "Lyon", "zip": 69000 + i % 100},
    } for i in range(n)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="2,000 records, 3 rounds")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    parser.add_argument("--json", metavar="PATH", help="write the ratios to PATH (bench/check.py reads them)")
    args = parser.parse_args()
    if args.quick:
        args.records, args.rounds = 2000, 3

    from confluent_kafka.schema_registry import SchemaRegistryClient as CKClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer as CKDeserializer
    from confluent_kafka.schema_registry.avro import AvroSerializer as CKSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kafkawire.schema import SchemaRegistryClient
    from kafkawire.schema.avro import AvroDeserializer, AvroSerializer
    from kafkawire.testing.registry import ApicurioRegistry

    data = records(args.records)
    text, reader_text = json.dumps(SCHEMA), json.dumps(READER)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    with ApicurioRegistry() as registry:
        kw_client = SchemaRegistryClient(registry.url)
        ck_client = CKClient({"url": registry.url})
        kw_ser = AvroSerializer(kw_client, text, topic=topic).for_topic(topic)
        kw_des = AvroDeserializer(kw_client, topic=topic).for_topic(topic)
        kw_des_reader = AvroDeserializer(kw_client, reader_text, topic=topic).for_topic(topic)
        ctx = SerializationContext(topic, MessageField.VALUE)
        ck_ser = CKSerializer(ck_client, text)
        ck_des = CKDeserializer(ck_client)
        ck_des_reader = CKDeserializer(ck_client, reader_text)
        payloads = [kw_ser(r) for r in data]
        if payloads != [ck_ser(r, ctx) for r in data]:
            print("the two serializers' bytes differ", file=sys.stderr)
            return 1
        for des in (kw_des, kw_des_reader):
            des(payloads[0])
        ck_des(payloads[0], ctx)
        ck_des_reader(payloads[0], ctx)

        cases: dict[str, Callable[[], Any]] = {
            "serialize/kafkawire": lambda: [kw_ser(r) for r in data],
            "serialize/confluent": lambda: [ck_ser(r, ctx) for r in data],
            "deserialize/kafkawire": lambda: [kw_des(p) for p in payloads],
            "deserialize/confluent": lambda: [ck_des(p, ctx) for p in payloads],
            "deserialize into a reader schema/kafkawire": lambda: [kw_des_reader(p) for p in payloads],
            "deserialize into a reader schema/confluent": lambda: [ck_des_reader(p, ctx) for p in payloads],
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.rounds):
            for name, run in cases.items():
                t0 = time.process_time()
                run()
                times[name].append(time.process_time() - t0)

    n = args.records
    lines = [f"CPython {platform.python_version()} on {platform.machine()}; CPU time, median of {args.rounds} "
             f"interleaved rounds; {n:,} records of a 9-field Order (nested record, enum, decimal, "
             f"timestamp, union, array, map), {len(payloads[0])}-{max(map(len, payloads))} bytes framed", "",
             "| per record | kafkawire | confluent-kafka | ratio | target | |",
             "|---|---|---|---|---|---|"]
    ratios = {}
    for what, key in (("serialize", "avro/serialize/vs-confluent"), ("deserialize", "avro/deserialize/vs-confluent"),
                      ("deserialize into a reader schema", "avro/deserialize-reader/vs-confluent")):
        kw, ck = statistics.median(times[f"{what}/kafkawire"]), statistics.median(times[f"{what}/confluent"])
        ratio = ck / kw
        ratios[key] = round(ratio, 3)
        lines.append(f"| {what} | {kw / n * 1e6:.2f} us ({n / kw / 1e3:.0f} k rec/s) | {ck / n * 1e6:.2f} us "
                     f"({n / ck / 1e3:.0f} k rec/s) | {ratio:.2f}x | >= 2x | {'PASS' if ratio >= 2 else 'MISS'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    write_markdown(args.markdown, text)
    write_json(args.json, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
