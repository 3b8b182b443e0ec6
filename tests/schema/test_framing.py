"""Confluent's framing written and read by kafkawire.schema.framing: byte for byte what
confluent-kafka writes (its SchemaId, on generated cases), errors that name what was
wrong, and records confluent-kafka's Avro serializer and deserializer made and read
through a real registry."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import pytest
from confluent_kafka.schema_registry.common.serde import SchemaId
from hypothesis import given
from hypothesis import strategies as st

from kafkawire.schema import Schema, errors
from kafkawire.schema.framing import HEADER_SIZE, frame, frame_header, unframe
from kafkawire.testing.registry import ApicurioRegistry

ids = st.integers(0, 0xFFFFFFFF)
indexes = st.lists(st.integers(0, 0x7FFFFFFF), min_size=1, max_size=6)


@given(ids, indexes, st.binary(max_size=40))
def test_protobuf_framing_is_confluents(schema_id: int, message_indexes: list[int], data: bytes) -> None:
    theirs = SchemaId("PROTOBUF", schema_id, message_indexes=message_indexes).id_to_bytes()
    ours = frame_header(schema_id, message_indexes)
    assert ours == theirs
    read_back = unframe(ours + data, protobuf=True)
    assert read_back.schema_id == schema_id and bytes(read_back.payload) == data
    assert read_back.message_indexes == tuple(message_indexes)
    parsed = SchemaId("PROTOBUF")
    rest = parsed.from_bytes(io.BytesIO(ours + data))
    assert parsed.id == schema_id and rest.read() == data
    assert list(parsed.message_indexes) == list(read_back.message_indexes)


@given(ids, st.binary(max_size=40))
def test_avro_and_json_framing_is_confluents(schema_id: int, data: bytes) -> None:
    framed = frame(schema_id, data)
    assert framed == SchemaId("AVRO", schema_id).id_to_bytes() + data
    read_back = unframe(framed)
    assert (read_back.schema_id, read_back.message_indexes, bytes(read_back.payload)) == (schema_id, None, data)


def test_the_payload_is_a_view_not_a_copy() -> None:
    buf = bytearray(frame(5, b"abcdef"))
    framed = unframe(buf)
    buf[HEADER_SIZE] = ord("X")
    assert bytes(framed.payload) == b"Xbcdef"


@pytest.mark.parametrize("data, protobuf, cls, words", [
    (b"", False, errors.TruncatedFrameError, "empty payload"),
    (b"plain text", False, errors.UnknownMagicByteError, "byte 112, not the magic byte 0"),
    (b"\x01" + bytes(16), False, errors.UnknownMagicByteError, "schema-GUID"),
    (b"\x00\x00\x01", False, errors.TruncatedFrameError, "3 bytes, shorter than the 5-byte header"),
    (b"\x00\x00\x00\x00\x07", True, errors.TruncatedFrameError, "ends inside the Protobuf message indexes (the count, byte 5)"),
    (b"\x00\x00\x00\x00\x07\x04\x82\x80", True, errors.TruncatedFrameError, "ends inside the Protobuf message indexes (index 0, byte 8)"),
    (b"\x00\x00\x00\x00\x07\x7e", True, errors.TruncatedFrameError, "says 63 Protobuf message indexes follow, but only 0 bytes do"),
    (b"\x00\x00\x00\x00\x07\x01", True, errors.InvalidMessageIndexesError, "the count -1"),
    (b"\x00\x00\x00\x00\x07\x02\x03", True, errors.InvalidMessageIndexesError, "index 0 -2"),
    (b"\x00\x00\x00\x00\x07\xff\xff\xff\xff\xff\x01", True, errors.InvalidMessageIndexesError, "longer than 5 bytes"),
])
def test_bad_payloads_say_what_was_wrong_and_where(data: bytes, protobuf: bool, cls: type, words: str) -> None:
    with pytest.raises(cls, match=words.replace("(", r"\(").replace(")", r"\)")) as info:
        unframe(data, protobuf=protobuf, topic="orders", partition=3, offset=1234)
    error = info.value
    assert isinstance(error, ValueError) and not error.retriable
    assert (error.topic, error.partition, error.offset) == ("orders", 3, 1234)
    assert "topic 'orders', partition 3, offset 1234" in str(error)
    if len(data) >= HEADER_SIZE and data[0] == 0:
        assert error.schema_id == 7 and "schema id 7" in str(error)


def test_values_that_cannot_be_framed() -> None:
    for bad in (-1, 1 << 32, "7", True):
        with pytest.raises(errors.FramingError, match="schema id"):
            frame_header(bad)  # type: ignore[arg-type]
    for bad_indexes in ([-1], [1 << 31], [0, "1"], []):
        with pytest.raises(errors.InvalidMessageIndexesError, match="message index"):
            frame_header(1, bad_indexes)  # type: ignore[arg-type]


SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "kw.framing",
                     "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]},
                    separators=(",", ":"))


def test_records_of_confluents_avro_serdes_through_a_registry(apicurio_registry: ApicurioRegistry, registry: Any,
                                                            subject: str) -> None:
    import fastavro
    from confluent_kafka.schema_registry import SchemaRegistryClient as CKClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = subject.removesuffix("-value")
    ctx = SerializationContext(topic, MessageField.VALUE)
    confluent = CKClient({"url": apicurio_registry.url, "timeout": 10})
    parsed = fastavro.parse_schema(json.loads(SCHEMA))
    # confluent-kafka writes, kafkawire unframes: the id names the schema, the rest is Avro.
    theirs = AvroSerializer(confluent, SCHEMA)({"id": 1, "item": "tea"}, ctx)
    framed = unframe(theirs, topic=topic)
    assert registry.get_schema(framed.schema_id).schema_str == SCHEMA
    assert fastavro.schemaless_reader(io.BytesIO(bytes(framed.payload)), parsed) == {"id": 1, "item": "tea"}
    # kafkawire frames, confluent-kafka reads (looking the id up in the registry).
    schema_id = registry.register_schema(f"{topic}-value", Schema(SCHEMA))
    body = io.BytesIO()
    fastavro.schemaless_writer(body, parsed, {"id": 2, "item": "milk"})
    ours = frame(schema_id, body.getvalue())
    assert ours[:HEADER_SIZE] == struct.pack(">bI", 0, schema_id)
    assert AvroDeserializer(CKClient({"url": apicurio_registry.url, "timeout": 10}))(ours, ctx) == {"id": 2, "item": "milk"}
    assert ours == AvroSerializer(confluent, SCHEMA)({"id": 2, "item": "milk"}, ctx)  # byte for byte
