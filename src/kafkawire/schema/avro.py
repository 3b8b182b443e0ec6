"""Avro keys and values in Confluent's framing, with a Schema Registry.

:class:`AvroSerializer` turns a dict (or what ``to_dict`` makes one of) into the magic
byte, the schema id and the Avro binary encoding; :class:`AvroDeserializer` reads them
back, into the reader schema when one is given (schema evolution).  Their bytes are
those of confluent-kafka's ``AvroSerializer`` for the same schema and value: both write
the Avro binary encoding with fastavro after the same 5-byte header.

They are the clients' ``key_serializer`` / ``value_serializer`` /
``key_deserializer`` / ``value_deserializer``.  The clients call these with the value
alone, so the topic a subject is named after is given when the serializer is made
(``topic=``) or bound with :meth:`AvroSerializer.for_topic`; called as
``serializer(value, ctx)`` the topic and field come from ``ctx`` (a topic name, a
:class:`~kafkawire.schema._serde.RecordContext`, or confluent-kafka's
``SerializationContext``).  :meth:`AvroDeserializer.deserialize` takes the partition and
offset too, for errors that name the record.

What is asked of the registry is asked once: the schema id per topic (register, look up
or latest), the writer schema per id, the parsed schemas (with their references) and
the writer/reader pair per id.  Each serializer holds a blocking
:class:`~kafkawire.schema.SchemaRegistryClient`; in an asyncio program its registry
calls block the loop once per new schema (bounded by the client's ``timeout_ms``).
"""

from __future__ import annotations

import json
from copy import deepcopy
from io import BytesIO
from typing import Any, Callable

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro._read_common import SchemaResolutionError as _FastavroResolutionError

from kafkawire.errors import ConfigError
from kafkawire.schema._avro_writer import compile_writer
from kafkawire.schema._core import Schema, _as_schema
from kafkawire.schema._serde import (
    KEY,
    VALUE,
    FramedDeserializer,
    FramedSerializer,
    RecordContext,
    SubjectNameStrategy,
    blocking_registry,
    check_latest_version,
    context_of,
    register_or_look_up,
    strategy,
    writer_schema,
)
from kafkawire.schema.errors import (
    PayloadDecodeError,
    SchemaResolutionError,
    SerializationError,
)
from kafkawire.schema.framing import HEADER_SIZE, MAGIC_BYTE, frame_header, unframe

__all__ = ["AvroDeserializer", "AvroSerializer", "parse_avro"]

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        # A primitive schema may be written as its bare name.
        if text.strip() in _PRIMITIVES:
            return text.strip()
        raise


def parse_avro(schema: Schema, registry: Any = None) -> Any:
    """``schema`` parsed by fastavro, its references (fetched from ``registry`` by subject
    and version, theirs first) known by name."""
    named: dict[str, Any] = {}
    if schema.references:
        if registry is None:
            raise ConfigError("a schema with references needs the registry to fetch them")
        _parse_references(schema.references, registry, named, set())
    try:
        return parse_schema(_loads(schema.schema_str), named)
    except Exception as exc:
        raise ConfigError(f"the Avro schema does not parse: {exc} (schema: {schema.schema_str[:200]})") from exc


def _parse_references(refs: Any, registry: Any, named: dict[str, Any], seen: set[Any]) -> None:
    for ref in refs:
        key = (ref.subject, ref.version)
        if key in seen:
            continue
        seen.add(key)
        found = registry.get_version(ref.subject, ref.version).schema
        _parse_references(found.references, registry, named, seen)
        parse_schema(_loads(found.schema_str), named)


def _record_name(parsed: Any) -> str | None:
    if isinstance(parsed, dict) and parsed.get("type") in ("record", "error", "enum", "fixed"):
        return parsed.get("name")
    return None


class AvroSerializer(FramedSerializer):
    """Avro in Confluent's framing: ``serializer(value)`` -> bytes (None stays None).

    ``registry``: a :class:`~kafkawire.schema.SchemaRegistryClient`.  ``schema``: the
    writer schema (a :class:`~kafkawire.schema.Schema`, or Avro schema text); may be
    left out with ``use_latest_version``.  ``topic``: the topic the subject is named
    after (or bind one with :meth:`for_topic`, or pass ``ctx``).  ``is_key``: serialize
    keys (subject ``<topic>-key``).  ``subject_name_strategy``: ``"topic"`` (default),
    ``"record"``, ``"topic-record"`` or a callable ``(topic, field, record_name)``.
    ``auto_register`` (True): register the schema under the subject, else look it up
    (:class:`~kafkawire.schema.errors.SchemaNotFoundError` when it is not there).
    ``use_latest_version``: write with the subject's latest schema instead (needs
    ``auto_register=False``).  ``normalize``: ask the registry to normalize the schema
    when registering or looking it up.  ``to_dict``: ``to_dict(value, ctx)`` makes a dict
    of an object first.
    """

    def __init__(self, registry: Any, schema: Schema | str | None = None, *, topic: str | None = None,
                 is_key: bool = False, subject_name_strategy: str | SubjectNameStrategy = "topic",
                 auto_register: bool = True, use_latest_version: bool = False, normalize: bool = False,
                 to_dict: Callable[[Any, RecordContext], Any] | None = None):
        check_latest_version(use_latest_version, auto_register)
        if schema is None and not use_latest_version:
            raise ConfigError("give the writer schema, or use_latest_version=True (with auto_register=False)")
        self.registry = registry if registry is None else blocking_registry(registry, type(self).__name__)
        self.schema = None if schema is None else _as_schema(schema)
        if self.schema is not None and self.schema.schema_type != "AVRO":
            raise ConfigError(f"AvroSerializer takes an AVRO schema, not {self.schema.schema_type}")
        self.topic = topic
        self.field = KEY if is_key else VALUE
        self.subject_name_strategy = strategy(subject_name_strategy)
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self.normalize = normalize
        self.to_dict = to_dict
        self._parsed: Any = None
        # (topic, field) -> (header bytes, parsed writer schema, schema id, subject, the
        # schema's generated encoder or None)
        self._targets: dict[tuple[str | None, str], tuple[bytes, Any, int, str, Any]] = {}
        self._writers: dict[int, Any] = {}  # id(parsed schema) -> its generated encoder

    def for_topic(self, topic: str) -> Callable[[Any], bytes | None]:
        """This serializer for ``topic``: the one-argument callable the clients' options take."""
        ctx = RecordContext(topic, self.field)
        key = (topic, self.field)
        targets = self._targets

        def serialize(value: Any) -> bytes | None:
            # The per-record path once the schema id is known: no context to build.
            target = targets.get(key)
            if target is None or value is None or self.to_dict is not None:
                return self(value, ctx)
            return self._encode(value, target, ctx)

        return serialize

    def _target(self, ctx: RecordContext) -> tuple[bytes, Any, int, str, Any]:
        if self.schema is not None and self._parsed is None:
            self._parsed = parse_avro(self.schema, self.registry)
        name = _record_name(self._parsed) if self._parsed is not None else None
        if self._parsed is None:  # use_latest_version without a schema: the subject needs no name
            name = None
        subject = self.subject_name_strategy(ctx.topic, ctx.field, name)
        if self.use_latest_version:
            latest = self.registry.get_latest_version(subject)
            schema_id, parsed = latest.schema_id, parse_avro(latest.schema, self.registry)
        else:
            schema_id = register_or_look_up(self.registry, subject, self.schema, ctx,
                                            auto_register=self.auto_register, normalize=self.normalize)
            parsed = self._parsed
        if id(parsed) not in self._writers:
            self._writers[id(parsed)] = compile_writer(parsed)
        target = (frame_header(schema_id), parsed, schema_id, subject, self._writers[id(parsed)])
        self._targets[(ctx.topic, ctx.field)] = target
        return target

    def __call__(self, value: Any, ctx: Any = None) -> bytes | None:
        if value is None:
            return None
        ctx, target = self._context_and_target(ctx)
        if self.to_dict is not None:
            ctx = ctx or RecordContext(self.topic, self.field)
            value = self.to_dict(value, ctx)
        return self._encode(value, target, ctx)

    def _encode(self, value: Any, target: tuple[bytes, Any, int, str, Any], ctx: RecordContext | None) -> bytes:
        write = target[4]
        if write is not None:
            # The generated encoder writes fastavro's bytes or gives up on the value (any
            # exception): fastavro then writes it, or raises the error that names it.
            framed = bytearray(target[0])
            try:
                write(value, framed)
                return bytes(framed)
            except Exception:
                pass
        out = BytesIO()
        out.write(target[0])
        try:
            schemaless_writer(out, target[1], value)
        except Exception as exc:
            raise self._value_error(value, target, ctx or RecordContext(self.topic, self.field), exc) from exc
        return out.getvalue()

    def _value_error(self, value: Any, target: tuple[bytes, Any, int, str, Any], ctx: RecordContext,
                     exc: Exception) -> SerializationError:
        from fastavro.validation import ValidationError, validate

        detail = f"{type(exc).__name__}: {exc}"
        try:
            validate(value, target[1], raise_errors=True)
        except ValidationError as found:
            detail = "; ".join(str(e) for e in found.errors) or detail
        except Exception:
            pass
        return SerializationError(
            f"{ctx.what()} does not fit the Avro schema (id {target[2]}, subject "
            f"{target[3]!r}): {detail}", schema_id=target[2], topic=ctx.topic)


class AvroDeserializer(FramedDeserializer):
    """Avro in Confluent's framing back to Python: ``deserializer(data)`` -> a dict (or
    what ``from_dict`` makes of it; None stays None).

    ``registry``: a :class:`~kafkawire.schema.SchemaRegistryClient`.  ``reader_schema``:
    read every record into this schema (records written with older or newer schemas are
    resolved into it by Avro's rules); without it a record is read as written.
    ``use_latest_version``: the subject's latest schema is the reader schema (needs the
    topic: ``topic=``, :meth:`for_topic`, or ``ctx``).  ``is_key``,
    ``subject_name_strategy``: as for :class:`AvroSerializer`.  ``from_dict``:
    ``from_dict(record, ctx)`` makes an object of each record.  ``return_record_name``:
    a union of records reads as ``(record name, record)``.

    Errors: :class:`~kafkawire.schema.errors.FramingError` (no magic byte, too short),
    :class:`~kafkawire.schema.errors.UnknownSchemaIdError` (40403: an id the registry
    does not know), :class:`~kafkawire.schema.errors.PayloadDecodeError` (the payload
    does not decode with its schema: ends early, union branch or enum symbol out of
    range, bytes left over, not UTF-8), :class:`~kafkawire.schema.errors.SchemaResolutionError`
    (not readable into the reader schema); each names the schema id and the topic,
    partition and offset where known.
    """

    def __init__(self, registry: Any, reader_schema: Schema | str | None = None, *, topic: str | None = None,
                 is_key: bool = False, use_latest_version: bool = False,
                 subject_name_strategy: str | SubjectNameStrategy = "topic",
                 from_dict: Callable[[Any, RecordContext], Any] | None = None,
                 return_record_name: bool = False):
        if use_latest_version and reader_schema is not None:
            raise ConfigError("use_latest_version reads into the subject's latest schema: give it "
                              "or a reader_schema, not both")
        self.registry = registry if registry is None else blocking_registry(registry, type(self).__name__)
        self.reader_schema = None if reader_schema is None else _as_schema(reader_schema)
        self.topic = topic
        self.field = KEY if is_key else VALUE
        self.use_latest_version = use_latest_version
        self.subject_name_strategy = strategy(subject_name_strategy)
        self.from_dict = from_dict
        self.return_record_name = return_record_name
        self._reader: Any = None
        # (schema id, topic) -> (parsed writer, parsed reader or None, top-level plan or None)
        self._pairs: dict[tuple[int, str | None], tuple[Any, Any, Any]] = {}

    def __call__(self, data: Any, ctx: Any = None) -> Any:
        if data is None:
            return None
        if ctx is None:
            topic = self.topic
        else:
            ctx = context_of(ctx, self.topic, self.field)
            topic = ctx.topic
        # The common case in a few steps; anything unusual goes the long way, which names it.
        if len(data) > HEADER_SIZE and data[0] == MAGIC_BYTE:
            pair = self._pairs.get((int.from_bytes(data[1:5], "big"), topic))
            if pair is not None:
                fo = BytesIO(data)
                fo.seek(HEADER_SIZE)
                try:
                    record = self._read(fo, pair)
                except Exception:
                    pass
                else:
                    if fo.tell() == len(data):
                        if self.from_dict is not None:
                            return self.from_dict(record, ctx or RecordContext(topic, self.field))
                        return record
        return self.deserialize(data, topic=topic, field=ctx.field if ctx is not None else None)

    def deserialize(self, data: Any, *, topic: str | None = None, partition: int | None = None,
                    offset: int | None = None, field: str | None = None) -> Any:
        """``data`` read back; ``topic``, ``partition`` and ``offset`` name the record in
        errors (the topic also names the subject with ``use_latest_version``)."""
        if data is None:
            return None
        ctx = RecordContext(topic if topic is not None else self.topic, field or self.field, partition, offset)
        framed = unframe(data, topic=ctx.topic, partition=partition, offset=offset)
        schema_id = framed.schema_id
        pair = self._pairs.get((schema_id, ctx.topic)) or self._pair(schema_id, ctx)
        payload = framed.payload
        fo = BytesIO(payload)
        try:
            record = self._read(fo, pair)
        except _FastavroResolutionError as exc:
            raise SchemaResolutionError(
                f"{ctx.what()} was written with schema id {schema_id}, which does "
                f"not resolve into the reader schema: {exc}", schema_id=schema_id, **ctx.attributes()) from exc
        except Exception as exc:
            raise _decode_error(bytes(payload), pair[0], schema_id, ctx, exc) from exc
        if fo.tell() != len(payload):
            raise PayloadDecodeError(
                f"{ctx.what()} has {len(payload) - fo.tell()} bytes left over after "
                f"the record its schema (id {schema_id}) describes ({len(payload)} bytes after the header, "
                f"the record ends at byte {fo.tell()}): written with another schema than its id says, "
                f"or two payloads run together", schema_id=schema_id, position=fo.tell(),
                **ctx.attributes())
        if self.from_dict is not None:
            return self.from_dict(record, ctx)
        return record

    def _read(self, fo: BytesIO, pair: tuple[Any, Any, Any]) -> Any:
        record = schemaless_reader(fo, pair[0], pair[1], self.return_record_name)
        plan = pair[2]
        if plan is not None:
            for name in plan[0]:
                del record[name]
            for name, default in plan[1]:
                record[name] = deepcopy(default) if isinstance(default, (dict, list)) else default
        return record

    def _pair(self, schema_id: int, ctx: RecordContext) -> tuple[Any, Any, Any]:
        writer = parse_avro(writer_schema(self.registry, schema_id, ctx, "AVRO", "Avro"), self.registry)
        reader = None
        if self.use_latest_version:
            subject = self.subject_name_strategy(ctx.topic, ctx.field, _record_name(writer))
            reader = parse_avro(self.registry.get_latest_version(subject).schema, self.registry)
        elif self.reader_schema is not None:
            if self._reader is None:
                self._reader = parse_avro(self.reader_schema, self.registry)
            reader = self._reader
        plan = None
        if reader is not None and reader == writer:
            reader = None  # read as written: no resolution to do per record
        elif reader is not None:
            plan = _top_level_plan(writer, reader)
            if plan is not None:
                reader = None  # read as written, then drop and default top-level fields
        pair = (writer, reader, plan)
        self._pairs[(schema_id, ctx.topic)] = pair
        return pair


# -- schema evolution at the top level, without fastavro's per-record resolution -------------

class _Recursive(Exception):
    pass


def _expanded(schema: Any, named: dict[str, Any], seen: frozenset[str] = frozenset()) -> Any:
    """A parsed schema with its named types written out in place, to compare two schemas
    parsed apart (a writer's and a reader's)."""
    if isinstance(schema, str):
        if schema in named:
            if schema in seen:
                raise _Recursive
            return _expanded(named[schema], named, seen | {schema})
        return schema
    if isinstance(schema, list):
        return [_expanded(s, named, seen) for s in schema]
    out = {k: v for k, v in schema.items() if not k.startswith("__")}
    for key in ("items", "values"):
        if key in out:
            out[key] = _expanded(out[key], named, seen)
    if "fields" in out:
        out["fields"] = [dict(f, type=_expanded(f["type"], named, seen)) for f in out["fields"]]
    return out


def _top_level_plan(writer: Any, reader: Any) -> tuple[list[str], list[tuple[str, Any]]] | None:
    """When the reader record differs from the writer's only by top-level fields added
    (with defaults) or removed, what Avro's resolution gives is the record read as
    written, the removed fields dropped and the added ones set to their defaults, as
    fastavro sets them: (fields to drop, (field, default) to add).  None when the
    difference is anything else (a type changed, a nested record evolved, aliases), which
    fastavro resolves per record."""
    if not (isinstance(writer, dict) and isinstance(reader, dict)):
        return None
    if writer.get("type") != "record" or reader.get("type") != "record" or writer.get("name") != reader.get("name"):
        return None
    writer_named, reader_named = writer.get("__named_schemas", {}), reader.get("__named_schemas", {})
    written = {f["name"]: f for f in writer["fields"]}
    defaults = []
    try:
        for f in reader["fields"]:
            if f.get("aliases"):
                return None
            w = written.get(f["name"])
            if w is None:
                if "default" not in f:
                    return None  # fastavro's resolution names the error
                defaults.append((f["name"], f["default"]))
            elif _expanded(w["type"], writer_named) != _expanded(f["type"], reader_named):
                return None
    except _Recursive:
        return None
    kept = {f["name"] for f in reader["fields"]}
    return [name for name in written if name not in kept], defaults


# -- naming what is wrong in a payload that does not decode ---------------------------------------

class _Bad(Exception):
    def __init__(self, message: str, path: str, position: int):
        super().__init__(message)
        self.path = path
        self.position = position


def _decode_error(payload: bytes, writer: Any, schema_id: int, ctx: RecordContext,
                  exc: Exception) -> PayloadDecodeError:
    """The error for a payload fastavro could not read: walks it again with the writer
    schema to say which field, which byte and what (only on this path, so the common one
    stays fast)."""
    named = writer.get("__named_schemas", {}) if isinstance(writer, dict) else {}
    path: str | None = None
    position: int | None = None
    try:
        _Walker(payload, named).walk(writer, "")
        what = f"{type(exc).__name__}: {exc}"
    except _Bad as bad:
        what, path, position = str(bad), bad.path, bad.position
    except Exception:
        what = f"{type(exc).__name__}: {exc}"
    at = f" at {path or 'the record'}" if path is not None else ""
    return PayloadDecodeError(
        f"{ctx.what()} does not decode with its schema (id {schema_id}){at}: {what}",
        schema_id=schema_id, path=path, position=position, **ctx.attributes())


class _Walker:
    """Reads a payload as the writer schema says, checking each length and index against
    what is there, and raises :class:`_Bad` naming the first thing that is not."""

    def __init__(self, data: bytes, named: dict[str, Any]):
        self.data = data
        self.pos = 0
        self.named = named

    def _need(self, n: int, what: str, path: str, start: int | None = None) -> None:
        start = self.pos if start is None else start
        if n < 0:
            raise _Bad(f"{what} at byte {start} has a negative length {n}", path, start)
        if self.pos + n > len(self.data):
            raise _Bad(f"{what} of {n} bytes at byte {start} runs past the end of the payload (the "
                       f"payload is {len(self.data)} bytes)", path, start)

    def long(self, path: str, what: str = "an int/long") -> int:
        start, result, shift = self.pos, 0, 0
        while True:
            if self.pos >= len(self.data):
                raise _Bad(f"the payload ends inside {what} (byte {start}; the payload is {len(self.data)} bytes)",
                           path, start)
            if shift > 63:
                raise _Bad(f"{what} at byte {start} is a varint longer than 10 bytes", path, start)
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)

    def walk(self, schema: Any, path: str) -> None:
        if isinstance(schema, str):
            if schema in self.named:
                return self.walk(self.named[schema], path)
            return self.primitive(schema, path)
        if isinstance(schema, list):
            start = self.pos
            index = self.long(path, "a union branch index")
            if not 0 <= index < len(schema):
                names = ", ".join(s if isinstance(s, str) else str(s.get("name") or s.get("type")) for s in schema)
                raise _Bad(f"union branch index {index} at byte {start} is out of range: the union "
                           f"[{names}] has {len(schema)} branches", path, start)
            return self.walk(schema[index], path)
        kind = schema.get("type")
        if kind in ("record", "error"):
            for f in schema["fields"]:
                self.walk(f["type"], f"{path}.{f['name']}" if path else f["name"])
        elif kind == "enum":
            start = self.pos
            index = self.long(path, "an enum symbol index")
            if not 0 <= index < len(schema["symbols"]):
                raise _Bad(f"enum symbol index {index} at byte {start} is out of range: {schema.get('name')} "
                           f"has {len(schema['symbols'])} symbols", path, start)
        elif kind == "fixed":
            self._need(schema["size"], f"a fixed {schema.get('name')}", path)
            self.pos += schema["size"]
        elif kind in ("array", "map"):
            i = 0
            while True:
                start = self.pos
                count = self.long(path, f"an {kind} block count")
                if count == 0:
                    return
                if count < 0:
                    count = -count
                    self.long(path, f"an {kind} block size")
                if count > len(self.data) - self.pos:
                    if _may_be_empty(schema, self.named):
                        return  # items of no bytes: nothing left to check
                    raise _Bad(f"an {kind} block of {count} items at byte {start} is longer than the "
                               f"{len(self.data) - self.pos} bytes left", path, start)
                for _ in range(count):
                    if kind == "map":
                        key_start = self.pos
                        n = self.long(f"{path}[key]", "a map key's length")
                        self._need(n, "a map key", f"{path}[key]", key_start)
                        self.utf8(key_start, n, f"{path}[key]")
                        self.walk(schema["values"], f"{path}[...]")
                    else:
                        self.walk(schema["items"], f"{path}[{i}]")
                    i += 1
        else:
            self.primitive(kind, path)

    def utf8(self, start: int, n: int, path: str) -> None:
        try:
            self.data[self.pos:self.pos + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Bad(f"a string at byte {start} is not UTF-8 ({exc.reason} at its byte {exc.start})",
                       path, start) from None
        self.pos += n

    def primitive(self, kind: str, path: str) -> None:
        if kind == "null":
            return
        if kind == "boolean":
            self._need(1, "a boolean", path)
            self.pos += 1
        elif kind in ("int", "long"):
            self.long(path, f"an {kind}")
        elif kind == "float":
            self._need(4, "a float", path)
            self.pos += 4
        elif kind == "double":
            self._need(8, "a double", path)
            self.pos += 8
        elif kind in ("bytes", "string"):
            start = self.pos
            n = self.long(path, f"a {kind} length")
            self._need(n, f"a {kind}", path, start)
            if kind == "string":
                self.utf8(start, n, path)
            else:
                self.pos += n


def _may_be_empty(schema: Any, named: dict[str, Any]) -> bool:
    """Whether an array's items or a map's values may take no bytes (null, an empty
    record), so that a count larger than the bytes left is no proof of damage."""
    inner = schema.get("items") if schema.get("type") == "array" else None
    if inner is None:
        return False  # a map entry has at least its key's length byte
    if isinstance(inner, str):
        inner = named.get(inner, inner)
    if inner == "null":
        return True
    return isinstance(inner, dict) and inner.get("type") == "record" and not inner.get("fields")
