"""format("kafkawire") writes (batch and streaming) and streaming reads against Apache Kafka."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from kafkawire.spark import KafkawireDataLossError, KafkawireOptionError
from kafkawire.spark import _io
from kafkawire.spark._options import SourceOptions
from kafkawire.spark.source import KAFKA_SCHEMA, KafkawireStreamReader
from sparkkafka import TS, confluent_rows, load, new_topic, produce, records, spark_rows

pytestmark = pytest.mark.spark


def write(df, bootstrap: str, **options) -> None:
    w = df.write.format("kafkawire").option("kafka.bootstrap.servers", bootstrap).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def test_write_then_read_back_identical_and_through_confluent(spark, kafka_broker):
    b = kafka_broker.bootstrap
    source, out = new_topic(b, 2), new_topic(b, 3)
    produce(b, source, {0: records(0, 300), 1: records(1, 200)})
    df = load(spark, b, subscribe=source, includeHeaders="true")
    # Rows keep their partition number and timestamp; headers and null keys/values survive.
    write(df.select("key", "value", "partition", "headers", "timestamp"), b, topic=out)
    got = spark_rows(load(spark, b, subscribe=out, includeHeaders="true"))
    want = spark_rows(df)
    strip = [(r[0], r[1], r[3], r[4], r[5], r[7]) for r in got]
    assert strip == [(r[0], r[1], r[3], r[4], r[5], r[7]) for r in want]
    assert confluent_rows(b, out, 3, 500) == got


def test_sink_routes_by_topic_column_and_key(spark, kafka_broker):
    b = kafka_broker.bootstrap
    t1, t2 = new_topic(b, 4), new_topic(b, 4)
    rows = [(t1 if i % 2 else t2, b"key-%d" % (i % 13), b"v%d" % i) for i in range(400)]
    df = spark.createDataFrame(rows, "topic string, key binary, value binary")
    write(df, b)
    got = spark_rows(load(spark, b, subscribe=f"{t1},{t2}"))
    assert sorted((r[2], r[1]) for r in got) == sorted((t, v) for t, _k, v in rows)
    # Keyed rows land where the Java producer's murmur2 puts them: one partition per key.
    where = {}
    for r in got:
        where.setdefault((r[2], r[0]), set()).add(r[3])
    assert all(len(ps) == 1 for ps in where.values())
    from kafkawire.client.partitioner import partition_for_key
    assert all(ps == {partition_for_key(k, 4)} for (_t, k), ps in where.items())


def test_sink_topic_option_wins_and_string_values(spark, kafka_broker):
    b = kafka_broker.bootstrap
    out = new_topic(b, 1)
    df = spark.createDataFrame([("ignored", "a"), ("ignored", "b")], "topic string, value string")
    write(df, b, topic=out)
    assert sorted(r.value for r in load(spark, b, subscribe=out).collect()) == [b"a", b"b"]


# Bad sink input, refused on the driver: test_conformance.py, beside the JVM connector.


def test_sink_needs_append_mode(spark, kafka_broker):
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(PySparkException, match="only appends"):
        df.write.format("kafkawire").option("kafka.bootstrap.servers", kafka_broker.bootstrap) \
            .option("topic", "t").mode("overwrite").save()


def test_failed_write_fails_the_spark_job_with_the_error(spark, kafka_broker):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    df = spark.createDataFrame([(b"x" * (2 << 20),)], "value binary")
    with pytest.raises(PySparkException, match="kafkawire sink: writing failed"):
        write(df, b, topic=topic, **{"kafka.max.request.size": str(1 << 20)})


def test_broker_error_fails_the_job_with_its_name(spark, mock_cluster_factory):
    # The mock cluster answers the next Produce requests with an injected error code.
    cluster = mock_cluster_factory(1)
    cluster.create_topic("denied", 1, 1)
    cluster.push_request_errors(0, [29] * 5)  # TOPIC_AUTHORIZATION_FAILED: not retriable
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(PySparkException, match="TOPIC_AUTHORIZATION_FAILED"):
        write(df, cluster.bootstrap, topic="denied")


def test_failed_send_fails_the_task_with_the_producers_error(kafka_broker):
    # A record over max_request_size: the task fails with the producer's error, not a hang.
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    big = pa.RecordBatch.from_pydict({"value": [b"x" * (2 << 20)]})
    with pytest.raises(_io.WriteError, match="RecordTooLarge|MESSAGE_TOO_LARGE|max_request_size"):
        _io.write_batches({"bootstrap_servers": b, "max_request_size": 1 << 20}, topic, iter([big]), 20)


# -- streaming ----------------------------------------------------------------------------

def _stream(spark, bootstrap: str, topic: str, **options):
    r = (spark.readStream.format("kafkawire").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _run_available_now(df, path: str, checkpoint: str, fmt: str = "parquet", **options):
    w = df.writeStream.format(fmt).option("checkpointLocation", checkpoint).trigger(availableNow=True)
    if path:
        w = w.option("path", path)
    for k, v in options.items():
        w = w.option(k, v)
    q = w.start()
    assert q.awaitTermination(180), "the stream did not finish in time"
    assert q.exception() is None, q.exception()
    return q


def test_stream_restart_from_checkpoint_equals_one_run(spark, kafka_broker, tmp_path):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2)
    produce(b, topic, {0: records(0, 150), 1: records(1, 150)})
    cols = "key, value, partition, offset, timestamp"
    split = str(tmp_path / "split")
    q = _run_available_now(_stream(spark, b, topic, startingOffsets="earliest", maxOffsetsPerTrigger="100")
                           .selectExpr(*cols.split(", ")), split, str(tmp_path / "cp-split"))
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 300 and max(sizes) <= 101 and len(sizes) >= 3  # maxOffsetsPerTrigger
    produce(b, topic, {0: records(0, 60), 1: records(1, 40)})
    _run_available_now(_stream(spark, b, topic, startingOffsets="earliest", maxOffsetsPerTrigger="100")
                       .selectExpr(*cols.split(", ")), split, str(tmp_path / "cp-split"))
    whole = str(tmp_path / "whole")
    _run_available_now(_stream(spark, b, topic, startingOffsets="earliest").selectExpr(*cols.split(", ")),
                       whole, str(tmp_path / "cp-whole"))
    a = sorted((tuple(r) for r in spark.read.parquet(split).collect()), key=lambda r: (r[2], r[3]))
    c = sorted((tuple(r) for r in spark.read.parquet(whole).collect()), key=lambda r: (r[2], r[3]))
    assert len(a) == 400 and a == c
    assert len({(r[2], r[3]) for r in a}) == 400  # no duplicates
    # The checkpoint's offsets are the JVM connector's JSON: the next offset per partition.
    offsets_dir = tmp_path / "cp-split" / "offsets"
    last = max(offsets_dir.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    assert json.loads(last.read_text().strip().splitlines()[-1]) == {topic: {"0": 210, "1": 190}}


def test_stream_starts_at_latest_by_default_and_new_partitions_at_earliest(spark, kafka_broker):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2)
    produce(b, topic, {0: records(0, 20)})
    opts = SourceOptions.parse({"kafka.bootstrap.servers": b, "subscribe": topic}, streaming=True)
    reader = KafkawireStreamReader(opts, KAFKA_SCHEMA)
    start = reader.initialOffset()
    assert start == {topic: {"0": 20, "1": 0}}
    # A partition missing from the start offsets (new since) is read from its beginning.
    produce(b, topic, {1: records(1, 5)})
    end = reader.latestOffset({topic: {"0": 20}}, ReadAllAvailable())
    assert end == {topic: {"0": 20, "1": 5}}
    assert [p.value for p in reader.partitions({topic: {"0": 20}}, end)] == [(topic, 1, 0, 5)]
    # maxOffsetsPerTrigger shares the limit in proportion to lag.
    produce(b, topic, {0: records(0, 30), 1: records(1, 10)})
    assert reader.latestOffset({topic: {"0": 20, "1": 5}}, ReadMaxRows(20)) == {topic: {"0": 35, "1": 10}}


def test_min_offsets_per_trigger_waits_for_enough_or_the_delay(kafka_broker):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    produce(b, topic, {0: records(0, 5)})
    start = {topic: {"0": 0}}
    base = {"kafka.bootstrap.servers": b, "subscribe": topic, "minOffsetsPerTrigger": "100"}
    patient = KafkawireStreamReader(SourceOptions.parse(base, streaming=True), KAFKA_SCHEMA)
    limit = patient.getDefaultReadLimit()
    assert limit == ReadMinRows(100)
    assert patient.latestOffset(start, limit) == start  # 5 < 100: no batch yet
    hurried = KafkawireStreamReader(SourceOptions.parse({**base, "maxTriggerDelay": "0s"}, streaming=True),
                                    KAFKA_SCHEMA)
    assert hurried.latestOffset(start, limit) == {topic: {"0": 5}}  # the delay is over
    # Trigger.AvailableNow asks for everything: the minimum does not hold it back.
    assert patient.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 5}}


def test_stream_offsets_never_go_backwards(kafka_broker):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    produce(b, topic, {0: records(0, 10)})
    base = {"kafka.bootstrap.servers": b, "subscribe": topic}
    ahead = {topic: {"0": 25}}  # beyond the log's end: a recreated or truncated topic
    strict = KafkawireStreamReader(SourceOptions.parse(base, streaming=True), KAFKA_SCHEMA)
    with pytest.raises(KafkawireDataLossError, match=rf"{topic}\[0\] starts at 25"):
        strict.latestOffset(ahead, ReadAllAvailable())
    lenient = KafkawireStreamReader(SourceOptions.parse({**base, "failOnDataLoss": "false"}, streaming=True),
                                    KAFKA_SCHEMA)
    assert lenient.latestOffset(ahead, ReadAllAvailable()) == ahead


def test_stream_write_reads_back_through_confluent(spark, kafka_broker, tmp_path):
    b = kafka_broker.bootstrap
    source, out = new_topic(b, 2), new_topic(b, 2)
    produce(b, source, {0: records(0, 120), 1: records(1, 80)})
    df = _stream(spark, b, source, startingOffsets="earliest").selectExpr("key", "value", "partition")
    _run_available_now(df, "", str(tmp_path / "cp"), fmt="kafkawire", topic=out,
                       **{"kafka.bootstrap.servers": b})
    got = confluent_rows(b, out, 2, 200)
    want = confluent_rows(b, source, 2, 200)
    assert [(r[0], r[1], r[3], r[4]) for r in got] == [(r[0], r[1], r[3], r[4]) for r in want]


def test_stream_rejects_batch_only_options(spark, kafka_broker):
    with pytest.raises((PySparkException, KafkawireOptionError), match="'endingOffsets' is for batch queries"):
        q = _stream(spark, kafka_broker.bootstrap, "x", endingOffsets="latest").writeStream.format("noop").start()
        q.awaitTermination(30)
        raise q.exception()


def test_timestamps_keep_their_milliseconds(spark, kafka_broker):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    produce(b, topic, {0: records(0, 5)})
    got = load(spark, b, subscribe=topic).selectExpr("unix_millis(timestamp) AS ms").collect()
    assert [r.ms for r in got] == [TS + i * 10 for i in range(5)]
