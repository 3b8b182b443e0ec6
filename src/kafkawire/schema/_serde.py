"""What the schema'd serializers share: the subject name strategies, where a record came
from (topic, key or value, partition, offset), and the wording of where, for errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

from kafkawire.errors import ConfigError
from kafkawire.schema.errors import SerializationError

__all__ = [
    "KEY",
    "VALUE",
    "RecordContext",
    "SubjectNameStrategy",
    "blocking_registry",
    "record_subject",
    "strategy",
    "topic_record_subject",
    "topic_subject",
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
