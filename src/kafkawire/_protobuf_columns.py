"""Protobuf payloads into Arrow columns: Confluent-framed messages of one Kafka column
decoded from the wire format and handed to pyarrow as one column per batch.

The schema is the registry's: a .proto file as its serialized ``FileDescriptorProto``
(base64, as kafkawire's and confluent-kafka's Python serializers register it), with the
files it imports.  :class:`ProtobufFiles` loads them into a descriptor pool of its own;
:func:`arrow_type` maps a message to Arrow types as spark-protobuf maps them to Spark types:

* message -> struct of its fields in declaration order (``oneof`` members are ordinary
  nullable fields, at most one set); ``repeated`` -> list; ``map<K, V>`` -> map;
* int32/sint32/sfixed32 -> int32, int64/sint64/sfixed64 -> int64; uint32/fixed32 -> int64 and
  uint64/fixed64 -> decimal(20, 0) (their whole range, where spark-protobuf wraps them);
  float, double, bool, string, bytes -> float32, float64, bool, string, binary;
* enum -> string (the value's name; a number the schema does not know reads as its decimal
  text, as an open enum keeps it);
* ``google.protobuf.Timestamp`` -> timestamp(us, UTC).

A field with presence (a message, a proto3 ``optional``, a ``oneof`` member, any proto2
singular field) is null when the payload lacks it; a proto3 field without presence reads
as its default (0, "", false, the first enum value, an empty list or map), as the Protobuf
runtimes hand it out.  A message that contains itself (recursion) is rejected: a column type
is finite.

:class:`ProtobufColumnDecoder` parses each payload (after the Confluent header and message
indexes) with the Protobuf runtime's compiled parser (upb), through a message class built
once per schema from its descriptor, so what it accepts and refuses, and the values it
reads, are the runtime's; it then reads the parsed messages one field at a time across the
batch into Arrow arrays.  A payload the runtime refuses is walked again by a pure-Python
reader of the wire format, which says what is wrong (a length past the end, a varint too
long, a string that is not UTF-8 ...); that reader also skips unknown fields and fields
whose wire type is not their type's, as the runtime does.
No I/O.
"""

from __future__ import annotations

import base64
import decimal
import struct
from itertools import accumulate, chain
from operator import attrgetter, itemgetter, methodcaller
from typing import Any, Callable

from kafkawire import errors

__all__ = ["ProtobufColumnDecoder", "ProtobufDecodeError", "ProtobufFiles", "ProtobufSchemaError",
           "arrow_type"]

MAX_DEPTH = 100
SHORT_HEADER = "{} bytes, fewer than the 5-byte Confluent header"
BAD_MAGIC = "magic byte {}, not 0: not Confluent-framed"
TRUNCATED = "truncated: a value runs past the end of the payload"


class ProtobufSchemaError(errors.CodecError):
    """A Protobuf schema this decoder cannot read into columns, saying where and why."""


class ProtobufDecodeError(errors.CodecError):
    """A payload that cannot be decoded: ``row`` in the column, ``schema_id`` from its
    header (None when the header itself is wrong), ``reason`` what was wrong."""

    def __init__(self, row: int, schema_id: int | None, reason: str):
        self.row, self.schema_id, self.reason = row, schema_id, reason
        where = f"row {row}" if schema_id is None else f"row {row} (schema id {schema_id})"
        super().__init__(f"Protobuf payload at {where}: {reason}")


class _Bad(Exception):
    pass


# -- schemas --------------------------------------------------------------------------------

def file_proto(text: str, name: str = "schema") -> Any:
    """A FileDescriptorProto from the registry's text for one file (base64)."""
    from google.protobuf import descriptor_pb2

    try:
        raw = base64.b64decode(text.strip(), validate=True)
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except Exception:
        raise ProtobufSchemaError(
            f"{name} is not a serialized FileDescriptorProto in base64 (what kafkawire's and confluent-kafka's "
            f"Python serializers register); .proto source text is not read into columns yet: "
            f"register the schema with kafkawire.schema.protobuf.ProtobufSerializer, or give "
            f"kafkawire.schema.protobuf.schema_of_file(YourMessage.DESCRIPTOR.file)") from None
    if not proto.name:
        raise ProtobufSchemaError(f"{name} has no file name: not a FileDescriptorProto")
    return proto


class ProtobufFiles:
    """A main .proto file and the files it imports, in a descriptor pool of their own.
    ``main`` and each of ``imports`` are base64 FileDescriptorProtos; imports the
    Protobuf runtime ships (Google's well-known types) need not be given."""

    def __init__(self, main: str, imports: list[str] = ()):
        from google.protobuf import descriptor_pool

        self.texts = (main, tuple(imports))
        protos = [file_proto(t, f"import {i}") for i, t in enumerate(imports)]
        self.main = file_proto(main, "the schema")
        pool = descriptor_pool.DescriptorPool()
        given = {p.name: p for p in protos}
        added: set[str] = set()
        default = descriptor_pool.Default()

        def add(name: str, chain: tuple) -> None:
            if name in added:
                return
            if name in chain:
                raise ProtobufSchemaError(f"the imports of {name} form a cycle")
            proto = self.main if name == self.main.name else given.get(name)
            if proto is None:
                try:
                    from google.protobuf import descriptor_pb2

                    found = default.FindFileByName(name)
                    proto = descriptor_pb2.FileDescriptorProto.FromString(found.serialized_pb)
                except KeyError:
                    _load_well_known(name)
                    try:
                        found = default.FindFileByName(name)
                    except KeyError:
                        raise ProtobufSchemaError(
                            f"the schema imports {name}, which is neither among its references nor a file "
                            f"the Protobuf runtime ships") from None
                    proto = descriptor_pb2.FileDescriptorProto.FromString(found.serialized_pb)
            for dep in proto.dependency:
                add(dep, chain + (name,))
            try:
                pool.AddSerializedFile(proto.SerializeToString())
            except Exception as exc:
                raise ProtobufSchemaError(f"the Protobuf file {name} does not load: {exc}") from None
            added.add(name)

        add(self.main.name, ())
        self.pool = pool
        self.file = pool.FindFileByName(self.main.name)

    def messages(self) -> list[str]:
        """Every message's full name, top-level and nested, in the file's order."""
        out: list[str] = []

        def walk(d: Any) -> None:
            out.append(d.full_name)
            for n in d.nested_types:
                if not n.GetOptions().map_entry:
                    walk(n)

        for d in self.file.message_types_by_name.values():
            walk(d)
        return out

    def message(self, name: str | None = None) -> Any:
        """The message named ``name`` (full, or short when unambiguous), or the file's only
        top-level message."""
        top = list(self.file.message_types_by_name.values())
        if name is None:
            if len(top) != 1:
                raise ProtobufSchemaError(
                    f"the schema's file {self.file.name} has {len(top)} top-level messages "
                    f"({', '.join(d.full_name for d in top)}); name the one to read with the option "
                    f"'<column>.protobuf.message'")
            return top[0]
        names = self.messages()
        if name in names:
            return self.pool.FindMessageTypeByName(name)
        short = [n for n in names if n.rsplit(".", 1)[-1] == name or n.endswith("." + name)]
        if len(short) == 1:
            return self.pool.FindMessageTypeByName(short[0])
        raise ProtobufSchemaError(f"the schema's file {self.file.name} has no message {name!r}; it has "
                                  f"{', '.join(names)}")

    def by_indexes(self, indexes: tuple) -> Any:
        """The message Confluent's message indexes point at, or None."""
        top = list(self.file.message_types_by_name.values())
        if not indexes or indexes[0] >= len(top):
            return None
        d = top[indexes[0]]
        for i in indexes[1:]:
            nested = list(d.nested_types)
            if i >= len(nested):
                return None
            d = nested[i]
        return d


def _load_well_known(name: str) -> None:
    """Import the generated module of one of Google's well-known files, which puts it in
    the default pool."""
    import importlib

    if name.startswith("google/protobuf/") and name.endswith(".proto"):
        try:
            importlib.import_module("google.protobuf." + name[len("google/protobuf/"):-6] + "_pb2")
        except ImportError:
            pass


# Field types (FieldDescriptor.TYPE_*) and their wire types.
T_DOUBLE, T_FLOAT, T_INT64, T_UINT64, T_INT32, T_FIXED64, T_FIXED32, T_BOOL, T_STRING, T_GROUP, \
    T_MESSAGE, T_BYTES, T_UINT32, T_ENUM, T_SFIXED32, T_SFIXED64, T_SINT32, T_SINT64 = range(1, 19)
_WIRE = {T_DOUBLE: 1, T_FLOAT: 5, T_INT64: 0, T_UINT64: 0, T_INT32: 0, T_FIXED64: 1, T_FIXED32: 5, T_BOOL: 0,
         T_STRING: 2, T_MESSAGE: 2, T_BYTES: 2, T_UINT32: 0, T_ENUM: 0, T_SFIXED32: 5, T_SFIXED64: 1,
         T_SINT32: 0, T_SINT64: 0}
_PACKABLE = {t for t, w in _WIRE.items() if w != 2}
TIMESTAMP = "google.protobuf.Timestamp"


def _scalar_arrow(t: int) -> Any:
    import pyarrow as pa

    return {T_DOUBLE: pa.float64(), T_FLOAT: pa.float32(), T_INT64: pa.int64(), T_SINT64: pa.int64(),
            T_SFIXED64: pa.int64(), T_INT32: pa.int32(), T_SINT32: pa.int32(), T_SFIXED32: pa.int32(),
            T_UINT32: pa.int64(), T_FIXED32: pa.int64(), T_UINT64: pa.decimal128(20, 0),
            T_FIXED64: pa.decimal128(20, 0), T_BOOL: pa.bool_(), T_STRING: pa.string(), T_BYTES: pa.binary(),
            T_ENUM: pa.string()}[t]


def _is_map(field: Any) -> bool:
    return (field.is_repeated and field.type == T_MESSAGE
            and field.message_type.GetOptions().map_entry)


def _value_arrow(field: Any, stack: tuple) -> Any:
    import pyarrow as pa

    if field.type == T_GROUP:
        raise ProtobufSchemaError(f"field {field.full_name} is a proto2 group, which is not read into columns")
    if field.type == T_MESSAGE:
        if field.message_type.full_name == TIMESTAMP:
            return pa.timestamp("us", tz="UTC")
        return _message_arrow(field.message_type, stack)
    return _scalar_arrow(field.type)


def _message_arrow(d: Any, stack: tuple = ()) -> Any:
    import pyarrow as pa

    if d.full_name in stack:
        raise ProtobufSchemaError(
            f"message {d.full_name} contains itself ({' -> '.join(stack + (d.full_name,))}); a recursive "
            f"message has no column type")
    stack = stack + (d.full_name,)
    fields = []
    for f in d.fields:
        if _is_map(f):
            entry = f.message_type
            t = pa.map_(_value_arrow(entry.fields_by_name["key"], stack),
                        _value_arrow(entry.fields_by_name["value"], stack))
        elif f.is_repeated:
            t = pa.list_(pa.field("element", _value_arrow(f, stack)))
        else:
            t = _value_arrow(f, stack)
        fields.append(pa.field(f.name, t))
    return pa.struct(fields)


def arrow_type(message: Any) -> Any:
    """The Arrow type a column of ``message`` (a Descriptor) decodes into."""
    return _message_arrow(message)


# -- decoding ---------------------------------------------------------------------------------

def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    for _ in range(10):
        if pos >= end:
            raise _Bad(TRUNCATED)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
    raise _Bad("a varint longer than 10 bytes")


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class _Plan:
    """How to read one message: by field number, (name, type, repeated, map, sub-plan or
    enum names, oneof index, default)."""

    def __init__(self, d: Any, plans: dict):
        plans[d.full_name] = self
        self.name = d.full_name
        self.order = [f.name for f in d.fields]
        self.fields: dict[int, tuple] = {}
        self.defaults: dict[str, Any] = {}
        self.oneofs: dict[int, list[str]] = {}
        self.timestamp = d.full_name == TIMESTAMP
        for f in d.fields:
            sub: Any = None
            if f.type == T_MESSAGE:
                sub = plans.get(f.message_type.full_name) or _Plan(f.message_type, plans)
            elif f.type == T_ENUM:
                sub = {v.number: v.name for v in f.enum_type.values}
            is_map = _is_map(f)
            repeated = f.is_repeated
            oneof = f.containing_oneof.index if f.containing_oneof is not None and not getattr(
                f.containing_oneof, "is_synthetic", False) else None
            if oneof is not None:
                self.oneofs.setdefault(oneof, []).append(f.name)
            self.fields[f.number] = (f.name, f.type, repeated, is_map, sub, oneof)
            if is_map:
                self.defaults[f.name] = []
            elif repeated:
                self.defaults[f.name] = []
            elif f.has_presence:
                self.defaults[f.name] = None
            elif f.type == T_ENUM:
                self.defaults[f.name] = f.enum_type.values[0].name
            elif f.type == T_UINT64 or f.type == T_FIXED64:
                self.defaults[f.name] = decimal.Decimal(0)
            else:
                self.defaults[f.name] = f.default_value


def _scalar(t: int, sub: Any, wire: int, buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    if wire == 0:
        v, pos = _varint(buf, pos, end)
        if t in (T_INT64,):
            return _signed(v, 64), pos
        if t == T_INT32:
            return _signed(v, 32), pos
        if t == T_UINT32:
            return v & 0xFFFFFFFF, pos
        if t == T_UINT64:
            return decimal.Decimal(v), pos
        if t == T_SINT32 or t == T_SINT64:
            bits = 32 if t == T_SINT32 else 64
            v &= (1 << bits) - 1
            return (v >> 1) ^ -(v & 1), pos
        if t == T_BOOL:
            return v != 0, pos
        n = _signed(v, 32)
        return sub.get(n, str(n)), pos  # T_ENUM
    if wire == 5:
        if end - pos < 4:
            raise _Bad(TRUNCATED)
        fmt = {T_FLOAT: "<f", T_FIXED32: "<I", T_SFIXED32: "<i"}[t]
        return struct.unpack_from(fmt, buf, pos)[0], pos + 4
    if end - pos < 8:
        raise _Bad(TRUNCATED)
    fmt = {T_DOUBLE: "<d", T_FIXED64: "<Q", T_SFIXED64: "<q"}[t]
    v = struct.unpack_from(fmt, buf, pos)[0]
    return (decimal.Decimal(v) if t == T_FIXED64 else v), pos + 8


def _skip(wire: int, buf: bytes, pos: int, end: int, number: int, depth: int) -> int:
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 1 or wire == 5:
        size = 8 if wire == 1 else 4
        if end - pos < size:
            raise _Bad(TRUNCATED)
        return pos + size
    if wire == 2:
        n, pos = _varint(buf, pos, end)
        if n > end - pos:
            raise _Bad(f"a length of {n} bytes past the end of the payload ({end - pos} left)")
        return pos + n
    if wire == 3:  # a group: skip fields up to its end tag
        if depth > MAX_DEPTH:
            raise _Bad(f"nested deeper than {MAX_DEPTH} messages")
        while True:
            key, pos = _varint(buf, pos, end)
            if key & 7 == 4:
                if key >> 3 != number:
                    raise _Bad(f"a group of field {number} ends with the tag of field {key >> 3}")
                return pos
            pos = _skip(key & 7, buf, pos, end, key >> 3, depth + 1)
    raise _Bad(f"wire type {wire}, which is not a Protobuf wire type" if wire > 5
               else "a group end without its start")


def _message(plan: _Plan, buf: bytes, pos: int, end: int, depth: int, out: dict | None = None) -> Any:
    if depth > MAX_DEPTH:
        raise _Bad(f"nested deeper than {MAX_DEPTH} messages")
    if out is None:
        out = {k: (list(v) if isinstance(v, list) else v) for k, v in plan.defaults.items()}
    fields = plan.fields
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _Bad("field number 0, which no field has")
        spec = fields.get(number)
        if spec is None:
            pos = _skip(wire, buf, pos, end, number, depth)
            continue
        name, t, repeated, is_map, sub, oneof = spec
        if wire != _WIRE.get(t) and not (repeated and wire == 2 and t in _PACKABLE):
            # As the Protobuf runtimes do: a field whose wire type is not its type's is kept
            # aside as unknown, not an error (its bytes are still checked while skipped).
            pos = _skip(wire, buf, pos, end, number, depth)
            continue
        if t == T_MESSAGE or t == T_STRING or t == T_BYTES:
            n, pos = _varint(buf, pos, end)
            if n > end - pos:
                raise _Bad(f"a length of {n} bytes past the end of the payload ({end - pos} left)")
            stop = pos + n
            if t == T_MESSAGE:
                if is_map:
                    entry = _message(sub, buf, pos, stop, depth + 1)
                    value: Any = (entry["key"], entry["value"])
                elif sub.timestamp:
                    ts = _message(sub, buf, pos, stop, depth + 1)
                    value = ts["seconds"] * 1_000_000 + ts["nanos"] // 1000
                    if not -(1 << 63) <= value < (1 << 63):
                        raise _Bad(f"field {name} (number {number}) is a timestamp outside the 64-bit "
                                   f"microsecond range")
                elif not repeated and out.get(name) is not None:
                    _message(sub, buf, pos, stop, depth + 1, out[name])  # a repeated message field merges
                    pos = stop
                    continue
                else:
                    value = _message(sub, buf, pos, stop, depth + 1)
            elif t == T_STRING:
                try:
                    value = buf[pos:stop].decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise _Bad(f"field {name} (number {number}) is not UTF-8: {exc.reason} at byte "
                               f"{pos + exc.start}") from None
            else:
                value = buf[pos:stop]
            pos = stop
            if repeated:
                out[name].append(value)
                continue
        elif repeated and wire == 2 and t in _PACKABLE:
            n, pos = _varint(buf, pos, end)
            if n > end - pos:
                raise _Bad(f"a length of {n} bytes past the end of the payload ({end - pos} left)")
            stop = pos + n
            items = out[name]
            inner = _WIRE[t]
            while pos < stop:
                v, pos = _scalar(t, sub, inner, buf, pos, stop)
                items.append(v)
            continue
        else:
            value, pos = _scalar(t, sub, wire, buf, pos, end)
            if repeated:
                out[name].append(value)
                continue
        if oneof is not None:
            for other in plan.oneofs[oneof]:
                out[other] = None
        out[name] = value
    if pos != end:
        raise _Bad(TRUNCATED)
    return out


class _Names(dict):
    """Enum numbers to names (the first name of an aliased number, as the runtime's
    ``values_by_number``); a number the schema does not know reads as its decimal text (an
    open enum keeps it)."""

    def __missing__(self, number: int) -> str:
        return str(number)


_SECONDS, _NANOS = attrgetter("seconds"), attrgetter("nanos")
_ALL = itemgetter(slice(None))


def _values(f: Any, typ: Any, vals: list) -> Any:
    """The Arrow array of ``vals``, values of field ``f`` as the runtime hands them out
    (a default message where one is not set), of Arrow type ``typ``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = f.type
    if t == T_MESSAGE:
        if f.message_type.full_name == TIMESTAMP:
            # seconds * 10^6 + floor(nanos / 1000), checked: a value past the 64-bit
            # microsecond range raises here and its row is found on the slow path
            nanos = pa.array(list(map(_NANOS, vals)), pa.int64())
            micros = pc.divide(nanos, 1000)  # truncates; floor for a negative remainder
            micros = pc.if_else(pc.less(nanos, pc.multiply(micros, 1000)), pc.subtract(micros, 1), micros)
            seconds = pa.array(list(map(_SECONDS, vals)), pa.int64())
            return pc.add_checked(pc.multiply_checked(seconds, 1_000_000), micros).view(typ)
        return _struct(f.message_type, typ, vals, None)
    if t == T_ENUM:
        return pa.array(list(map(_enum_names(f.enum_type).__getitem__, vals)), pa.string())
    if t == T_UINT64 or t == T_FIXED64:
        return pa.array(vals, pa.uint64()).cast(typ)
    return pa.array(vals, typ)


_ENUMS: dict[Any, _Names] = {}
_CLASSES: dict[Any, type] = {}


def _enum_names(e: Any) -> _Names:
    names = _ENUMS.get(e)
    if names is None:
        names = _ENUMS[e] = _Names({v.number: v.name for v in reversed(e.values)})
    return names


def _message_class(d: Any) -> type:
    cls = _CLASSES.get(d)
    if cls is None:
        from google.protobuf import message_factory

        cls = _CLASSES[d] = message_factory.GetMessageClass(d)
    return cls


def _struct(d: Any, typ: Any, msgs: list, mask: Any) -> Any:
    """The struct array of ``msgs`` (parsed messages of ``d``), null where ``mask`` is set:
    one pass over the batch per field, not one per message."""
    import pyarrow as pa
    import pyarrow.compute as pc

    children = []
    whiches: dict[str, Any] = {}
    for f, field in zip(d.fields, typ):
        get = attrgetter(f.name)
        ft = field.type
        if f.is_repeated:
            conts = list(map(get, msgs))
            if _is_map(f):
                offsets = pa.array([0, *accumulate(map(len, conts))], pa.int32())
                entry = f.message_type
                keys: list = []
                items: list = []
                for c in conts:
                    if c:
                        ks = list(c)
                        keys += ks
                        items += map(c.__getitem__, ks)
                children.append(pa.MapArray.from_arrays(
                    offsets, _values(entry.fields_by_name["key"], ft.key_type, keys),
                    _values(entry.fields_by_name["value"], ft.item_type, items), type=ft))
            else:
                # a slice of a repeated field is one call per row, where iterating it is
                # one per element; a list's length costs next to nothing
                lists = list(map(_ALL, conts))
                offsets = pa.array([0, *accumulate(map(len, lists))], pa.int32())
                flat = list(chain.from_iterable(lists))
                children.append(pa.ListArray.from_arrays(offsets, _values(f, ft.value_type, flat), type=ft))
        elif f.has_presence:
            # every row's value (a default where unset), then the unset ones made null; a
            # oneof's members are told apart by one WhichOneof a row for all of them
            oneof = f.containing_oneof
            if oneof is not None and len(oneof.fields) > 1:
                which = whiches.get(oneof.name)
                if which is None:
                    which = whiches[oneof.name] = pa.array(
                        list(map(methodcaller("WhichOneof", oneof.name), msgs)), pa.string())
                has = pc.fill_null(pc.equal(which, f.name), False)
            else:
                has = pa.array(list(map(methodcaller("HasField", f.name), msgs)), pa.bool_())
            if f.type == T_MESSAGE and f.message_type.full_name != TIMESTAMP:
                children.append(_struct(f.message_type, ft, list(map(get, msgs)), pc.invert(has)))
            else:
                column = _values(f, ft, list(map(get, msgs)))
                children.append(column if has.false_count == 0 else pc.if_else(has, column, pa.scalar(None, ft)))
        else:
            children.append(_values(f, ft, list(map(get, msgs))))
    return pa.StructArray.from_arrays(children, fields=list(typ), mask=mask)


class ProtobufColumnDecoder:
    """Decodes columns of Confluent-framed Protobuf payloads of ``message`` (a Descriptor of
    ``files``) into Arrow arrays.  ``writer_files``: called with a schema id, gives the
    ProtobufFiles the record was written with (to check that its message indexes name
    ``message``), or None for an id that is unknown; None: every record was written with
    ``files``.  One decoder is used by one thread at a time."""

    def __init__(self, files: ProtobufFiles, message: Any,
                 writer_files: Callable[[int], ProtobufFiles | None] | None = None):
        self.files = files
        self.message = message
        self.arrow_type = arrow_type(message)
        self.plan = _Plan(message, {})
        self.cls = _message_class(message)
        self.writer_files = writer_files
        self._names: dict[tuple, str | None] = {}
        # Headers seen, by their first 6 bytes when the sixth is the one-byte message
        # indexes [0] (what nearly every writer sends) and it names this column's message: the
        # schema id.
        self._headers: dict[bytes, int] = {}

    def _named(self, schema_id: int, indexes: tuple) -> str | None:
        """The full name of the message ``indexes`` point at in schema ``schema_id``."""
        key = (schema_id, indexes)
        if key not in self._names:
            files = self.files if self.writer_files is None else self.writer_files(schema_id)
            if files is None:
                raise _Bad(f"unknown schema id {schema_id}: not a Protobuf schema the registry holds")
            d = files.by_indexes(indexes)
            self._names[key] = None if d is None else d.full_name
        return self._names[key]

    def _check_indexes(self, schema_id: int, indexes: tuple) -> _Bad | None:
        try:
            name = self._named(schema_id, indexes)
        except _Bad as exc:
            return exc
        if name is None:
            return _Bad(f"message indexes {list(indexes)} name no message of schema id {schema_id}")
        if name != self.plan.name:
            return _Bad(f"message indexes {list(indexes)} name {name}, not the {self.plan.name} this column reads")
        return None

    def _header(self, data: bytes) -> tuple[int | None, int, _Bad | None]:
        """``(schema id, where the message starts, None or what is wrong)``."""
        from kafkawire.schema.errors import FramingError
        from kafkawire.schema.framing import unframe

        if len(data) > 5 and data[5] == 0:
            head = data[:6]
            seen = self._headers.get(head)
            if seen is not None:
                return seen, 6, None
            if data[0] == 0:
                schema_id = int.from_bytes(data[1:5], "big")
                wrong = self._check_indexes(schema_id, (0,))
                if wrong is None:  # only a good header is kept: an unknown id is asked again
                    self._headers[head] = schema_id
                return schema_id, 6, wrong
        if len(data) and data[0] != 0:
            return None, 0, _Bad(BAD_MAGIC.format(data[0]))
        if len(data) < 5:
            return None, 0, _Bad(SHORT_HEADER.format(len(data)))
        schema_id = int.from_bytes(data[1:5], "big")
        try:
            framed = unframe(data, protobuf=True)
        except FramingError as exc:
            return schema_id, 0, _Bad(str(exc))
        return schema_id, len(data) - len(framed.payload), self._check_indexes(schema_id, framed.message_indexes)

    def _explain(self, data: bytes, start: int, refused: Exception) -> _Bad:
        """Why the runtime refused a message: the pure-Python reader's account of it, or
        the runtime's own words where that reader finds nothing wrong."""
        try:
            _message(self.plan, data, start, len(data), 0)
        except _Bad as exc:
            return exc
        except RecursionError:
            return _Bad(f"nested deeper than {MAX_DEPTH} messages")
        return _Bad(f"the Protobuf runtime refuses it: {refused}")

    def _run(self, payloads: Any) -> tuple[Any, dict, dict]:
        bad: dict[int, str] = {}
        ids: dict[int, int | None] = {}  # of the bad rows
        return self._rows(payloads.to_pylist(), bad, ids), bad, ids

    def _rows(self, rows: list, bad: dict[int, str], ids: dict[int, int | None]) -> Any:
        """The struct array of ``rows`` (payloads), noting the bad ones in ``bad`` and
        ``ids``."""
        import pyarrow as pa

        parse = self.cls.FromString
        seen = self._headers.get
        empty = self.cls()
        msgs: list = []
        missing: list[bool] = []
        for row, data in enumerate(rows):
            if data is None:
                msgs.append(empty)
                missing.append(True)
                continue
            schema_id = seen(data[:6])
            if schema_id is not None:  # the common header, checked before
                start, wrong = 6, None
            else:
                schema_id, start, wrong = self._header(data)
            if wrong is None:
                try:
                    msgs.append(parse(data[start:]))
                    missing.append(False)
                    continue
                except Exception as exc:  # the runtime's DecodeError, or its RuntimeError on nesting
                    wrong = self._explain(data, start, exc)
            ids[row] = schema_id
            bad[row] = str(wrong)
            msgs.append(empty)
            missing.append(True)
        try:
            return _struct(self.message, self.arrow_type, msgs, pa.array(missing, pa.bool_()))
        except (UnicodeDecodeError, OverflowError, pa.ArrowInvalid) as exc:
            first = exc
        # A message the runtime parsed but whose values do not fit their column (a
        # timestamp past the 64-bit microsecond range, a string that is not UTF-8 where the
        # runtime does not check): find which, as the pure-Python reader explains them.
        for i, data in enumerate(rows):
            if missing[i]:
                continue
            try:
                _struct(self.message, self.arrow_type, [msgs[i]], None)
            except (UnicodeDecodeError, OverflowError, pa.ArrowInvalid) as exc:
                schema_id, start, _ok = self._header(data)
                ids[i], bad[i] = schema_id, str(self._explain(data, start, exc))
                msgs[i], missing[i] = empty, True
        try:
            return _struct(self.message, self.arrow_type, msgs, pa.array(missing, pa.bool_()))
        except (UnicodeDecodeError, OverflowError, pa.ArrowInvalid):
            raise ProtobufSchemaError(f"decoded values do not fit {self.arrow_type}: {first}") from None

    def decode(self, payloads: Any) -> Any:
        """The Arrow array of the payloads (null where a payload is null); the first bad
        payload raises ProtobufDecodeError naming its row and schema id (FAILFAST)."""
        out, bad, ids = self._run(payloads)
        if bad:
            row = min(bad)
            raise ProtobufDecodeError(row, ids.get(row), bad[row])
        return out

    def decode_permissive(self, payloads: Any) -> tuple[Any, Any]:
        """``(array, errors)``: a bad payload gives a null row and its reason in ``errors``
        instead of an error (PERMISSIVE)."""
        import pyarrow as pa

        out, bad, ids = self._run(payloads)
        reasons: list = [None] * len(out)
        for row, why in bad.items():
            reasons[row] = str(ProtobufDecodeError(row, ids.get(row), why))
        return out, pa.array(reasons, pa.string())
