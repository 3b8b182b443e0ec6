"""format("kafkawire") read in batch against real brokers, checked against confluent-kafka.

Apache Kafka is the broker; Tansu stays for its low ListOffsets "latest" (the source
reads the Fetch watermark instead) and librdkafka's mock for magic 0/1 message sets,
which Kafka 4 no longer accepts (KIP-896 removed Produce v0-v2)."""

from __future__ import annotations

import json
import re
import uuid

import confluent_kafka
import pytest
from pyspark.errors import PySparkException
from pyspark.sql.pandas.types import to_arrow_schema
from sparkkafka import TS, confluent_rows, load, new_topic, produce, records, spark_rows

from kafkawire import Admin
from kafkawire.spark import KafkawireDataLossError, KafkawireOptionError, _io
from kafkawire.spark._options import SourceOptions
from kafkawire.spark.source import KAFKA_SCHEMA, KafkawireReader

pytestmark = pytest.mark.spark

@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_batch_read_matches_confluent(spark, kafka_broker, compression):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2)
    produce(b, topic, {0: records(0, 250), 1: records(1, 130)}, compression_type=compression)
    want = confluent_rows(b, topic, 2, 380)
    assert len(want) == 380
    got = spark_rows(load(spark, b, subscribe=topic, includeHeaders="true"))
    assert got == want


def test_batch_read_on_tansu_reads_to_the_watermark(spark, tansu_broker):
    # Tansu's ListOffsets "latest" can stay below the high watermark: a read that ended
    # there would miss records, so the source ends at the Fetch watermark.
    b = tansu_broker.bootstrap
    topic = new_topic(b, 2)
    produce(b, topic, {0: records(0, 250), 1: records(1, 130)}, compression_type="zstd")
    want = confluent_rows(b, topic, 2, 380)
    assert len(want) == 380
    assert spark_rows(load(spark, b, subscribe=topic, includeHeaders="true")) == want


@pytest.mark.parametrize("produce_version,magic,compression", [
    (1, 0, "none"), (2, 1, "none"), (3, 2, "none"), (3, 2, "gzip"), (3, 2, "snappy"), (3, 2, "lz4"),
    (3, 2, "zstd"),
])
def test_batch_read_every_message_format(spark, mock_cluster, produce_version, magic, compression):
    # Kafka 4 (no Produce v0-v2, KIP-896) and Tansu refuse magic 0/1 produce; the mock
    # cluster stores each format as sent (and refuses compressed magic 0/1 sets:
    # tests/integration names that quirk).
    b = mock_cluster.bootstrap
    topic = f"sp-fmt{magic}-{compression}-{uuid.uuid4().hex[:6]}"
    mock_cluster.create_topic(topic, 2, 1)
    parts = {p: [r[:3] for r in records(p, 60, headers=False)] for p in (0, 1)}
    produce(b, topic, parts, api_version_overrides={"Produce": produce_version}, compression_type=compression)
    want = confluent_rows(b, topic, 2, 120)
    got = spark_rows(load(spark, b, subscribe=topic, includeHeaders="true"))
    assert len(got) == 120 and got == want
    if magic == 0:  # no timestamps in magic 0: -1 and type -1, as the JVM connector gives
        assert {(r[5], r[6]) for r in got} == {(-1, -1)}


def test_offsets_options_and_assign(spark, kafka_broker):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 3)
    produce(b, topic, {p: records(p, 50) for p in range(3)})
    df = load(spark, b, assign=json.dumps({topic: [0, 2]}),
              startingOffsets=json.dumps({topic: {"0": 10, "2": -2}}),
              endingOffsets=json.dumps({topic: {"0": 20, "2": -1}}))
    got = [(r.partition, r.offset) for r in df.orderBy("partition", "offset").collect()]
    assert got == [(0, o) for o in range(10, 20)] + [(2, o) for o in range(50)]
    # subscribePattern finds the topic by regex; endingOffsets latest is the default.
    pattern = load(spark, b, subscribePattern=re.escape(topic[:-3]) + "[0-9a-f]{3}")
    assert pattern.count() == 150


def test_min_partitions_and_max_records_per_partition_split_tasks(spark, kafka_broker):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2)
    produce(b, topic, {0: records(0, 300), 1: records(1, 100)})
    df = load(spark, b, subscribe=topic, maxRecordsPerPartition="70")
    assert df.rdd.getNumPartitions() == 5 + 2
    assert sorted(r.offset for r in df.where("partition = 0").collect()) == list(range(300))
    df = load(spark, b, subscribe=topic, minPartitions="8")
    assert df.rdd.getNumPartitions() == 8
    assert df.count() == 400


def test_timestamp_options(spark, kafka_broker):
    # Record i has timestamp TS + 10 * i: Kafka's time index finds TS + 50 at offset 5
    # and TS + 300 at offset 30.
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    produce(b, topic, {0: records(0, 40)})
    start, end = 5, 30
    got = load(spark, b, subscribe=topic, startingTimestamp=str(TS + 50)).collect()
    assert sorted(r.offset for r in got) == list(range(start, 40))
    got = load(spark, b, subscribe=topic,
               startingOffsetsByTimestamp=json.dumps({topic: {"0": TS + 50}}),
               endingOffsetsByTimestamp=json.dumps({topic: {"0": TS + 300}})).collect()
    assert sorted(r.offset for r in got) == list(range(start, end))
    # A time between two records starts at the later one.
    got = load(spark, b, subscribe=topic, startingTimestamp=str(TS + 51)).collect()
    assert min(r.offset for r in got) == 6
    # The timestamp options win over the offsets ones (the JVM connector's precedence).
    got = load(spark, b, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 39}}),
               startingTimestamp=str(TS + 50)).count()
    assert got == 40 - start


def test_starting_timestamp_after_every_record(spark, kafka_broker):
    # No record at or after the time: an error naming the option, or with the "latest"
    # strategy a start at the end.
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    produce(b, topic, {0: records(0, 20)})
    later = str(TS + 10**9)
    with pytest.raises(PySparkException, match="startingOffsetsByTimestampStrategy=latest"):
        load(spark, b, subscribe=topic, startingTimestamp=later).collect()
    assert load(spark, b, subscribe=topic, startingTimestamp=later,
                startingOffsetsByTimestampStrategy="latest").count() == 0


@pytest.mark.parametrize("options,message", [
    ({}, "exactly one of the options 'assign', 'subscribe' or 'subscribePattern'"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of"),
    ({"assign": "[1,2]"}, "option 'assign' must be JSON like"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "'startingOffsets' cannot be 'latest' for a batch"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "'endingOffsets' cannot be 'earliest'"),
    ({"subscribe": "a", "startingOffsets": "{bad"}, "option 'startingOffsets' is not valid JSON"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, "offset -1 for a[0] is not allowed"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "'failOnDataLoss' must be 'true' or 'false'"),
    ({"subscribe": "a", "minPartitions": "0"}, "'minPartitions' must be a positive integer"),
    ({"subscribe": "a", "maxRecordsPerPartition": "x"}, "'maxRecordsPerPartition' must be a positive"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "10"}, "applies to streaming queries only"),
    ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "nope"}, "must be 'error' or 'latest'"),
    ({"subscribe": "a", "subscribePattern": "("}, "exactly one of"),
    ({"subscribePattern": "("}, "not a valid regular expression"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "set startingOffsets instead"),
    ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "'kafka.enable.auto.commit' is not supported"),
    ({"subscribe": "a", "kafka.value.deserializer": "x"}, "values are always binary"),
    ({"subscribe": "a", "kafka.fetch.max.wait.ms": "soon"}, "fetch_max_wait_ms must be an integer"),
    ({"subscribe": "a", "kafka.no.such.thing": "1"}, "unknown consumer option"),
    ({"subscribe": "a", "kafka.isolation.level": "committed"}, "isolation_level must be one of"),
    ({"subscribe": "a", "startingoffset": "earliest"}, "did you mean 'startingOffsets'?"),
    ({"subscribe": "a", "topic": "b"}, "option 'topic' does not apply to reading"),
])
def test_bad_options_name_the_option(options, message):
    opts = {"kafka.bootstrap.servers": "127.0.0.1:9"}
    opts.update(options)
    with pytest.raises(KafkawireOptionError) as info:
        SourceOptions.parse(opts, streaming=False)
    assert message in str(info.value)


def test_missing_bootstrap_and_stream_only_options():
    with pytest.raises(KafkawireOptionError, match="'kafka.bootstrap.servers' is required"):
        SourceOptions.parse({"subscribe": "a"}, streaming=False)
    with pytest.raises(KafkawireOptionError, match="'endingOffsets' is for batch queries only"):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "latest"},
                            streaming=True)
    opts = SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a"}, streaming=True)
    assert opts.starting == "latest"  # streams start at latest, batches at earliest
    assert SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a"}, False).starting == "earliest"


def test_bad_option_fails_the_query_with_its_message(spark, kafka_broker):
    with pytest.raises(PySparkException, match="startingOffsets"):
        load(spark, kafka_broker.bootstrap, subscribe="x", startingOffsets="latest").collect()


def test_json_offsets_must_name_every_partition(spark, kafka_broker):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2)
    with pytest.raises(PySparkException, match="must give every partition"):
        load(spark, b, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 0}})).collect()


def test_pushdown_narrows_the_offsets_fetched(spark, kafka_broker):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 3)
    produce(b, topic, {p: records(p, 400) for p in range(3)})
    # The plan itself: ranges narrowed by the predicates, before anything is fetched.
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

    reader = KafkawireReader(SourceOptions.parse({"kafka.bootstrap.servers": b, "subscribe": topic}, False),
                             KAFKA_SCHEMA)
    left = list(reader.pushFilters([GreaterThanOrEqual(("offset",), 350), In(("partition",), (0, 2)),
                                    LessThan(("offset",), 360), EqualTo(("key",), b"x")]))
    assert left == [EqualTo(("key",), b"x")]  # key predicates stay with Spark
    assert [r.value for r in reader.partitions()] == [(topic, 0, 350, 360), (topic, 2, 350, 360)]
    # The same through Spark (a fresh DataFrame per filtered query: Spark 4.3 keeps the
    # first pushed-down plan of a DataFrame for its later queries).
    got = load(spark, b, subscribe=topic).where("offset >= 390 and partition = 1")
    assert sorted((r.partition, r.offset) for r in got.collect()) == [(1, o) for o in range(390, 400)]
    got = load(spark, b, subscribe=topic).where("offset in (3, 7, 399) and partition < 2")
    assert sorted((r.partition, r.offset) for r in got.collect()) == [(p, o) for p in (0, 1) for o in (3, 7, 399)]
    got = load(spark, b, subscribe=topic).where(f"timestamp >= timestamp_millis({TS + 3950})")
    assert sorted(r.offset for r in got.collect()) == sorted(list(range(395, 400)) * 3)


def test_offset_gaps_from_transaction_markers(spark, kafka_broker):
    # A transaction's commit marker takes an offset no record has: the read skips it.
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    p = confluent_kafka.Producer({"bootstrap.servers": b, "transactional.id": f"tx-{topic}", "log_level": 3})
    p.init_transactions(20)
    for batch in range(3):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, b"t%d-%d" % (batch, i), partition=0)
        p.commit_transaction(20)
    p.flush(10)
    got = load(spark, b, subscribe=topic).orderBy("offset").collect()
    assert [r.value for r in got] == [b"t%d-%d" % (t, i) for t in range(3) for i in range(5)]
    offsets = [r.offset for r in got]
    assert offsets[-1] > len(offsets) - 1, "no gap: the broker wrote no markers"


def test_data_loss_start_before_the_log(spark, kafka_broker):
    # Offsets before the log's start (DeleteRecords moved it, as retention does): an
    # error naming the partition, or with failOnDataLoss=false a start where the log does.
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    produce(b, topic, {0: records(0, 10)})
    with Admin(bootstrap_servers=b) as admin:
        admin.delete_records({(topic, 0): 4}, timeout=30)
    start = json.dumps({topic: {"0": 2}})
    with pytest.raises(PySparkException, match=rf"{topic}\[0\] starts at 2 but the earliest offset is 4"):
        load(spark, b, subscribe=topic, startingOffsets=start).collect()
    got = load(spark, b, subscribe=topic, startingOffsets=start, failOnDataLoss="false").collect()
    assert sorted(r.offset for r in got) == list(range(4, 10))
    # A start beyond the log's end (a recreated topic): the same, from the other side.
    start = json.dumps({topic: {"0": 50}})
    with pytest.raises(PySparkException, match=rf"{topic}\[0\] starts at 50 but the latest offset is 10"):
        load(spark, b, subscribe=topic, startingOffsets=start).collect()
    assert load(spark, b, subscribe=topic, startingOffsets=start, failOnDataLoss="false").count() == 0


def test_reads_with_filter_pushdown_off(spark, kafka_broker):
    # Spark's default: the source must still plan, and Spark applies the filters itself.
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    produce(b, topic, {0: records(0, 30)})
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        got = load(spark, b, subscribe=topic).where("offset >= 25").collect()
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    assert sorted(r.offset for r in got) == [25, 26, 27, 28, 29]


def _offsets_read(batches) -> list[int]:
    return [o for rb in batches for o in rb.column("offset").to_pylist()]


def test_read_range_stopped_early_leaves_its_consumer_to_the_next_task(kafka_broker):
    # Spark stops reading a range early (a limit): the worker's consumer, shared by the
    # next task on that worker, must read that task's range and nothing left from this one.
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    produce(b, topic, {0: records(0, 600)})
    client = {"bootstrap_servers": b, "max_partition_fetch_bytes": 2048}  # one 100-record batch a fetch
    schema = to_arrow_schema(KAFKA_SCHEMA, timezone="UTC")
    reading = _io.read_range(client, topic, 0, 0, 600, schema, False, 30000, True)
    assert next(reading).column("offset")[0].as_py() == 0
    reading.close()  # records fetched past offset 99 may still sit in the consumer
    assert _offsets_read(_io.read_range(client, topic, 0, 300, 600, schema, False, 30000, True)) == \
        list(range(300, 600))


def test_read_range_past_the_log_is_data_loss(kafka_broker):
    # The range ends past the log: the task raises the loss and lets the consumer go;
    # with failOnDataLoss=false the records that exist are read.
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1)
    produce(b, topic, {0: records(0, 10)})
    client = {"bootstrap_servers": b, "fetch_max_wait_ms": 20}
    schema = to_arrow_schema(KAFKA_SCHEMA, timezone="UTC")
    with pytest.raises(KafkawireDataLossError, match=rf"{topic}\[0\]: offsets \[10, 20\) were to be read"):
        _offsets_read(_io.read_range(client, topic, 0, 0, 20, schema, False, 5000, True))
    assert not [k for k in _io._clients if k[0] == "consumer" and ("fetch_max_wait_ms", "20") in k]
    assert _offsets_read(_io.read_range(client, topic, 0, 0, 20, schema, False, 5000, False)) == list(range(10))
