"""kafkawire's Avro serializer and deserializer against a real registry (Apicurio) and
beside confluent-kafka's: the same bytes for the same schema and value, each reads what
the other wrote; subject name strategies, auto-registration, latest version, normalize,
schema references, reader-schema evolution, and bad input named."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema as CKSchema
from confluent_kafka.schema_registry import SchemaReference as CKReference
from confluent_kafka.schema_registry import record_subject_name_strategy, topic_record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroDeserializer as CKDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CKSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkawire.errors import ConfigError
from kafkawire.schema import Schema, SchemaReference, SchemaRegistryClient, errors
from kafkawire.schema._serde import RecordContext
from kafkawire.schema.avro import AvroDeserializer, AvroSerializer
from kafkawire.schema.framing import frame
from kafkawire.testing.registry import ApicurioRegistry


def compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


# Every kind of Avro type: nested records, unions (of null, a primitive and a record),
# enums, fixed, decimals (bytes and fixed), timestamps, date, time, uuid, maps, arrays.
RICH = {
    "type": "record", "name": "Order", "namespace": "kw.avro",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "flag", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": "double"},
        {"name": "count", "type": "int"},
        {"name": "blob", "type": "bytes"},
        {"name": "customer", "type": "string"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "fee", "type": {"type": "fixed", "name": "Fee", "size": 8, "logicalType": "decimal",
                                 "precision": 10, "scale": 3}},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "updated", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line", "fields": [
                {"name": "sku", "type": "string"},
                {"name": "qty", "type": "int"},
                {"name": "extra", "type": {"type": "map", "values": ["null", "double"]}}]}}},
        {"name": "ship", "type": ["null", {"type": "record", "name": "Address", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": "int"}]}], "default": None},
        {"name": "choice", "type": ["null", "long", "string", "Address"]},
    ],
}


def rich_value(i: int) -> dict[str, Any]:
    utc = datetime.timezone.utc
    return {
        "id": 10**12 + i, "flag": bool(i % 2), "ratio": 0.5, "score": -1.25 * i, "count": -i,
        "blob": bytes(range(i % 7)), "customer": f"cüstomer-{i}", "status": ("NEW", "PAID", "SHIPPED")[i % 3],
        "digest": b"\x00\x01\x02" + bytes([i % 256]), "amount": decimal.Decimal("1234.56") * i,
        "fee": decimal.Decimal("-0.125"), "created": datetime.datetime(2026, 12, 7, 17, 0, 0, 123000, tzinfo=utc),
        "updated": datetime.datetime(2026, 12, 7, 17, 0, 0, 123456, tzinfo=utc),
        "day": datetime.date(2026, 12, 7), "at": datetime.time(17, 30, 1, 500000),
        "ref": uuid.UUID(int=i), "note": None if i % 2 else f"note {i}", "tags": ["a", "b"][: i % 3],
        "attrs": {"x": i, "y": -(2**40)}, "lines": [{"sku": f"s{j}", "qty": j, "extra": {"w": None, "v": 1.5}}
                                                   for j in range(i % 3)],
        "ship": None if i % 3 == 0 else {"city": "Lyon", "zip": 69000 + i},
        "choice": [None, i, f"c{i}", {"city": "Nice", "zip": 6000}][i % 4],
    }


VALUES = [rich_value(i) for i in range(8)]

V1 = compact({"type": "record", "name": "User", "namespace": "kw.avro",
              "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
V2 = compact({"type": "record", "name": "User", "namespace": "kw.avro",
              "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "long"},
                         {"name": "email", "type": ["null", "string"], "default": None},
                         {"name": "tier", "type": "string", "default": "basic"}]})


@pytest.fixture
def topic() -> str:
    return f"avro-{uuid.uuid4().hex[:10]}"


def ck_ctx(topic: str, key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE)


def test_bytes_identical_to_confluents_and_each_reads_the_other(client: Any, confluent: Any, topic: str) -> None:
    text = compact(RICH)
    ours = AvroSerializer(client, text, topic=topic)
    theirs = CKSerializer(confluent, text)
    mine = [ours(v) for v in VALUES]
    assert mine == [theirs(v, ck_ctx(topic)) for v in VALUES]
    schema_id = client.get_latest_version(f"{topic}-value").schema_id
    assert all(p[:5] == b"\x00" + schema_id.to_bytes(4, "big") for p in mine)
    ck_read = CKDeserializer(confluent)
    kw_read = AvroDeserializer(client)
    assert [ck_read(p, ck_ctx(topic)) for p in mine] == VALUES
    assert [kw_read(p) for p in mine] == VALUES
    # What confluent-kafka wrote under the key subject, kafkawire reads; and the key
    # serializer names its subject <topic>-key.
    keys = [CKSerializer(confluent, text)(v, ck_ctx(topic, key=True)) for v in VALUES]
    assert keys == [AvroSerializer(client, text, is_key=True).for_topic(topic)(v) for v in VALUES]
    assert [AvroDeserializer(client, is_key=True)(k) for k in keys] == VALUES
    assert client.get_latest_version(f"{topic}-key").schema_id == schema_id
    assert ours(None) is None and kw_read(None) is None


def test_primitive_schema(client: Any, confluent: Any, topic: str) -> None:
    ours, theirs = AvroSerializer(client, '"string"', topic=topic), CKSerializer(confluent, '"string"')
    assert ours("héllo") == theirs("héllo", ck_ctx(topic))
    assert CKDeserializer(confluent)(ours("héllo"), ck_ctx(topic)) == "héllo"
    with pytest.raises(errors.SerializationError, match="not a named type"):
        AvroSerializer(client, '"string"', subject_name_strategy="record")("x")


def test_schema_references(client: Any, confluent: Any, topic: str) -> None:
    inner = compact({"type": "record", "name": "Money", "namespace": "kw.ref",
                     "fields": [{"name": "units", "type": "long"},
                                {"name": "currency", "type": {"type": "enum", "name": "Currency",
                                                              "symbols": ["EUR", "USD"]}}]})
    outer = compact({"type": "record", "name": "Payment", "namespace": "kw.ref",
                     "fields": [{"name": "total", "type": "kw.ref.Money"},
                                {"name": "parts", "type": {"type": "array", "items": "kw.ref.Money"}},
                                {"name": "by_id", "type": {"type": "map", "values": ["null", "kw.ref.Money"]}}]})
    client.register_schema(f"{topic}-money", Schema(inner))
    ref = SchemaReference("kw.ref.Money", f"{topic}-money", 1)
    value = {"total": {"units": 7, "currency": "EUR"}, "parts": [{"units": 3, "currency": "USD"}] * 2,
             "by_id": {"a": None, "b": {"units": 1, "currency": "EUR"}}}
    ours = AvroSerializer(client, Schema(outer, references=[ref]), topic=topic)
    theirs = CKSerializer(confluent, CKSchema(outer, "AVRO", [CKReference("kw.ref.Money", f"{topic}-money", 1)]))
    mine = ours(value)
    assert mine == theirs(value, ck_ctx(topic))
    assert CKDeserializer(confluent)(mine, ck_ctx(topic)) == value
    fresh = SchemaRegistryClient(client._core.urls[0])  # nothing cached: the reference is fetched
    assert AvroDeserializer(fresh)(mine) == value


@pytest.mark.parametrize("name, theirs", [("record", record_subject_name_strategy),
                                          ("topic-record", topic_record_subject_name_strategy)])
def test_subject_name_strategies(client: Any, confluent: Any, topic: str, name: str, theirs: Any) -> None:
    record = f"kw.s{uuid.uuid4().hex[:8]}.User"
    ns = record.rsplit(".", 1)[0]
    text = compact({"type": "record", "name": "User", "namespace": ns, "fields": [{"name": "name", "type": "string"}]})
    ours = AvroSerializer(client, text, topic=topic, subject_name_strategy=name)
    mine = ours({"name": "ann"})
    subject = record if name == "record" else f"{topic}-{record}"
    assert subject in client.get_subjects()
    assert client.get_latest_version(subject).schema_id == int.from_bytes(mine[1:5], "big")
    ck = CKSerializer(confluent, text, conf={"subject.name.strategy": theirs, "auto.register.schemas": False})
    assert ck({"name": "ann"}, ck_ctx(topic)) == mine
    assert f"{topic}-value" not in client.get_subjects()


def test_topic_comes_from_the_context_or_for_topic(client: Any, topic: str) -> None:
    ser = AvroSerializer(client, V1)
    with pytest.raises(errors.SerializationError, match="needs the topic"):
        ser({"name": "a", "age": 1})
    a = ser({"name": "a", "age": 1}, topic)
    assert ser.for_topic(topic)({"name": "a", "age": 1}) == a
    assert ser({"name": "a", "age": 1}, ck_ctx(topic)) == a
    assert ser({"name": "a", "age": 1}, RecordContext(topic + "-2")) != b""
    assert {f"{topic}-value", f"{topic}-2-value"} <= set(client.get_subjects())


def test_auto_register_off_looks_the_schema_up(client: Any, topic: str) -> None:
    ser = AvroSerializer(client, V1, topic=topic, auto_register=False)
    with pytest.raises((errors.SubjectNotFoundError, errors.SchemaNotFoundError)):
        ser({"name": "a", "age": 1})
    assert f"{topic}-value" not in client.get_subjects()
    schema_id = client.register_schema(f"{topic}-value", V1)
    assert ser({"name": "a", "age": 1})[1:5] == schema_id.to_bytes(4, "big")


def test_use_latest_version(client: Any, confluent: Any, topic: str) -> None:
    subject = f"{topic}-value"
    client.register_schema(subject, V1)
    v2 = client.register_schema(subject, V2)
    with pytest.raises(ConfigError, match="auto_register=False"):
        AvroSerializer(client, use_latest_version=True)
    ours = AvroSerializer(client, topic=topic, auto_register=False, use_latest_version=True)
    value = {"name": "bo", "age": 2**40, "email": "b@o", "tier": "gold"}
    mine = ours(value)
    assert mine[1:5] == v2.to_bytes(4, "big")
    ck = CKSerializer(confluent, None, conf={"auto.register.schemas": False, "use.latest.version": True})
    assert ck(value, ck_ctx(topic)) == mine
    # A reader on the latest version reads what was written with version 1.
    old = AvroSerializer(client, V1, topic=topic)({"name": "al", "age": 3})
    latest_reader = AvroDeserializer(client, topic=topic, use_latest_version=True)
    assert latest_reader(old) == {"name": "al", "age": 3, "email": None, "tier": "basic"}


def test_normalize(client: Any, confluent: Any, topic: str) -> None:
    spaced = json.dumps(json.loads(V1), indent=2)
    ours = AvroSerializer(client, spaced, topic=topic, normalize=True)
    theirs = CKSerializer(confluent, spaced, conf={"normalize.schemas": True})
    value = {"name": "n", "age": 5}
    mine = ours(value)
    assert mine == theirs(value, ck_ctx(topic))
    assert AvroDeserializer(client)(mine) == value


def test_reader_schema_evolution(client: Any, confluent: Any, topic: str) -> None:
    subject = f"{topic}-value"
    client.set_config("BACKWARD", subject)
    written_v1 = AvroSerializer(client, V1, topic=topic)({"name": "old", "age": 41})
    written_v2 = CKSerializer(confluent, V2)({"name": "new", "age": 2**33, "email": "x@y", "tier": "t"}, ck_ctx(topic))
    assert written_v1[1:5] != written_v2[1:5]
    reader = AvroDeserializer(client, V2)
    assert reader(written_v1) == {"name": "old", "age": 41, "email": None, "tier": "basic"}
    assert reader(written_v2) == {"name": "new", "age": 2**33, "email": "x@y", "tier": "t"}
    # confluent-kafka's deserializer with the same reader schema agrees.
    ck_reader = CKDeserializer(confluent, V2)
    assert ck_reader(written_v1, ck_ctx(topic)) == reader(written_v1)
    # A reader without the writer's field and with a renamed type does not resolve.
    other = compact({"type": "record", "name": "User", "namespace": "kw.avro",
                     "fields": [{"name": "missing", "type": "string"}]})
    with pytest.raises(errors.SchemaResolutionError) as info:
        AvroDeserializer(client, other).deserialize(written_v1, topic=topic, partition=3, offset=17)
    e = info.value
    assert (e.topic, e.partition, e.offset, e.schema_id) == (topic, 3, 17, int.from_bytes(written_v1[1:5], "big"))
    assert "partition 3, offset 17" in str(e)


def test_from_and_to_dict(client: Any, topic: str) -> None:
    class User:
        def __init__(self, name: str, age: int):
            self.name, self.age = name, age

    ser = AvroSerializer(client, V1, topic=topic, to_dict=lambda u, ctx: {"name": u.name, "age": u.age})
    des = AvroDeserializer(client, from_dict=lambda d, ctx: User(**d))
    got = des(ser(User("z", 9)))
    assert (got.name, got.age) == ("z", 9)


# -- bad input ------------------------------------------------------------------------------------


@pytest.fixture
def written(client: Any, topic: str) -> tuple[int, bytes]:
    schema = compact({"type": "record", "name": "Bad", "namespace": "kw.avro", "fields": [
        {"name": "s", "type": "string"}, {"name": "u", "type": ["null", "long"]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}]})
    data = AvroSerializer(client, schema, topic=topic)({"s": "hello", "u": 5, "e": "B"})
    return int.from_bytes(data[1:5], "big"), data


def test_payload_without_magic_byte(client: Any, topic: str) -> None:
    with pytest.raises(errors.UnknownMagicByteError) as info:
        AvroDeserializer(client).deserialize(b'{"json": 1}', topic=topic, partition=0, offset=5)
    assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 5)
    assert "offset 5" in str(info.value) and "byte 123" in str(info.value)
    with pytest.raises(errors.PayloadError):  # the clients' path, no context
        AvroDeserializer(client)(b"\x01\x00")


def test_unknown_schema_id(client: Any, topic: str) -> None:
    with pytest.raises(errors.UnknownSchemaIdError) as info:
        AvroDeserializer(client).deserialize(frame(987654321, b"\x02"), topic=topic, partition=1, offset=9)
    e = info.value
    assert isinstance(e, errors.SchemaNotFoundError) and e.code == 40403
    assert (e.schema_id, e.topic, e.partition, e.offset) == (987654321, topic, 1, 9)
    assert "schema id 987654321" in str(e) and f"topic {topic!r}, partition 1, offset 9" in str(e)


def test_truncated_payload(client: Any, topic: str, written: tuple[int, bytes]) -> None:
    schema_id, data = written
    des = AvroDeserializer(client)
    with pytest.raises(errors.TruncatedFrameError):
        des(data[:3])
    with pytest.raises(errors.PayloadDecodeError) as info:
        des.deserialize(data[:-1], topic=topic, partition=2, offset=4)
    e = info.value
    assert (e.schema_id, e.topic, e.partition, e.offset, e.path) == (schema_id, topic, 2, 4, "e")
    assert "ends inside an enum symbol index" in str(e) and f"schema (id {schema_id})" in str(e)


def test_string_length_past_the_end(client: Any, topic: str, written: tuple[int, bytes]) -> None:
    schema_id, data = written
    bad = data[:5] + bytes([40]) + data[6:]  # "hello" claims 20 bytes
    with pytest.raises(errors.PayloadDecodeError) as info:
        AvroDeserializer(client).deserialize(bad, topic=topic, partition=0, offset=1)
    assert info.value.path == "s" and info.value.position == 0
    assert "a string of 20 bytes at byte 0 runs past the end" in str(info.value)


def test_union_branch_out_of_range(client: Any, topic: str, written: tuple[int, bytes]) -> None:
    schema_id, data = written
    bad = data[:11] + bytes([8]) + data[12:]  # branch 4 of a 2-branch union
    with pytest.raises(errors.PayloadDecodeError) as info:
        AvroDeserializer(client)(bad, topic)
    assert info.value.path == "u" and info.value.position == 6 and info.value.schema_id == schema_id
    assert "union branch index 4 at byte 6 is out of range" in str(info.value)
    bad_enum = data[:-1] + bytes([6])
    with pytest.raises(errors.PayloadDecodeError, match="enum symbol index 3"):
        AvroDeserializer(client)(bad_enum)


def test_over_long_payload(client: Any, topic: str, written: tuple[int, bytes]) -> None:
    schema_id, data = written
    with pytest.raises(errors.PayloadDecodeError) as info:
        AvroDeserializer(client).deserialize(data + b"\x00\x00", topic=topic, partition=0, offset=8)
    assert "2 bytes left over" in str(info.value) and info.value.schema_id == schema_id


def test_not_utf8(client: Any, written: tuple[int, bytes]) -> None:
    schema_id, data = written
    bad = data[:6] + b"\xff" + data[7:]
    with pytest.raises(errors.PayloadDecodeError, match="not UTF-8"):
        AvroDeserializer(client)(bad)


def test_value_that_does_not_fit(client: Any, topic: str) -> None:
    ser = AvroSerializer(client, V1, topic=topic)
    with pytest.raises(errors.SerializationError) as info:
        ser({"name": "a", "age": "not a number"})
    assert "age" in str(info.value) and f"{topic}-value" in str(info.value)


def test_incompatible_schema_on_register(client: Any, topic: str) -> None:
    subject = f"{topic}-value"
    client.set_config("BACKWARD", subject)
    AvroSerializer(client, V1, topic=topic)({"name": "a", "age": 1})
    breaks = compact({"type": "record", "name": "User", "namespace": "kw.avro",
                      "fields": [{"name": "other", "type": "string"}]})
    with pytest.raises(errors.IncompatibleSchemaError) as info:
        AvroSerializer(client, breaks, topic=topic)({"other": "x"})
    assert info.value.code == 409 and subject in str(info.value) and f"topic {topic!r}" in str(info.value)


def test_generated_encoder_path_is_byte_identical_too(client: Any, confluent: Any, topic: str) -> None:
    # RICH without its four-branch union and fixed decimal: a schema the generated
    # encoder covers.
    schema = dict(RICH, fields=[f for f in RICH["fields"] if f["name"] not in ("choice", "fee")])
    text = compact(schema)
    serializer = AvroSerializer(client, text)
    ours = serializer.for_topic(topic)
    theirs = CKSerializer(confluent, text)
    values = [{k: v for k, v in rich_value(i).items() if k not in ("choice", "fee")} for i in range(8)]
    # And values it leaves to fastavro: a naive datetime, a field left to its default, a
    # tuple for an array.
    values += [values[0] | {"created": datetime.datetime(2026, 1, 1, 12)},
               {k: v for k, v in values[1].items() if k != "note"}, values[2] | {"tags": ("t", "u")}]
    assert [ours(v) for v in values] == [theirs(v, ck_ctx(topic)) for v in values]
    assert [t[4] is not None for t in serializer._targets.values()] == [True]  # the generated encoder
    assert [AvroDeserializer(client)(p) for p in [ours(v) for v in values[:8]]] == values[:8]


def test_reader_with_top_level_fields_added_and_removed(client: Any, confluent: Any, topic: str) -> None:
    # Read as written, then fields dropped and defaulted: the same records as Avro's
    # resolution gives (confluent-kafka's deserializer, fastavro's resolution per record).
    writer = compact({"type": "record", "name": "Evt", "namespace": "kw.avro", "fields": [
        {"name": "id", "type": "long"}, {"name": "gone", "type": "string"},
        {"name": "where", "type": {"type": "record", "name": "Loc", "fields": [{"name": "x", "type": "int"}]}}]})
    reader = compact({"type": "record", "name": "Evt", "namespace": "kw.avro", "fields": [
        {"name": "id", "type": "long"},
        {"name": "where", "type": {"type": "record", "name": "Loc", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": ["a"]},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "level", "type": "int", "default": 3}]})
    payloads = [AvroSerializer(client, writer, topic=topic)({"id": i, "gone": "x", "where": {"x": i}}) for i in range(3)]
    ours = AvroDeserializer(client, reader)
    got = [ours(p) for p in payloads]
    assert got == [CKDeserializer(confluent, reader)(p, ck_ctx(topic)) for p in payloads]
    assert got[0] == {"id": 0, "where": {"x": 0}, "tags": ["a"], "note": None, "level": 3}
    assert list(ours._pairs.values())[0][2] is not None  # read by the plan, not per-record resolution
    got[0]["tags"].append("mutated")  # a default handed out is the record's own
    assert ours(payloads[1])["tags"] == ["a"]
    # A nested record that evolved is resolved by fastavro, record by record.
    nested = compact({"type": "record", "name": "Evt", "namespace": "kw.avro", "fields": [
        {"name": "id", "type": "long"},
        {"name": "where", "type": {"type": "record", "name": "Loc", "fields": [
            {"name": "x", "type": "int"}, {"name": "y", "type": "int", "default": -1}]}}]})
    deep = AvroDeserializer(client, nested)
    assert deep(payloads[2]) == {"id": 2, "where": {"x": 2, "y": -1}}
    assert list(deep._pairs.values())[0][2] is None


def test_an_asyncio_registry_client_is_refused_with_the_fix(apicurio_registry: ApicurioRegistry) -> None:
    from kafkawire.schema import AsyncSchemaRegistryClient

    aclient = AsyncSchemaRegistryClient(apicurio_registry.url)
    for make in (lambda: AvroSerializer(aclient, V1), lambda: AvroDeserializer(aclient)):
        with pytest.raises(ConfigError, match="not an AsyncSchemaRegistryClient"):
            make()
    import asyncio

    asyncio.run(aclient.close())
