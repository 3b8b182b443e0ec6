"""kafkawire's Protobuf and JSON Schema serdes against a real registry (Apicurio) and
beside confluent-kafka's: the same bytes and the same registered schemas for the same
message or value, each reads what the other wrote; nested messages, oneof, maps, enums,
imports registered as references; JSON Schema validation and references; bad input named."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema as CKSchema
from confluent_kafka.schema_registry import SchemaReference as CKReference
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CKJSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CKJSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CKProtoDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CKProtoSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from kafkawire.schema import Schema, SchemaReference, errors
from kafkawire.schema.json_schema import JSONDeserializer, JSONSerializer
from kafkawire.schema.protobuf import ProtobufDeserializer, ProtobufSerializer, message_indexes

F = descriptor_pb2.FieldDescriptorProto


def _build_messages() -> dict[str, type]:
    """Two .proto files, made as descriptors (no protoc here): kw/common/money.proto
    (Money, Currency) and kw/shop/order.proto, which imports it and Google's Timestamp and
    has two top-level messages (Note, Order) with Order's nested Line, a oneof, a map."""
    pool = descriptor_pool.Default()
    money = descriptor_pb2.FileDescriptorProto(name="kw/common/money.proto", package="kw.common", syntax="proto3")
    money.enum_type.add(name="Currency").value.extend([
        descriptor_pb2.EnumValueDescriptorProto(name="EUR", number=0),
        descriptor_pb2.EnumValueDescriptorProto(name="USD", number=1)])
    m = money.message_type.add(name="Money")
    m.field.add(name="units", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    m.field.add(name="currency", number=2, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL, type_name=".kw.common.Currency")
    order = descriptor_pb2.FileDescriptorProto(name="kw/shop/order.proto", package="kw.shop", syntax="proto3",
                                               dependency=["kw/common/money.proto", "google/protobuf/timestamp.proto"])
    note = order.message_type.add(name="Note")
    note.field.add(name="text", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    o.field.add(name="at", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".google.protobuf.Timestamp")
    o.field.add(name="total", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".kw.common.Money")
    line = o.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    o.field.add(name="lines", number=4, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".kw.shop.Order.Line")
    o.oneof_decl.add(name="payment")
    o.field.add(name="card", number=5, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    o.field.add(name="cash", number=6, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".kw.common.Money",
                oneof_index=0)
    entry = o.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    o.field.add(name="attrs", number=7, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".kw.shop.Order.AttrsEntry")
    o.field.add(name="tags", number=8, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    # Importing Google's Timestamp puts timestamp.proto in the pool, for the import.
    assert timestamp_pb2.Timestamp.DESCRIPTOR.file.name == "google/protobuf/timestamp.proto"
    for f in (money, order):
        try:
            pool.FindFileByName(f.name)
        except KeyError:
            pool.AddSerializedFile(f.SerializeToString())
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
            for name in ("kw.common.Money", "kw.shop.Note", "kw.shop.Order", "kw.shop.Order.Line")}


MESSAGES = _build_messages()
Money, Note, Order, Line = (MESSAGES[n] for n in ("kw.common.Money", "kw.shop.Note", "kw.shop.Order", "kw.shop.Order.Line"))


def orders() -> list[Any]:
    out = []
    for i in range(6):
        o = Order(id=10**10 + i, total=Money(units=i * 100, currency=i % 2),
                  lines=[Line(sku=f"s{j}", qty=j) for j in range(i % 3)], tags=["a", "ü"][: i % 3])
        o.at.seconds, o.at.nanos = 1_765_000_000 + i, 500
        if i % 2:
            o.card = f"card-{i}"
        else:
            o.cash.units = i
        o.attrs["k"] = i
        out.append(o)
    return out


@pytest.fixture
def topic() -> str:
    return f"pj-{uuid.uuid4().hex[:10]}"


def ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


# -- Protobuf ----------------------------------------------------------------------------------


def test_message_indexes() -> None:
    assert message_indexes(Money.DESCRIPTOR) == [0]
    assert message_indexes(Note.DESCRIPTOR) == [0]
    assert message_indexes(Order.DESCRIPTOR) == [1]
    assert message_indexes(Line.DESCRIPTOR) == [1, 0]


def test_protobuf_bytes_identical_to_confluents_and_each_reads_the_other(client: Any, confluent: Any,
                                                                         topic: str) -> None:
    ours = ProtobufSerializer(client, Order, topic=topic)
    theirs = CKProtoSerializer(Order, confluent, {"use.deprecated.format": False})
    values = orders()
    mine = [ours(o) for o in values]
    assert mine == [theirs(o, ctx(topic)) for o in values]
    assert all(p[5] == 2 and p[6] == 2 for p in mine)  # message indexes [1]: count 1, index 1 (zigzag)
    ck_read = CKProtoDeserializer(Order, {"use.deprecated.format": False})
    assert [ck_read(p, ctx(topic)) for p in mine] == values
    assert [ProtobufDeserializer(Order)(p) for p in mine] == values
    # The import is registered under its file name and referenced; Google's Timestamp is not.
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject) for r in latest.schema.references] == [("kw/common/money.proto",
                                                                        "kw/common/money.proto")]
    # A nested message: indexes [1, 0], the same bytes as confluent-kafka's.
    line_topic = topic + "-line"
    nested = ProtobufSerializer(client, Line).for_topic(line_topic)(Line(sku="x", qty=3))
    assert nested == CKProtoSerializer(Line, confluent, {"use.deprecated.format": False})(Line(sku="x", qty=3),
                                                                                          ctx(line_topic))
    assert nested[5:8] == b"\x04\x02\x00"
    assert ProtobufDeserializer(Line)(nested) == Line(sku="x", qty=3)
    # The first top-level message: indexes [0] as the single byte 0.
    first = ProtobufSerializer(client, Money, topic=topic + "-money")(Money(units=1))
    assert first[5] == 0 and ProtobufDeserializer(Money)(first) == Money(units=1)


def test_protobuf_strategies_and_lookup(client: Any, topic: str) -> None:
    with pytest.raises((errors.SubjectNotFoundError, errors.SchemaNotFoundError)):
        ProtobufSerializer(client, Note, topic=topic, auto_register=False)(Note(text="x"))
    data = ProtobufSerializer(client, Note, topic=topic, subject_name_strategy="topic-record")(Note(text="x"))
    assert client.get_latest_version(f"{topic}-kw.shop.Note").schema_id == int.from_bytes(data[1:5], "big")
    latest = ProtobufSerializer(client, Note, topic=topic, subject_name_strategy="topic-record",
                                auto_register=False, use_latest_version=True)(Note(text="x"))
    assert latest == data


def test_protobuf_bad_input(client: Any, topic: str) -> None:
    data = ProtobufSerializer(client, Order, topic=topic)(orders()[1])
    des = ProtobufDeserializer(Order)
    with pytest.raises(errors.UnknownMagicByteError):
        des(b"\x08\x01")
    with pytest.raises(errors.TruncatedFrameError):
        des.deserialize(data[:5], topic=topic, partition=0, offset=3)
    with pytest.raises(errors.PayloadDecodeError) as info:
        # field 4 (lines) says 16 bytes follow; 1 does
        des.deserialize(data[:7] + b"\x22\x10\x0a", topic=topic, partition=2, offset=7)
    e = info.value
    assert (e.topic, e.partition, e.offset, e.schema_id) == (topic, 2, 7, int.from_bytes(data[1:5], "big"))
    assert "does not parse as kw.shop.Order" in str(e) and "offset 7" in str(e)
    with pytest.raises(errors.SerializationError, match="not the kw.shop.Order"):
        ProtobufSerializer(client, Order, topic=topic)(Note(text="x"))


# -- JSON Schema -------------------------------------------------------------------------------

ADDRESS = {"$schema": "http://json-schema.org/draft-07/schema#", "$id": "address.json", "title": "Address",
           "type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
           "required": ["city"]}
PERSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person", "type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                         "tags": {"type": "array", "items": {"type": "string"}},
                         "home": {"$ref": "address.json"},
                         "extra": {"type": "object", "additionalProperties": {"type": ["number", "null"]}}},
          "required": ["name", "age"]}
PEOPLE = [{"name": "Zoë", "age": 30, "tags": ["a", "b"], "home": {"city": "Lyon", "zip": 69001},
           "extra": {"x": 1.5, "y": None}},
          {"name": "Al", "age": 0, "tags": []}, {"name": "日本", "age": 7, "home": {"city": "Kyoto"}}]


def test_json_bytes_identical_to_confluents_and_each_reads_the_other(client: Any, confluent: Any,
                                                                     topic: str) -> None:
    client.register_schema(f"{topic}-address", Schema(json.dumps(ADDRESS), "JSON"))
    schema = Schema(json.dumps(PERSON), "JSON", [SchemaReference("address.json", f"{topic}-address", 1)])
    ours = JSONSerializer(client, schema, topic=topic)
    theirs = CKJSONSerializer(CKSchema(json.dumps(PERSON), "JSON", [CKReference("address.json", f"{topic}-address", 1)]),
                              confluent)
    mine = [ours(p) for p in PEOPLE]
    assert mine == [theirs(p, ctx(topic)) for p in PEOPLE]
    assert mine[0][5:] == json.dumps(PEOPLE[0], separators=(",", ":"), ensure_ascii=False).encode()
    ck_read = CKJSONDeserializer(None, schema_registry_client=confluent)
    assert [ck_read(p, ctx(topic)) for p in mine] == PEOPLE
    assert [JSONDeserializer(client)(p) for p in mine] == PEOPLE
    # The subject after the schema's title.
    rec = JSONSerializer(client, schema, topic=topic, subject_name_strategy="topic-record")(PEOPLE[1])
    assert client.get_latest_version(f"{topic}-Person").schema_id == int.from_bytes(rec[1:5], "big")


def test_json_validation_names_the_paths(client: Any, topic: str) -> None:
    ours = JSONSerializer(client, {k: v for k, v in PERSON.items() if k != "properties"} | {
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}}}, topic=topic)
    with pytest.raises(errors.SerializationError) as info:
        ours({"name": 5, "age": -1})
    assert "$.age" in str(info.value) and "$.name" in str(info.value) and f"{topic}-value" in str(info.value)
    assert JSONSerializer(client, PERSON | {"properties": {}}, topic=topic + "-nv", validate=False)({"x": 1})[5:] == b'{"x":1}'


def test_json_bad_input(client: Any, topic: str) -> None:
    strict = {"title": "S", "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    data = JSONSerializer(client, strict, topic=topic)({"n": 1})
    schema_id = int.from_bytes(data[1:5], "big")
    des = JSONDeserializer(client)
    with pytest.raises(errors.PayloadDecodeError) as info:
        des.deserialize(data[:-1], topic=topic, partition=1, offset=2)
    assert info.value.schema_id == schema_id and "is not JSON" in str(info.value) and "offset 2" in str(info.value)
    wrong = data[:5] + b'{"n":"one"}'
    with pytest.raises(errors.PayloadDecodeError, match=r"\$\.n"):
        des(wrong)
    assert JSONDeserializer(client, validate=False)(wrong) == {"n": "one"}
    with pytest.raises(errors.UnknownSchemaIdError) as unknown:
        des.deserialize(b"\x00\x3a\xde\x68\xb1{}", topic=topic, partition=0, offset=1)
    assert unknown.value.schema_id == 987654321 and unknown.value.code == 40403
