"""Shared by the Spark Connect and standalone-cluster tests and their job scripts: an Avro
topic written with kafkawire's AvroSerializer against a real registry, and the typed rows
Spark must read from it, both as plain JSON values (the jobs print what they collected
as JSON; the tests compare it with :func:`expected`)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

UTC = dt.timezone.utc

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "sparkjobs", "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"},
            {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "GOLD", "PLATINUM"]}},
        ]}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ref", "type": ["null", "long", "string"], "default": None},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    ]}
SPARK_TYPE = ("struct<id:bigint,customer:struct<name:string,tier:string>,amount:decimal(12,2),at:timestamp,"
              "note:string,ref:struct<member0:bigint,member1:string>,lines:array<struct<sku:string,qty:int>>>")
AT = dt.datetime(2026, 3, 1, tzinfo=UTC)


def order(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "customer": {"name": f"cust-{i % 13}-ü", "tier": ("FREE", "GOLD", "PLATINUM")[i % 3]},
        "amount": decimal.Decimal((i * 7919) % 2_000_003 - 1_000_000).scaleb(-2),
        "at": AT + dt.timedelta(milliseconds=i * 1_234_567),
        "note": None if i % 4 == 0 else f"note {i}",
        "ref": (None, (i << 33) + 5, f"r{i}")[i % 3],
        "lines": [{"sku": f"s{i}-{k}", "qty": k - i} for k in range(i % 4)],
    }


def produce(bootstrap: str, url: str, topic: str, partitions: int, per_partition: int) -> list[dict[str, Any]]:
    """Records ``order(i)`` for i in 0..partitions*per_partition, i to partition i % partitions,
    serialized by kafkawire's AvroSerializer (registering SCHEMA under ``<topic>-value``)."""
    from kafkawire import Producer
    from kafkawire.schema import SchemaRegistryClient
    from kafkawire.schema.avro import AvroSerializer

    values = [order(i) for i in range(partitions * per_partition)]
    with SchemaRegistryClient(url) as client:
        serialize = AvroSerializer(client, json.dumps(SCHEMA)).for_topic(topic)
        with Producer(bootstrap_servers=bootstrap) as p:
            for part in range(partitions):
                p.send_batch(topic, part, [(b"k%d" % v["id"], serialize(v)) for v in values[part::partitions]]
                             ).result(30)
    return values


def expected(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as :func:`plain` gives Spark's reading of it."""
    ref = value["ref"]
    return {
        "id": value["id"], "customer": dict(value["customer"]), "amount": str(value["amount"]),
        "at": round(value["at"].timestamp() * 1000), "note": value["note"],
        "ref": None if ref is None else {"member0": ref if isinstance(ref, int) else None,
                                         "member1": ref if isinstance(ref, str) else None},
        "lines": [dict(line) for line in value["lines"]],
    }


def plain(row: Any) -> dict[str, Any]:
    """A collected ``value`` struct as JSON values: decimals as text, timestamps as epoch
    milliseconds (PySpark gives naive datetimes in this process's local time, which
    ``timestamp()`` reads back as the same instant)."""
    v = row.asDict(recursive=True)
    v["amount"] = str(v["amount"])
    v["at"] = round(v["at"].timestamp() * 1000)
    return v
