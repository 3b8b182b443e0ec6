"""Typed key and value columns for ``format("kafkawire")``: Avro, JSON Schema and Protobuf
payloads decoded into Spark columns in the executors, with no jar.

The driver parses the options (:func:`parse`, no I/O) and fixes the reader schema once per
query (:func:`resolve`: the inline schema, or the subject's latest version from the Schema
Registry), so every task decodes into the same Spark type.  Executors decode each fetched
batch's column with :class:`kafkawire._avro_columns.AvroColumnDecoder` (one compiled pass,
no Python object per record), :class:`kafkawire._json_columns.JsonColumnDecoder` (pyarrow's
compiled JSON reader, one call per batch) or
:class:`kafkawire._protobuf_columns.ProtobufColumnDecoder` (each payload parsed by the
Protobuf runtime's compiled parser, its fields read across the batch); the writer schemas are fetched lazily, once per schema id per worker process, when
a batch names an id the worker has not met yet.
"""

from __future__ import annotations

import difflib
import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkawire.errors import KafkaWireError
from kafkawire.spark._errors import KafkawireOptionError

__all__ = ["TypedColumns", "ColumnFormat", "KafkawireDecodeError", "parse", "resolve", "spark_schema",
           "decode_batch", "OPTION_NAMES"]

FORMATS = ("raw", "avro", "json", "protobuf")
TYPED = FORMATS[1:]
# How each format names itself in errors.
LABELS = {"avro": "Avro", "json": "JSON", "protobuf": "Protobuf"}
# The registry's schemaType of each format (None: Avro, the default).
SCHEMA_TYPES = {"avro": (None, "AVRO"), "json": ("JSON",), "protobuf": ("PROTOBUF",)}
MODES = ("FAILFAST", "PERMISSIVE")
REGISTRY_PREFIX = "schema.registry."
# The registry client's options a Spark option can set (all but callables and contexts),
# spelt with dots after the prefix: schema.registry.basic.auth.user.info.
_REGISTRY_OPTIONS = {
    "basic_auth_user_info": str, "bearer_auth_token": str, "bearer_auth_logical_cluster": str,
    "bearer_auth_identity_pool_id": str, "ssl_cafile": str, "ssl_capath": str, "ssl_certfile": str,
    "ssl_keyfile": str, "ssl_password": str, "ssl_crlfile": str, "ssl_ciphers": str,
    "ssl_check_hostname": bool, "ssl_endpoint_identification_algorithm": str, "timeout_ms": float,
    "request_timeout_ms": float, "retry_backoff_ms": float, "retry_backoff_max_ms": float,
    "cache_capacity": int,
}
#: Source option names this module owns (lowercase -> documented spelling).
OPTION_NAMES = {name.lower(): name for name in (
    "key.format", "value.format", "key.schema", "value.schema", "key.subject", "value.subject", "mode",
    "key.protobuf.message", "value.protobuf.message")}


class KafkawireDecodeError(KafkaWireError, ValueError):
    """A key or value that does not decode (FAILFAST): ``topic``, ``partition``,
    ``offset`` and ``schema_id`` (None when the header is wrong) say which record, ``reason``
    what was wrong.  ``mode=PERMISSIVE`` reads such a record as a null with the error in a
    column instead."""

    def __init__(self, column: str, topic: str, partition: int, offset: int, schema_id: int | None,
                 reason: str, format: str = "Avro"):
        self.column, self.topic, self.partition, self.offset = column, topic, partition, offset
        self.schema_id, self.reason, self.format = schema_id, reason, format
        sid = "" if schema_id is None else f" (schema id {schema_id})"
        super().__init__(
            f"the {column} of {topic}[{partition}] at offset {offset} is not valid {format}{sid}: {reason}; "
            f"set the option mode=PERMISSIVE to read such records as null with the error in "
            f"'{column}_error'")


KafkawireDecodeError.__module__ = "kafkawire.spark"


@dataclass
class ColumnFormat:
    """How one of ``key``/``value`` is decoded.  ``reader`` is the reader schema's text
    once :func:`resolve` fixed it (for Protobuf the main file, with ``imports`` the files it
    imports, each a base64 FileDescriptorProto, and ``message`` the message read)."""

    column: str
    inline: str | None = None  # key.schema / value.schema as given
    subject: str | None = None  # key.subject / value.subject, or the topic name strategy's
    reader: str | None = None
    kind: str = "avro"
    message: str | None = None  # <column>.protobuf.message, then the message resolved
    imports: tuple = ()

    @property
    def label(self) -> str:
        return LABELS[self.kind]


@dataclass
class TypedColumns:
    formats: dict[str, ColumnFormat] = field(default_factory=dict)
    registry: dict[str, Any] | None = None  # {"url": ..., client options}
    mode: str = "FAILFAST"

    @property
    def permissive(self) -> bool:
        return self.mode == "PERMISSIVE"


def _registry_options(opts: dict[str, str]) -> dict[str, Any] | None:
    given = {k[len(REGISTRY_PREFIX):]: v for k, v in opts.items() if k.startswith(REGISTRY_PREFIX)}
    if not given:
        return None
    out: dict[str, Any] = {}
    spelt = {name.replace("_", "."): name for name in _REGISTRY_OPTIONS}
    for name, raw in given.items():
        if name == "url":
            if not raw.strip():
                raise KafkawireOptionError("option 'schema.registry.url' is empty; give the registry's URL")
            out["url"] = raw.strip()
            continue
        key = spelt.get(name)
        if key is None:
            close = difflib.get_close_matches(name, ["url", *spelt], n=1, cutoff=0.75)
            hint = f"; did you mean {REGISTRY_PREFIX + close[0]!r}?" if close else (
                f"; the registry options are {', '.join(REGISTRY_PREFIX + s for s in ['url', *sorted(spelt)])}")
            raise KafkawireOptionError(f"unknown option {REGISTRY_PREFIX + name!r}{hint}")
        kind = _REGISTRY_OPTIONS[key]
        try:
            if kind is bool:
                if raw.strip().lower() not in ("true", "false"):
                    raise ValueError
                value: Any = raw.strip().lower() == "true"
            else:
                value = kind(raw)
        except ValueError:
            raise KafkawireOptionError(
                f"option {REGISTRY_PREFIX + name!r} must be {'true or false' if kind is bool else kind.__name__}, "
                f"got {raw!r}") from None
        out[key] = value
    if "url" not in out:
        raise KafkawireOptionError(
            f"options {sorted(REGISTRY_PREFIX + k for k in given)} need 'schema.registry.url' too")
    return out


def parse(opts: dict[str, str]) -> TypedColumns | None:
    """The typed-column options of a read (``opts`` lowercased), checked; None when keys
    and values stay binary.  No I/O."""
    typed = TypedColumns()
    for column in ("key", "value"):
        fmt = opts.get(f"{column}.format", "raw").strip().lower()
        if fmt in ("json_schema", "jsonschema", "json-schema"):
            fmt = "json"
        if fmt not in FORMATS:
            raise KafkawireOptionError(
                f"option '{column}.format' must be one of {', '.join(FORMATS)}, got {opts[f'{column}.format']!r}")
        for what in ("schema", "subject", "protobuf.message"):
            if fmt == "raw" and f"{column}.{what}" in opts:
                raise KafkawireOptionError(
                    f"option '{column}.{what}' applies with a typed {column}.format ({', '.join(TYPED)}) only")
        if fmt != "protobuf" and f"{column}.protobuf.message" in opts:
            raise KafkawireOptionError(f"option '{column}.protobuf.message' applies with {column}.format=protobuf only")
        if fmt in ("json", "protobuf"):
            inline = opts.get(f"{column}.schema")
            if fmt == "json" and inline is not None:
                try:
                    if not isinstance(json.loads(inline), (dict, bool)):
                        raise ValueError
                except ValueError:
                    raise KafkawireOptionError(
                        f"option '{column}.schema' is not a JSON Schema (a JSON object): {inline[:200]!r}") from None
            subject = opts.get(f"{column}.subject")
            if subject is not None and not subject.strip():
                raise KafkawireOptionError(f"option '{column}.subject' is empty")
            message = opts.get(f"{column}.protobuf.message")
            if message is not None and not message.strip():
                raise KafkawireOptionError(f"option '{column}.protobuf.message' is empty")
            typed.formats[column] = ColumnFormat(column, inline, subject.strip() if subject else None, kind=fmt,
                                                 message=message.strip() if message else None)
        if fmt == "avro":
            inline = opts.get(f"{column}.schema")
            if inline is not None:
                try:
                    json.loads(inline)
                except ValueError:
                    if inline.strip().strip('"') not in ("null", "boolean", "int", "long", "float", "double",
                                                         "bytes", "string"):
                        raise KafkawireOptionError(
                            f"option '{column}.schema' is not an Avro schema (JSON): {inline[:200]!r}") from None
                    inline = json.dumps(inline.strip().strip('"'))
            subject = opts.get(f"{column}.subject")
            if subject is not None and not subject.strip():
                raise KafkawireOptionError(f"option '{column}.subject' is empty")
            typed.formats[column] = ColumnFormat(column, inline, subject.strip() if subject else None)
    typed.registry = _registry_options(opts)
    mode = opts.get("mode")
    if not typed.formats:
        if mode is not None:
            raise KafkawireOptionError(
                f"option 'mode' applies with a typed key.format or value.format ({', '.join(TYPED)}) only")
        if typed.registry is not None:
            raise KafkawireOptionError(
                f"the schema.registry.* options apply with a typed key.format or value.format ({', '.join(TYPED)}) only")
        return None
    if mode is not None:
        typed.mode = mode.strip().upper()
        if typed.mode not in MODES:
            raise KafkawireOptionError(f"option 'mode' must be FAILFAST or PERMISSIVE, got {mode!r}")
    for f in typed.formats.values():
        if typed.registry is None and f.inline is None:
            raise KafkawireOptionError(
                f"{f.column}.format={f.kind} needs 'schema.registry.url' (the writer schemas come from the "
                f"registry) or an inline '{f.column}.schema' (every record written with that schema)")
        if typed.registry is None and f.subject is not None:
            raise KafkawireOptionError(f"option '{f.column}.subject' needs 'schema.registry.url'")
    return typed


# -- the driver: the reader schema and the Spark type -------------------------------------

_lock = threading.Lock()
_registries: dict[tuple, Any] = {}


def _options_key(options: dict[str, Any] | None) -> tuple:
    """The registry options as a key of this process's caches."""
    return tuple(sorted((k, repr(v)) for k, v in (options or {}).items()))


def registry_client(options: dict[str, Any]) -> Any:
    """One SchemaRegistryClient per configuration per process (its caches hold the ids)."""
    key = _options_key(options)
    with _lock:
        client = _registries.get(key)
        if client is None:
            from kafkawire.errors import ConfigError
            from kafkawire.schema import SchemaRegistryClient

            opts = dict(options)
            try:
                client = SchemaRegistryClient(opts.pop("url"), **opts)
            except ConfigError as exc:
                raise KafkawireOptionError(f"the schema.registry.* options are not accepted: {exc}") from None
            _registries[key] = client
        return client


def _topics(opts: dict[str, str]) -> list[str] | None:
    """The topics a read names (None for subscribePattern, which names none)."""
    if "subscribe" in opts:
        return [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
    if "assign" in opts:
        try:
            return sorted(json.loads(opts["assign"]))
        except (ValueError, TypeError):
            return None
    return None


def _imports(client: Any, schema: Any, seen: set) -> list[str]:
    """The texts of the files a Protobuf schema imports, from the registry, each after the
    files it imports in turn."""
    out: list[str] = []
    for ref in schema.references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        found = client.get_version(ref.subject, ref.version).schema
        out += _imports(client, found, seen)
        out.append(found.schema_str)
    return out


_proto_files: dict[tuple, Any] = {}
_files_lock = threading.Lock()  # not _lock: _column builds a decoder, which asks for files, holding it


def protobuf_files(main: str, imports: tuple) -> Any:
    """One ProtobufFiles per schema per process (a descriptor pool is built once)."""
    from kafkawire._protobuf_columns import ProtobufFiles

    key = (main, tuple(imports))
    with _files_lock:
        found = _proto_files.get(key)
        if found is None:
            found = _proto_files[key] = ProtobufFiles(main, list(imports))
    return found


def arrow_type(f: ColumnFormat) -> Any:
    """The Arrow type ``f``'s reader schema decodes into (for Protobuf, fixing
    ``f.message`` to the full name of the message read)."""
    if f.kind == "json":
        from kafkawire._json_columns import arrow_type as json_type

        return json_type(f.reader)
    if f.kind == "protobuf":
        from kafkawire._protobuf_columns import arrow_type as protobuf_type

        message = protobuf_files(f.reader, f.imports).message(f.message)
        f.message = message.full_name
        return protobuf_type(message)
    from kafkawire._avro_columns import arrow_type as avro_type

    return avro_type(f.reader)


def resolve(typed: TypedColumns, opts: dict[str, str]) -> TypedColumns:
    """``typed`` with each column's reader schema fixed: the inline schema, or the latest
    version of its subject (``<topic>-key``/``-value`` for the one topic read, unless a
    subject is given).  Asks the registry; raises KafkawireOptionError saying what to set."""
    from kafkawire._avro_columns import AvroSchemaError
    from kafkawire._json_columns import JsonSchemaError
    from kafkawire._protobuf_columns import ProtobufSchemaError

    for f in typed.formats.values():
        if f.inline is not None:
            f.reader = f.inline
        else:
            subject = f.subject
            if subject is None:
                topics = _topics(opts)
                if not topics or len(topics) != 1:
                    raise KafkawireOptionError(
                        f"{f.column}.format={f.kind} without '{f.column}.schema' takes the reader schema from the "
                        f"subject <topic>-{f.column}, which needs exactly one topic; this read names "
                        f"{topics if topics else 'a pattern'}: set '{f.column}.subject' or '{f.column}.schema'")
                subject = f"{topics[0]}-{f.column}"
            from kafkawire.schema.errors import SubjectNotFoundError, VersionNotFoundError

            client = registry_client(typed.registry)
            try:
                latest = client.get_latest_version(subject)
            except (SubjectNotFoundError, VersionNotFoundError):
                raise KafkawireOptionError(
                    f"the Schema Registry has no subject {subject!r} (the {f.column} reader schema); "
                    f"register a schema under it, or set '{f.column}.subject' or '{f.column}.schema'") from None
            if latest.schema.schema_type not in SCHEMA_TYPES[f.kind]:
                raise KafkawireOptionError(
                    f"subject {subject!r} holds a {latest.schema.schema_type or 'AVRO'} schema, not {f.label}: "
                    f"{f.column}.format={f.kind} reads {f.label}")
            if latest.schema.references:
                if f.kind != "protobuf":
                    raise KafkawireOptionError(
                        f"subject {subject!r}'s schema has references, which typed columns do not resolve for "
                        f"{f.label} yet; give the schema with the referenced types written out as "
                        f"'{f.column}.schema'")
                f.imports = tuple(_imports(client, latest.schema, set()))
            f.subject = subject
            f.reader = latest.schema.schema_str
        try:
            arrow_type(f)
        except (AvroSchemaError, JsonSchemaError, ProtobufSchemaError, ValueError) as exc:
            raise KafkawireOptionError(f"the {f.column} reader schema cannot be read into columns: {exc}") from None
    return typed


def _spark_type(t: Any) -> Any:
    import pyarrow as pa
    from pyspark.sql import types as T

    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_int32(t):
        return T.IntegerType()
    if pa.types.is_int64(t):
        return T.LongType()
    if pa.types.is_float32(t):
        return T.FloatType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_string(t):
        return T.StringType()
    if pa.types.is_binary(t):
        return T.BinaryType()
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_date32(t):
        return T.DateType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz else T.TimestampNTZType()
    if pa.types.is_null(t):
        return T.NullType()
    if pa.types.is_map(t):
        return T.MapType(_spark_type(t.key_type), _spark_type(t.item_type), True)
    if pa.types.is_list(t):
        return T.ArrayType(_spark_type(t.value_type), True)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(t.field(i).name, _spark_type(t.field(i).type), True)
                             for i in range(t.num_fields)])
    raise KafkawireOptionError(f"no Spark type for the Arrow type {t}")


def spark_schema(base: Any, typed: TypedColumns) -> Any:
    """``base`` (the Kafka read schema) with the typed columns' types, plus
    ``<column>_raw`` and ``<column>_error`` for each of them in PERMISSIVE mode.  Every
    field is nullable: a record may be null (a tombstone), and Spark's Arrow transfer
    takes nullable fields."""
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    fields = []
    for f in base.fields:
        fmt = typed.formats.get(f.name)
        fields.append(f if fmt is None else StructField(f.name, _spark_type(arrow_type(fmt)), True))
    if typed.permissive:
        for column in ("key", "value"):
            if column in typed.formats:
                fields += [StructField(f"{column}_raw", BinaryType(), True),
                           StructField(f"{column}_error", StringType(), True)]
    return StructType(fields)


# -- the executors: decoding ---------------------------------------------------------------

class _Writers(Mapping):
    """One column's writer schemas by id, fetched from the registry the first time a
    payload names an id: the decoder looks an id up once and keeps its plan, and both live
    as long as the worker process.  As a mapping (Avro's decoder takes one) an id gives
    the schema's text; :meth:`schema` gives the registry's Schema."""

    def __init__(self, column: str, registry: dict[str, Any], kind: str = "avro"):
        self.column = column
        self.registry = registry
        self.kind = kind
        self.known: dict[int, Any] = {}
        self.unknown: set[int] = set()  # ids the registry does not know: their rows fail
        self.where = ""  # the batch being read, for the errors
        self._files: dict[int, Any] = {}

    def schema(self, schema_id: int) -> Any:
        """The registry's Schema of ``schema_id``; KeyError when it is not one this column
        can use."""
        found = self.known.get(schema_id)
        if found is not None:
            return found
        if schema_id in self.unknown:
            raise KeyError(schema_id)
        from kafkawire.schema.errors import SchemaNotFoundError

        try:
            schema = registry_client(self.registry).get_schema(schema_id)
        except SchemaNotFoundError:
            schema = None
        except KafkaWireError as exc:
            raise type(exc)(f"reading {self.where}: fetching the writer schema id {schema_id} "
                            f"of the {self.column}s: {exc}") from exc
        if (schema is None or schema.schema_type not in SCHEMA_TYPES[self.kind]
                or (schema.references and self.kind == "avro")):
            self.unknown.add(schema_id)  # its rows fail, saying the id is not usable here
            raise KeyError(schema_id)
        self.known[schema_id] = schema
        return schema

    def __getitem__(self, schema_id: int) -> str:
        return self.schema(schema_id).schema_str

    def usable(self, schema_id: int) -> bool:
        try:
            self.schema(schema_id)
        except KeyError:
            return False
        return True

    def files(self, schema_id: int) -> Any:
        """The Protobuf files ``schema_id`` was written with, or None."""
        if schema_id not in self._files:
            try:
                schema = self.schema(schema_id)
            except KeyError:
                return None
            from kafkawire._protobuf_columns import ProtobufSchemaError

            try:
                imports = _imports(registry_client(self.registry), schema, set())
                self._files[schema_id] = protobuf_files(schema.schema_str, tuple(imports))
            except ProtobufSchemaError:
                self._files[schema_id] = None
        return self._files[schema_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self.known)

    def __len__(self) -> int:
        return len(self.known)


class _Column:
    """One worker's decoder for one column, kept across batches and tasks."""

    def __init__(self, fmt: ColumnFormat, registry: dict[str, Any] | None):
        self.writers = None if registry is None else _Writers(fmt.column, registry, fmt.kind)
        if fmt.kind == "json":
            from kafkawire._json_columns import JsonColumnDecoder

            self.decoder: Any = JsonColumnDecoder(fmt.reader, None if self.writers is None else self.writers.usable)
        elif fmt.kind == "protobuf":
            from kafkawire._protobuf_columns import ProtobufColumnDecoder

            files = protobuf_files(fmt.reader, fmt.imports)
            self.decoder = ProtobufColumnDecoder(files, files.message(fmt.message),
                                                 None if self.writers is None else self.writers.files)
        else:
            from kafkawire._avro_columns import AvroColumnDecoder

            self.decoder = AvroColumnDecoder(fmt.reader, self.writers)

    def decoder_for(self, topic: str, partition: int) -> Any:
        if self.writers is not None:
            self.writers.where = f"{topic}[{partition}]"
        return self.decoder


_columns: dict[tuple, _Column] = {}


def _column(fmt: ColumnFormat, registry: dict[str, Any] | None) -> _Column:
    key = (fmt.column, fmt.kind, fmt.reader, fmt.imports, fmt.message, _options_key(registry))
    with _lock:
        col = _columns.get(key)
        if col is None:
            col = _columns[key] = _Column(fmt, registry)
        return col


_ROW = re.compile(r"^(Avro|JSON|Protobuf) payload at row \d+")


def decode_batch(rb: Any, topic: str, partition: int, typed: TypedColumns, schema: Any) -> Any:
    """``rb`` (Spark's Kafka columns, binary key and value, records of ``topic``'s
    ``partition``) with its typed columns decoded, as a RecordBatch of the Arrow ``schema``
    (spark_schema's)."""
    import pyarrow as pa

    from kafkawire._avro_columns import AvroDecodeError
    from kafkawire._json_columns import JsonDecodeError
    from kafkawire._protobuf_columns import ProtobufDecodeError

    cols = dict(zip(rb.schema.names, rb.columns))
    for column, fmt in typed.formats.items():
        raw = cols[column]
        decoder = _column(fmt, typed.registry).decoder_for(topic, partition)
        if typed.permissive:
            array, errors = decoder.decode_permissive(raw)
            if errors.null_count < len(errors):
                offsets = rb.column("offset")
                errors = pa.array([None if e is None else _ROW.sub(
                    f"{fmt.label} payload at {topic}[{partition}] offset {offsets[i].as_py()}", e)
                    for i, e in enumerate(errors.to_pylist())], pa.string())
            cols[f"{column}_raw"] = raw
            cols[f"{column}_error"] = errors
        else:
            try:
                array = decoder.decode(raw)
            except (AvroDecodeError, JsonDecodeError, ProtobufDecodeError) as exc:
                raise KafkawireDecodeError(column, topic, partition, rb.column("offset")[exc.row].as_py(),
                                           exc.schema_id, exc.reason, fmt.label) from None
        target = schema.field(column).type
        cols[column] = array if array.type == target else array.cast(target)
    return pa.RecordBatch.from_arrays([cols[name] for name in schema.names], schema=schema)


# -- the sink: struct columns written as Avro ---------------------------------------------

def parse_sink(opts: dict[str, str], topic: str | None) -> TypedColumns | None:
    """The sink's typed-column options (``opts`` lowercased): the writer schema is the
    inline one (registered under the subject, as Confluent's serializer auto-registers) or
    the subject's latest version (looked up).  None when key and value are written as
    given.  No I/O."""
    if "mode" in opts:
        raise KafkawireOptionError("option 'mode' applies to reading only")
    typed = parse(opts)
    if typed is None:
        return None
    for f in typed.formats.values():
        if f.kind != "avro":
            raise KafkawireOptionError(
                f"writing {f.column}.format={f.kind} is not supported yet (reading is); the sink writes Avro, or "
                f"bytes you serialize yourself (kafkawire.schema's serializers) into a binary '{f.column}' column")
        if f"{f.column}.protobuf.message" in opts:
            raise KafkawireOptionError(f"option '{f.column}.protobuf.message' applies to reading only")
    if typed.registry is None:
        raise KafkawireOptionError(
            "writing Avro needs 'schema.registry.url': Confluent's framing names the schema by its registry id")
    for f in typed.formats.values():
        if f.subject is None:
            if topic is None:
                raise KafkawireOptionError(
                    f"{f.column}.format=avro names its subject after the 'topic' option (<topic>-{f.column}); "
                    f"set 'topic' or '{f.column}.subject'")
            f.subject = f"{topic}-{f.column}"
    return typed


def _plain(value: Any, t: Any) -> Any:
    """A value of Arrow type ``t`` as to_pylist gives it, as Avro takes it: maps (lists
    of pairs) become dicts."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: _plain(v, t.item_type) for k, v in value}
    if pa.types.is_struct(t):
        return {t.field(i).name: _plain(value[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_plain(v, t.value_type) for v in value]
    return value


_serializers: dict[tuple, Any] = {}


def _serializer(fmt: ColumnFormat, registry: dict[str, Any]) -> Any:
    key = (fmt.column, fmt.subject, fmt.inline, _options_key(registry))
    with _lock:
        found = _serializers.get(key)
    if found is not None:
        return found
    from kafkawire.schema.avro import AvroSerializer

    subject = fmt.subject
    found = AvroSerializer(registry_client(registry), fmt.inline, topic=subject, is_key=fmt.column == "key",
                           subject_name_strategy=lambda _topic, _field, _name: subject,
                           auto_register=fmt.inline is not None, use_latest_version=fmt.inline is None)
    with _lock:
        _serializers[key] = found
    return found


def encode_batch(rb: Any, typed: TypedColumns) -> Any:
    """``rb`` (the sink's columns) with its typed key/value columns written as
    Confluent-framed Avro (binary)."""
    import pyarrow as pa

    cols = dict(zip(rb.schema.names, rb.columns))
    for column, fmt in typed.formats.items():
        if column not in cols:
            continue
        serialize = _serializer(fmt, typed.registry)
        t = cols[column].type
        cols[column] = pa.array([None if v is None else serialize(_plain(v, t))
                                 for v in cols[column].to_pylist()], pa.binary())
    return pa.RecordBatch.from_pydict(cols)
