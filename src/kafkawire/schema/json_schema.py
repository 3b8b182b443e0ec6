"""JSON Schema keys and values in Confluent's framing, with a Schema Registry.

:class:`JSONSerializer` checks a value against the schema (``validate``), writes it as
compact JSON (UTF-8, no spaces, non-ASCII kept) after the magic byte and schema id;
:class:`JSONDeserializer` reads it back and checks it against the writer's schema (or the
reader schema given).  The bytes are those of confluent-kafka's ``JSONSerializer``: the
same JSON text (orjson's when it is installed, as confluent-kafka picks it, else the
standard library's compact form, which is orjson's) after the same header.

As for :mod:`kafkawire.schema.avro`: the topic is given at construction, bound with
``for_topic``, or passed as ``ctx``; the registry is asked once per topic and per schema
id; the validators (with the schema's references resolved from the registry, never from
the network otherwise) are built once per schema.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from kafkawire.errors import ConfigError
from kafkawire.schema._core import Schema
from kafkawire.schema._serde import (
    KEY,
    VALUE,
    FramedDeserializer,
    FramedSerializer,
    RecordContext,
    SubjectNameStrategy,
    blocking_registry,
    check_latest_version,
    register_or_look_up,
    strategy,
    writer_schema,
)
from kafkawire.schema.errors import (
    PayloadDecodeError,
    SerializationError,
)
from kafkawire.schema.framing import frame_header, unframe

__all__ = ["JSONDeserializer", "JSONSerializer"]

try:  # confluent-kafka writes with orjson when it is there: so must we, for the same bytes
    import orjson

    def _dumps(value: Any) -> bytes:
        return orjson.dumps(value)

    def _loads(data: Any) -> Any:
        return orjson.loads(data)

    _DecodeError: tuple[type[Exception], ...] = (orjson.JSONDecodeError, ValueError)
except ImportError:
    def _dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def _loads(data: Any) -> Any:
        return json.loads(data)

    _DecodeError = (ValueError,)


def _as_json_schema(schema: Schema | str | dict[str, Any]) -> Schema:
    if isinstance(schema, dict):
        return Schema(json.dumps(schema), "JSON")
    if isinstance(schema, str):
        return Schema(schema, "JSON")
    if isinstance(schema, Schema):
        if schema.schema_type != "JSON":
            raise ConfigError(f"a JSON Schema serde takes a JSON schema, not {schema.schema_type}")
        return schema
    raise ConfigError(f"give a kafkawire.schema.Schema, JSON Schema text or a dict, not {type(schema).__name__}")


class _Parsed:
    """A JSON schema parsed, its references resolved, and its validator."""

    def __init__(self, schema: Schema, registry: Any):
        from jsonschema.validators import validator_for
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7

        self.schema = json.loads(schema.schema_str)
        resources = Registry()  # no retrieve: a $ref outside the references is an error, not a download
        for name, text in _references(schema, registry, set()):
            resources = resources.with_resource(name, Resource.from_contents(json.loads(text),
                                                                             default_specification=DRAFT7))
        cls = validator_for(self.schema)
        try:
            cls.check_schema(self.schema)
        except Exception as exc:
            raise ConfigError(f"the JSON schema is not valid: {exc}") from exc
        self.validator = cls(self.schema, registry=resources)
        title = self.schema.get("title") if isinstance(self.schema, dict) else None
        self.name = title if isinstance(title, str) else None

    def errors(self, value: Any) -> str | None:
        found = sorted(self.validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if not found:
            return None
        return "; ".join(f"{e.json_path}: {e.message}" for e in found[:5]) + (
            f" (and {len(found) - 5} more)" if len(found) > 5 else "")


def _references(schema: Schema, registry: Any, seen: set[Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for ref in schema.references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        if registry is None:
            raise ConfigError("a schema with references needs the registry to fetch them")
        found = registry.get_version(ref.subject, ref.version).schema
        out += _references(found, registry, seen)
        out.append((ref.name, found.schema_str))
    return out


class JSONSerializer(FramedSerializer):
    """JSON Schema in Confluent's framing: ``serializer(value)`` -> bytes (None stays None).

    ``registry``, ``topic``, ``is_key``, ``subject_name_strategy`` (``"record"`` names
    the subject after the schema's ``title``), ``auto_register``, ``use_latest_version``,
    ``normalize``, ``to_dict``: as for :class:`~kafkawire.schema.avro.AvroSerializer`.
    ``schema``: a :class:`~kafkawire.schema.Schema` (type ``JSON``), its text, or a dict.
    ``validate`` (True): check each value against the schema first
    (:class:`~kafkawire.schema.errors.SerializationError` naming the failing paths).
    """

    def __init__(self, registry: Any, schema: Schema | str | dict[str, Any] | None = None, *,
                 topic: str | None = None, is_key: bool = False,
                 subject_name_strategy: str | SubjectNameStrategy = "topic", auto_register: bool = True,
                 use_latest_version: bool = False, normalize: bool = False, validate: bool = True,
                 to_dict: Callable[[Any, RecordContext], Any] | None = None):
        check_latest_version(use_latest_version, auto_register)
        if schema is None and not use_latest_version:
            raise ConfigError("give the schema, or use_latest_version=True (with auto_register=False)")
        self.registry = registry if registry is None else blocking_registry(registry, type(self).__name__)
        self.schema = None if schema is None else _as_json_schema(schema)
        self.topic = topic
        self.field = KEY if is_key else VALUE
        self.subject_name_strategy = strategy(subject_name_strategy)
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self.normalize = normalize
        self.validate = validate
        self.to_dict = to_dict
        self._parsed: _Parsed | None = None
        self._targets: dict[tuple[str | None, str], tuple[bytes, _Parsed | None, int, str]] = {}

    def _target(self, ctx: RecordContext) -> tuple[bytes, _Parsed | None, int, str]:
        if self.schema is not None and self._parsed is None:
            self._parsed = _Parsed(self.schema, self.registry)
        subject = self.subject_name_strategy(ctx.topic, ctx.field, self._parsed.name if self._parsed else None)
        parsed = self._parsed
        if self.use_latest_version:
            latest = self.registry.get_latest_version(subject)
            schema_id, parsed = latest.schema_id, _Parsed(latest.schema, self.registry)
        else:
            schema_id = register_or_look_up(self.registry, subject, self.schema, ctx,
                                            auto_register=self.auto_register, normalize=self.normalize)
        target = (frame_header(schema_id), parsed if self.validate else None, schema_id, subject)
        self._targets[(ctx.topic, ctx.field)] = target
        return target

    def __call__(self, value: Any, ctx: Any = None) -> bytes | None:
        if value is None:
            return None
        found, target = self._context_and_target(ctx)
        ctx = found or RecordContext(self.topic, self.field)
        if self.to_dict is not None:
            value = self.to_dict(value, ctx)
        if target[1] is not None:
            problems = target[1].errors(value)
            if problems is not None:
                raise SerializationError(
                    f"{ctx.what()} does not match the JSON schema (id {target[2]}, subject {target[3]!r}): "
                    f"{problems}", schema_id=target[2], topic=ctx.topic)
        try:
            return target[0] + _dumps(value)
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"{ctx.what()} is not JSON-serializable: {exc}",
                                     schema_id=target[2], topic=ctx.topic) from exc


class JSONDeserializer(FramedDeserializer):
    """JSON Schema in Confluent's framing back to Python: ``deserializer(data)`` -> the
    value (or what ``from_dict`` makes of it; None stays None).

    ``registry``: where the writer's schema is found by id (needed to ``validate``
    against it).  ``schema``: a reader schema to check every value against instead.
    ``validate`` (True): check each value (:class:`~kafkawire.schema.errors.PayloadDecodeError`
    naming the failing paths).  Errors name the schema id and the topic, partition and
    offset where known, as the Avro deserializer's do.
    """

    def __init__(self, registry: Any = None, schema: Schema | str | dict[str, Any] | None = None, *,
                 topic: str | None = None, is_key: bool = False, validate: bool = True,
                 from_dict: Callable[[Any, RecordContext], Any] | None = None):
        if registry is None and validate and schema is None:
            raise ConfigError("to validate, give the registry (the writer's schema) or a schema")
        self.registry = registry if registry is None else blocking_registry(registry, type(self).__name__)
        self.topic = topic
        self.field = KEY if is_key else VALUE
        self.validate = validate
        self.from_dict = from_dict
        self._reader = None if schema is None else _Parsed(_as_json_schema(schema), registry)
        self._by_id: dict[int, _Parsed | None] = {}

    def deserialize(self, data: Any, *, topic: str | None = None, partition: int | None = None,
                    offset: int | None = None, field: str | None = None) -> Any:
        """``data`` read back; ``topic``, ``partition`` and ``offset`` name the record in errors."""
        if data is None:
            return None
        ctx = RecordContext(topic if topic is not None else self.topic, field or self.field, partition, offset)
        framed = unframe(data, topic=ctx.topic, partition=partition, offset=offset)
        schema_id = framed.schema_id
        checker = self._checker(schema_id, ctx)
        try:
            value = _loads(bytes(framed.payload))
        except _DecodeError as exc:
            position = getattr(exc, "pos", None)
            raise PayloadDecodeError(
                f"{ctx.what()} (schema id {schema_id}) is not JSON"
                + (f" at byte {position}" if position is not None else "") + f": {exc}",
                schema_id=schema_id, position=position, **ctx.attributes()) from exc
        if checker is not None:
            problems = checker.errors(value)
            if problems is not None:
                raise PayloadDecodeError(
                    f"{ctx.what()} (schema id {schema_id}) does not match its JSON schema: {problems}",
                    schema_id=schema_id, **ctx.attributes())
        return self.from_dict(value, ctx) if self.from_dict is not None else value

    def _checker(self, schema_id: int, ctx: RecordContext) -> _Parsed | None:
        if not self.validate:
            return None
        if self._reader is not None:
            return self._reader
        if schema_id in self._by_id:
            return self._by_id[schema_id]
        parsed = _Parsed(writer_schema(self.registry, schema_id, ctx, "JSON", "JSON Schema"), self.registry)
        self._by_id[schema_id] = parsed
        return parsed
