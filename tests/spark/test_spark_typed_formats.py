"""format("kafkawire") with value.format=json and value.format=protobuf: Confluent-framed JSON
Schema and Protobuf written by kafkawire's serializers to Apache Kafka, with Apicurio Registry
holding the schemas, read into typed Spark columns and compared with confluent-kafka's
deserializers' reading of the same records; PERMISSIVE and FAILFAST on damaged records,
batch and streaming."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import tempfile
from typing import Any, Iterator

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as CKRegistry
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CKJSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CKProtoDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from kafkawire import Producer
from kafkawire.testing.registry import ApicurioRegistry
from sparkkafka import new_topic

pytestmark = [pytest.mark.spark, pytest.mark.registry]

UTC = dt.timezone.utc


@pytest.fixture(scope="module")
def registry_url() -> Iterator[str]:
    with ApicurioRegistry() as registry:
        yield registry.url


def read(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    r = spark.read.format("kafkawire").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def send(bootstrap: str, topic: str, records: list[tuple[int, bytes | None]]) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for f in [p.send(topic, payload, partition=part) for part, payload in records]:
            f.result(30)


def local(value: Any) -> Any:
    """Spark hands TimestampType out as naive local time: as UTC instants, nested too."""
    if isinstance(value, dt.datetime):
        return value.astimezone(UTC)
    if isinstance(value, dict):
        return {k: local(v) for k, v in value.items()}
    if isinstance(value, list):
        return [local(v) for v in value]
    return value


# -- JSON Schema -------------------------------------------------------------------------------

ORDER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"$ref": "#/definitions/Customer"},
        "note": {"type": ["string", "null"]},
        "amount": {"type": "number"},
        "paid": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "lines": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}}, "required": ["sku", "qty"]}},
    },
    "required": ["id", "customer", "amount"],
    "definitions": {"Customer": {"type": "object", "properties": {
        "name": {"type": "string"}, "tier": {"enum": ["FREE", "GOLD"]}}, "required": ["name"]}},
}
JSON_SPARK_TYPE = ("struct<id:bigint,customer:struct<name:string,tier:string>,note:string,amount:double,"
                   "paid:boolean,at:timestamp,day:date,lines:array<struct<sku:string,qty:bigint>>>")


def order(i: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": i, "customer": {"name": f"cust-{i % 7}-é", "tier": ["FREE", "GOLD"][i % 2]},
        "note": None if i % 3 == 0 else f"note {i}\nline two", "amount": i * 1.25 - 3,
        "at": f"2026-0{1 + i % 9}-1{i % 10}T0{i % 10}:30:00.{i:03d}+02:00",
        "day": f"2025-11-{10 + i % 20}",
        "lines": [{"sku": f"s{i}-{k}", "qty": k} for k in range(i % 4)],
    }
    if i % 5:
        out["paid"] = i % 2 == 0
    return out


def as_spark_json(value: dict[str, Any]) -> dict[str, Any]:
    """confluent-kafka's reading of a value in the shape its Spark row has: every property
    of the schema (absent ones null), instants and dates typed."""
    out = {k: value.get(k) for k in ORDER_JSON["properties"]}
    out["customer"] = {"name": value["customer"]["name"], "tier": value["customer"].get("tier")}
    out["at"] = dt.datetime.fromisoformat(value["at"]).astimezone(UTC)
    out["day"] = dt.date.fromisoformat(value["day"])
    return out


def produce_json(bootstrap: str, url: str, topic: str, values: list[tuple[int, dict]]) -> list[bytes]:
    from kafkawire.schema import SchemaRegistryClient
    from kafkawire.schema.json_schema import JSONSerializer

    with SchemaRegistryClient(url) as client:
        serialize = JSONSerializer(client, json.dumps(ORDER_JSON)).for_topic(topic)
        payloads = [serialize(v) for _p, v in values]
    send(bootstrap, topic, [(p, payload) for payload, (p, _v) in zip(payloads, values)])
    return payloads


_ck_readers: dict[str, Any] = {}


def ck_json(url: str, topic: str, payload: bytes) -> Any:
    """confluent-kafka's JSONDeserializer's reading (one client per registry: it caches the
    schemas, as a consumer's would)."""
    reader = _ck_readers.get(url)
    if reader is None:
        reader = _ck_readers[url] = CKJSONDeserializer(None, schema_registry_client=CKRegistry({"url": url}))
    return reader(payload, SerializationContext(topic, MessageField.VALUE))


def test_json_values_read_into_typed_columns(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2, prefix="jsoncols")
    values = [(i % 2, order(i)) for i in range(60)]
    payloads = produce_json(b, registry_url, topic, values)
    df = read(spark, b, topic, **{"value.format": "json", "schema.registry.url": registry_url})
    assert df.schema["value"].dataType.simpleString() == JSON_SPARK_TYPE
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    rows = df.orderBy("value.id").collect()
    assert {r["partition"] for r in rows} == {0, 1}
    got = [local(r["value"].asDict(recursive=True)) for r in rows]
    want = [as_spark_json(ck_json(registry_url, topic, p)) for p in payloads]
    assert got == want
    assert got[1]["at"] == dt.datetime(2026, 2, 10, 23, 30, 0, 1000, tzinfo=UTC)  # +02:00 honoured
    assert got[0]["paid"] is None and got[1]["note"] == "note 1\nline two"

    # An inline schema: a projection, no subject needed; records keep their registry ids.
    small = {"type": "object", "properties": {"id": {"type": "integer"}, "lines": ORDER_JSON["properties"]["lines"]}}
    df = read(spark, b, topic, **{"value.format": "json", "value.schema": json.dumps(small)})
    assert df.schema["value"].dataType.simpleString() == "struct<id:bigint,lines:array<struct<sku:string,qty:bigint>>>"
    assert [r["value"].asDict(recursive=True) for r in df.orderBy("value.id").collect()] == [
        {"id": v["id"], "lines": v["lines"]} for _p, v in values]


def damaged_json_topic(b: str, url: str) -> tuple[str, dict[tuple[int, int], bytes | None]]:
    """Partition 1 holds, among good values: a string where an integer goes (offset 3), a
    value without its required 'amount' (4), bytes that are not framed (5), a tombstone
    (6).  Returns the topic and every value written, by (partition, offset)."""
    topic = new_topic(b, 2, prefix="jsonbad")
    first = produce_json(b, url, topic, [(0, order(i)) for i in range(4)])
    second = produce_json(b, url, topic, [(1, order(i)) for i in range(4, 7)])
    header = first[0][:5]  # the schema's id
    bad_type = header + json.dumps(dict(order(7), id="seven")).encode()
    no_amount = header + json.dumps({k: v for k, v in order(8).items() if k != "amount"}).encode()
    tail = [bad_type, no_amount, b'{"id": 1}', None, first[1]]
    send(b, topic, [(1, v) for v in tail])
    held = {(0, i): v for i, v in enumerate(first)}
    held.update({(1, i): v for i, v in enumerate(second + tail)})
    return topic, held


def test_json_permissive_and_failfast_on_damaged_records(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic, held = damaged_json_topic(b, registry_url)
    opts = {"value.format": "json", "schema.registry.url": registry_url}
    with pytest.raises(Exception) as info:
        read(spark, b, topic, **opts).collect()
    text = str(info.value)
    assert f"KafkawireDecodeError: the value of {topic}[1] at offset 3 is not valid JSON (schema id" in text
    assert "Column(/id) changed from number to string" in text and "mode=PERMISSIVE" in text

    df = read(spark, b, topic, mode="PERMISSIVE", **opts)
    assert df.columns[-2:] == ["value_raw", "value_error"]
    rows = {(r["partition"], r["offset"]): r for r in df.collect()}
    assert set(rows) == set(held)
    errors = {k: r["value_error"] for k, r in rows.items() if r["value_error"] is not None}
    assert sorted(errors) == [(1, 3), (1, 4), (1, 5)]
    assert errors[(1, 3)].startswith(f"JSON payload at {topic}[1] offset 3 (schema id ")
    assert "required property /amount is missing or null" in errors[(1, 4)]
    assert "not Confluent-framed" in errors[(1, 5)] and errors[(1, 5)].startswith(f"JSON payload at {topic}[1] offset 5:")
    for key, r in rows.items():
        assert r["value_raw"] == held[key]
        if key in errors or held[key] is None:
            assert r["value"] is None
        else:
            assert local(r["value"].asDict(recursive=True)) == as_spark_json(ck_json(registry_url, topic, held[key]))
    assert rows[(1, 6)]["value_error"] is None  # a tombstone is a null value, not an error


# -- Protobuf ----------------------------------------------------------------------------------

F = descriptor_pb2.FieldDescriptorProto


def _messages() -> dict[str, type]:
    """kw/sparktyped/money.proto (Money, Currency) and kw/sparktyped/order.proto importing it
    and Google's Timestamp, with two top-level messages (Note, Order): Order has a nested
    Line, a oneof, a map, repeated scalars, unsigned ints."""
    money = descriptor_pb2.FileDescriptorProto(name="kw/sparktyped/money.proto", package="kw.sparktyped",
                                               syntax="proto3")
    money.enum_type.add(name="Currency").value.extend([
        descriptor_pb2.EnumValueDescriptorProto(name="EUR", number=0),
        descriptor_pb2.EnumValueDescriptorProto(name="USD", number=1)])
    m = money.message_type.add(name="Money")
    m.field.add(name="units", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    m.field.add(name="currency", number=2, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                type_name=".kw.sparktyped.Currency")
    order = descriptor_pb2.FileDescriptorProto(
        name="kw/sparktyped/order.proto", package="kw.sparktyped", syntax="proto3",
        dependency=["kw/sparktyped/money.proto", "google/protobuf/timestamp.proto"])
    note = order.message_type.add(name="Note")
    note.field.add(name="text", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    o.field.add(name="at", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                type_name=".google.protobuf.Timestamp")
    o.field.add(name="total", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".kw.sparktyped.Money")
    line = o.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=F.TYPE_UINT32, label=F.LABEL_OPTIONAL)
    o.field.add(name="lines", number=4, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                type_name=".kw.sparktyped.Order.Line")
    o.oneof_decl.add(name="payment")
    o.field.add(name="card", number=5, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    o.field.add(name="cash", number=6, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".kw.sparktyped.Money",
                oneof_index=0)
    entry = o.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    o.field.add(name="attrs", number=7, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                type_name=".kw.sparktyped.Order.AttrsEntry")
    o.field.add(name="tags", number=8, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    o.field.add(name="big", number=9, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
    o.field.add(name="raw", number=10, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(money.SerializeToString())
    pool.AddSerializedFile(order.SerializeToString())
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName("kw.sparktyped." + n))
            for n in ("Money", "Note", "Order")}


MESSAGES = _messages()
Money, Note, Order = MESSAGES["Money"], MESSAGES["Note"], MESSAGES["Order"]
PROTO_SPARK_TYPE = ("struct<id:bigint,at:timestamp,total:struct<units:bigint,currency:string>,"
                    "lines:array<struct<sku:string,qty:bigint>>,card:string,cash:struct<units:bigint,currency:string>,"
                    "attrs:map<string,double>,tags:array<string>,big:decimal(20,0),raw:binary>")


def proto_order(i: int) -> Any:
    o = Order(id=i, tags=[f"t{k}" for k in range(i % 3)], big=(1 << 64) - 1 - i, raw=bytes([i % 256, 0]))
    if i % 4:
        o.at.FromDatetime(dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i * 37, microseconds=i))
    if i % 5:
        o.total.units, o.total.currency = i * 100, i % 2
    for k in range(i % 3):
        o.lines.add(sku=f"s{i}-{k}", qty=(1 << 32) - 1 - k)
    if i % 2:
        o.card = f"card-{i}"
    elif i % 3:
        o.cash.units = i
    for k in range(i % 3):
        o.attrs[f"a{k}"] = k / 4 + i
    return o


def as_spark_proto(m: Any) -> dict[str, Any]:
    """A message read by confluent-kafka's deserializer, in the shape of its Spark row: a
    field with presence that is unset is null, the others read as the runtime gives them."""
    out: dict[str, Any] = {}
    for f in m.DESCRIPTOR.fields:
        v = getattr(m, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            out[f.name] = dict(v)
        elif f.is_repeated:
            out[f.name] = [as_spark_proto(x) if f.message_type is not None else x for x in v]
        elif f.has_presence and not m.HasField(f.name):
            out[f.name] = None
        elif f.message_type is not None and f.message_type.full_name == "google.protobuf.Timestamp":
            out[f.name] = v.ToDatetime(tzinfo=UTC)
        elif f.message_type is not None:
            out[f.name] = as_spark_proto(v)
        elif f.enum_type is not None:
            out[f.name] = f.enum_type.values_by_number[v].name
        elif f.type == f.TYPE_UINT64:
            out[f.name] = decimal.Decimal(v)
        elif f.type == f.TYPE_BYTES:
            out[f.name] = bytearray(v)
        else:
            out[f.name] = v
    return out


def produce_proto(bootstrap: str, url: str, topic: str, values: list[tuple[int, Any]]) -> list[bytes]:
    from kafkawire.schema import SchemaRegistryClient
    from kafkawire.schema.protobuf import ProtobufSerializer

    with SchemaRegistryClient(url) as client:
        serialize = ProtobufSerializer(client, type(values[0][1])).for_topic(topic)
        payloads = [serialize(v) for _p, v in values]
    send(bootstrap, topic, [(p, payload) for payload, (p, _v) in zip(payloads, values)])
    return payloads


def ck_proto(payload: bytes, topic: str) -> Any:
    reader = CKProtoDeserializer(Order, {"use.deprecated.format": False})
    return reader(payload, SerializationContext(topic, MessageField.VALUE))


def test_protobuf_values_read_into_typed_columns(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2, prefix="protocols")
    values = [(i % 2, proto_order(i)) for i in range(40)]
    payloads = produce_proto(b, registry_url, topic, values)
    assert all(p[5:7] == b"\x02\x02" for p in payloads)  # message indexes [1]: Order, the second message
    opts = {"value.format": "protobuf", "schema.registry.url": registry_url,
            "value.protobuf.message": "kw.sparktyped.Order"}
    df = read(spark, b, topic, **opts)
    assert df.schema["value"].dataType.simpleString() == PROTO_SPARK_TYPE
    rows = df.orderBy("value.id").collect()
    assert {r["partition"] for r in rows} == {0, 1}
    got = [local(r["value"].asDict(recursive=True)) for r in rows]
    assert got == [as_spark_proto(ck_proto(p, topic)) for p in payloads]
    assert got[1]["card"] == "card-1" and got[1]["cash"] is None and got[2]["cash"] == {"units": 2, "currency": "EUR"}
    assert got[0]["at"] is None and got[0]["total"] is None and got[0]["tags"] == []
    # The short name picks the same message.
    assert read(spark, b, topic, **dict(opts, **{"value.protobuf.message": "Order"})).count() == 40


def test_protobuf_permissive_failfast_and_a_record_of_another_message(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1, prefix="protobad")
    good = produce_proto(b, registry_url, topic, [(0, proto_order(i)) for i in range(1, 4)])
    note = produce_proto(b, registry_url, topic, [(0, Note(text="a note"))])[0]  # indexes [0]: Note
    truncated = good[0][:-3]
    send(b, topic, [(0, truncated), (0, b"\x00\x7f\xff\xff\xf0\x00\x08\x01"), (0, good[1])])
    opts = {"value.format": "protobuf", "schema.registry.url": registry_url,
            "value.protobuf.message": "kw.sparktyped.Order"}
    with pytest.raises(Exception) as info:
        read(spark, b, topic, **opts).collect()
    text = str(info.value)
    assert f"KafkawireDecodeError: the value of {topic}[0] at offset 3 is not valid Protobuf (schema id" in text
    assert "name kw.sparktyped.Note, not the kw.sparktyped.Order this column reads" in text

    rows = read(spark, b, topic, mode="PERMISSIVE", **opts).orderBy("offset").collect()
    assert [r["offset"] for r in rows] == list(range(7))
    assert [r["value_raw"] for r in rows] == good + [note, truncated, b"\x00\x7f\xff\xff\xf0\x00\x08\x01", good[1]]
    errors = [r["value_error"] for r in rows]
    assert errors[:3] == [None] * 3 and errors[6] is None
    assert errors[3].startswith(f"Protobuf payload at {topic}[0] offset 3 (schema id ")
    assert errors[4].startswith(f"Protobuf payload at {topic}[0] offset 4 (schema id ") and (
        "past the end of the payload" in errors[4] or "truncated" in errors[4])
    assert "unknown schema id 2147483632" in errors[5]
    assert [r["value"] is None for r in rows] == [False, False, False, True, True, True, False]
    assert local(rows[6]["value"].asDict(recursive=True)) == as_spark_proto(ck_proto(good[1], topic))


def test_protobuf_streaming_read(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 2, prefix="protostream")
    values = [(i % 2, proto_order(i)) for i in range(30)]
    payloads = produce_proto(b, registry_url, topic, values)
    name = "proto_" + topic.replace("-", "_")
    q = (spark.readStream.format("kafkawire").option("kafka.bootstrap.servers", b).option("subscribe", topic)
         .option("startingOffsets", "earliest").option("value.format", "protobuf")
         .option("value.protobuf.message", "kw.sparktyped.Order")
         .option("schema.registry.url", registry_url).load()
         .writeStream.format("memory").queryName(name)
         .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())
    assert q.awaitTermination(300)
    rows = spark.sql(f"SELECT * FROM {name} ORDER BY value.id").collect()
    assert [local(r["value"].asDict(recursive=True)) for r in rows] == [
        as_spark_proto(ck_proto(p, topic)) for p in payloads]


def test_typed_format_option_errors_at_load(spark, kafka_broker, registry_url):
    b = kafka_broker.bootstrap
    topic = new_topic(b, 1, prefix="typedopt")
    produce_proto(b, registry_url, topic, [(0, proto_order(1))])
    cases = [
        ({"value.format": "protobuf", "schema.registry.url": registry_url},
         "has 2 top-level messages (kw.sparktyped.Note, kw.sparktyped.Order); name the one to read"),
        ({"value.format": "protobuf", "schema.registry.url": registry_url, "value.protobuf.message": "Nope"},
         "has no message 'Nope'"),
        ({"value.format": "json", "schema.registry.url": registry_url},
         f"subject '{topic}-value' holds a PROTOBUF schema, not JSON"),
        ({"value.format": "json", "value.schema": '{"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}'},
         "cannot be read into columns: #/properties/a: type"),
        ({"value.format": "json", "value.schema": "[1]"}, "is not a JSON Schema (a JSON object)"),
        ({"value.format": "json", "value.protobuf.message": "X", "value.schema": "{}"},
         "applies with value.format=protobuf only"),
        ({"value.format": "xml"}, "must be one of raw, avro, json, protobuf"),
    ]
    for options, message in cases:
        with pytest.raises(Exception) as info:
            read(spark, b, topic, **options)
        assert message in str(info.value), (options, str(info.value)[:2000])
    with pytest.raises(Exception) as info:
        (spark.createDataFrame([({"a": 1},)], "value struct<a:int>").write.format("kafkawire")
         .option("kafka.bootstrap.servers", b).option("topic", topic).option("value.format", "json")
         .option("schema.registry.url", registry_url).mode("append").save())
    assert "writing value.format=json is not supported yet" in str(info.value)
