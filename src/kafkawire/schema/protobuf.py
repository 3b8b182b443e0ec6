"""Protobuf keys and values in Confluent's framing, with a Schema Registry.

:class:`ProtobufSerializer` writes the magic byte, the schema id, the message indexes
(where the message is in its .proto file: ``[0]`` the first top-level message, ``[1, 0]``
the first message nested in the second) and ``message.SerializeToString()``;
:class:`ProtobufDeserializer` reads them back into the message class given.  The bytes
are those of confluent-kafka's ``ProtobufSerializer``, and the schema registered is what
it registers: the message's file as its serialized ``FileDescriptorProto`` in base64,
each imported file (but Google's and Confluent's well-known ones) registered first under
its own file name and referenced by it.

As for :mod:`kafkawire.schema.avro`: the topic is given at construction, bound with
``for_topic``, or passed as ``ctx``; the registry is asked once per topic.
"""

from __future__ import annotations

import base64
from typing import Any

from kafkawire.errors import ConfigError
from kafkawire.schema._core import Schema, SchemaReference
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
)
from kafkawire.schema.errors import (
    PayloadDecodeError,
    SerializationError,
)
from kafkawire.schema.framing import frame_header, unframe

__all__ = ["ProtobufDeserializer", "ProtobufSerializer", "message_indexes", "schema_of_file"]

# Files every Protobuf runtime has: not registered as references (confluent-kafka's default).
_KNOWN = ("google/protobuf/", "google/type/", "confluent/")


def message_indexes(descriptor: Any) -> list[int]:
    """Where the message ``descriptor`` is in its file: the index of the top-level message,
    then of each nested message down to it."""
    path: list[int] = []
    current = descriptor
    while current.containing_type is not None:
        parent = current.containing_type
        path.append(list(parent.nested_types).index(current))
        current = parent
    path.append(list(current.file.message_types_by_name.values()).index(current))
    return path[::-1]


def schema_of_file(file: Any) -> str:
    """A .proto file's schema text as confluent-kafka registers it: its serialized
    ``FileDescriptorProto``, base64."""
    return base64.standard_b64encode(file.serialized_pb).decode("ascii")


def _file_subject(topic: str | None, field: str, file_name: str) -> str:
    return file_name


class ProtobufSerializer(FramedSerializer):
    """Protobuf in Confluent's framing: ``serializer(message)`` -> bytes (None stays None).

    ``registry``: a :class:`~kafkawire.schema.SchemaRegistryClient`.  ``message_type``:
    the generated message class every value is an instance of.  ``topic``, ``is_key``,
    ``subject_name_strategy`` (``"record"``: the message's full name), ``auto_register``,
    ``use_latest_version``, ``normalize``: as for
    :class:`~kafkawire.schema.avro.AvroSerializer`.  ``reference_subject_name_strategy``:
    ``(topic, field, file_name)`` -> the subject an imported file is registered under
    (default: its file name).  ``skip_known_types`` (True): Google's and Confluent's
    well-known files are not registered as references.
    """

    def __init__(self, registry: Any, message_type: type, *, topic: str | None = None, is_key: bool = False,
                 subject_name_strategy: str | SubjectNameStrategy = "topic",
                 reference_subject_name_strategy: SubjectNameStrategy = _file_subject,
                 auto_register: bool = True, use_latest_version: bool = False, normalize: bool = False,
                 skip_known_types: bool = True):
        check_latest_version(use_latest_version, auto_register)
        descriptor = getattr(message_type, "DESCRIPTOR", None)
        if descriptor is None or not hasattr(descriptor, "file"):
            raise ConfigError(f"message_type must be a generated Protobuf message class, not {message_type!r}")
        self.registry = registry if registry is None else blocking_registry(registry, type(self).__name__)
        self.message_type = message_type
        self.topic = topic
        self.field = KEY if is_key else VALUE
        self.subject_name_strategy = strategy(subject_name_strategy)
        self.reference_subject_name_strategy = reference_subject_name_strategy
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self.normalize = normalize
        self.skip_known_types = skip_known_types
        self.indexes = message_indexes(descriptor)
        self._targets: dict[tuple[str | None, str], tuple[bytes, int, str]] = {}

    def _references(self, ctx: RecordContext, file: Any) -> list[SchemaReference]:
        refs = []
        for dep in file.dependencies:
            if self.skip_known_types and dep.name.startswith(_KNOWN):
                continue
            schema = Schema(schema_of_file(dep), "PROTOBUF", self._references(ctx, dep))
            subject = self.reference_subject_name_strategy(ctx.topic, ctx.field, dep.name)
            if self.auto_register:
                self.registry.register_schema(subject, schema, normalize=self.normalize)
            version = self.registry.lookup_schema(subject, schema, normalize=self.normalize).version
            refs.append(SchemaReference(dep.name, subject, int(version)))
        return refs

    def _target(self, ctx: RecordContext) -> tuple[bytes, int, str]:
        descriptor = self.message_type.DESCRIPTOR
        subject = self.subject_name_strategy(ctx.topic, ctx.field, descriptor.full_name)
        if self.use_latest_version:
            schema_id = self.registry.get_latest_version(subject).schema_id
        else:
            schema = Schema(schema_of_file(descriptor.file), "PROTOBUF", self._references(ctx, descriptor.file))
            schema_id = register_or_look_up(self.registry, subject, schema, ctx,
                                            auto_register=self.auto_register, normalize=self.normalize)
        target = (frame_header(schema_id, self.indexes), schema_id, subject)
        self._targets[(ctx.topic, ctx.field)] = target
        return target

    def __call__(self, message: Any, ctx: Any = None) -> bytes | None:
        if message is None:
            return None
        ctx, target = self._context_and_target(ctx)
        if not isinstance(message, self.message_type):
            what = (ctx or RecordContext(self.topic, self.field)).what()
            raise SerializationError(
                f"{what} is a {type(message).__name__}, not the {self.message_type.DESCRIPTOR.full_name} "
                f"this serializer writes", schema_id=target[1], topic=(ctx.topic if ctx else self.topic))
        return target[0] + message.SerializeToString()


class ProtobufDeserializer(FramedDeserializer):
    """Protobuf in Confluent's framing back to a message: ``deserializer(data)`` -> an
    instance of ``message_type`` (None stays None).  The schema id is not looked up: the
    message class is the reader's schema, and Protobuf reads what an older or newer
    version of it wrote.  Errors: the framing's, and
    :class:`~kafkawire.schema.errors.PayloadDecodeError` for a payload that does not
    parse, each naming the schema id and the topic, partition and offset where known.
    """

    def __init__(self, message_type: type, *, topic: str | None = None, is_key: bool = False):
        if not hasattr(message_type, "FromString"):
            raise ConfigError(f"message_type must be a generated Protobuf message class, not {message_type!r}")
        self.message_type = message_type
        self.topic = topic
        self.field = KEY if is_key else VALUE

    def deserialize(self, data: Any, *, topic: str | None = None, partition: int | None = None,
                    offset: int | None = None, field: str | None = None) -> Any:
        """``data`` read back; ``topic``, ``partition`` and ``offset`` name the record in errors."""
        if data is None:
            return None
        ctx = RecordContext(topic if topic is not None else self.topic, field or self.field, partition, offset)
        framed = unframe(data, protobuf=True, topic=ctx.topic, partition=partition, offset=offset)
        try:
            return self.message_type.FromString(framed.payload)  # a view: protobuf reads any buffer
        except Exception as exc:
            raise PayloadDecodeError(
                f"{ctx.what()} (schema id {framed.schema_id}, message indexes {list(framed.message_indexes or ())}) "
                f"does not parse as {self.message_type.DESCRIPTOR.full_name}: {exc}",
                schema_id=framed.schema_id, **ctx.attributes()) from exc
