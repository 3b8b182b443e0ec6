"""kafkawire's Spark source and sink side by side with Spark's own Python-data-source limits
and with Spark's JVM Kafka connector (``format("kafka")``, spark-sql-kafka-0-10).

One process, one SparkSession (local[2]; ``--master standalone``: a standalone cluster
of two single-core workers started here, kafkawire.testing.SparkStandaloneCluster, whose
executor JVMs and their Python workers count in the CPU and memory columns) with the JVM
connector's jars (kafkawire.testing.spark.kafka_connector_jars), one Apache Kafka node on loopback (started
here; ``--broker tansu`` for a Tansu broker instead, where the JVM connector's cases are
left out).  Every round runs every case once, the case order rotating from round to round,
so the drift of a shared machine hits every case alike; the tables show medians over the
rounds.  Run with:

    .venv/bin/python bench/compare_spark.py [--quick] [--rows N] [--rounds R] [--broker kafka|tansu]
        [--master local|standalone] [--cases ceiling,kw_read,tuple_read,...] [--markdown PATH]
        [--event-log DIR]

(``--event-log``: Spark's event log, for each stage's and task's timings;
``COMPARE_SPARK_PROGRESS=1``: every micro-batch's durations, latestOffset to walCommit.)

Cases (N rows each, default 5,000,000; Kafka-shaped: 16-byte keys, 100-byte values):

- ``ceiling``: a Python data source whose reader yields one prebuilt Arrow RecordBatch in
  the Kafka read schema over and over (2 partitions), into the noop sink: what Spark's
  Python-source transport itself allows.
- ``kw_read``: ``spark.read.format("kafkawire")`` of a 2-partition topic holding N records
  (produced once, before the rounds, with kafkawire's send_batch), into the noop sink.
- ``tuple_read``: the same topic through a Python data source in this file that polls
  kafkawire's Consumer and yields one tuple per record (the API's ordinary tuple path).
- ``noop_writer``: N key/value rows (from the ceiling source) into a Python data source
  whose DataSourceArrowWriter only counts rows: the Arrow write transport's limit.
- ``kw_sink``: the same rows into ``df.write.format("kafkawire")`` (a fresh 2-partition
  topic per round; the broker's end offsets are checked after each write).
- ``empty``: the ceiling source with 2 rows: the fixed cost of one Python-source query,
  contained in every case above (shown for context, not part of any target).
- ``jvm_read``, ``jvm_sink``: ``kw_read`` and ``kw_sink`` through ``format("kafka")``.
- ``kw_window``, ``jvm_window``: the read topic through each connector into per-key counts
  and value-length sums over one-minute event-time windows (the demo's pipeline), to noop.
- ``kw_stream``, ``jvm_stream``: the read topic as a stream from the earliest offsets with
  ``Trigger.AvailableNow`` and ``maxOffsetsPerTrigger`` N/4 (four micro-batches), to noop.

Variants, run only when named in ``--cases``: ``ceiling64k`` (the ceiling with 65,536-row
batches instead of 10,000: no measurable difference here) and ``kw_read_osbuf`` (the
kafkawire read with ``kafka.receive.buffer.bytes=-1``: no measurable difference either).

Targets: kafkawire read >= 80 % of the ceiling and >= 4x the tuple read; kafkawire sink
>= 80 % of the noop Arrow writer; every kafkawire case at or above the JVM connector's.
The JVM connector's JIT warms over the first rounds: its medians need three or more.  Everything shares the machine's cores: the Spark JVM,
its Python workers and the broker.  The table therefore also shows the CPU seconds each
of them used per case, and the ratios per CPU second with and without the broker's share
(on a 2-core machine a read that costs the broker CPU cannot keep up with a source that
costs nothing but Spark's own transport).

Memory: while a read case runs, a thread samples every Python process under the Spark JVM
(/proc: RSS and PSS from smaps_rollup; Spark's workers are forked from one daemon and share
pages, so PSS sums without double counting); the table shows the peak per case.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Iterator

from report import write_markdown

KEY_SIZE = 16
VALUE_SIZE = 100
POOL = 4096  # distinct keys/values, cycled

PARTITIONS = 2
CEILING_BATCH = 10_000  # rows in the prebuilt batch (Spark's arrow.maxRecordsPerBatch default)
TUPLE_MAX_RECORDS = 10_000  # records per Consumer.poll() in the tuple reader

TARGET_READ_VS_CEILING = 0.80
TARGET_READ_VS_TUPLES = 4.0
TARGET_SINK_VS_NOOP = 0.80

READ_CASES = ("ceiling", "kw_read", "tuple_read", "ceiling64k", "kw_read_osbuf", "jvm_read", "kw_stream", "jvm_stream")
TOPIC_CASES = ("kw_read", "kw_read_osbuf", "tuple_read", "jvm_read", "kw_window", "jvm_window", "kw_stream",
               "jvm_stream")
JVM_CASES = ("jvm_read", "jvm_window", "jvm_stream", "jvm_sink")
# (what, kafkawire's case, the JVM connector's)
AGAINST_JVM = (("batch read to noop", "kw_read", "jvm_read"),
               ("per-key counts and sums over 1-minute windows", "kw_window", "jvm_window"),
               ("stream, Trigger.AvailableNow, 4 micro-batches", "kw_stream", "jvm_stream"),
               ("sink", "kw_sink", "jvm_sink"))
ALL_CASES = ("ceiling", "kw_read", "tuple_read", "noop_writer", "kw_sink", "empty", "jvm_read", "kw_window",
             "jvm_window", "kw_stream", "jvm_stream", "jvm_sink")
EXTRA_CASES = ("ceiling64k", "kw_read_osbuf")  # variants, run only when named in --cases
LABELS = {
    "ceiling": "ceiling: prebuilt Arrow batch, repeated -> noop",
    "kw_read": 'kafkawire read: format("kafkawire") -> noop',
    "tuple_read": "tuple read: Consumer.poll, one tuple per record -> noop",
    "noop_writer": "noop DataSourceArrowWriter (counts rows)",
    "kw_sink": 'kafkawire sink: write.format("kafkawire")',
    "empty": "empty query: ceiling source, 2 rows -> noop",
    "ceiling64k": "ceiling with 65,536-row batches -> noop",
    "kw_read_osbuf": 'kafkawire read, kafka.receive.buffer.bytes=-1 (OS default) -> noop',
    "jvm_read": 'JVM connector read: format("kafka") -> noop',
    "kw_window": 'kafkawire read -> 1-minute windows per key -> noop',
    "jvm_window": 'JVM connector read -> 1-minute windows per key -> noop',
    "kw_stream": 'kafkawire stream, AvailableNow -> noop',
    "jvm_stream": 'JVM connector stream, AvailableNow -> noop',
    "jvm_sink": 'JVM connector sink: write.format("kafka")',
}


# ---------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------

def make_pool(seed: int = 1) -> tuple[list[bytes], list[bytes]]:
    # The pool of compare_e2e.py, written out again: Spark pickles this script's data
    # sources by value, and its workers cannot import the benchmark directory.
    import random

    rng = random.Random(seed)
    keys, values = [], []
    for i in range(POOL):
        keys.append(rng.randbytes(KEY_SIZE // 2).hex().encode())
        head = b'{"id":%d,"user":"u%05d","event":"%s","pad":"' % (
            i, rng.randrange(50_000), rng.choice([b"view", b"click", b"buy"]))
        pad = rng.randbytes(VALUE_SIZE).hex().encode()[: VALUE_SIZE - len(head) - 2]
        values.append(head + pad + b'"}')
    return keys, values


def kafka_schema() -> Any:
    from kafkawire.spark import KAFKA_SCHEMA

    return KAFKA_SCHEMA


def split(n: int, parts: int) -> list[int]:
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


# ---------------------------------------------------------------------------------------
# The bench's own Python data sources.  Defined in __main__, so cloudpickle ships them to
# the workers by value; imports happen inside methods, in the worker.
# ---------------------------------------------------------------------------------------

def define_sources() -> dict[str, type]:
    from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, InputPartition,
                                        WriterCommitMessage)

    class CeilingReader(DataSourceReader):
        def __init__(self, schema: Any, rows: int, parts: int, batch: int):
            self.schema, self.rows, self.parts, self.batch = schema, rows, parts, batch

        def partitions(self) -> list:
            # Partition values are read from .value: with filter pushdown on, Spark may
            # hand back a plain InputPartition around the same value.
            return [InputPartition((i, n)) for i, n in enumerate(split(self.rows, self.parts)) if n]

        def read(self, partition: Any) -> Iterator[Any]:
            import numpy as np
            import pyarrow as pa
            from pyspark.sql.pandas.types import to_arrow_schema

            part, n = partition.value
            keys, values = make_pool()
            size = min(self.batch, n)
            pick = [i % POOL for i in range(size)]
            now_us = int(time.time() * 1_000_000)
            schema = to_arrow_schema(self.schema, timezone="UTC")
            rb = pa.RecordBatch.from_arrays([
                pa.array([keys[i] for i in pick], pa.binary()),
                pa.array([values[i] for i in pick], pa.binary()),
                pa.array(["ceiling"] * size, pa.string()),
                pa.array(np.full(size, part, dtype=np.int32)),
                pa.array(np.arange(size, dtype=np.int64)),
                pa.array(np.full(size, now_us, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(size, dtype=np.int32)),
            ], schema=schema)
            full, rest = divmod(n, size)
            for _ in range(full):
                yield rb
            if rest:
                yield rb.slice(0, rest)

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_ceiling"

        def schema(self) -> Any:
            return kafka_schema()

        def reader(self, schema: Any) -> DataSourceReader:
            return CeilingReader(schema, int(self.options["rows"]), int(self.options.get("partitions", PARTITIONS)),
                                 int(self.options.get("batch", CEILING_BATCH)))

    class TupleReader(DataSourceReader):
        def __init__(self, bootstrap: str, topic: str, ends: list[int], countdir: str | None):
            self.bootstrap, self.topic, self.ends, self.countdir = bootstrap, topic, ends, countdir

        def partitions(self) -> list:
            return [InputPartition((p, end)) for p, end in enumerate(self.ends)]

        def read(self, partition: Any) -> Iterator[tuple]:
            from kafkawire import Consumer

            p, end = partition.value
            # The kafkawire source's own fetch settings (its _SOURCE_DEFAULTS), for a like
            # comparison: the difference under test is tuples versus Arrow.
            c = Consumer(bootstrap_servers=self.bootstrap, fetch_max_wait_ms=50,
                         max_partition_fetch_bytes=8 << 20)
            tp = (self.topic, p)
            topic = self.topic
            epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
            ms = dt.timedelta(milliseconds=1)
            count = 0
            try:
                c.assign([tp])
                c.seek(tp, 0)
                pos = 0
                idle = time.monotonic()
                while pos < end:
                    records = c.poll(1.0, TUPLE_MAX_RECORDS)
                    if not records:
                        if time.monotonic() - idle > 30:
                            raise RuntimeError(f"{topic}[{p}]: no records for 30 s at offset {pos} of {end}")
                        continue
                    idle = time.monotonic()
                    for r in records:
                        off = r.offset
                        if off >= end:
                            break
                        yield (r.key, r.value, topic, p, off, epoch + r.timestamp * ms, r.timestamp_type)
                        count += 1
                    pos = records[-1].offset + 1
            finally:
                c.close()
            if self.countdir:
                with open(os.path.join(self.countdir, f"tuples-{p}-{uuid.uuid4().hex}"), "w") as fh:
                    fh.write(str(count))

    class TupleSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_tuples"

        def schema(self) -> Any:
            return kafka_schema()

        def reader(self, schema: Any) -> DataSourceReader:
            o = self.options
            return TupleReader(o["bootstrap"], o["topic"], json.loads(o["ends"]), o.get("countdir"))

    class CountMessage(WriterCommitMessage):
        def __init__(self, rows: int):
            self.rows = rows

    class NoopArrowWriter(DataSourceArrowWriter):
        def __init__(self, countfile: str | None):
            self.countfile = countfile

        def write(self, iterator: Iterator[Any]) -> CountMessage:
            rows = 0
            for rb in iterator:
                rows += rb.num_rows
            return CountMessage(rows)

        def commit(self, messages: list) -> None:
            if self.countfile:
                with open(self.countfile, "w") as fh:
                    fh.write(str(sum(m.rows for m in messages if m is not None)))

        def abort(self, messages: list) -> None:
            pass

    class NoopArrowSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_noop_arrow"

        def writer(self, schema: Any, overwrite: bool) -> NoopArrowWriter:
            return NoopArrowWriter(self.options.get("countfile"))

    return {"ceiling": CeilingSource, "tuples": TupleSource, "noop": NoopArrowSource}


# ---------------------------------------------------------------------------------------
# Broker side: topics, producing the read topic, end offsets
# ---------------------------------------------------------------------------------------

class Admin:
    def __init__(self, bootstrap: str):
        from kafkawire.client.cluster import Cluster
        from kafkawire.client.config import Config
        from kafkawire.protocol import apis

        self.CREATE = apis.get("CreateTopics")
        self.DELETE = apis.get("DeleteTopics")
        self.cluster = Cluster(Config.client(bootstrap_servers=bootstrap))
        self.cluster.bootstrap(15)

    def create(self, topic: str, partitions: int = PARTITIONS) -> None:
        C = self.CREATE
        req = C.Request(topics=[C.Request.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=15000)
        code = self.cluster.request(None, C, req, 15).topics[0].error_code
        if code not in (0, 36):  # 36 TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"CreateTopics {topic}: error code {code}")
        if self.cluster.partitions_for(topic, 15) != list(range(partitions)):
            raise RuntimeError(f"{topic} does not have {partitions} partitions")

    def delete(self, topics: list[str]) -> None:
        if not topics:
            return
        D = self.DELETE
        try:
            req = D.Request(topic_names=list(topics), timeout_ms=15000, topics=[
                D.Request.DeleteTopicState(name=t, topic_id=uuid.UUID(int=0)) for t in topics])
            self.cluster.request(None, D, req, 15)
        except Exception as exc:  # noqa: BLE001 - freeing broker memory is best effort
            print(f"  (DeleteTopics failed: {exc})", file=sys.stderr)

    def close(self) -> None:
        self.cluster.close()


def produce(bootstrap: str, topic: str, n: int) -> float:
    """N records, record i to partition i % 2, through send_batch; returns seconds."""
    from kafkawire import Producer

    keys, values = make_pool()
    p = Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=1_000_000,
                 max_request_size=1 << 20, send_buffer_bytes=-1, receive_buffer_bytes=-1)
    try:
        p.partitions_for(topic)
        start = time.perf_counter()
        chunk = 500_000  # bounded memory for the lists of tuples
        futures = []
        for lo in range(0, n, chunk * PARTITIONS):
            hi = min(n, lo + chunk * PARTITIONS)
            for part in range(PARTITIONS):
                recs = [(keys[i % POOL], values[i % POOL]) for i in range(lo + part, hi, PARTITIONS)]
                if recs:
                    futures.append(p.send_batch(topic, part, recs))
        p.flush(600)
        count = sum(m.count for f in futures for m in f.result(60))
        elapsed = time.perf_counter() - start
        if count != n:
            raise RuntimeError(f"produced {count:,} of {n:,}")
        return elapsed
    finally:
        p.close(30)


def topic_end_offsets(bootstrap: str, topic: str) -> list[int]:
    """The broker's end offsets of ``topic`` (Fetch high watermark: Tansu's ListOffsets
    latest can be short)."""
    from kafkawire import Consumer
    from kafkawire.client.consumer import TopicPartition

    c = Consumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in c.cluster.partitions_for(topic, 15)]
        ends = c.high_watermarks(tps, 15)
        return [ends[tp] for tp in tps]
    finally:
        c.close()


# ---------------------------------------------------------------------------------------
# Process accounting: CPU of the broker, memory of the Spark Python workers (/proc only)
# ---------------------------------------------------------------------------------------

def process_cpu(pid: int | None) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return None


def process_cpu_all(pid: int) -> float:
    """CPU seconds of ``pid`` including its reaped children (a pyspark daemon reaps the
    workers it forked); 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def jvms_cpu(jvms: list[int]) -> float | None:
    """CPU seconds of the Spark JVMs (the driver; on a cluster, the executors too)."""
    cpus = [process_cpu(pid) for pid in jvms]
    return None if not cpus or None in cpus else sum(cpus)


def workers_cpu(jvms: list[int]) -> dict[int, float]:
    return {pid: process_cpu_all(pid) for jvm in jvms for pid in python_workers(jvm)}


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def python_workers(root: int) -> list[int]:
    """Python processes below ``root`` (the Spark JVM): the daemon and its forked workers."""
    kids = _children_map()
    out, todo = [], list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, []))
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                program = fh.read().split(b"\0", 1)[0]
        except OSError:
            continue
        # By the program, not the whole command line: a child the JVM has forked but not
        # yet exec'd carries the JVM's command line (whose classpath names pyspark) and
        # the JVM's resident memory, which would count as one huge Python worker.
        if b"python" in os.path.basename(program):
            out.append(pid)
    return out


def _mem_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of ``pid`` in KiB; (0, 0) if it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss, pss


class MemorySampler:
    """Peak memory of the Python workers under the JVM while a case runs (10 samples/s)."""

    def __init__(self, jvms: list[int], interval: float = 0.1):
        self.jvms, self.interval = jvms, interval
        self.peak_pss_sum = self.peak_rss_max = self.peak_procs = 0
        self.base_pss_sum: int | None = None  # at the start of the case
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        mems = [_mem_kb(pid) for jvm in self.jvms for pid in python_workers(jvm)]
        mems = [m for m in mems if m[0]]
        if mems:
            if self.base_pss_sum is None:
                self.base_pss_sum = sum(p for _r, p in mems)
            self.peak_pss_sum = max(self.peak_pss_sum, sum(p for _r, p in mems))
            self.peak_rss_max = max(self.peak_rss_max, max(r for r, _p in mems))
            self.peak_procs = max(self.peak_procs, len(mems))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> MemorySampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()


# ---------------------------------------------------------------------------------------
# The session and the cases
# ---------------------------------------------------------------------------------------

# A driver on a standalone cluster: one single-core executor per worker, every task
# waiting until both have registered (as tests/spark/cluster_job.py does).
CLUSTER_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
    "spark.cores.max": str(PARTITIONS),
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
    "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
}


def make_session(jvm_connector: bool, master: str = "local[2]", event_log: str | None = None) -> Any:
    from kafkawire.spark import local_session
    from kafkawire.testing.spark import kafka_connector_jars

    conf = {"spark.sql.python.filterPushdown.enabled": "true", "spark.sql.shuffle.partitions": "2"}
    if event_log:  # stage and task timings, for locating where a case's time goes
        os.makedirs(event_log, exist_ok=True)
        conf.update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": os.path.abspath(event_log)})
    if not master.startswith("local"):
        conf.update(CLUSTER_CONF)
    if jvm_connector:
        conf["spark.jars"] = ",".join(kafka_connector_jars())  # resolved from Maven Central once, then cached
    return local_session("kafkawire-compare-spark", master=master, conf=conf)


def executor_jvms(cluster: Any, expected: int, timeout: float = 120.0) -> list[int]:
    """The executor JVMs the cluster's workers started for this application."""
    deadline = time.monotonic() + timeout
    while True:
        kids = _children_map()
        found, todo = [], [pid for worker in cluster.pids[1:] for pid in kids.get(worker, [])]
        while todo:
            pid = todo.pop()
            todo.extend(kids.get(pid, []))
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if b"CoarseGrainedExecutorBackend" in fh.read():
                        found.append(pid)
            except OSError:
                continue
        if len(found) >= expected:
            return sorted(found)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(found)} of {expected} executors started within {timeout:.0f}s")
        time.sleep(0.2)


def jvm_pid(spark: Any) -> int | None:
    try:
        return int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - memory is then not reported
        proc = getattr(spark.sparkContext._gateway, "proc", None)
        return getattr(proc, "pid", None)


class Outcome:
    __slots__ = ("seconds", "rows", "problem", "broker_cpu", "jvm_cpu", "py_cpu", "mem")

    def __init__(self, seconds: float, rows: int, problem: str | None = None):
        self.seconds, self.rows, self.problem = seconds, rows, problem
        self.broker_cpu: float | None = None
        self.jvm_cpu: float | None = None  # the Spark JVM's own threads
        self.py_cpu: float | None = None  # Python workers under the JVM (short-lived planners missed)
        # (peak PSS sum KiB, peak RSS of one process KiB, processes, peak PSS sum - PSS sum at start KiB)
        self.mem: tuple[int, int, int, int] | None = None

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if not self.problem and self.seconds > 0 else 0.0


class Bench:
    def __init__(self, spark: Any, bootstrap: str, broker_pid: int | None, n: int, read_topic: str,
                 ends: list[int], admin: Admin, workdir: str):
        self.spark, self.bootstrap, self.broker_pid, self.n = spark, bootstrap, broker_pid, n
        self.read_topic, self.ends, self.admin, self.workdir = read_topic, ends, admin, workdir
        self.jvms = [pid for pid in (jvm_pid(spark),) if pid is not None]

    def ceiling_df(self, rows: int, cols: tuple[str, ...] | None = None, batch: int = CEILING_BATCH) -> Any:
        df = self.spark.read.format("bench_ceiling").option("rows", str(rows)).option("batch", str(batch)).load()
        return df.select(*cols) if cols else df

    # Each case: run the query once, return (rows it handled, problem or None).
    def ceiling(self, n: int) -> tuple[int, str | None]:
        self.ceiling_df(n).write.format("noop").mode("overwrite").save()
        return n, None

    def ceiling64k(self, n: int) -> tuple[int, str | None]:
        self.ceiling_df(n, batch=65536).write.format("noop").mode("overwrite").save()
        return n, None

    def empty(self, n: int) -> tuple[int, str | None]:
        self.ceiling_df(2).write.format("noop").mode("overwrite").save()
        return 2, None

    def kw_df(self, fmt: str = "kafkawire", **kafka: str) -> Any:
        r = self.spark.read.format(fmt).option("kafka.bootstrap.servers", self.bootstrap)
        for k, v in kafka.items():
            r = r.option(f"kafka.{k.replace('_', '.')}", v)
        return r.option("subscribe", self.read_topic).load()

    def jvm_read(self, n: int) -> tuple[int, str | None]:
        self.kw_df("kafka").write.format("noop").mode("overwrite").save()
        return n, None

    def _window(self, fmt: str, n: int) -> tuple[int, str | None]:
        from pyspark.sql import functions as F

        (self.kw_df(fmt).groupBy(F.window("timestamp", "1 minute"), "key")
         .agg(F.count("*"), F.sum(F.length("value"))).write.format("noop").mode("overwrite").save())
        return n, None

    def kw_window(self, n: int) -> tuple[int, str | None]:
        return self._window("kafkawire", n)

    def jvm_window(self, n: int) -> tuple[int, str | None]:
        return self._window("kafka", n)

    def _stream(self, fmt: str, n: int) -> tuple[int, str | None]:
        q = (self.spark.readStream.format(fmt).option("kafka.bootstrap.servers", self.bootstrap)
             .option("subscribe", self.read_topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(max(1, n // 4))).load()
             .writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp(dir=self.workdir))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        got = sum(p["numInputRows"] for p in q.recentProgress)
        if os.environ.get("COMPARE_SPARK_PROGRESS"):  # per micro-batch durations (ms), for diagnosis
            for p in q.recentProgress:
                print(f"    batch {p['batchId']} rows {p['numInputRows']} {p['durationMs']}", file=sys.stderr)
        return got, None if got == n else f"read {got:,} of {n:,}"

    def kw_stream(self, n: int) -> tuple[int, str | None]:
        return self._stream("kafkawire", n)

    def jvm_stream(self, n: int) -> tuple[int, str | None]:
        return self._stream("kafka", n)

    def kw_read(self, n: int) -> tuple[int, str | None]:
        self.kw_df().write.format("noop").mode("overwrite").save()
        return n, None

    def kw_read_osbuf(self, n: int) -> tuple[int, str | None]:
        # kafkawire's default receive buffer is the Java client's fixed 64 KiB, which on
        # Linux switches receive-buffer autotuning off (see compare_e2e.py).
        self.kw_df(receive_buffer_bytes="-1").write.format("noop").mode("overwrite").save()
        return n, None

    def tuple_read(self, n: int) -> tuple[int, str | None]:
        countdir = tempfile.mkdtemp(dir=self.workdir)
        (self.spark.read.format("bench_tuples").option("bootstrap", self.bootstrap)
         .option("topic", self.read_topic).option("ends", json.dumps(self.ends)).option("countdir", countdir)
         .load().write.format("noop").mode("overwrite").save())
        got = sum(int(open(os.path.join(countdir, f)).read()) for f in os.listdir(countdir))
        return got, None if got == n else f"read {got:,} of {n:,}"

    def noop_writer(self, n: int) -> tuple[int, str | None]:
        countfile = os.path.join(self.workdir, f"noop-{uuid.uuid4().hex}")
        self.ceiling_df(n, ("key", "value")).write.format("bench_noop_arrow").option(
            "countfile", countfile).mode("append").save()
        got = int(open(countfile).read())
        return got, None if got == n else f"wrote {got:,} of {n:,}"

    def kw_sink(self, n: int, fmt: str = "kafkawire") -> tuple[int, str | None]:
        out = f"spark-sink-{uuid.uuid4().hex[:8]}"
        self.admin.create(out)
        self._sink_topic = out
        (self.ceiling_df(n, ("key", "value")).write.format(fmt)
         .option("kafka.bootstrap.servers", self.bootstrap).option("topic", out).mode("append").save())
        return n, None

    def jvm_sink(self, n: int) -> tuple[int, str | None]:
        return self.kw_sink(n, "kafka")

    def after_sink(self, out: Outcome) -> None:
        """Untimed: the sink's topic must hold exactly N records; then it is deleted."""
        topic = getattr(self, "_sink_topic", None)
        if topic is None:
            return
        self._sink_topic = None
        try:
            if out.problem is None:
                got = sum(topic_end_offsets(self.bootstrap, topic))
                if got != out.rows:
                    out.problem = f"topic holds {got:,} of {out.rows:,}"
        finally:
            self.admin.delete([topic])

    def run_case(self, case: str, n: int) -> Outcome:
        fn: Callable[[int], tuple[int, str | None]] = getattr(self, case)
        gc.collect()
        cpu0 = process_cpu(self.broker_pid)
        jvm0, py0 = jvms_cpu(self.jvms), workers_cpu(self.jvms)
        sampler = MemorySampler(self.jvms) if case in READ_CASES else None
        try:
            if sampler:
                sampler.__enter__()
            start = time.perf_counter()
            try:
                rows, problem = fn(n)
            finally:
                elapsed = time.perf_counter() - start
                if sampler:
                    sampler.__exit__()
            out = Outcome(elapsed, rows, problem)
        except Exception as exc:  # noqa: BLE001 - a failing case is reported, not fatal
            text = str(exc).strip().splitlines()
            out = Outcome(float("nan"), 0, f"ERROR {type(exc).__name__}: {' '.join(text[:3])}"[:400])
            print(f"  {case} failed:\n{exc}", file=sys.stderr)
        cpu1 = process_cpu(self.broker_pid)
        if cpu0 is not None and cpu1 is not None:
            out.broker_cpu = cpu1 - cpu0
        jvm1, py1 = jvms_cpu(self.jvms), workers_cpu(self.jvms)
        if jvm0 is not None and jvm1 is not None:
            out.jvm_cpu = jvm1 - jvm0
            out.py_cpu = sum(v - py0.get(pid, 0.0) for pid, v in py1.items())
        if sampler:
            base = sampler.base_pss_sum or 0
            out.mem = (sampler.peak_pss_sum, sampler.peak_rss_max, sampler.peak_procs, sampler.peak_pss_sum - base)
        if case in ("kw_sink", "jvm_sink"):
            self.after_sink(out)
        return out


def show(case: str, out: Outcome) -> None:
    rate = out.rows / out.seconds if out.seconds == out.seconds and out.seconds > 0 else 0
    cpu = "" if out.jvm_cpu is None else f"  cpu: jvm {out.jvm_cpu:5.1f}s py {out.py_cpu:5.1f}s"
    cpu += "" if out.broker_cpu is None else f" broker {out.broker_cpu:4.1f}s"
    mem = "" if not out.mem else (f"  py-workers PSS {out.mem[0] / 1024:5.0f} MiB (+{out.mem[3] / 1024:.0f} during, "
                                  f"{out.mem[2]} procs, largest RSS {out.mem[1] / 1024:.0f} MiB)")
    note = f"  <-- {out.problem}" if out.problem else ""
    print(f"  {case:<12} {out.seconds:7.2f}s {rate:>12,.0f} rows/s{cpu}{mem}{note}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> tuple[dict[str, list[Outcome]], dict[str, Any]]:
    from kafkawire.testing import KafkaCluster, TansuBroker

    info: dict[str, Any] = {"broker": args.broker}
    results: dict[str, list[Outcome]] = {}
    cases = list(args.cases)
    needs_topic = any(c in cases for c in TOPIC_CASES)

    stack = contextlib.ExitStack()
    master, executors = "local[2]", []
    if args.master == "standalone":
        from kafkawire.testing import SparkStandaloneCluster

        cluster = stack.enter_context(SparkStandaloneCluster(workers=PARTITIONS, cores=1, memory="1500m"))
        master = cluster.master_url
    t0 = time.monotonic()
    spark = make_session(any(c in cases for c in JVM_CASES), master, args.event_log)
    if args.master == "standalone":
        executors = executor_jvms(cluster, PARTITIONS)
        print(f"standalone cluster {master}: executor JVMs {executors}", file=sys.stderr, flush=True)
    info["session_s"] = time.monotonic() - t0
    info["spark"] = spark.version
    info["master"] = ("local[2]" if args.master == "local" else
                      f"a standalone cluster (master and {PARTITIONS} workers on loopback, one single-core executor each)")
    for cls in define_sources().values():
        spark.dataSource.register(cls)
    workdir = tempfile.mkdtemp(prefix="compare-spark-")
    try:
        with (KafkaCluster(1) if args.broker == "kafka" else TansuBroker()) as broker:
            bootstrap = broker.bootstrap
            broker_pid = broker.nodes[0].pid if args.broker == "kafka" else broker.pid
            print(f"{args.broker} broker pid {broker_pid} on {bootstrap}; Spark {spark.version}, "
                  f"JVM pid {jvm_pid(spark)}", file=sys.stderr, flush=True)
            admin = Admin(bootstrap)
            try:
                read_topic = f"spark-read-{uuid.uuid4().hex[:8]}"
                ends = split(args.rows, PARTITIONS)
                if needs_topic:
                    admin.create(read_topic)
                    secs = produce(bootstrap, read_topic, args.rows)
                    info["produce_rate"] = args.rows / secs
                    print(f"produced {args.rows:,} records to {read_topic} in {secs:.1f}s", file=sys.stderr, flush=True)
                    got = topic_end_offsets(bootstrap, read_topic)
                    if got != ends:
                        raise RuntimeError(f"{read_topic} end offsets {got}, expected {ends}")
                bench = Bench(spark, bootstrap, broker_pid, args.rows, read_topic, ends, admin, workdir)
                bench.jvms += executors
                if "kw_read" in cases or "kw_read_osbuf" in cases:
                    t = time.perf_counter()
                    count = bench.kw_df().count()
                    print(f"kafkawire source count(): {count:,} ({time.perf_counter() - t:.1f}s)", file=sys.stderr)
                    if count != args.rows:
                        raise RuntimeError(f"format('kafkawire') counted {count:,} rows, expected {args.rows:,}")
                # Warm-up (untimed): cold Python workers, first-use imports, JIT.
                warm = min(args.rows, 200_000)
                print(f"warm-up ({warm:,} rows per case)", file=sys.stderr, flush=True)
                for case in cases:
                    if case in TOPIC_CASES:
                        continue  # they read the whole topic; the first round warms them
                    show(case, bench.run_case(case, warm))
                for r in range(args.rounds):
                    order = cases[r % len(cases):] + cases[: r % len(cases)]
                    print(f"round {r + 1}/{args.rounds}: {', '.join(order)}", file=sys.stderr, flush=True)
                    for case in order:
                        out = bench.run_case(case, args.rows)
                        results.setdefault(case, []).append(out)
                        show(case, out)
                if needs_topic:
                    admin.delete([read_topic])
            finally:
                admin.close()
    finally:
        spark.stop()
        stack.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return results, info


BROKERS = {"kafka": "one Apache Kafka node (KafkaCluster)", "tansu": "one Tansu broker (in-memory storage)"}


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def report(results: dict[str, list[Outcome]], info: dict[str, Any], args: argparse.Namespace) -> list[str]:
    n = args.rows
    rate: dict[str, float | None] = {}
    lines = [
        "# kafkawire Spark benchmark",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared); PySpark {info.get('spark', '?')} {info.get('master', 'local[2]')}, one SparkSession; "
        f"{BROKERS[info['broker']]} on loopback; median of {args.rounds} interleaved rounds (case order rotating); "
        f"{n:,} rows per case, {KEY_SIZE}-byte keys and {VALUE_SIZE}-byte values, "
        f"{PARTITIONS} partitions (= {PARTITIONS} Spark tasks). Time: the whole `save()` call, "
        f"planning included (see the empty-query row for that fixed cost).",
        "",
        "| case | rows/s (median) | min–max | s (median) | CPU s: JVM / Python workers / broker | peak Python-worker memory | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in ALL_CASES + EXTRA_CASES:
        outs = results.get(case)
        if not outs:
            continue
        rates = [o.rate for o in outs]
        rate[case] = median(rates) if case not in ("empty",) else None
        secs = median([o.seconds for o in outs if o.seconds == o.seconds]) or float("nan")
        def med(xs: list[float | None]) -> str:
            got = [x for x in xs if x is not None]
            return f"{median(got):.1f}" if got else "?"
        cpu = (f"{med([o.jvm_cpu for o in outs])} / {med([o.py_cpu for o in outs])} / "
               f"{med([o.broker_cpu for o in outs]) if case in TOPIC_CASES + ('kw_sink', 'jvm_sink') else '-'}")
        mems = [o.mem for o in outs if o.mem and o.mem[0]]
        mem = ""
        if mems:
            pss = max(m[0] for m in mems) / 1024
            rss = max(m[1] for m in mems) / 1024
            procs = max(m[2] for m in mems)
            grow = max(m[3] for m in mems) / 1024
            mem = f"{pss:,.0f} MiB PSS in {procs} procs, +{grow:,.0f} MiB during the case; largest process RSS {rss:,.0f} MiB"
        problems = sorted({o.problem for o in outs if o.problem})
        lines.append(f"| {LABELS[case]} | {median(rates) or 0:,.0f} | {min(rates):,.0f}–{max(rates):,.0f} | "
                     f"{secs:.2f} | {cpu} | {mem} | {'; '.join(problems)} |")

    def row(what: str, mine: str, ref: str, target: float, pct: bool) -> str:
        a, b = rate.get(mine), rate.get(ref)
        tgt = f">= {target:.0%}" if pct else f">= {target:g}x"
        if not a or not b:
            return f"| {what} | n/a | n/a | n/a | {tgt} | n/a |"
        ratio = a / b
        shown = f"{ratio:.0%}" if pct else f"{ratio:.2f}x"
        # Per-round ratios (same round, adjacent in time) show the spread.
        pairs = [x.rate / y.rate for x, y in zip(results[mine], results[ref]) if x.rate and y.rate]
        spread = f" (rounds {min(pairs):.2f}–{max(pairs):.2f})" if pairs else ""
        return (f"| {what} | {a:,.0f}/s | {b:,.0f}/s | {shown}{spread} | {tgt} | "
                f"{'PASS' if ratio >= target else 'MISS'} |")

    def per_cpu(case: str, broker: bool) -> float | None:
        """Median rows per CPU second of the Spark side (JVM + Python workers), + broker if asked."""
        xs = []
        for o in results.get(case, []):
            if o.problem or o.jvm_cpu is None or o.py_cpu is None:
                continue
            cpu = o.jvm_cpu + o.py_cpu + ((o.broker_cpu or 0.0) if broker else 0.0)
            if cpu > 0:
                xs.append(o.rows / cpu)
        return median(xs)

    def info_row(what: str, mine: str, ref: str, broker: bool) -> str:
        a, b = per_cpu(mine, broker), per_cpu(ref, broker)
        if not a or not b:
            return f"| {what} | n/a | n/a | n/a | (context) | |"
        return f"| {what} | {a:,.0f}/CPU-s | {b:,.0f}/CPU-s | {a / b:.0%} | (context) | |"

    lines += [
        "",
        "| target | kafkawire | reference | ratio of medians | target | |",
        "|---|---|---|---|---|---|",
        row("read vs ceiling", "kw_read", "ceiling", TARGET_READ_VS_CEILING, True),
        row("read vs tuple read", "kw_read", "tuple_read", TARGET_READ_VS_TUPLES, False),
        row("sink vs noop Arrow writer", "kw_sink", "noop_writer", TARGET_SINK_VS_NOOP, True),
        info_row("read vs ceiling, rows per CPU-s of JVM + Python workers", "kw_read", "ceiling", False),
        info_row("read vs ceiling, rows per CPU-s of JVM + Python workers + broker", "kw_read", "ceiling", True),
        info_row("sink vs noop writer, rows per CPU-s of JVM + Python workers", "kw_sink", "noop_writer", False),
        info_row("sink vs noop writer, rows per CPU-s of JVM + Python workers + broker", "kw_sink", "noop_writer",
                 True),
    ]
    if any(results.get(jvm) for _w, _k, jvm in AGAINST_JVM):
        lines += ["", "| against the JVM connector | kafkawire | JVM connector | kafkawire / JVM | target | |",
                  "|---|---|---|---|---|---|"]
        for what, mine, jvm in AGAINST_JVM:
            a, b = rate.get(mine), rate.get(jvm)
            if not a or not b:
                continue
            pairs = [x.rate / y.rate for x, y in zip(results[mine], results[jvm]) if x.rate and y.rate]
            lines.append(f"| {what} | {a:,.0f}/s | {b:,.0f}/s | {a / b:.2f}x (rounds {min(pairs):.2f}–"
                         f"{max(pairs):.2f}) | >= 1x | {'PASS' if a >= b else 'MISS'} |")
    lines += [
        "",
        "Memory (read cases; worst round): peak of the summed PSS (proportional set size, /proc smaps_rollup) "
        "of every Python process under the Spark JVM (the pyspark daemon, the workers it forks, the planner "
        "processes), sampled 10x/s; idle workers left from earlier cases are included, hence also the growth "
        "over the case and the RSS of the largest single process (a reading worker). CPU: seconds used during the "
        "case (median) by the Spark JVM, by the Python processes under it (including workers reaped meanwhile; "
        "short-lived planner processes are missed) and by the broker: all three share the 2 cores.",
    ]
    if "produce_rate" in info:
        lines += ["", f"Read topic produced once before the rounds with `Producer.send_batch`: "
                  f"{info['produce_rate']:,.0f} records/s (untimed context)."]
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows per case (5,000,000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (5; --quick 3)")
    parser.add_argument("--quick", action="store_true", help="500,000 rows, 3 rounds")
    parser.add_argument("--cases", default=",".join(ALL_CASES),
                        help=f"comma-separated, from {','.join(ALL_CASES + EXTRA_CASES)} (default: all but the variants)")
    parser.add_argument("--broker", choices=sorted(BROKERS), default="kafka",
                        help="the broker started for the run (kafka; tansu leaves the JVM connector out)")
    parser.add_argument("--master", choices=("local", "standalone"), default="local",
                        help="local[2] (default), or a standalone cluster started here: a master and 2 workers "
                             "with one single-core executor each")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables to PATH")
    parser.add_argument("--event-log", metavar="DIR", help="write Spark's event log (stage and task timings) to DIR")
    args = parser.parse_args()
    args.rows = args.rows or (500_000 if args.quick else 5_000_000)
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if args.broker == "tansu":  # the JVM connector is compared on the reference broker only
        args.cases = [c for c in args.cases if c not in JVM_CASES]
    bad = [c for c in args.cases if c not in ALL_CASES + EXTRA_CASES]
    if bad:
        parser.error(f"unknown case(s) {bad}; choose from {', '.join(ALL_CASES)}")
    if args.rows < PARTITIONS:
        parser.error(f"--rows must be at least {PARTITIONS}")
    started = time.monotonic()
    results, info = run(args)
    text = "\n".join(report(results, info, args)) + "\n"
    print(text)
    print(f"(took {time.monotonic() - started:.0f}s)", file=sys.stderr)
    write_markdown(args.markdown, text)


if __name__ == "__main__":
    main()
