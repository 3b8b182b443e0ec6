"""format("kafkawire") with value.format=avro: Confluent-framed Avro written by kafkawire's
Producer and AvroSerializer to Apache Kafka, with Apicurio Registry holding the schemas,
read into typed Spark columns and compared with fastavro's reading of the same payloads."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import random
import tempfile
from typing import Any, Iterator

import fastavro
import pytest
from pyspark.sql import functions as F

from kafkawire import Producer
from kafkawire.testing.registry import ApicurioRegistry
from sparkkafka import new_topic

pytestmark = [pytest.mark.spark, pytest.mark.registry]

UTC = dt.timezone.utc

V1 = {
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"},
            {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "GOLD", "PLATINUM"]}},
        ]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
        {"name": "choice", "type": ["null", "int", "string"], "default": None},
    ]}
# The second version adds a field with a default: records written with V1 read as "web".
V2 = dict(V1, fields=V1["fields"] + [{"name": "channel", "type": "string", "default": "web"}])

SPARK_TYPE = ("struct<id:bigint,customer:struct<name:string,tier:string>,note:string,amount:decimal(12,2),"
              "at:timestamp,day:date,lines:array<struct<sku:string,qty:int>>,attrs:map<string,double>,"
              "choice:struct<member0:int,member1:string>,channel:string>")


@pytest.fixture(scope="module")
def registry_url() -> Iterator[str]:
    with ApicurioRegistry() as registry:
        yield registry.url


def order(i: int, rng: random.Random) -> dict[str, Any]:
    return {
        "id": i,
        "customer": {"name": f"cust-{i % 9}-é", "tier": ["FREE", "GOLD", "PLATINUM"][i % 3]},
        "note": None if i % 4 == 0 else f"note {i}",
        "amount": decimal.Decimal(rng.randint(-10**9, 10**9)) / 100,
        "at": dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=rng.randint(0, 10**10)),
        "day": dt.date(2000, 1, 1) + dt.timedelta(days=i),
        "lines": [{"sku": f"s{i}-{k}", "qty": k * i - 3} for k in range(i % 4)],
        "attrs": {f"a{k}": k / 3 + i for k in range(i % 3)},
        "choice": [None, i, f"c{i}"][i % 3],
    }


def produce_avro(bootstrap: str, url: str, topic: str, schema: dict, values: list[tuple[int, dict]],
                 **extra: Any) -> list[bytes]:
    """Send ``(partition, value)`` pairs as Avro; returns the payloads written."""
    from kafkawire.schema import SchemaRegistryClient
    from kafkawire.schema.avro import AvroSerializer

    with SchemaRegistryClient(url) as client:
        serialize = AvroSerializer(client, json.dumps(schema)).for_topic(topic)
        payloads = [serialize(v) for _p, v in values]
        with Producer(bootstrap_servers=bootstrap, **extra) as p:
            futures = [p.send(topic, payload, key=b"k%d" % v["id"], partition=part)
                       for payload, (part, v) in zip(payloads, values)]
            for f in futures:
                f.result(30)
    return payloads


def fastavro_read(payload: bytes, writer: dict, reader: dict) -> Any:
    return fastavro.schemaless_reader(io.BytesIO(payload[5:]), fastavro.parse_schema(writer),
                                      fastavro.parse_schema(reader))


def as_spark(value: dict) -> dict:
    """fastavro's reading in the shape Spark gives it: unions of several types as
    struct<member0, member1>, timestamps as UTC instants."""
    out = dict(value)
    c = value["choice"]
    out["choice"] = None if c is None else {"member0": c if isinstance(c, int) else None,
                                            "member1": c if isinstance(c, str) else None}
    out["at"] = value["at"].astimezone(UTC)
    return out


def spark_value(row: Any) -> dict:
    v = row["value"].asDict(recursive=True)
    v["at"] = v["at"].astimezone(UTC)  # Spark hands TimestampType out as naive local time
    return v


def read(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    r = spark.read.format("kafkawire").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_two_schema_versions_read_into_the_latest(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2, prefix="avro")
    rng = random.Random(7)
    first = [(i % 2, order(i, rng)) for i in range(40)]
    second = [(i % 2, dict(order(i, rng), channel=f"app{i}")) for i in range(40, 90)]
    written = [(p, V1) for p in produce_avro(b, registry_url, topic, V1, first)]
    written += [(p, V2) for p in produce_avro(b, registry_url, topic, V2, second)]

    df = read(spark, b, topic, **{"value.format": "avro", "schema.registry.url": registry_url})
    assert df.schema["value"].dataType.simpleString() == SPARK_TYPE
    assert df.schema["key"].dataType.simpleString() == "binary"
    rows = df.orderBy("value.id").collect()
    assert [r["key"] for r in rows] == [b"k%d" % i for i in range(90)]
    got = [spark_value(r) for r in rows]
    want = [as_spark(fastavro_read(payload, writer, V2)) for payload, writer in written]
    assert got == want
    assert [g["channel"] for g in got[:40]] == ["web"] * 40  # V1's records: the reader's default
    assert {r["partition"] for r in rows} == {0, 1}

    # An inline reader schema: a projection of the writer's, no subject needed.
    small = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "region", "type": "string", "default": "eu"}]}
    df = read(spark, b, topic, **{"value.format": "avro", "schema.registry.url": registry_url,
                                  "value.schema": json.dumps(small)})
    assert df.schema["value"].dataType.simpleString() == "struct<id:bigint,note:string,region:string>"
    got = [r["value"].asDict() for r in df.orderBy("value.id").collect()]
    assert got == [{"id": v["id"], "note": v["note"], "region": "eu"} for _p, v in first + second]


def bad_topic(spark: Any, b: str, url: str) -> tuple[str, list[bytes], int]:
    """A topic whose partition 1 holds a truncated payload at offset 5 among good ones."""
    topic = new_topic(b, 2, prefix="avrobad")
    rng = random.Random(3)
    payloads = produce_avro(b, url, topic, V2, [(p, dict(order(i, rng), channel="x"))
                                                 for i, p in enumerate([0] * 6 + [1] * 5)])
    broken = payloads[-1][:9]  # the header and a few bytes of a record
    with Producer(bootstrap_servers=b) as p:
        p.send(topic, broken, key=b"bad", partition=1).result(30)
        p.send(topic, payloads[0], key=b"after", partition=1).result(30)
    return topic, payloads, 5


def test_failfast_names_topic_partition_and_offset(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic, _payloads, offset = bad_topic(spark, b, registry_url)
    df = read(spark, b, topic, **{"value.format": "avro", "schema.registry.url": registry_url})
    with pytest.raises(Exception) as info:
        df.collect()
    text = str(info.value)
    assert f"KafkawireDecodeError: the value of {topic}[1] at offset {offset} is not valid Avro (schema id" in text
    assert "mode=PERMISSIVE" in text


def test_permissive_gives_null_raw_bytes_and_the_error(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic, payloads, offset = bad_topic(spark, b, registry_url)
    df = read(spark, b, topic, **{"value.format": "avro", "schema.registry.url": registry_url,
                                  "mode": "PERMISSIVE"})
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                          "value_raw", "value_error"]
    rows = {(r["partition"], r["offset"]): r for r in df.collect()}
    assert len(rows) == 13
    bad = rows[(1, offset)]
    assert bad["value"] is None and bad["value_raw"] == payloads[-1][:9]
    assert bad["value_error"].startswith(f"Avro payload at {topic}[1] offset {offset} (schema id ")
    good = [r for k, r in rows.items() if k != (1, offset)]
    assert all(r["value_error"] is None and r["value"] is not None for r in good)
    after = rows[(1, offset + 1)]
    assert after["value_raw"] == payloads[0] and spark_value(after) == as_spark(fastavro_read(payloads[0], V2, V2))


def test_unknown_schema_id_and_missing_magic_byte_fail_naming_them(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1, prefix="avroid")
    produce_avro(b, registry_url, topic, V2, [(0, dict(order(1, random.Random(1)), channel="x"))])
    with Producer(bootstrap_servers=b) as p:
        p.send(topic, b"\x00\x7f\xff\xff\xf0\x02", partition=0).result(30)  # an id nobody registered
        p.send(topic, b"plain text", partition=0).result(30)
    opts = {"value.format": "avro", "schema.registry.url": registry_url}
    with pytest.raises(Exception) as info:
        read(spark, b, topic, **opts).collect()
    assert f"the value of {topic}[0] at offset 1 is not valid Avro (schema id {0x7ffffff0})" in str(info.value)
    rows = read(spark, b, topic, mode="PERMISSIVE", **opts).orderBy("offset").collect()
    assert [r["value"] is None for r in rows] == [False, True, True]
    assert "unknown schema id 2147483632" in rows[1]["value_error"]
    assert "not Confluent-framed" in rows[2]["value_error"] and f"{topic}[0] offset 2" in rows[2]["value_error"]


def test_streaming_read_of_typed_values(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2, prefix="avrostream")
    rng = random.Random(11)
    values = [(i % 2, dict(order(i, rng), channel="s")) for i in range(30)]
    payloads = produce_avro(b, registry_url, topic, V2, values)
    name = "avro_" + topic.replace("-", "_")
    q = (spark.readStream.format("kafkawire").option("kafka.bootstrap.servers", b).option("subscribe", topic)
         .option("startingOffsets", "earliest").option("value.format", "avro")
         .option("schema.registry.url", registry_url).load()
         .writeStream.format("memory").queryName(name)
         .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())
    assert q.awaitTermination(300)
    rows = spark.sql(f"SELECT * FROM {name} ORDER BY value.id").collect()
    assert [spark_value(r) for r in rows] == [as_spark(fastavro_read(p, V2, V2)) for p in payloads]


def test_option_errors_at_load(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1, prefix="avroopt")
    cases = [
        ({"value.fromat": "avro"}, "did you mean 'value.format'?"),
        ({"value.format": "avro", "schema.registry.url": registry_url, "schema.registry.basic.auth.user.inf": "a:b"},
         "did you mean 'schema.registry.basic.auth.user.info'?"),
        ({"value.format": "avro", "schema.registry.url": registry_url},
         f"the Schema Registry has no subject '{topic}-value'"),
        ({"value.format": "avro"}, "needs 'schema.registry.url'"),
        ({"value.format": "protobuf"}, "value.format=protobuf needs 'schema.registry.url'"),
        ({"value.format": "avro", "value.schema": '"string"', "mode": "LENIENT"}, "FAILFAST or PERMISSIVE"),
    ]
    for options, message in cases:
        with pytest.raises(Exception) as info:
            read(spark, b, topic, **options)
        assert message in str(info.value), (options, str(info.value)[:2000])


def test_avro_keys_beside_raw_values(spark, kafka_broker, registry_url):
    from kafkawire.schema import SchemaRegistryClient
    from kafkawire.schema.avro import AvroSerializer

    b = kafka_broker.bootstrap
    topic = new_topic(b, 1, prefix="avrokey")
    key_schema = {"type": "record", "name": "Key", "fields": [{"name": "user", "type": "string"},
                                                             {"name": "shard", "type": ["null", "int"]}]}
    with SchemaRegistryClient(registry_url) as client:
        serialize = AvroSerializer(client, json.dumps(key_schema), is_key=True).for_topic(topic)
        with Producer(bootstrap_servers=b, key_serializer=serialize) as p:
            for i in range(5):
                p.send(topic, b"v%d" % i, key={"user": f"u{i}", "shard": None if i % 2 else i}, partition=0)
            p.send(topic, b"keyless", partition=0)
    df = read(spark, b, topic, **{"key.format": "avro", "schema.registry.url": registry_url, "mode": "PERMISSIVE"})
    assert df.columns[-2:] == ["key_raw", "key_error"] and "value_raw" not in df.columns
    assert df.schema["key"].dataType.simpleString() == "struct<user:string,shard:int>"
    rows = df.orderBy("offset").collect()
    assert [(r["key"] and r["key"].asDict(), r["value"], r["key_error"]) for r in rows] == [
        ({"user": f"u{i}", "shard": None if i % 2 else i}, b"v%d" % i, None) for i in range(5)
    ] + [(None, b"keyless", None)]


def test_writer_schemas_are_fetched_once_per_id_per_worker(registry_url):
    """The executor side alone: batches naming two schema ids ask the registry for each
    id the worker does not know, once."""
    import pyarrow as pa

    from kafkawire.spark import _typed
    from kafkawire.spark._options import SourceOptions
    from kafkawire.spark.source import KAFKA_SCHEMA, _RAW_ARROW
    from pyspark.sql.pandas.types import to_arrow_schema
    from kafkawire.schema import SchemaRegistryClient
    from kafkawire.schema.avro import AvroSerializer

    subject_topic = f"fetch-{random.randrange(1 << 30)}"
    rng = random.Random(5)
    with SchemaRegistryClient(registry_url) as client:
        one = AvroSerializer(client, json.dumps(V1)).for_topic(subject_topic)(order(1, rng))
        two = AvroSerializer(client, json.dumps(V2)).for_topic(subject_topic)(dict(order(2, rng), channel="c"))
    # A registry URL of its own (a trailing slash) gives this test a fresh client and cache.
    opts = SourceOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": subject_topic,
                                "value.format": "avro", "schema.registry.url": registry_url + "/"}, False)
    typed = _typed.resolve(opts.typed, {"subscribe": subject_topic})
    schema = to_arrow_schema(_typed.spark_schema(KAFKA_SCHEMA, typed), timezone="UTC")
    registry = _typed.registry_client(typed.registry)
    before = registry.requests_sent

    def batch(payloads: list[bytes]) -> Any:
        n = len(payloads)
        return pa.RecordBatch.from_arrays([
            pa.nulls(n, pa.binary()), pa.array(payloads, pa.binary()), pa.array([subject_topic] * n),
            pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
            pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([0] * n, pa.int32())], schema=_RAW_ARROW)

    out = _typed.decode_batch(batch([one, two, one]), subject_topic, 0, typed, schema)
    # V2's id came with the subject's latest version (the reader schema): V1's alone is asked.
    assert registry.requests_sent - before == 1
    assert [v["id"] for v in out.column("value").to_pylist()] == [1, 2, 1]
    assert [v["channel"] for v in out.column("value").to_pylist()] == ["web", "c", "web"]
    out = _typed.decode_batch(batch([two, one]), subject_topic, 0, typed, schema)
    assert registry.requests_sent - before == 1 and out.num_rows == 2


def test_sink_writes_struct_columns_as_avro(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    source, out = new_topic(b, 2, prefix="avrosrc"), new_topic(b, 1, prefix="avroout")
    rng = random.Random(13)
    values = [(i % 2, dict(order(i, rng), channel=f"c{i}")) for i in range(25)]
    produce_avro(b, registry_url, source, V2, values)
    df = read(spark, b, source, **{"value.format": "avro", "schema.registry.url": registry_url})
    # The inline schema is registered under <topic>-value.  It leaves out the int|string
    # union, which reads as struct<member0, member1>, a shape the union does not take back.
    writer = dict(V2, fields=[f for f in V2["fields"] if f["name"] != "choice"])
    (df.select(F.struct(*[F.col("value." + f["name"]) for f in writer["fields"]]).alias("value"), "key")
       .write.format("kafkawire").option("kafka.bootstrap.servers", b).option("topic", out)
       .option("value.format", "avro").option("value.schema", json.dumps(writer))
       .option("schema.registry.url", registry_url).mode("append").save())
    back = read(spark, b, out, **{"value.format": "avro", "schema.registry.url": registry_url})
    got = sorted(((r["key"], spark_value(r)) for r in back.collect()), key=lambda kv: kv[1]["id"])
    want = []
    for _p, v in values:
        v = as_spark(dict(v))
        del v["choice"]
        want.append((b"k%d" % v["id"], v))
    assert got == want
    # And with no schema given, the subject's latest (just registered) is looked up and used.
    (df.select(F.struct(*[F.col("value." + f["name"]) for f in writer["fields"]]).alias("value"))
       .write.format("kafkawire").option("kafka.bootstrap.servers", b).option("topic", out)
       .option("value.format", "avro").option("schema.registry.url", registry_url).mode("append").save())
    assert read(spark, b, out, **{"value.format": "avro", "schema.registry.url": registry_url}).count() == 50
