"""Confluent-framed Avro into typed Spark rows: ``format("kafkawire")`` with
``value.format=avro`` against Spark's JVM Kafka connector plus ``from_avro``.

One process, one SparkSession (local[2]) with the JVM connector's jars
(kafkawire.testing.spark.kafka_connector_jars) and spark-avro's (``bench/spark-avro.pom.xml``,
fetched from Maven Central once into the same cache), one Apache Kafka node and one
Apicurio Registry on loopback, both started here.  The topic (2 partitions) holds N
records produced with kafkawire's ``AvroSerializer`` against that registry: Confluent's
framing (a zero byte, the 4-byte schema id, the Avro body) of an order-like record with a
nested record, an enum, a decimal, a timestamp-millis, a date, a ``["null", "string"]``
and a ``["null", "long", "string"]`` union, an array of records and a map (100,000
distinct records, repeated in a larger topic).

Cases, each a batch read of the whole topic into rows of (key, partition, offset, value
struct) written to Spark's ``noop`` sink:

- ``kafkawire``: ``spark.read.format("kafkawire")`` with ``value.format=avro`` and
  ``schema.registry.url`` (the reader schema is the subject's latest version; the
  executors fetch writer schemas by id and decode each fetched batch into Arrow columns);
- ``jvm``: ``spark.read.format("kafka")`` and ``from_avro(expr("substring(value, 6)"),
  schema)``, the usual open-source workaround for Confluent's framing (open-source
  spark-avro knows no registry: the schema text is fetched from the registry in the driver
  and handed over; every record must then be written with that very schema).

Before anything is timed, both reads are collected (``toArrow()``, ordered by partition
and offset) and must be identical: the same Spark type and the same values.  Then one
untimed warm-up run of each and R interleaved rounds (the order alternating from round to
round); the table shows medians, and the ratio is the JVM side's median time over
kafkawire's (higher is better for kafkawire; target >= 2x).  Run with:

    .venv/bin/python bench/compare_spark_avro.py [--quick] [--rows N] [--rounds R] [--markdown PATH] [--json PATH]

(default 1,000,000 rows, 5 rounds; --quick 200,000 rows, 3 rounds.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import os
import platform
import random
import statistics
import sys
import time
import uuid
from typing import Any, Callable

from report import write_json, write_markdown

PARTITIONS = 2
POOL = 100_000  # distinct records serialized; a larger topic repeats them
TARGET = 2.0
#: spark-avro from Maven Central; no 4.3.0 is published (as for the Kafka connector), and
#: 4.2.0's from_avro runs inside PySpark 4.3 (the identity check below proves it each run).
SPARK_AVRO_VERSION = os.environ.get("KAFKAWIRE_SPARK_AVRO_VERSION", "4.2.0")
POM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark-avro.pom.xml")

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "bench.spark", "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"},
            {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "GOLD", "PLATINUM"]}},
            {"name": "since", "type": {"type": "int", "logicalType": "date"}},
        ]}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ref", "type": ["null", "long", "string"], "default": None},
        {"name": "score", "type": "double"},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
    ]}


def spark_avro_jars(timeout: float = 900.0) -> list[str]:
    """spark-avro's jar, fetched by Maven once into kafkawire's cache (as the JVM Kafka
    connector's are)."""
    from kafkawire.testing._maven import cached_dependencies

    libs = cached_dependencies(
        POM, f"spark-avro-{SPARK_AVRO_VERSION}", {"spark.avro.version": SPARK_AVRO_VERSION},
        f"spark-avro_2.13-{SPARK_AVRO_VERSION}.jar",
        f"org.apache.spark:spark-avro_2.13:{SPARK_AVRO_VERSION} (set KAFKAWIRE_SPARK_AVRO_VERSION to a "
        f"published release)", RuntimeError, timeout=timeout)
    return sorted(os.path.join(libs, n) for n in os.listdir(libs) if n.endswith(".jar"))


def order(i: int, rng: random.Random) -> dict[str, Any]:
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return {
        "id": i,
        "customer": {"name": f"customer-{rng.randrange(100_000):06d}",
                     "tier": ("FREE", "GOLD", "PLATINUM")[i % 3],
                     "since": dt.date(2015, 1, 1) + dt.timedelta(days=rng.randrange(4000))},
        "amount": decimal.Decimal(rng.randrange(-10**9, 10**9)).scaleb(-2),
        "at": base + dt.timedelta(milliseconds=rng.randrange(10**10)),
        "status": ("NEW", "PAID", "SHIPPED")[rng.randrange(3)],
        "note": None if rng.random() < 0.6 else f"note {i}",
        "ref": (None, rng.randrange(1 << 40), f"r-{i}")[i % 3],
        "score": rng.random(),
        "lines": [{"sku": f"sku-{rng.randrange(5000)}", "qty": rng.randrange(1, 9)} for _ in range(i % 4)],
        "attrs": {f"k{j}": f"v{rng.randrange(1000)}" for j in range(i % 3)},
    }


def produce(bootstrap: str, url: str, topic: str, n: int) -> tuple[float, float]:
    """N Avro records (record i to partition i % 2), serialized one by one with kafkawire's
    AvroSerializer (registering the schema; up to POOL distinct ones, then repeated), sent
    with send_batch; returns (serialize s, send s)."""
    from kafkawire import Producer
    from kafkawire.schema import SchemaRegistryClient
    from kafkawire.schema.avro import AvroSerializer

    rng = random.Random(1)
    with SchemaRegistryClient(url) as client:
        serialize = AvroSerializer(client, json.dumps(SCHEMA)).for_topic(topic)
        t0 = time.perf_counter()
        pool = [serialize(order(i, rng)) for i in range(min(n, POOL))]
        parts: list[list[tuple[bytes, bytes]]] = [[] for _ in range(PARTITIONS)]
        for i in range(n):
            parts[i % PARTITIONS].append((b"order-%08d" % i, pool[i % POOL]))
        t_ser = time.perf_counter() - t0
    p = Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=1_000_000,
                 max_request_size=1 << 20)
    try:
        p.partitions_for(topic)
        t0 = time.perf_counter()
        futures = [p.send_batch(topic, part, recs[lo:lo + 100_000])
                   for part, recs in enumerate(parts) for lo in range(0, len(recs), 100_000)]
        p.flush(600)
        count = sum(m.count for f in futures for m in f.result(60))
        if count != n:
            raise RuntimeError(f"produced {count:,} of {n:,}")
        return t_ser, time.perf_counter() - t0
    finally:
        p.close(30)


def create_topic(bootstrap: str, topic: str) -> None:
    from kafkawire import Consumer
    from kafkawire.protocol import apis

    create = apis.get("CreateTopics")
    with Consumer(bootstrap_servers=bootstrap) as c:
        req = create.Request(topics=[create.Request.CreatableTopic(
            name=topic, num_partitions=PARTITIONS, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=15000)
        code = c.cluster.request(None, create, req, 15).topics[0].error_code
        if code != 0:
            raise RuntimeError(f"CreateTopics {topic}: error code {code}")
        if c.cluster.partitions_for(topic, 15) != list(range(PARTITIONS)):
            raise RuntimeError(f"{topic} does not have {PARTITIONS} partitions")


class Reads:
    def __init__(self, spark: Any, bootstrap: str, url: str, topic: str, schema_text: str):
        self.spark, self.bootstrap, self.url, self.topic, self.schema_text = spark, bootstrap, url, topic, schema_text

    def kafkawire(self) -> Any:
        return (self.spark.read.format("kafkawire").option("kafka.bootstrap.servers", self.bootstrap)
                .option("subscribe", self.topic).option("value.format", "avro")
                .option("schema.registry.url", self.url).load()
                .select("key", "partition", "offset", "value"))

    def jvm(self) -> Any:
        from pyspark.sql.avro.functions import from_avro
        from pyspark.sql.functions import expr

        return (self.spark.read.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
                .option("subscribe", self.topic).load()
                .select("key", "partition", "offset",
                        from_avro(expr("substring(value, 6)"), self.schema_text).alias("value")))


def same_rows(reads: Reads, n: int) -> str:
    """Both reads collected and compared; returns the Spark type they share."""
    import pyarrow as pa

    kw_df, jvm_df = reads.kafkawire(), reads.jvm()
    kw_type = kw_df.schema["value"].dataType.simpleString()
    jvm_type = jvm_df.schema["value"].dataType.simpleString()
    if kw_type != jvm_type:
        raise SystemExit(f"the value types differ:\n  kafkawire {kw_type}\n  from_avro {jvm_type}")
    kw = kw_df.orderBy("partition", "offset").toArrow()
    jvm = jvm_df.orderBy("partition", "offset").toArrow()
    if kw.num_rows != n or jvm.num_rows != n:
        raise SystemExit(f"rows read: kafkawire {kw.num_rows:,}, from_avro {jvm.num_rows:,}, produced {n:,}")
    # Nullability flags may differ (from_avro takes them from the Avro schema); the values may not.
    jvm = pa.Table.from_arrays([c.cast(f.type) for c, f in zip(jvm.columns, kw.schema)], schema=kw.schema)
    for name in kw.column_names:
        a, b = kw.column(name).combine_chunks(), jvm.column(name).combine_chunks()
        if not a.equals(b):
            first = next(i for i in range(n) if a[i] != b[i])
            raise SystemExit(f"column {name!r} differs first at row {first:,}:\n  kafkawire {a[first]}\n"
                             f"  from_avro {b[first]}")
    return kw_type


def timed(fn: Callable[[], Any], jvms: list[int]) -> tuple[float, float | None]:
    """(wall seconds, CPU seconds of the Spark JVM and the Python processes under it)."""
    from compare_spark import jvms_cpu, workers_cpu

    jvm0, py0 = jvms_cpu(jvms), workers_cpu(jvms)
    t0 = time.perf_counter()
    fn().write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - t0
    jvm1, py1 = jvms_cpu(jvms), workers_cpu(jvms)
    if jvm0 is None or jvm1 is None:
        return wall, None
    return wall, jvm1 - jvm0 + sum(v - py0.get(pid, 0.0) for pid, v in py1.items())


def run(args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, Any]]:
    from kafkawire.schema import SchemaRegistryClient
    from kafkawire.spark import local_session
    from kafkawire.testing import KafkaCluster
    from kafkawire.testing.registry import ApicurioRegistry
    from kafkawire.testing.spark import kafka_connector_jars

    info: dict[str, Any] = {}
    jars = kafka_connector_jars() + spark_avro_jars()
    spark = local_session("kafkawire-compare-spark-avro", conf={
        "spark.jars": ",".join(jars), "spark.sql.shuffle.partitions": "2",
        "spark.sql.python.filterPushdown.enabled": "true", "spark.driver.memory": "2g",
        "spark.sql.execution.arrow.pyspark.enabled": "true"})
    info["spark"] = spark.version
    from compare_spark import jvm_pid

    jvms = [pid for pid in (jvm_pid(spark),) if pid is not None]
    times: dict[str, list[float]] = {"kafkawire": [], "jvm": []}
    cpus: dict[str, list[float]] = {"kafkawire": [], "jvm": []}
    try:
        with KafkaCluster(1) as broker, ApicurioRegistry() as registry:
            bootstrap, url = broker.bootstrap, registry.url
            topic = f"spark-avro-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic)
            t_ser, t_send = produce(bootstrap, url, topic, args.rows)
            info["send_rate"] = args.rows / t_send
            print(f"produced {args.rows:,} Avro records to {topic}: serialized in {t_ser:.1f}s, "
                  f"sent in {t_send:.1f}s", file=sys.stderr, flush=True)
            with SchemaRegistryClient(url) as client:
                latest = client.get_latest_version(f"{topic}-value")
            schema_text = latest.schema.schema_str
            reads = Reads(spark, bootstrap, url, topic, schema_text)
            t0 = time.perf_counter()
            info["type"] = same_rows(reads, args.rows)
            print(f"identical rows from both reads ({time.perf_counter() - t0:.0f}s to collect and compare): "
                  f"value {info['type']}", file=sys.stderr, flush=True)
            cases = {"kafkawire": reads.kafkawire, "jvm": reads.jvm}
            for name, fn in cases.items():  # warm-up: Python workers, imports, the JIT
                print(f"  warm-up {name}: {timed(fn, jvms)[0]:.2f}s", file=sys.stderr, flush=True)
            for r in range(args.rounds):
                order = list(cases) if r % 2 == 0 else list(cases)[::-1]
                for name in order:
                    secs, cpu = timed(cases[name], jvms)
                    times[name].append(secs)
                    if cpu is not None:
                        cpus[name].append(cpu)
                    print(f"  round {r + 1} {name:<9} {secs:6.2f}s {args.rows / secs:>10,.0f} rows/s"
                          f"  CPU {cpu if cpu is not None else float('nan'):6.2f}s", file=sys.stderr, flush=True)
    finally:
        spark.stop()
    info["cpus"] = cpus
    return times, info


def report(times: dict[str, list[float]], info: dict[str, Any],
           args: argparse.Namespace) -> tuple[str, float, float | None]:
    n = args.rows
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["jvm"] / med["kafkawire"]
    pairs = [j / k for k, j in zip(times["kafkawire"], times["jvm"])]
    labels = {"kafkawire": 'format("kafkawire"), value.format=avro, schema.registry.url -> noop',
              "jvm": 'format("kafka") + from_avro(substring(value, 6), schema) -> noop'}
    lines = [
        "### Avro into typed Spark rows: kafkawire vs the JVM connector + from_avro",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared); PySpark {info['spark']} local[2], spark-avro {SPARK_AVRO_VERSION}; "
        f"one Apache Kafka node and Apicurio Registry on loopback; {n:,} Confluent-framed Avro records "
        f"(kafkawire's AvroSerializer) in {PARTITIONS} partitions; median of {args.rounds} interleaved rounds "
        f"after one warm-up each; time: the whole `save()`. Rows checked identical first "
        f"(`toArrow()` of both, ordered by partition and offset).",
        "",
        f"value: `{info['type']}`",
        "",
        "| read | rows/s (median) | s (median) | min–max s | CPU s (median): Spark JVM + Python workers |",
        "|---|---:|---:|---:|---:|",
    ]
    cpus = info.get("cpus", {})
    cpu_med = {k: statistics.median(v) for k, v in cpus.items() if v}
    for name in ("kafkawire", "jvm"):
        xs = times[name]
        cpu = f"{cpu_med[name]:.2f}" if name in cpu_med else "?"
        lines.append(f"| {labels[name]} | {n / med[name]:,.0f} | {med[name]:.2f} | {min(xs):.2f}–{max(xs):.2f} | "
                     f"{cpu} |")
    cpu_ratio = cpu_med["jvm"] / cpu_med["kafkawire"] if len(cpu_med) == 2 else None
    lines += [
        "",
        f"kafkawire vs JVM connector + from_avro: **{ratio:.2f}x** (ratio of medians; rounds "
        f"{min(pairs):.2f}–{max(pairs):.2f}); target >= {TARGET:g}x: {'PASS' if ratio >= TARGET else 'MISS'}",
    ]
    if cpu_ratio is not None:
        cpu_pairs = [j / k for k, j in zip(cpus["kafkawire"], cpus["jvm"]) if k > 0]
        lines += ["", f"In CPU seconds of the Spark JVM and its Python workers (the broker's left out: both "
                      f"read the same bytes): **{cpu_ratio:.2f}x** (rounds {min(cpu_pairs):.2f}–{max(cpu_pairs):.2f})"]
    lines.append("")
    return "\n".join(lines), ratio, cpu_ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="records in the topic (1,000,000; --quick 200,000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (5; --quick 3)")
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 3 rounds")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    parser.add_argument("--json", metavar="PATH", help="write the ratio to PATH")
    args = parser.parse_args()
    args.rows = args.rows or (200_000 if args.quick else 1_000_000)
    args.rounds = args.rounds or (3 if args.quick else 5)
    started = time.monotonic()
    times, info = run(args)
    text, ratio, cpu_ratio = report(times, info, args)
    print(text)
    print(f"(took {time.monotonic() - started:.0f}s)", file=sys.stderr)
    write_markdown(args.markdown, text)
    ratios = {"avro/read/vs-jvm-from_avro": round(ratio, 3)}
    if cpu_ratio is not None:
        ratios["avro/read-cpu/vs-jvm-from_avro"] = round(cpu_ratio, 3)
    write_json(args.json, ratios)


if __name__ == "__main__":
    main()
