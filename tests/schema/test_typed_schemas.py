"""Typed columns from JSON Schema and Protobuf schemas, without Spark or a broker: the Arrow
types derived from the schemas, what cannot be derived and the error saying so, and the two
column decoders against the Python serdes' own reading of the same payloads."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from kafkawire._json_columns import JsonColumnDecoder, JsonDecodeError, JsonSchemaError
from kafkawire._json_columns import arrow_type as json_type
from kafkawire._protobuf_columns import (
    ProtobufColumnDecoder,
    ProtobufDecodeError,
    ProtobufFiles,
    ProtobufSchemaError,
)
from kafkawire._protobuf_columns import arrow_type as protobuf_type
from kafkawire.schema.framing import frame_header
from kafkawire.schema.protobuf import message_indexes

UTC = dt.timezone.utc
H = frame_header(7)

# -- JSON Schema -------------------------------------------------------------------------------

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"$ref": "#/definitions/Customer"},
        "note": {"type": ["string", "null"]},
        "amount": {"type": "number"},
        "paid": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "tier": {"enum": ["FREE", "GOLD"]},
        "lines": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}}, "required": ["sku"]}},
        "maybe": {"oneOf": [{"type": "null"}, {"type": "integer"}]},
    },
    "required": ["id", "customer", "note"],
    "definitions": {"Customer": {"type": "object", "properties": {"name": {"type": "string"}},
                                 "required": ["name"]}},
}


def test_json_schema_to_arrow_types() -> None:
    assert json_type(json.dumps(ORDER)) == pa.struct([
        ("id", pa.int64()), ("customer", pa.struct([("name", pa.string())])), ("note", pa.string()),
        ("amount", pa.float64()), ("paid", pa.bool_()), ("at", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()), ("tier", pa.string()),
        ("lines", pa.list_(pa.field("element", pa.struct([("sku", pa.string()), ("qty", pa.int64())])))),
        ("maybe", pa.int64())])
    assert json_type({"type": "array", "items": {"type": "string"}}) == pa.list_(pa.field("element", pa.string()))
    assert json_type({"$ref": "#/$defs/N", "$defs": {"N": {"type": "integer"}}}) == pa.int64()


@pytest.mark.parametrize("schema, message", [
    ({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}, "#/properties/a: type"),
    ({"type": "object", "additionalProperties": {"type": "string"}}, "an object without 'properties'"),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
     "anyOf of 2 non-null schemas"),
    ({"type": "object", "properties": {"a": {"$ref": "other.json#/X"}}}, "points outside this document"),
    ({"type": "object", "properties": {"a": {"$ref": "#/definitions/missing"}}}, "names nothing"),
    ({"type": "object", "properties": {"next": {"$ref": "#"}}}, "is recursive"),
    ({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}}, "allOf is not read"),
    ({"type": "object", "properties": {"a": {}}}, "allows any value"),
    ({"type": "array", "items": [{"type": "string"}]}, "tuple arrays"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}, "required ['b']"),
])
def test_json_schemas_that_have_no_column_type_say_where_and_why(schema: Any, message: str) -> None:
    with pytest.raises(JsonSchemaError) as info:
        json_type(schema)
    assert message in str(info.value)


def _order(i: int) -> dict[str, Any]:
    return {"id": i, "customer": {"name": f"c{i}-é\n"}, "note": None if i % 3 else f"n{i}", "amount": i / 7,
            "paid": i % 2 == 0, "at": f"2026-03-0{1 + i % 9}T10:1{i % 10}:00.{i:06d}Z",
            "day": f"2025-12-{10 + i % 20}", "tier": ["FREE", "GOLD"][i % 2],
            "lines": [{"sku": f"s{k}", "qty": k} for k in range(i % 3)], "maybe": None if i % 2 else i,
            "ignored": {"deep": [1, 2]}}


def _expected(v: dict[str, Any]) -> dict[str, Any]:
    """A value as the column holds it: lines without qty get null, dates and instants typed,
    properties outside the schema dropped."""
    out = {k: v.get(k) for k in ORDER["properties"]}
    out["at"] = dt.datetime.fromisoformat(v["at"].replace("Z", "+00:00"))
    out["day"] = dt.date.fromisoformat(v["day"])
    out["lines"] = [{"sku": x["sku"], "qty": x.get("qty")} for x in v["lines"]]
    return out


def test_json_columns_match_the_values_written() -> None:
    values = [_order(i) for i in range(50)]
    payloads = [H + json.dumps(v, ensure_ascii=False).encode() for v in values]
    payloads[7] = H + json.dumps(values[7], indent=2).encode()  # pretty-printed: newlines between tokens
    column = pa.array(payloads + [None], pa.binary())
    out = JsonColumnDecoder(json.dumps(ORDER)).decode(column)
    got = out.to_pylist()
    assert got[-1] is None
    assert [{**g, "at": g["at"].astimezone(UTC)} for g in got[:-1]] == [_expected(v) for v in values]
    # A slice of a column (Arrow offsets not starting at 0) reads the same rows.
    assert out.slice(10, 5).to_pylist() == JsonColumnDecoder(ORDER).decode(column.slice(10, 5)).to_pylist()


def test_json_bad_payloads_each_get_their_own_error() -> None:
    good = H + json.dumps(_order(1)).encode()
    cases = {
        1: (b"plain", "magic byte 112, not 0: not Confluent-framed"),
        2: (b"\x00\x00\x01", "3 bytes, fewer than the 5-byte Confluent header"),
        3: (H + b'{"id": "one", "customer": {"name": "x"}, "note": null}', "Column(/id) changed from number to string"),
        4: (H + b'{"id": 1, "note": null}', "required property /customer is missing or null"),
        5: (H + b'{"id": 1, "customer": {}, "note": null}', "required property /customer/name is missing or null"),
        6: (H + b'{"id": 1, "customer": {"name": "x"}, "note": null, "lines": [{"qty": 1}]}',
            "required property /lines/[]/sku"),
        7: (H + b"null", "the value is null, which its schema does not allow"),
        8: (H + b'{"id": 1, "customer": {"name": "x"}, "note": null}}{"id": 2', "not JSON of the schema's types"),
        9: (H + b'{"id": 1, "customer": {"name": "x"}, "note": null, "at": "yesterday"}',
            "not JSON of the schema's types"),
        10: (H + b"", "an empty JSON payload"),
        11: (H + b'{"id": 1, "customer": {"name": "x"}, "note": null}\n{"id": 2, "customer": {"name": "y"}, "note": null}',
             "2 JSON values in one payload, not one"),
        12: (H + b"[1, 2]", "the JSON value is not an object (it starts with '['), which the schema's type is"),
        13: (H + b'{"id": 1, "customer": {"name": "x"}, "note": null', "not JSON of the schema's types"),
    }
    rows = [good] + [cases[i][0] for i in sorted(cases)] + [good, None]
    decoder = JsonColumnDecoder(ORDER)
    values, errors = decoder.decode_permissive(pa.array(rows, pa.binary()))
    got, why = values.to_pylist(), errors.to_pylist()
    assert got[0] is not None and got[0]["id"] == 1 and got[-2] == got[0] and got[-1] is None
    assert why[0] is None and why[-2] is None and why[-1] is None
    for row, (_payload, message) in cases.items():
        assert got[row] is None
        assert message in why[row], (row, why[row])
        assert why[row].startswith(f"JSON payload at row {row}")
    with pytest.raises(JsonDecodeError) as info:
        decoder.decode(pa.array(rows, pa.binary()))
    assert info.value.row == 1 and info.value.schema_id is None
    with pytest.raises(JsonDecodeError) as info:
        decoder.decode(pa.array([good, cases[3][0]], pa.binary()))
    assert info.value.row == 1 and info.value.schema_id == 7


def test_json_values_that_are_not_objects() -> None:
    """A schema whose top level is a string or an array (keys often are): each payload is
    wrapped to be read, and rows stay aligned when some are bad."""
    strings = JsonColumnDecoder({"type": "string"})
    values, errors = strings.decode_permissive(pa.array(
        [H + b'"a\\nb"', H + b"null", H + b"5", None, H + b'"\xc3\xa9"'], pa.binary()))
    assert values.to_pylist() == ["a\nb", None, None, None, "é"]
    assert "the value is null" in errors.to_pylist()[1] and "not JSON of the schema's types" in errors.to_pylist()[2]
    lists = JsonColumnDecoder({"type": ["array", "null"], "items": {"type": "integer"}})
    values, errors = lists.decode_permissive(pa.array([H + b"[1,2]", H + b"null", H + b"[]", H + b"[1,"], pa.binary()))
    assert values.to_pylist() == [[1, 2], None, [], None] and errors.to_pylist()[:3] == [None] * 3


def test_json_unknown_schema_ids_fail_their_rows_only() -> None:
    asked: list[int] = []

    def known(schema_id: int) -> bool:
        asked.append(schema_id)
        return schema_id == 7

    other = frame_header(99) + json.dumps(_order(2)).encode()
    values, errors = JsonColumnDecoder(ORDER, known).decode_permissive(
        pa.array([H + json.dumps(_order(1)).encode(), other, other], pa.binary()))
    assert sorted(asked) == [7, 99]  # once per id per batch
    assert values.to_pylist()[0]["id"] == 1 and values.to_pylist()[1:] == [None, None]
    assert "unknown schema id 99" in errors.to_pylist()[1]


def test_json_random_damage_never_crashes_and_keeps_rows_aligned() -> None:
    rng = random.Random(5)
    decoder = JsonColumnDecoder(ORDER)
    for _ in range(40):
        payloads, intact = [], []
        for i in range(20):
            p = bytearray(H + json.dumps(_order(i)).encode())
            damaged = rng.random() < 0.3
            if damaged:
                for _k in range(rng.randint(1, 3)):
                    p[rng.randrange(5, len(p))] = rng.choice(b'{}[]",:\n0a\\ ')
            payloads.append(bytes(p))
            intact.append(not damaged)
        values, errors = decoder.decode_permissive(pa.array(payloads, pa.binary()))
        assert len(values) == 20
        for i, (v, e) in enumerate(zip(values.to_pylist(), errors.to_pylist())):
            assert (v is None) == (e is not None)
            if intact[i]:
                assert v is not None and v["id"] == i


# -- Protobuf ----------------------------------------------------------------------------------

F = descriptor_pb2.FieldDescriptorProto


def _files() -> tuple[dict[str, type], descriptor_pb2.FileDescriptorProto, descriptor_pb2.FileDescriptorProto]:
    """kw/typed/common.proto (Color, Point) and kw/typed/all.proto importing it and
    Google's Timestamp: Event with every scalar type, nested, repeated (packed and not),
    a map, a oneof, a proto3 optional; then Tree, which contains itself."""
    common = descriptor_pb2.FileDescriptorProto(name="kw/typed/common.proto", package="kw.typed", syntax="proto3")
    common.enum_type.add(name="Color").value.extend([
        descriptor_pb2.EnumValueDescriptorProto(name="RED", number=0),
        descriptor_pb2.EnumValueDescriptorProto(name="GREEN", number=1)])
    point = common.message_type.add(name="Point")
    point.field.add(name="x", number=1, type=F.TYPE_SINT32, label=F.LABEL_OPTIONAL)
    point.field.add(name="y", number=2, type=F.TYPE_SINT64, label=F.LABEL_OPTIONAL)
    main = descriptor_pb2.FileDescriptorProto(name="kw/typed/all.proto", package="kw.typed", syntax="proto3",
                                              dependency=["kw/typed/common.proto", "google/protobuf/timestamp.proto"])
    e = main.message_type.add(name="Event")
    scalars = [("d", F.TYPE_DOUBLE), ("f", F.TYPE_FLOAT), ("i64", F.TYPE_INT64), ("u64", F.TYPE_UINT64),
               ("i32", F.TYPE_INT32), ("fx64", F.TYPE_FIXED64), ("fx32", F.TYPE_FIXED32), ("b", F.TYPE_BOOL),
               ("s", F.TYPE_STRING), ("raw", F.TYPE_BYTES), ("u32", F.TYPE_UINT32), ("sf32", F.TYPE_SFIXED32),
               ("sf64", F.TYPE_SFIXED64), ("s32", F.TYPE_SINT32), ("s64", F.TYPE_SINT64)]
    for n, (name, t) in enumerate(scalars, 1):
        e.field.add(name=name, number=n, type=t, label=F.LABEL_OPTIONAL)
    e.field.add(name="color", number=16, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL, type_name=".kw.typed.Color")
    e.field.add(name="at", number=17, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                type_name=".google.protobuf.Timestamp")
    e.field.add(name="where", number=18, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".kw.typed.Point")
    e.field.add(name="path", number=19, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".kw.typed.Point")
    e.field.add(name="nums", number=20, type=F.TYPE_INT32, label=F.LABEL_REPEATED)  # packed (proto3)
    e.field.add(name="colors", number=21, type=F.TYPE_ENUM, label=F.LABEL_REPEATED, type_name=".kw.typed.Color")
    entry = e.nested_type.add(name="LabelsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".kw.typed.Point")
    e.field.add(name="labels", number=22, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                type_name=".kw.typed.Event.LabelsEntry")
    e.oneof_decl.add(name="kind")
    e.field.add(name="text", number=23, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    e.field.add(name="code", number=24, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, oneof_index=0)
    e.oneof_decl.add(name="_maybe")
    e.field.add(name="maybe", number=25, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL, oneof_index=1,
                proto3_optional=True)
    tree = main.message_type.add(name="Tree")
    tree.field.add(name="kids", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED, type_name=".kw.typed.Tree")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(common.SerializeToString())
    pool.AddSerializedFile(main.SerializeToString())
    classes = {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n))
               for n in ("kw.typed.Event", "kw.typed.Point", "kw.typed.Tree")}
    return classes, common, main


CLASSES, COMMON, MAIN = _files()
Event, Point = CLASSES["kw.typed.Event"], CLASSES["kw.typed.Point"]


def _b64(proto: Any) -> str:
    import base64

    return base64.standard_b64encode(proto.SerializeToString()).decode()


FILES = ProtobufFiles(_b64(MAIN), [_b64(COMMON)])


def test_protobuf_message_to_arrow_type() -> None:
    point = pa.struct([("x", pa.int32()), ("y", pa.int64())])
    assert protobuf_type(FILES.message("kw.typed.Event")) == pa.struct([
        ("d", pa.float64()), ("f", pa.float32()), ("i64", pa.int64()), ("u64", pa.decimal128(20, 0)),
        ("i32", pa.int32()), ("fx64", pa.decimal128(20, 0)), ("fx32", pa.int64()), ("b", pa.bool_()),
        ("s", pa.string()), ("raw", pa.binary()), ("u32", pa.int64()), ("sf32", pa.int32()),
        ("sf64", pa.int64()), ("s32", pa.int32()), ("s64", pa.int64()), ("color", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")), ("where", point), ("path", pa.list_(pa.field("element", point))),
        ("nums", pa.list_(pa.field("element", pa.int32()))), ("colors", pa.list_(pa.field("element", pa.string()))),
        ("labels", pa.map_(pa.string(), point)), ("text", pa.string()), ("code", pa.int32()), ("maybe", pa.int64())])
    assert FILES.messages() == ["kw.typed.Event", "kw.typed.Tree"]
    assert FILES.message("Event").full_name == "kw.typed.Event"
    assert FILES.by_indexes((1,)).full_name == "kw.typed.Tree" and FILES.by_indexes((2,)) is None


def test_protobuf_schemas_that_cannot_be_read_say_why() -> None:
    with pytest.raises(ProtobufSchemaError, match="contains itself"):
        protobuf_type(FILES.message("kw.typed.Tree"))
    with pytest.raises(ProtobufSchemaError, match="has 2 top-level messages"):
        FILES.message()
    with pytest.raises(ProtobufSchemaError, match="has no message 'Nope'"):
        FILES.message("Nope")
    with pytest.raises(ProtobufSchemaError, match=r"\.proto source text is not read"):
        ProtobufFiles('syntax = "proto3"; message M { int32 a = 1; }')
    with pytest.raises(ProtobufSchemaError, match="imports kw/typed/common.proto, which is neither"):
        ProtobufFiles(_b64(MAIN))


def _event(i: int) -> Any:
    e = Event(d=i / 3, f=1.5 * i, i64=-(1 << 40) * i, u64=(1 << 64) - 1 - i, i32=-i, fx64=(1 << 63) + i,
              fx32=(1 << 32) - 1 - i, b=i % 2 == 1, s=f"s{i}-ü", raw=bytes([i, 0, 255]), u32=(1 << 32) - 1 - i,
              sf32=-i, sf64=-(1 << 50), s32=-(1 << 30) + i, s64=-(1 << 62) - i, color=i % 2,
              nums=list(range(-i, i)), colors=[0, 1][: i % 3])
    if i % 3:
        e.at.FromDatetime(dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i, microseconds=i))
        e.where.x, e.where.y = i, -i
    for k in range(i % 3):
        e.path.add(x=k, y=k * 2)
        e.labels[f"l{k}"].x = k
    if i % 2:
        e.text = f"t{i}"
    elif i % 4 == 0:
        e.code = i
    if i % 5 == 0:
        e.maybe = 0
    return e


def _enum(f: Any, number: int) -> str:
    """An enum value's name; a number the schema does not know (an open enum keeps it) as
    its decimal text."""
    value = f.enum_type.values_by_number.get(number)
    return str(number) if value is None else value.name


def as_row(m: Any) -> dict[str, Any]:
    """A message as its column holds it, read from the Protobuf runtime's own parse: a
    field with presence that is not set is null, one without reads as the runtime's value."""
    out: dict[str, Any] = {}
    for f in m.DESCRIPTOR.fields:
        v = getattr(m, f.name)
        if f.is_repeated:
            if f.message_type is not None and f.message_type.GetOptions().map_entry:
                out[f.name] = sorted((k, as_row(x)) for k, x in v.items())
            elif f.message_type is not None:
                out[f.name] = [as_row(x) for x in v]
            elif f.enum_type is not None:
                out[f.name] = [_enum(f, x) for x in v]
            else:
                out[f.name] = list(v)
        elif f.has_presence and not m.HasField(f.name):
            out[f.name] = None
        elif f.message_type is not None and f.message_type.full_name == "google.protobuf.Timestamp":
            out[f.name] = v.ToDatetime(tzinfo=UTC)
        elif f.message_type is not None:
            out[f.name] = as_row(v)
        elif f.enum_type is not None:
            out[f.name] = _enum(f, v)
        elif f.type in (f.TYPE_UINT64, f.TYPE_FIXED64):
            out[f.name] = decimal.Decimal(v)
        else:
            out[f.name] = v
    return out


def _sorted_maps(row: dict[str, Any]) -> dict[str, Any]:
    return dict(row, labels=sorted(row["labels"]))


def test_protobuf_columns_match_the_runtimes_parse() -> None:
    events = [_event(i) for i in range(30)]
    header = frame_header(7, message_indexes(Event.DESCRIPTOR))
    column = pa.array([header + e.SerializeToString() for e in events] + [None], pa.binary())
    decoder = ProtobufColumnDecoder(FILES, FILES.message("kw.typed.Event"))
    got = decoder.decode(column).to_pylist()
    assert got[-1] is None
    want = [as_row(Event.FromString(e.SerializeToString())) for e in events]
    assert [_sorted_maps(g) for g in got[:-1]] == want
    assert got[5]["maybe"] == 0 and got[1]["maybe"] is None  # proto3 optional: set to 0 vs unset
    assert got[1]["text"] == "t1" and got[1]["code"] is None and got[4]["code"] == 4 and got[2]["text"] is None


def test_protobuf_unpacked_repeated_and_later_oneof_member_win() -> None:
    header = frame_header(7, [0])
    # nums 1 and 2 unpacked (wire type 0 each), then text "a", then code 5: code wins the oneof
    payload = b"\xa0\x01\x01\xa0\x01\x02" + b"\xba\x01\x01a" + b"\xc0\x01\x05"
    row = ProtobufColumnDecoder(FILES, FILES.message("kw.typed.Event")).decode(
        pa.array([header + payload], pa.binary())).to_pylist()[0]
    assert row["nums"] == [1, 2] and row["text"] is None and row["code"] == 5
    assert as_row(Event.FromString(payload))["code"] == 5 and Event.FromString(payload).nums == [1, 2]


def test_protobuf_bad_payloads_are_named_and_checked_before_use() -> None:
    event = frame_header(7, [0])
    good = event + _event(1).SerializeToString()
    cases = {
        1: (b"nope", "magic byte 110, not 0"),
        2: (b"\x00\x00", "2 bytes, fewer than the 5-byte Confluent header"),
        3: (frame_header(7, [1]) + b"", "message indexes [1] name kw.typed.Tree, not the kw.typed.Event"),
        4: (frame_header(7, [5]) + b"", "message indexes [5] name no message of schema id 7"),
        5: (event + b"\x4a\x7f" + b"ab", "a length of 127 bytes past the end of the payload (2 left)"),
        6: (event + b"\x09\x01\x02", "truncated"),
        7: (event + b"\x18" + b"\xff" * 11, "a varint longer than 10 bytes"),
        8: (event + b"\x0a\x01", "a length of 1 bytes past the end of the payload (0 left)"),
        9: (event + b"\x4a\x02\xc3\x28", "field s (number 9) is not UTF-8"),
        10: (event + b"\xf7\x01", "wire type 7, which is not a Protobuf wire type"),
        11: (event + b"\x00\x01", "field number 0"),
        12: (event + b"\x92\x01\x02\x08\xff" + b"\x01", "truncated"),  # a varint running past its Point
        13: (b"\x00\x00\x00\x00\x07\x80", "ends inside the Protobuf message indexes"),
        14: (b"\x00\x00\x00\x00\x07\x7f", "has the count -64 in its Protobuf message indexes"),
    }
    rows = [good] + [cases[i][0] for i in sorted(cases)] + [good]
    decoder = ProtobufColumnDecoder(FILES, FILES.message("kw.typed.Event"))
    values, errors = decoder.decode_permissive(pa.array(rows, pa.binary()))
    got, why = values.to_pylist(), errors.to_pylist()
    assert got[0] == got[-1] and got[0] is not None and why[0] is None and why[-1] is None
    for row, (_p, message) in cases.items():
        assert got[row] is None and message in why[row], (row, why[row])
        assert why[row].startswith(f"Protobuf payload at row {row}")
    with pytest.raises(ProtobufDecodeError) as info:
        decoder.decode(pa.array([good, cases[5][0]], pa.binary()))
    assert info.value.row == 1 and info.value.schema_id == 7


def test_protobuf_unknown_fields_are_skipped_and_writer_ids_checked() -> None:
    payload = _event(2).SerializeToString()
    extra = b"\xf8\x06\x01" + b"\xfa\x06\x03abc" + b"\xfd\x06\x00\x00\x00\x00" + b"\xf9\x06" + b"\x00" * 8
    asked: list[int] = []

    def writer(schema_id: int) -> ProtobufFiles | None:
        asked.append(schema_id)
        return FILES if schema_id == 7 else None

    decoder = ProtobufColumnDecoder(FILES, FILES.message("kw.typed.Event"), writer)
    values, errors = decoder.decode_permissive(pa.array(
        [frame_header(7, [0]) + payload + extra, frame_header(8, [0]) + payload, frame_header(7, [0]) + payload],
        pa.binary()))
    got = values.to_pylist()
    assert _sorted_maps(got[0]) == as_row(_event(2)) == _sorted_maps(got[2])
    assert got[1] is None and "unknown schema id 8" in errors.to_pylist()[1]
    assert asked == [7, 8]  # each (id, indexes) once


def test_protobuf_random_damage_reads_as_the_runtime_reads_it() -> None:
    """Differential against the Protobuf runtime (upb) on damaged messages: a payload the
    runtime refuses is refused, one it parses gives the runtime's values, and nothing
    crashes.  (The two may differ where the runtime is laxer or stricter on purpose; on
    these inputs they agree.)"""
    rng = random.Random(9)
    decoder = ProtobufColumnDecoder(FILES, FILES.message("kw.typed.Event"))
    header = frame_header(7, [0])
    outcomes = {"both read": 0, "both refused": 0}
    for _ in range(1500):
        p = bytearray(_event(rng.randrange(12)).SerializeToString())
        for _k in range(rng.randint(1, 3)):
            if p and rng.random() < 0.7:
                p[rng.randrange(len(p))] = rng.randrange(256)
            elif p:
                del p[rng.randrange(len(p)):]
        values, errors = decoder.decode_permissive(pa.array([header + bytes(p)], pa.binary()))
        mine = values.to_pylist()[0]
        assert (mine is None) == (errors.to_pylist()[0] is not None)
        try:
            theirs = as_row(Event.FromString(bytes(p)))
        except Exception:
            theirs = None
        assert (mine is None) == (theirs is None), (bytes(p), errors.to_pylist()[0])
        if mine is not None:
            assert _sorted_maps(mine) == theirs, bytes(p)
        outcomes["both read" if mine is not None else "both refused"] += 1
    assert min(outcomes.values()) > 100  # the damage exercised both sides
