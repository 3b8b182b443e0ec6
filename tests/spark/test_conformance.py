"""format("kafka"), Spark's own JVM connector (spark-sql-kafka-0-10), and format("kafkawire")
side by side on the same Apache Kafka topics: the same rows and schema for the same query,
the same partition for the same key, the same failures for the same mistakes.

The JVM connector is 4.2.0 inside PySpark 4.3 (no 4.3.0 is published; see
kafkawire.testing.spark.kafka_connector_jars).  Every difference that stays is listed in
the README's Spark section with its reason, and pinned by a test here, so that a change
on either side shows.
"""

from __future__ import annotations

import json
import os
import re
import time

import confluent_kafka
import pytest
from pyspark.errors import StreamingQueryException
from sparkkafka import TS, new_topic, produce, records

from kafkawire import Admin, Consumer
from kafkawire.client.consumer import TopicPartition
from kafkawire.client.partitioner import partition_for_key
from kafkawire.testing.spark import SPARK_CONNECTOR_VERSION, kafka_connector_jars, pyspark_home

pytestmark = pytest.mark.spark

FORMATS = ("kafka", "kafkawire")
# Records per partition of the shared topic `a` (3 partitions) and `b` (2 partitions).
A_SIZES = (40, 50, 60)
B_SIZES = (25, 25)


@pytest.fixture(scope="module")
def topics(kafka_broker):
    """Two topics with records (headers on every third, null keys and values among them),
    shared by the read tests, which only read them."""
    b = kafka_broker.bootstrap
    a, bb = new_topic(b, 3, prefix="conf-a"), new_topic(b, 2, prefix="conf-b")
    produce(b, a, {p: records(p, n) for p, n in enumerate(A_SIZES)})
    produce(b, bb, {p: records(p, n) for p, n in enumerate(B_SIZES)})
    return {"a": a, "b": bb, "bootstrap": b}


def reader(spark, fmt: str, bootstrap: str, options: dict):
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def rows(df) -> list[tuple]:
    # Row is a tuple (headers a list of Rows, also tuples): compared whole, in log order.
    return sorted((tuple(r) for r in df.collect()), key=lambda r: (r[2], r[3], r[4]))


def same_read(spark, bootstrap: str, **options) -> tuple[list[tuple], list]:
    """Run one batch query through both connectors; assert the same schema and rows.
    Returns the rows and both DataFrames (JVM's first)."""
    dfs = [reader(spark, fmt, bootstrap, options).load() for fmt in FORMATS]
    assert dfs[0].schema == dfs[1].schema
    jvm, ours = rows(dfs[0]), rows(dfs[1])
    assert len(ours) == len(jvm)
    assert ours == jvm
    return ours, dfs


def test_connector_jars_add_only_what_pyspark_lacks():
    jars = kafka_connector_jars()
    names = {os.path.basename(j) for j in jars}
    assert f"spark-sql-kafka-0-10_2.13-{SPARK_CONNECTOR_VERSION}.jar" in names
    assert any(n.startswith("kafka-clients-") for n in names)
    # A second copy of a class PySpark already loads could clash (a jar name without its version).
    artifact = re.compile(r"^(.*?)-\d[\w.\-]*\.jar$")
    shipped = {artifact.match(n).group(1) for n in os.listdir(os.path.join(pyspark_home(), "jars"))
               if artifact.match(n)}
    assert not {artifact.match(n).group(1) for n in names} & shipped
    assert kafka_connector_jars() == jars  # cached: no Maven the second time


# -- reading -----------------------------------------------------------------------------

def _by_time(t: str, sizes: tuple[int, ...], at: int) -> int:
    """Records of `t` at or after TS + at ms (record i of each partition is at TS + 10 i)."""
    return sum(max(0, n - -(-at // 10)) for n in sizes)


READS = {
    # name: (options from the topic names, rows expected)
    "subscribe": (lambda a, b: {"subscribe": a}, sum(A_SIZES)),
    "subscribe two topics": (lambda a, b: {"subscribe": f"{a},{b}"}, sum(A_SIZES) + sum(B_SIZES)),
    "subscribePattern": (lambda a, b: {"subscribePattern": re.escape(a[:-2]) + ".."}, sum(A_SIZES)),
    "assign": (lambda a, b: {"assign": json.dumps({a: [0, 2], b: [1]})}, 40 + 60 + 25),
    "offsets as keywords": (lambda a, b: {"subscribe": a, "startingOffsets": "earliest",
                                          "endingOffsets": "latest"}, sum(A_SIZES)),
    "offsets as JSON": (lambda a, b: {
        "subscribe": a, "startingOffsets": json.dumps({a: {"0": 5, "1": -2, "2": 12}}),
        "endingOffsets": json.dumps({a: {"0": 20, "1": -1, "2": 30}})}, 15 + 50 + 18),
    "startingTimestamp": (lambda a, b: {"subscribe": a, "startingTimestamp": str(TS + 155)},
                          _by_time("a", A_SIZES, 155)),
    "endingTimestamp": (lambda a, b: {"subscribe": a, "endingTimestamp": str(TS + 205)}, 3 * 21),
    "offsets by timestamp": (lambda a, b: {
        "subscribe": a,
        "startingOffsetsByTimestamp": json.dumps({a: {"0": TS + 50, "1": TS, "2": TS + 100}}),
        "endingOffsetsByTimestamp": json.dumps({a: {"0": TS + 300, "1": TS + 10**9, "2": TS + 150}})},
        25 + 50 + 5),
    "startingTimestamp after every record, strategy latest": (lambda a, b: {
        "subscribe": a, "startingTimestamp": str(TS + 10**9),
        "startingOffsetsByTimestampStrategy": "latest"}, 0),
    "includeHeaders": (lambda a, b: {"subscribe": a, "includeHeaders": "true"}, sum(A_SIZES)),
}


@pytest.mark.parametrize("name", list(READS))
def test_same_rows_and_schema(spark, topics, name):
    options, expected = READS[name]
    got, _ = same_read(spark, topics["bootstrap"], **options(topics["a"], topics["b"]))
    assert len(got) == expected


def test_headers_and_nulls_are_read_alike(spark, topics):
    got, dfs = same_read(spark, topics["bootstrap"], subscribe=topics["b"], includeHeaders="true")
    assert dfs[0].schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    # records(): a header with a null value on every third, null keys and values among them.
    assert any(r[7] is not None and any(h.value is None for h in r[7]) for r in got)
    assert any(r[7] is None for r in got)
    assert any(r[0] is None for r in got) and any(r[1] is None for r in got)


def _task_sizes(df) -> list[int]:
    return sorted(df.rdd.mapPartitions(lambda it: [sum(1 for _ in it)]).collect())


def test_min_partitions_splits_alike(spark, topics):
    _, dfs = same_read(spark, topics["bootstrap"], subscribe=topics["a"], minPartitions="7")
    sizes = [_task_sizes(df) for df in dfs]
    assert len(sizes[1]) == 7 and sizes[0] == sizes[1]


def test_max_records_per_partition(spark, topics):
    a = topics["a"]
    # With concrete JSON offsets both split each range into pieces of at most 20 records.
    concrete = {"startingOffsets": json.dumps({a: {"0": 0, "1": 0, "2": 0}}),
                "endingOffsets": json.dumps({a: {"0": 40, "1": 50, "2": 60}})}
    _, dfs = same_read(spark, topics["bootstrap"], subscribe=a, maxRecordsPerPartition="20", **concrete)
    sizes = [_task_sizes(df) for df in dfs]
    assert sizes[0] == sizes[1] == [16, 17, 17, 20, 20, 20, 20, 20]  # 50 records: three even pieces
    # Difference (README): with earliest/latest, connector 4.2.0 sizes its ranges before it
    # resolves them (-2 to -1, one record each) and splits nothing; kafkawire still does.
    _, dfs = same_read(spark, topics["bootstrap"], subscribe=a, maxRecordsPerPartition="20")
    jvm, ours = (_task_sizes(df) for df in dfs)
    assert jvm == sorted(A_SIZES)
    assert max(ours) <= 20 and sum(ours) == sum(A_SIZES) and len(ours) == 8


# -- failing alike -------------------------------------------------------------------------

# What an error raised in a task carries: Spark 4 rethrows a task's SparkThrowable on the
# driver as it is, without "Job aborted due to stage failure", so the stack frames tell.
_TASK_MARKS = ("stage failure", "scheduler.ResultTask", "scheduler.ShuffleMapTask", "Executor$TaskRunner",
               "An exception was thrown from the Python worker")


def _in_a_task(exc: BaseException) -> bool:
    return any(mark in str(exc) for mark in _TASK_MARKS)


def _attempt(spark, fmt: str, bootstrap: str, options: dict) -> tuple[str, BaseException | None]:
    """Where a query fails: "load", "action" (on the driver, before any task), "task",
    or "ok"; with the exception."""
    try:
        df = reader(spark, fmt, bootstrap, options).load()
    except Exception as exc:  # noqa: BLE001 - Py4J and PySpark errors alike
        return "load", exc
    try:
        df.collect()
    except Exception as exc:  # noqa: BLE001
        return ("task" if _in_a_task(exc) else "action"), exc
    return "ok", None


# (options with {a} for the topic, what kafkawire's message says, where the JVM connector
# fails, where kafkawire does).  Batch-only rules wait for the first action in kafkawire:
# a Python data source learns whether it is read as a batch or a stream only then.
BAD_SOURCE_OPTIONS = [
    ({}, "exactly one of the options 'assign', 'subscribe' or 'subscribePattern'", "load", "load"),
    ({"subscribe": "{a}", "assign": '{{"{a}":[0]}}'}, "exactly one of the options", "load", "load"),
    ({"assign": "[1,2]"}, "option 'assign' must be JSON like", "load", "load"),
    ({"subscribe": ""}, "option 'subscribe' must list one or more topics", "load", "load"),
    ({"subscribePattern": "("}, "option 'subscribePattern' is not a valid regular expression", "load", "load"),
    ({"subscribe": "{a}", "startingOffsets": "{{bad"}, "option 'startingOffsets' is not valid JSON", "load", "load"),
    ({"subscribe": "{a}", "failOnDataLoss": "maybe"}, "option 'failOnDataLoss' must be 'true' or 'false'", "load", "load"),
    ({"subscribe": "{a}", "includeHeaders": "maybe"}, "option 'includeHeaders' must be 'true' or 'false'", "load", "load"),
    ({"subscribe": "{a}", "minPartitions": "0"}, "option 'minPartitions' must be a positive integer", "load", "load"),
    ({"subscribe": "{a}", "maxRecordsPerPartition": "0"}, "option 'maxRecordsPerPartition' must be a positive",
     "load", "load"),
    ({"subscribe": "{a}", "startingTimestamp": "abc"}, "option 'startingTimestamp' must be an integer", "load", "load"),
    ({"subscribe": "{a}", "startingOffsetsByTimestampStrategy": "nope"},
     "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'", "load", "load"),
    ({"subscribe": "{a}", "kafka.auto.offset.reset": "earliest"}, "option 'kafka.auto.offset.reset' is not supported",
     "load", "load"),
    ({"subscribe": "{a}", "kafka.enable.auto.commit": "true"}, "option 'kafka.enable.auto.commit' is not supported",
     "load", "load"),
    ({"subscribe": "{a}", "kafka.key.deserializer": "x"}, "option 'kafka.key.deserializer' is not supported",
     "load", "load"),
    ({"subscribe": "{a}", "kafka.value.deserializer": "x"}, "option 'kafka.value.deserializer' is not supported",
     "load", "load"),
    ({"subscribe": "{a}", "kafka.interceptor.classes": "x"}, "option 'kafka.interceptor.classes' is not supported",
     "load", "load"),
    ({"subscribe": "{a}", "startingOffsets": "latest"}, "option 'startingOffsets' cannot be 'latest' for a batch",
     "load", "action"),
    ({"subscribe": "{a}", "endingOffsets": "earliest"}, "option 'endingOffsets' cannot be 'earliest' for a batch",
     "load", "action"),
    ({"subscribe": "{a}", "startingOffsets": '{{"{a}":{{"0":-1,"1":-2,"2":-2}}}}'},
     "option 'startingOffsets': offset -1 for {a}[0] is not allowed", "load", "action"),
    ({"subscribe": "{a}", "endingOffsets": '{{"{a}":{{"0":-2,"1":-1,"2":-1}}}}'},
     "option 'endingOffsets': offset -2 for {a}[0] is not allowed", "load", "action"),
    # These need the broker, in both.
    ({"subscribe": "{a}", "startingOffsets": '{{"{a}":{{"0":0}}}}'},
     "option 'startingOffsets' must give every partition the query reads", "action", "action"),
    ({"subscribe": "{a}", "startingOffsets": '{{"{a}":{{"0":20,"1":0,"2":0}}}}',
      "endingOffsets": '{{"{a}":{{"0":10,"1":5,"2":5}}}}'},
     "{a}[0]: the start offset 20 (from startingOffsets) is after the end offset 10 (from endingOffsets)",
     "load", "action"),
    ({"subscribe": "conformance-no-such-topic"}, "option 'subscribe' names topics that do not exist", "action", "action"),
    ({"assign": '{{"conformance-no-such-topic":[0]}}'}, "option 'assign' names partitions that do not exist",
     "action", "action"),
    ({"subscribe": "{a}", "startingTimestamp": str(TS + 10**9)},
     "option 'startingTimestamp': no record at or after the given timestamp", "action", "action"),
]


@pytest.mark.parametrize("options,message,jvm_stage,our_stage", BAD_SOURCE_OPTIONS,
                         ids=[json.dumps(c[0])[:60] for c in BAD_SOURCE_OPTIONS])
def test_bad_options_fail_in_both_on_the_driver(spark, topics, options, message, jvm_stage, our_stage):
    a = topics["a"]
    options = {k: v.format(a=a) for k, v in options.items()}
    jvm, jvm_exc = _attempt(spark, "kafka", topics["bootstrap"], options)
    ours, our_exc = _attempt(spark, "kafkawire", topics["bootstrap"], options)
    assert (jvm, ours) == (jvm_stage, our_stage), (jvm_exc, our_exc)
    assert message.format(a=a) in str(our_exc)
    if "conformance-no-such-topic" in json.dumps(options):
        with Admin(bootstrap_servers=topics["bootstrap"]) as admin:
            assert "conformance-no-such-topic" not in admin.list_topics(timeout=30)  # reading creates nothing


def test_assign_of_a_missing_partition_fails_in_kafkawire_only(spark, topics):
    # Difference (README): connector 4.2.0 reads the assigned partitions that exist and
    # says nothing of the others; kafkawire names them.
    a = topics["a"]
    options = {"assign": json.dumps({a: [0, 7]})}
    assert len(rows(reader(spark, "kafka", topics["bootstrap"], options).load())) == A_SIZES[0]
    ours, exc = _attempt(spark, "kafkawire", topics["bootstrap"], options)
    assert ours == "action" and f"option 'assign' names partitions that do not exist: {a}[7] ({a} has partitions 0-2)" in str(exc)


def test_bad_kafka_values_fail_on_the_driver_in_kafkawire_only(spark, topics):
    # Difference (README): the JVM connector hands kafka.* values to the Java client in
    # each task, so a bad one fails the tasks; kafkawire checks them on the driver.
    options = {"subscribe": topics["a"], "kafka.fetch.max.wait.ms": "soon"}
    jvm, jvm_exc = _attempt(spark, "kafka", topics["bootstrap"], options)
    ours, our_exc = _attempt(spark, "kafkawire", topics["bootstrap"], options)
    assert jvm == "task" and "fetch.max.wait.ms" in str(jvm_exc)
    assert ours == "load" and "fetch_max_wait_ms must be an integer, got 'soon'" in str(our_exc)


@pytest.mark.parametrize("options,message", [
    ({"kafka.no.such.thing": "1"}, "unknown consumer option 'no_such_thing'"),
    ({"startingoffset": "earliest"}, "did you mean 'startingOffsets'?"),
    ({"topic": "x"}, "option 'topic' does not apply to reading"),
    ({"maxOffsetsPerTrigger": "10"}, "option 'maxOffsetsPerTrigger' applies to streaming queries only"),
])
def test_options_the_jvm_connector_ignores_are_errors_in_kafkawire(spark, topics, options, message):
    # Difference (README): an option that has no effect where it is given (unknown,
    # misspelt, or for the other kind of query) is an error in kafkawire; the JVM
    # connector ignores it and reads as if it were not there.
    options = {"subscribe": topics["a"], **options}
    assert _attempt(spark, "kafka", topics["bootstrap"], options)[0] == "ok"
    ours, exc = _attempt(spark, "kafkawire", topics["bootstrap"], options)
    assert ours in ("load", "action") and message in str(exc)


# -- data loss -----------------------------------------------------------------------------

def test_fail_on_data_loss_both_ways(spark, kafka_broker):
    b = kafka_broker.bootstrap
    t = new_topic(b, 2, prefix="conf-loss")
    produce(b, t, {0: records(0, 10), 1: records(1, 10)})
    with Admin(bootstrap_servers=b) as admin:
        admin.delete_records({(t, 0): 4}, timeout=30)  # as retention would
    cases = [
        # A start before the log's start: the JVM connector's task meets OFFSET_OUT_OF_RANGE;
        # kafkawire sees it while planning.
        ({"startingOffsets": json.dumps({t: {"0": 2, "1": 0}})}, "task", "action",
         f"{t}[0] starts at 2 but the earliest offset is 4", 6 + 10),
        # An end past the log's end (the JVM connector's task waits one poll timeout for
        # the records that are not there, 2 minutes by default).
        ({"endingOffsets": json.dumps({t: {"0": 10, "1": 15}}), "kafkaConsumer.pollTimeoutMs": "3000"},
         "task", "action",
         f"{t}[1] ends at 15 but the latest offset is 10", 6 + 10),
    ]
    for options, jvm_stage, our_stage, message, rows_without_check in cases:
        options = {"subscribe": t, **options}
        jvm, jvm_exc = _attempt(spark, "kafka", b, options)
        ours, our_exc = _attempt(spark, "kafkawire", b, options)
        assert (jvm, ours) == (jvm_stage, our_stage), (jvm_exc, our_exc)
        assert message in str(our_exc) and "failOnDataLoss=false" in str(our_exc)
        got, _ = same_read(spark, b, failOnDataLoss="false", **options)
        assert len(got) == rows_without_check
    # Difference (README): a start past the log's end (a recreated topic) with
    # failOnDataLoss=false is skipped by kafkawire, as a stream does in both; connector
    # 4.2.0's batch read fails it anyway, its start being after its end.
    options = {"subscribe": t, "failOnDataLoss": "false", "startingOffsets": json.dumps({t: {"0": 50, "1": 0}})}
    jvm, exc = _attempt(spark, "kafka", b, options)
    assert jvm == "task" and "start offset 50 is greater than the resolved end offset 10" in str(exc)
    assert [(r[3], r[4]) for r in rows(reader(spark, "kafkawire", b, options).load())] == [(1, o) for o in range(10)]


# -- transactions --------------------------------------------------------------------------

def _transactional(bootstrap: str, tid: str) -> confluent_kafka.Producer:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 3})
    p.init_transactions(30)
    return p


def test_read_committed_alike_over_aborted_and_open_transactions(spark, kafka_broker):
    b = kafka_broker.bootstrap
    t = new_topic(b, 2, prefix="conf-tx")
    p = _transactional(b, f"conf-{t}")
    for n in range(6):  # committed, aborted, committed, ... interleaved with plain records
        p.begin_transaction()
        for i in range(5):
            p.produce(t, b"tx%d-%d" % (n, i), key=b"k%d" % i, partition=i % 2)
        p.flush(30)  # in the log before the abort: an abort drops what is still queued
        p.abort_transaction(30) if n % 2 else p.commit_transaction(30)
        produce(b, t, {0: records(0, 2)})
    # A transaction left open holds read_committed's end (the last stable offset) back.
    still_open = _transactional(b, f"conf-open-{t}")
    still_open.begin_transaction()
    for i in range(4):
        still_open.produce(t, b"open-%d" % i, partition=i % 2)
    still_open.flush(30)
    produce(b, t, {0: records(0, 3)})
    try:
        committed = same_read(spark, b, subscribe=t, **{"kafka.isolation.level": "read_committed"})[0]
        assert sorted(r[1] for r in committed if r[1] and r[1].startswith(b"tx")) == sorted(
            b"tx%d-%d" % (n, i) for n in (0, 2, 4) for i in range(5))
        assert not any(r[1] and r[1].startswith(b"open") for r in committed)
        assert len(committed) == 15 + 12  # and not the 3 records after the open transaction
        everything = same_read(spark, b, subscribe=t, **{"kafka.isolation.level": "read_uncommitted"})[0]
        assert len(everything) == 30 + 12 + 4 + 3
    finally:
        still_open.abort_transaction(30)


# -- writing -------------------------------------------------------------------------------

def _write(df, fmt: str, bootstrap: str, mode: str | None = "append", **options) -> None:
    w = df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        w = w.option(k, v)
    if mode:
        w = w.mode(mode)
    w.save()


def test_sink_keys_headers_and_null_keys_land_alike(spark, kafka_broker):
    b = kafka_broker.bootstrap
    data = [(b"key-%d" % (i % 13) if i % 4 else None, b"v%d" % i,
             [("h", b"%d" % i), ("n", None)] if i % 3 == 0 else None) for i in range(300)]
    df = spark.createDataFrame(data, "key binary, value binary, headers array<struct<key:string,value:binary>>")
    out = {fmt: new_topic(b, 4, prefix=f"conf-sink-{fmt}") for fmt in FORMATS}
    for fmt in FORMATS:
        _write(df, fmt, b, topic=out[fmt])
    written = {}
    for fmt in FORMATS:
        # Each topic reads the same through both connectors...
        got, _ = same_read(spark, b, subscribe=out[fmt], includeHeaders="true")
        written[fmt] = got
    # ...and the two sinks wrote the same records, headers and null keys included.
    def content(rs):
        return sorted((r[0] or b"", r[1], repr(r[7])) for r in rs)
    assert content(written["kafka"]) == content(written["kafkawire"])
    assert len(written["kafkawire"]) == len(data)
    assert {r[6] for r in written["kafkawire"]} == {0}  # CreateTime, set by the producer
    # The same key lands in the same partition with both: the Java producer's murmur2.
    placed = {fmt: {(r[0], r[3]) for r in written[fmt] if r[0] is not None} for fmt in FORMATS}
    assert placed["kafka"] == placed["kafkawire"]
    assert placed["kafkawire"] == {(k, partition_for_key(k, 4)) for k, _v, _h in data if k is not None}
    assert len({p for _k, p in placed["kafkawire"]}) > 1


def _counts(spark, bootstrap: str, topics: list[str]) -> dict[str, int]:
    df = reader(spark, "kafkawire", bootstrap, {"subscribe": ",".join(topics)}).load()
    return {t: 0 for t in topics} | {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}


def test_sink_topic_option_wins_over_the_column(spark, kafka_broker):
    b = kafka_broker.bootstrap
    for fmt in FORMATS:
        column, option, other = (new_topic(b, 1, prefix=f"conf-{x}") for x in ("col", "opt", "other"))
        df = spark.createDataFrame([(column if i % 2 else other, b"v%d" % i) for i in range(10)],
                                   "topic string, value binary")
        _write(df, fmt, b, topic=option)
        assert _counts(spark, b, [column, option, other]) == {column: 0, option: 10, other: 0}, fmt
        # Without the option, the column routes each row.
        _write(df, fmt, b)
        assert _counts(spark, b, [column, option, other]) == {column: 5, option: 10, other: 5}, fmt


def test_sink_partition_column_is_kept_alike_and_timestamp_by_kafkawire_only(spark, kafka_broker):
    b = kafka_broker.bootstrap
    data = [(b"k", b"v%d" % i, i % 3, i * 1000) for i in range(30)]
    df = spark.createDataFrame(data, "key binary, value binary, partition int, ms long") \
        .selectExpr("key", "value", "partition", f"timestamp_millis(ms + {TS}) AS timestamp")
    got = {}
    before = time.time() - 5
    for fmt in FORMATS:
        t = new_topic(b, 3, prefix=f"conf-part-{fmt}")
        _write(df, fmt, b, topic=t)
        got[fmt] = sorted((r[1], r[3], round(r[5].timestamp() * 1000)) for r in same_read(spark, b, subscribe=t)[0])
    # The partition column wins over the key's partition in both.
    assert [(v, p) for v, p, _ms in got["kafka"]] == [(v, p) for v, p, _ms in got["kafkawire"]]
    assert [(v, p) for v, p, _ms in got["kafkawire"]] == sorted((v, p) for _k, v, p, _ms in data)
    # Difference (README): kafkawire writes the timestamp column as the record's time;
    # connector 4.2.0 has no timestamp column and stamps the time of sending.
    assert {ms - TS for _v, _p, ms in got["kafkawire"]} == {ms for *_, ms in data}
    assert min(ms for _v, _p, ms in got["kafka"]) >= before * 1000


BAD_SINK = [
    # (DataFrame DDL, options, what kafkawire's message says)
    ("key binary", {"topic": "t"}, "the sink needs a 'value' column"),
    ("value binary", {}, "the sink needs a 'topic' column or the 'topic' option"),
    ("value int", {"topic": "t"}, "the sink's 'value' column must be binary or string"),
    ("value binary, key int", {"topic": "t"}, "the sink's 'key' column must be binary or string"),
    ("value binary, topic int", {}, "the sink's 'topic' column must be string"),
    ("value binary, partition long", {"topic": "t"}, "the sink's 'partition' column must be integer"),
    ("value binary, headers array<string>", {"topic": "t"}, "the sink's 'headers' column must be array<struct"),
    ("value binary", {"topic": "t", "kafka.key.serializer": "x"}, "option 'kafka.key.serializer' is not supported"),
    ("value binary", {"topic": "t", "kafka.value.serializer": "x"}, "option 'kafka.value.serializer' is not supported"),
]


@pytest.mark.parametrize("ddl,options,message", BAD_SINK, ids=[c[0] + " " + json.dumps(c[1]) for c in BAD_SINK])
def test_bad_sink_input_fails_in_both_before_writing(spark, kafka_broker, ddl, options, message):
    df = spark.createDataFrame([], ddl)
    for fmt in FORMATS:
        with pytest.raises(Exception) as info:  # noqa: PT011 - Py4J's and PySpark's errors differ
            _write(df, fmt, kafka_broker.bootstrap, **options)
        assert not _in_a_task(info.value), fmt  # refused on the driver, no task ran
    assert message in str(info.value)


def test_sink_save_modes(spark, kafka_broker):
    b = kafka_broker.bootstrap
    t = new_topic(b, 1, prefix="conf-mode")
    df = spark.createDataFrame([(b"v",)], "value binary")
    for fmt in FORMATS:
        for mode in ("overwrite", "ignore"):
            with pytest.raises(Exception, match="(?i)overwrite|ignore|append"):  # noqa: PT011
                _write(df, fmt, b, mode=mode, topic=t)
    # Difference (README): the JVM connector also takes the default mode (ErrorIfExists);
    # Spark's Python Data Source API gives a Python sink Append and Overwrite only.
    _write(df, "kafka", b, mode=None, topic=t)
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):  # noqa: PT011
        _write(df, "kafkawire", b, mode=None, topic=t)
    assert len(same_read(spark, b, subscribe=t)[0]) == 1


def test_sink_options_the_jvm_connector_ignores_are_errors_in_kafkawire(spark, kafka_broker):
    b = kafka_broker.bootstrap
    t = new_topic(b, 1, prefix="conf-sinkopt")
    df = spark.createDataFrame([(b"v",)], "value binary")
    _write(df, "kafka", b, topic=t, startingOffsets="earliest", **{"kafka.no.such": "1"})
    for options, message in (({"startingOffsets": "earliest"}, "'startingoffsets' does not apply to writing"),
                             ({"kafka.no.such": "1"}, "unknown producer option 'no_such'")):
        with pytest.raises(Exception) as info:  # noqa: PT011
            _write(df, "kafkawire", b, topic=t, **options)
        assert message in str(info.value)


# -- streaming -----------------------------------------------------------------------------

def _stream(spark, fmt: str, bootstrap: str, name: str, checkpoint: str, **options):
    r = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(180), f"{fmt}: the stream did not finish in time"
    except StreamingQueryException:
        pass  # a failed query: the caller looks at q.exception()
    return q


def test_available_now_with_max_offsets_per_trigger(spark, topics, tmp_path):
    a, b = topics["a"], topics["b"]
    sizes, tables = {}, {}
    for fmt in FORMATS:
        q = _stream(spark, fmt, topics["bootstrap"], f"conf_max_{fmt}", str(tmp_path / fmt),
                    subscribe=f"{a},{b}", startingOffsets="earliest", maxOffsetsPerTrigger="60")
        assert q.exception() is None, q.exception()
        sizes[fmt] = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        tables[fmt] = rows(spark.table(f"conf_max_{fmt}"))
        assert json.loads(q.lastProgress["sources"][0]["endOffset"]) == {
            a: {str(p): n for p, n in enumerate(A_SIZES)}, b: {str(p): n for p, n in enumerate(B_SIZES)}}
    # The limit is shared among partitions by lag, batch by batch, the same way.
    assert sizes["kafka"] == sizes["kafkawire"]
    assert max(sizes["kafkawire"]) <= 60 and sum(sizes["kafkawire"]) == sum(A_SIZES) + sum(B_SIZES)
    assert tables["kafka"] == tables["kafkawire"]


def test_stream_starts_at_latest_and_fails_on_lost_offsets(spark, topics, tmp_path):
    a = topics["a"]
    for fmt in FORMATS:
        q = _stream(spark, fmt, topics["bootstrap"], f"conf_latest_{fmt}", str(tmp_path / f"l-{fmt}"), subscribe=a)
        assert q.exception() is None and spark.table(f"conf_latest_{fmt}").count() == 0
        # A start past the log's end (a recreated topic) is data loss in both.
        q = _stream(spark, fmt, topics["bootstrap"], f"conf_beyond_{fmt}", str(tmp_path / f"b-{fmt}"),
                    subscribe=a, startingOffsets=json.dumps({a: {"0": 900, "1": -2, "2": -2}}))
        assert q.exception() is not None, fmt
        message = str(q.exception())
        assert ("data may have been lost" if fmt == "kafka" else f"{a}[0] starts at 900") in message


def _running(spark, fmt: str, bootstrap: str, name: str, checkpoint: str, **options):
    """A stream into a memory table with a 1 s trigger: its micro-batches see the topic change."""
    r = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return (r.load().writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second").start())


def _wait_rows(spark, q, table: str, count: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while spark.table(table).count() < count:
        assert q.exception() is None, q.exception()
        assert time.monotonic() < deadline, f"{table}: {spark.table(table).count()} of {count} rows"
        time.sleep(0.5)


def test_partition_added_mid_stream_is_read_alike(spark, kafka_broker, tmp_path):
    b = kafka_broker.bootstrap
    t = new_topic(b, 2, prefix="conf-grow")
    produce(b, t, {0: records(0, 10), 1: records(1, 10)})
    queries = {fmt: _running(spark, fmt, b, f"conf_grow_{fmt}", str(tmp_path / fmt), subscribe=t,
                             startingOffsets="earliest") for fmt in FORMATS}
    try:
        for fmt, q in queries.items():
            _wait_rows(spark, q, f"conf_grow_{fmt}", 20)
        with Admin(bootstrap_servers=b) as admin:  # between two micro-batches of both queries
            admin.create_partitions({t: 3}, timeout=30)
        produce(b, t, {2: records(2, 7), 0: records(0, 3)})
        for fmt, q in queries.items():
            _wait_rows(spark, q, f"conf_grow_{fmt}", 30)
        time.sleep(2)  # a few more triggers: nothing read twice
    finally:
        for q in queries.values():
            q.stop()
    # Both read the new partition from its first offset, and every record once.
    jvm, ours = (rows(spark.table(f"conf_grow_{fmt}")) for fmt in FORMATS)
    assert ours == jvm and len(ours) == 30
    assert [r[4] for r in ours if r[3] == 2] == list(range(7))


def _stream_to_files(spark, fmt: str, bootstrap: str, where, **options):
    """Trigger.AvailableNow into a parquet sink, which (unlike the memory sink) a query
    restarts on from its checkpoint; the query, and the rows the sink holds."""
    r = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().writeStream.format("parquet").option("path", str(where / "out"))
         .option("checkpointLocation", str(where / "checkpoint")).trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(180), f"{fmt}: the stream did not finish in time"
    except StreamingQueryException:
        pass  # the caller looks at q.exception()
    return q, rows(spark.read.parquet(str(where / "out"))) if (where / "out").exists() else []


def test_deleted_records_between_micro_batches_both_ways(spark, kafka_broker, tmp_path):
    b = kafka_broker.bootstrap
    t = new_topic(b, 1, prefix="conf-del")
    produce(b, t, {0: records(0, 10)})
    for fmt in FORMATS:
        q, got = _stream_to_files(spark, fmt, b, tmp_path / fmt, subscribe=t, startingOffsets="earliest")
        assert q.exception() is None and len(got) == 10
    # The checkpoints stand at offset 10; offsets 10-14 go (as retention would) before the next run.
    produce(b, t, {0: records(0, 10)})
    with Admin(bootstrap_servers=b) as admin:
        admin.delete_records({(t, 0): 15}, timeout=30)
    for fmt in FORMATS:
        q, got = _stream_to_files(spark, fmt, b, tmp_path / fmt, subscribe=t)
        assert q.exception() is not None and len(got) == 10, fmt  # failOnDataLoss=true: the query fails
        message = str(q.exception())
        assert ("data may have been lost" if fmt == "kafka" else f"{t}[0] starts at 10 but the earliest offset is 15"
                ) in message, message
    tables = {}
    for fmt in FORMATS:  # the same checkpoint with failOnDataLoss=false: on from the log's start
        q, tables[fmt] = _stream_to_files(spark, fmt, b, tmp_path / fmt, subscribe=t, failOnDataLoss="false")
        assert q.exception() is None, q.exception()
    assert tables["kafka"] == tables["kafkawire"]
    assert [r[4] for r in tables["kafkawire"]] == list(range(10)) + list(range(15, 20))


def _compacted(bootstrap: str) -> str:
    """A compacted topic whose log has gaps: keys k0-k4 written 8 times each, then
    compacted by the broker (segments roll after 100 ms; the cleaner looks every 15 s)
    down to each key's last record and the tombstone: a pass that began before the last
    rounds' segments rolled leaves them for the next, 15 s on, and the tests' reads must
    not race it.  Timestamps are now: with TS's, a day old, Kafka 4.4 rolled no segment here."""
    t = f"conf-compact-{os.urandom(4).hex()}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([t], num_partitions=1, replication_factor=1, configs={
            "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "3600000"}, timeout=30)
    for round_ in range(8):
        now = int(time.time() * 1000)
        produce(bootstrap, t, {0: [(b"k%d" % i, None if (round_, i) == (7, 4) else b"r%d-%d" % (round_, i),
                                    now, []) for i in range(5)]})
        time.sleep(0.3)  # each round in its own segment
    produce(bootstrap, t, {0: [(b"last", b"x", int(time.time() * 1000), [])]})  # rolls the last full one
    deadline = time.monotonic() + 90
    while True:
        with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(t, 0)])
            got: list[int] = []
            while batch := c.poll(2.0):
                got += [m.offset for m in batch]
        if got == list(range(35, 41)):  # round 7's k0-k3 and k4's tombstone, then "last"
            return t
        assert time.monotonic() < deadline, "the broker did not compact the topic in 90 s"
        time.sleep(2)


def test_compacted_topic_reads_alike(spark, kafka_broker, tmp_path):
    b = kafka_broker.bootstrap
    t = _compacted(b)
    got, _ = same_read(spark, b, subscribe=t)
    offsets = [r[4] for r in got]
    assert offsets != list(range(len(offsets)))  # gaps where older values were
    assert any(r[1] is None for r in got)  # the tombstone stays (delete.retention.ms)
    # A range that starts inside the gaps, and a stream split by offsets, not records.
    got, _ = same_read(spark, b, subscribe=t, startingOffsets=json.dumps({t: {"0": 3}}),
                       endingOffsets=json.dumps({t: {"0": 38}}))
    sizes = {}
    for fmt in FORMATS:
        q = _stream(spark, fmt, b, f"conf_compact_{fmt}", str(tmp_path / fmt), subscribe=t,
                    startingOffsets="earliest", maxOffsetsPerTrigger="10")
        assert q.exception() is None, q.exception()
        sizes[fmt] = [p["numInputRows"] for p in q.recentProgress]
        assert rows(spark.table(f"conf_compact_{fmt}")) == rows(reader(spark, "kafka", b, {"subscribe": t}).load())
    assert sizes["kafka"] == sizes["kafkawire"]


def test_a_stream_on_a_topic_that_does_not_exist_fails_in_both_on_the_driver(spark, kafka_broker, tmp_path):
    # As a batch read does (BAD_SOURCE_OPTIONS): neither waits for the topic, neither creates it.
    b = kafka_broker.bootstrap
    t = f"conf-absent-{os.urandom(4).hex()}"
    for fmt in FORMATS:
        q = _stream(spark, fmt, b, f"conf_absent_{fmt}", str(tmp_path / fmt), subscribe=t)
        message = str(q.exception())
        assert not _in_a_task(q.exception()), message
        assert ("UnknownTopicOrPartitionException" if fmt == "kafka" else
                f"option 'subscribe' names topics that do not exist: ['{t}']") in message, message
    with Admin(bootstrap_servers=b) as admin:
        assert t not in admin.list_topics(timeout=30)
