"""Schema Registry support: a client for the Confluent REST API (Confluent's registry,
Karapace, Redpanda, Apicurio's ``/apis/ccompat/v7``), sync and asyncio.

* :class:`SchemaRegistryClient` / :class:`AsyncSchemaRegistryClient`: register, look up,
  versions, compatibility, config and mode, deletes, contexts; ids and schemas cached.
* :class:`Schema`, :class:`SchemaReference`, :class:`RegisteredSchema`: what it stores.
* :class:`AvroSerializer` / :class:`AvroDeserializer` (:mod:`kafkawire.schema.avro`,
  needs ``fastavro``), :class:`ProtobufSerializer` / :class:`ProtobufDeserializer`
  (:mod:`kafkawire.schema.protobuf`, needs ``protobuf``), :class:`JSONSerializer` /
  :class:`JSONDeserializer` (:mod:`kafkawire.schema.json_schema`, needs ``jsonschema``):
  records in Confluent's framing, for the clients' ``key_serializer`` /
  ``value_deserializer`` options.
* :mod:`kafkawire.schema.framing`: Confluent's framing (magic byte, schema id, Protobuf
  message indexes) written and read.
* the typed errors of :mod:`kafkawire.schema.errors`.

The clients need ``httpx`` (``pip install kafkawire[schema]``); they are imported on
first use, so that the I/O-free parts (:mod:`kafkawire.schema._core`, the errors) import
without it.
"""

from __future__ import annotations

from typing import Any

from kafkawire.schema._core import RegisteredSchema, Schema, SchemaReference
# Every typed error is re-exported here, as listed once in errors.__all__.
from kafkawire.schema.errors import *  # noqa: F401,F403
from kafkawire.schema.errors import __all__ as _ERRORS

__all__ = [
    "AsyncSchemaRegistryClient",
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    *_ERRORS,
    "AvroSerializer",
    "AvroDeserializer",
    "JSONSerializer",
    "JSONDeserializer",
    "ProtobufSerializer",
    "ProtobufDeserializer",
]

_SHELLS = {"SchemaRegistryClient": "kafkawire.schema._sync",
           "AsyncSchemaRegistryClient": "kafkawire.schema._aio",
           "AvroSerializer": "kafkawire.schema.avro",
           "AvroDeserializer": "kafkawire.schema.avro",
           "JSONSerializer": "kafkawire.schema.json_schema",
           "JSONDeserializer": "kafkawire.schema.json_schema",
           "ProtobufSerializer": "kafkawire.schema.protobuf",
           "ProtobufDeserializer": "kafkawire.schema.protobuf"}
# The package each shell needs, by the top-level module that was missing.
_NEEDS = {"httpx": "httpx", "fastavro": "fastavro", "jsonschema": "jsonschema", "referencing": "jsonschema",
          "google": "protobuf"}


def __getattr__(name: str) -> Any:
    module = _SHELLS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkawire.schema' has no attribute {name!r}")
    try:
        import importlib

        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        package = _NEEDS.get((exc.name or "").partition(".")[0])
        if package is None:
            raise
        raise ImportError(f"kafkawire.schema.{name} needs {package}: pip install 'kafkawire[schema]' "
                          f"(or pip install {package})") from exc
    globals()[name] = value
    return value
