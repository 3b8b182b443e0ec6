"""What the schema'd serializers share: the subject name strategies, where a record came
from (topic, key or value, partition, offset), the wording of where, for errors, and the
registry steps every format takes the same way (the schema id to write with, the writer
schema of an id read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

from kafkawire.errors import ConfigError
from kafkawire.schema.errors import (
    IncompatibleSchemaError,
    PayloadDecodeError,
    SchemaNotFoundError,
    SerializationError,
    UnknownSchemaIdError,
)

__all__ = [
    "KEY",
    "VALUE",
    "FramedDeserializer",
    "FramedSerializer",
    "RecordContext",
    "SubjectNameStrategy",
    "blocking_registry",
    "check_latest_version",
    "context_of",
    "register_or_look_up",
    "record_subject",
    "strategy",
    "topic_record_subject",
    "topic_subject",
    "writer_schema",
]

KEY = "key"
VALUE = "value"


@dataclass(frozen=True)
class RecordContext:
    """Where a key or value goes to or comes from: the topic, ``"key"`` or ``"value"``,
    and for a consumed record its partition and offset (None where unknown)."""

    topic: str | None
    field: str = VALUE
    partition: int | None = None
    offset: int | None = None

    def where(self) -> str:
        parts = []
        if self.topic is not None:
            parts.append(f"topic {self.topic!r}")
        if self.partition is not None:
            parts.append(f"partition {self.partition}")
        if self.offset is not None:
            parts.append(f"offset {self.offset}")
        return ", ".join(parts)

    def what(self) -> str:
        """``the value at topic 'orders', partition 0, offset 42`` (as much as is known)."""
        where = self.where()
        return f"the {self.field} at {where}" if where else f"the {self.field}"

    def attributes(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


#: ``strategy(topic, field, record_name)`` -> the subject a schema is registered under;
#: ``field`` is ``"key"`` or ``"value"``, ``record_name`` the schema's full name (None
#: for a schema that is not a named type).
SubjectNameStrategy = Callable[[Union[str, None], str, Union[str, None]], str]


def _need_topic(topic: str | None, what: str) -> str:
    if topic is None:
        raise SerializationError(
            f"the {what} subject name strategy needs the topic, and none was given: build the "
            f"serializer with topic=..., or use serializer.for_topic(topic) as the client's "
            f"key_serializer/value_serializer (the clients pass only the value)")
    return topic


def _need_name(record_name: str | None, what: str) -> str:
    if record_name is None:
        raise SerializationError(
            f"the {what} subject name strategy names the subject after the record, and the "
            f"schema is not a named type (record, enum, fixed): use the topic strategy")
    return record_name


def topic_subject(topic: str | None, field: str, record_name: str | None) -> str:
    """``<topic>-key`` / ``<topic>-value``: one schema (and its versions) per topic."""
    return f"{_need_topic(topic, 'topic')}-{field}"


def record_subject(topic: str | None, field: str, record_name: str | None) -> str:
    """The record's full name: one record type shared by the topics that carry it."""
    return _need_name(record_name, "record")


def topic_record_subject(topic: str | None, field: str, record_name: str | None) -> str:
    """``<topic>-<record full name>``: several record types in one topic."""
    return f"{_need_topic(topic, 'topic-record')}-{_need_name(record_name, 'topic-record')}"


_STRATEGIES: dict[str, SubjectNameStrategy] = {
    "topic": topic_subject,
    "record": record_subject,
    "topic-record": topic_record_subject,
    "topic_record": topic_record_subject,
}


def strategy(value: str | SubjectNameStrategy) -> SubjectNameStrategy:
    """A strategy by name (``"topic"``, ``"record"``, ``"topic-record"``), or the callable given."""
    if callable(value):
        return value
    found = _STRATEGIES.get(str(value).lower().replace("_name_strategy", "").replace("namestrategy", ""))
    if found is None:
        raise ConfigError(f"subject_name_strategy {value!r}: use 'topic', 'record' or 'topic-record', "
                          f"or a callable (topic, field, record_name) -> subject")
    return found


def blocking_registry(registry: Any, what: str) -> Any:
    """``registry`` if the serializers can call it: a blocking client (they run inside
    the clients' synchronous send and poll paths), not the asyncio one."""
    import inspect

    if inspect.iscoroutinefunction(getattr(registry, "_call", None)):
        raise ConfigError(
            f"{what} takes a SchemaRegistryClient, not an AsyncSchemaRegistryClient: the clients "
            f"call serializers synchronously, also in asyncio programs, and the registry is asked "
            f"only once per schema (cached), so give it SchemaRegistryClient(url)")
    return registry


def context_of(ctx: Any, topic: str | None, field: str) -> RecordContext:
    """The context a serializer was called with: nothing (its own topic), a topic name, a
    :class:`RecordContext`, or anything with ``topic`` and ``field`` attributes
    (confluent-kafka's ``SerializationContext``)."""
    if ctx is None:
        return RecordContext(topic, field)
    if isinstance(ctx, RecordContext):
        return ctx
    if isinstance(ctx, str):
        return RecordContext(ctx, field)
    got = getattr(ctx, "field", None)
    return RecordContext(getattr(ctx, "topic", topic), str(got) if got is not None else field)


def check_latest_version(use_latest_version: bool, auto_register: bool) -> None:
    """A serializer's ``use_latest_version`` and ``auto_register`` contradict each other."""
    if use_latest_version and auto_register:
        raise ConfigError("use_latest_version writes with the subject's latest schema, which "
                          "auto_register would replace with this one: pass auto_register=False")


def register_or_look_up(registry: Any, subject: str, schema: Any, ctx: RecordContext, *,
                        auto_register: bool, normalize: bool) -> int:
    """The id a serializer writes ``schema`` with under ``subject``: registered there
    (``auto_register``), else looked up; a refused registration names the record's topic."""
    if not auto_register:
        return registry.lookup_schema(subject, schema, normalize=normalize).schema_id
    try:
        return registry.register_schema(subject, schema, normalize=normalize)
    except IncompatibleSchemaError as exc:
        raise IncompatibleSchemaError(
            f"the schema for {ctx.what()} cannot be registered under subject {subject!r}: {exc}",
            code=exc.code, status=exc.status, url=exc.url) from exc


def writer_schema(registry: Any, schema_id: int, ctx: RecordContext, schema_type: str, format_name: str) -> Any:
    """The schema a record names by ``schema_id``, which must be a ``schema_type`` one:
    an id the registry does not know is an :class:`UnknownSchemaIdError` naming the
    record, another format's schema a :class:`PayloadDecodeError`."""
    try:
        schema = registry.get_schema(schema_id)
    except SchemaNotFoundError as exc:
        error = UnknownSchemaIdError(
            f"{ctx.what()} names schema id {schema_id}, which the registry does not know: {exc}",
            code=exc.code, status=exc.status, url=exc.url)
        error.schema_id, error.topic, error.partition, error.offset = (
            schema_id, ctx.topic, ctx.partition, ctx.offset)
        raise error from exc
    if schema.schema_type != schema_type:
        raise PayloadDecodeError(
            f"{ctx.what()} was written with schema id {schema_id}, a {schema.schema_type} schema, "
            f"not {format_name}: use that format's deserializer", schema_id=schema_id, **ctx.attributes())
    return schema


class FramedDeserializer:
    """The calling conventions of a deserializer with ``topic`` and ``field`` whose
    ``deserialize(data, topic=, partition=, offset=, field=)`` does the reading."""

    topic: str | None
    field: str

    def deserialize(self, data: Any, *, topic: str | None = None, partition: int | None = None,
                    offset: int | None = None, field: str | None = None) -> Any:
        raise NotImplementedError

    def for_topic(self, topic: str) -> Callable[[Any], Any]:
        """This deserializer for ``topic``: the one-argument callable the clients' options take."""
        ctx = RecordContext(topic, self.field)
        return lambda data: self(data, ctx)

    def __call__(self, data: Any, ctx: Any = None) -> Any:
        if data is None:
            return None
        ctx = RecordContext(self.topic, self.field) if ctx is None else context_of(ctx, self.topic, self.field)
        return self.deserialize(data, topic=ctx.topic, field=ctx.field)


class FramedSerializer:
    """The calling conventions of a serializer with ``topic`` and ``field`` whose
    ``_target(ctx)`` asks the registry for what a topic's records are written with (the
    header first), kept in ``_targets`` by (topic, field)."""

    topic: str | None
    field: str
    _targets: dict[tuple[str | None, str], Any]

    def _target(self, ctx: RecordContext) -> Any:
        raise NotImplementedError

    def for_topic(self, topic: str) -> Callable[[Any], bytes | None]:
        """This serializer for ``topic``: the one-argument callable the clients' options take."""
        ctx = RecordContext(topic, self.field)
        return lambda value: self(value, ctx)  # type: ignore[operator]

    def _context_and_target(self, ctx: Any) -> tuple[RecordContext | None, Any]:
        """The call's context and its target; the context is None for a call without one
        whose target is known (the common case builds nothing)."""
        if ctx is None:
            target = self._targets.get((self.topic, self.field))
            if target is not None:
                return None, target
            ctx = RecordContext(self.topic, self.field)
        else:
            ctx = context_of(ctx, self.topic, self.field)
        return ctx, self._targets.get((ctx.topic, ctx.field)) or self._target(ctx)
