"""The Spark stage of ``kafkawire demo``: windowed per-key totals from one topic to another.

:func:`run_pipeline` reads a topic through ``format("kafkawire")``, counts records and sums
value lengths per (event-time window, key), writes one JSON record per group to a second
topic through the sink, reads that back and checks every group against the same sums done
in plain Python, without Spark.  PySpark is imported inside the functions only, so that
``kafkawire demo --no-spark`` works where it is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import time
from datetime import datetime, timezone
from typing import Any, Iterable, TextIO

__all__ = ["WINDOW", "WINDOW_MS", "SparkUnavailableError", "spark_missing", "window_totals",
           "compare", "run_pipeline"]

# The demo's records span ten minutes of event time (kafkawire.cli._DemoRecords), so one-minute
# windows give ten groups per key.
WINDOW = "1 minute"
WINDOW_MS = 60_000

# (window start in ms, key) -> (records, sum of value lengths)
Totals = dict[tuple[int, bytes | None], tuple[int, int]]


class SparkUnavailableError(RuntimeError):
    """PySpark, pyarrow or Java is missing: the Spark stage cannot run."""


def spark_missing() -> str | None:
    """What the Spark stage lacks here, or None when it can run."""
    absent = [m for m in ("pyspark", "pyarrow", "pandas") if importlib.util.find_spec(m) is None]
    if absent:
        return (f"the Spark stage needs {', '.join(absent)} (PySpark 4.0+ with pyarrow and pandas); "
                f"install them with: pip install 'kafkawire[spark]'")
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        return "the Spark stage needs Java 17+ on PATH (or JAVA_HOME) for PySpark's JVM"
    return None


def window_totals(records: Iterable[tuple[bytes | None, int, int]], window_ms: int = WINDOW_MS) -> Totals:
    """Plain-Python totals of ``(key, timestamp ms, value length)`` records per
    (window start, key): what the Spark stage computes, without Spark."""
    counts: dict[tuple[int, bytes | None], int] = {}
    sizes: dict[tuple[int, bytes | None], int] = {}
    for key, ts, size in records:
        group = (ts - ts % window_ms, key)  # Spark's tumbling windows start at multiples of the size
        counts[group] = counts.get(group, 0) + 1
        sizes[group] = sizes.get(group, 0) + size
    return {g: (n, sizes[g]) for g, n in counts.items()}


def _consumed_records(bootstrap: str, topic: str) -> Iterable[tuple[bytes | None, int, int]]:
    """``(key, timestamp, value length)`` of every record in ``topic``, read with kafkawire's
    own Consumer: the reference when the caller has no list of what was produced."""
    from kafkawire.client.consumer import Consumer

    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  fetch_max_bytes=64 * 1024 * 1024) as c:
        tps = [(topic, p) for p in c.cluster.partitions_for(topic, 30)]
        c.assign(tps)
        c.seek_to_beginning()
        end = c.high_watermarks(tps)
        idle = 0
        while idle < 5 and any(c.position(tp) < end[tp] for tp in end):
            batches = c.poll_batch(1.0)
            idle = 0 if batches else idle + 1
            for b in batches:
                cols = b.columns
                ts, lengths = cols.timestamps.tolist(), cols.value_lengths.tolist()
                for j in range(len(cols)):
                    yield cols.key(j), ts[j], max(lengths[j], 0)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _totals(t: tuple[int, int] | None) -> str:
    return "nothing" if t is None else f"{t[0]:,} records / {t[1]:,} bytes"


def compare(expected: Totals, got: Totals) -> list[str]:
    """Differences between two sets of totals, one readable line each (empty when equal)."""
    errors = []
    for group in sorted(expected.keys() | got.keys(), key=lambda g: (g[0], g[1] or b"")):
        want, have = expected.get(group), got.get(group)
        if want != have:
            errors.append(f"window {_when(group[0])} key {group[1]!r}: expected {_totals(want)}, "
                          f"Spark wrote {_totals(have)}")
    return errors


def _session() -> Any:
    from kafkawire.spark import local_session

    conf = {
        # A few hundred groups: the default 200 shuffle partitions would be 200 sink tasks.
        "spark.sql.shuffle.partitions": "2",
        # Lets kafkawire's reader narrow its offset ranges to the warm-up's filter below.
        "spark.sql.python.filterPushdown.enabled": "true",
    }
    jars = _cached_connector_jars()
    if jars:
        conf["spark.jars"] = ",".join(jars)
    return local_session("kafkawire-demo", conf=conf)


def _cached_connector_jars() -> list[str]:
    """Spark's JVM Kafka connector's jars when a test or benchmark run has cached them
    (never a download here), so the demo can show its read beside kafkawire's."""
    try:
        from kafkawire.testing._maven import is_cached
        from kafkawire.testing.spark import SPARK_CONNECTOR_VERSION, kafka_connector_jars
    except ImportError:
        return []
    if not is_cached(f"spark-kafka-connector-{SPARK_CONNECTOR_VERSION}"):
        return []
    return kafka_connector_jars()


def _timed_read(spark: Any, fmt: str, bootstrap: str, topic: str) -> tuple[int, float]:
    """(records, seconds) of the read stage: every record, projected to what the
    aggregation needs, cached and counted."""
    from pyspark.sql import functions as F

    t0 = time.monotonic()
    slim = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
            .select("key", "timestamp", F.length("value").alias("value_length")).cache())
    rows = slim.count()
    seconds = time.monotonic() - t0
    slim.unpersist()
    return rows, seconds


def _read(spark: Any, bootstrap: str, topic: str) -> Any:
    return (spark.read.format("kafkawire")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .load())


def run_pipeline(bootstrap: str, topic: str, out_topic: str,
                 expected: Iterable[tuple[bytes | None, int, int]] | None = None,
                 stream: TextIO | None = None, spark: Any = None) -> dict[str, Any]:
    """Windowed per-key counts and value-length sums of ``topic``, written to ``out_topic``
    as JSON by Spark through kafkawire, read back and checked.

    ``expected`` is ``(key, timestamp ms, value length)`` for every record of ``topic``
    (None: read them with kafkawire's Consumer).  ``spark`` is a session with kafkawire
    registered; without one, a local[2] session is started and stopped here.  Returns the
    stage timings and row counts, the totals read back (``result``) and ``errors`` (empty
    when every group matched).
    """
    if stream is None:
        stream = sys.stderr
    missing = spark_missing()
    if missing:
        raise SparkUnavailableError(missing)
    from pyspark.sql import functions as F

    stats: dict[str, Any] = {}
    own = spark is None
    if own:
        t0 = time.monotonic()
        spark = _session()
        stats["session_s"] = time.monotonic() - t0
        print(f"spark: started a local[2] session (Spark {spark.version}) in {stats['session_s']:.1f}s",
              file=stream)
    try:
        # PySpark runs each step of a Python data source (lookup, planning, reading,
        # writing, commit) in Python daemons of its own, each started cold the first time
        # (seconds each on two cores).  One tiny read and one empty write start them all
        # here, timed apart, so that the stages below measure the pipeline.  The read is
        # the first record of each partition: limit(1) would cut a reader task off mid-way,
        # which PySpark's daemon reports with a BrokenPipeError traceback on stderr.
        t0 = time.monotonic()
        _read(spark, bootstrap, topic).where("offset < 1").collect()
        (spark.createDataFrame([], "value binary").write.format("kafkawire")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
         .mode("append").save())
        stats["warmup_s"] = time.monotonic() - t0
        print(f"spark: warm-up (starts Spark's Python workers) in {stats['warmup_s']:.1f}s", file=stream)

        # Read: every record, projected to what the aggregation needs and cached, so that
        # this stage times kafkawire's source and the next one Spark's work and the sink.
        t0 = time.monotonic()
        slim = _read(spark, bootstrap, topic).select(
            "key", "timestamp", F.length("value").alias("value_length")).cache()
        stats["read_rows"] = slim.count()
        stats["read_s"] = time.monotonic() - t0
        print(f"spark: read {stats['read_rows']:,} records of {topic}", file=stream)
        if "spark-sql-kafka-0-10" in spark.conf.get("spark.jars", ""):
            # The same read stage through Spark's JVM connector, in the same session (its
            # first use: class loading and JIT included, as a job's first read has them).
            rows, seconds = _timed_read(spark, "kafka", bootstrap, topic)
            stats["jvm_read_rows"], stats["jvm_read_s"] = rows, seconds
            short = ""
            if rows != stats["read_rows"]:
                # Tansu (the demo's broker) answers ListOffsets "latest" below its last
                # record, where the JVM connector ends each partition; kafkawire asks a Fetch.
                short = (f" (only {rows:,} of the {stats['read_rows']:,} records: this broker's ListOffsets "
                         f"reports each partition's end short, and the JVM connector stops there)")
            print(f"spark: the same read through Spark's JVM connector (format(\"kafka\")): {rows:,} records, "
                  f"{rows / seconds:,.0f} rows/s{short}; format(\"kafkawire\"): "
                  f"{stats['read_rows'] / stats['read_s']:,.0f} rows/s", file=stream)

        t0 = time.monotonic()
        groups = (slim.groupBy(F.window("timestamp", WINDOW).alias("window"), "key")
                  .agg(F.count("*").alias("records"), F.sum("value_length").alias("value_bytes")))
        (groups.selectExpr(
            "CAST(key AS BINARY) AS key",
            "to_json(struct(window.start AS window_start, window.end AS window_end, "
            "CAST(key AS STRING) AS key, records, value_bytes)) AS value",
            "window.start AS timestamp")  # output records carry their window's event time
         .write.format("kafkawire")
         .option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out_topic)
         .mode("append")
         .save())
        stats["write_s"] = time.monotonic() - t0
        slim.unpersist()

        t0 = time.monotonic()
        rows = (_read(spark, bootstrap, out_topic)
                .selectExpr("key", "value", "unix_millis(timestamp) AS timestamp_ms").collect())
        stats["back_s"] = time.monotonic() - t0
        stats["back_rows"] = len(rows)
        print(f"spark: wrote and read back {len(rows):,} window/key totals in {out_topic}", file=stream)
    finally:
        if own:
            spark.stop()
            print("spark: stopped the session", file=stream)

    errors: list[str] = []
    got: Totals = {}
    for row in rows:
        doc = json.loads(row.value)
        start = datetime.strptime(doc["window_start"], "%Y-%m-%dT%H:%M:%S.%f%z")
        group = (round(start.timestamp() * 1000), None if row.key is None else bytes(row.key))
        if group in got:  # the sink is at-least-once: a retried task shows up here
            errors.append(f"window {_when(group[0])} key {group[1]!r} was written twice")
        got[group] = (doc["records"], doc["value_bytes"])
        if row.timestamp_ms != group[0]:
            errors.append(f"window {_when(group[0])} key {group[1]!r}: the output record's timestamp is "
                          f"{row.timestamp_ms}, not the window's start")
    stats["result"] = got
    stats["windows"] = len(got)

    t0 = time.monotonic()
    if expected is None:
        want = window_totals(_consumed_records(bootstrap, topic))
    else:
        want = window_totals(expected)
    stats["check_s"] = time.monotonic() - t0
    total = sum(n for n, _ in want.values())
    if stats["read_rows"] != total:
        errors.append(f"Spark read {stats['read_rows']:,} records of {topic}, expected {total:,}")
    stats["errors"] = errors + compare(want, got)
    return stats
