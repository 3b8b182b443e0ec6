"""format("kafkawire") against Spark's own JVM Kafka connector (format("kafka")), side by side.

One Apache Kafka node (kafkawire.testing.KafkaCluster) holds a topic of ``--rows`` records
(16-byte keys, 100-byte values) in ``--partitions`` partitions; one local[2] SparkSession
with the connector's jars (kafkawire.testing.spark.kafka_connector_jars) reads it through
both connectors, alternating which goes first each round, after one warm-up each:

* read: a batch read of the whole topic written to Spark's noop sink;
* window: per-key counts and value-length sums over one-minute event-time windows (the
  demo's pipeline), to noop.

Prints rows/s (medians) and kafkawire's ratio to the JVM connector per case. Run with:

    .venv/bin/python bench/compare_spark_jvm.py [--rows 2000000] [--rounds 3] [--partitions 2]

The JVM connector's JIT keeps warming over the first rounds: more rounds give it more time.
Not yet part of `make bench`; bench/compare_spark.py is where it is headed (issue 21).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

from kafkawire.client.admin import Admin, NewTopic
from kafkawire.client.producer import Producer
from kafkawire.spark import local_session
from kafkawire.testing.kafka import KafkaCluster
from kafkawire.testing.spark import kafka_connector_jars

FORMATS = ("kafka", "kafkawire")


def _fill(bootstrap: str, topic: str, rows: int, partitions: int) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout=30)
    value = b"x" * 100
    per = rows // partitions
    with Producer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=512 * 1024) as p:
        for part in range(partitions):
            for start in range(0, per, 50_000):
                chunk = [(b"key-%012d" % i, value) for i in range(start, min(per, start + 50_000))]
                p.send_batch(topic, part, chunk).result(60)


def _cases(spark: Any, bootstrap: str, topic: str) -> dict[str, Callable[[str], None]]:
    from pyspark.sql import functions as F

    def load(fmt: str) -> Any:
        return (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).load())

    def read(fmt: str) -> None:
        load(fmt).write.format("noop").mode("overwrite").save()

    def window(fmt: str) -> None:
        (load(fmt).groupBy(F.window("timestamp", "1 minute"), "key")
         .agg(F.count("*"), F.sum(F.length("value")))
         .write.format("noop").mode("overwrite").save())

    return {"read": read, "window": window}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args(argv)
    rows = args.rows - args.rows % args.partitions
    with KafkaCluster(1) as kafka:
        _fill(kafka.bootstrap, "bench", rows, args.partitions)
        spark = local_session("compare-spark-jvm", conf={
            "spark.jars": ",".join(kafka_connector_jars()), "spark.driver.memory": "2g",
            "spark.sql.shuffle.partitions": "2"})
        try:
            cases = _cases(spark, kafka.bootstrap, "bench")
            times: dict[tuple[str, str], list[float]] = {(c, f): [] for c in cases for f in FORMATS}
            for fmt in FORMATS:
                cases["read"](fmt)  # warm-up: JVM classes, Python workers, connections
            for r in range(args.rounds):
                for fmt in FORMATS if r % 2 == 0 else FORMATS[::-1]:
                    for name, case in cases.items():
                        start = time.perf_counter()
                        case(fmt)
                        times[(name, fmt)].append(time.perf_counter() - start)
        finally:
            spark.stop()
    print(f"\n{rows:,} records, {args.partitions} partitions, 100-byte values, local[2], "
          f"{args.rounds} rounds (medians)")
    print(f"{'case':8} {'JVM rows/s':>12} {'kafkawire rows/s':>17} {'kafkawire/JVM':>14}")
    for name in cases:
        jvm, kw = (statistics.median(times[(name, f)]) for f in FORMATS)
        print(f"{name:8} {rows / jvm:12,.0f} {rows / kw:17,.0f} {jvm / kw:13.2f}x"
              f"   runs JVM {[round(t, 2) for t in times[(name, 'kafka')]]}"
              f" kafkawire {[round(t, 2) for t in times[(name, 'kafkawire')]]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
