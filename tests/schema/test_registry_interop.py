"""kafkawire's registry client and confluent-kafka's SchemaRegistryClient on one real
registry (Apicurio's Confluent-compatible API): each reads what the other registered."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from confluent_kafka.schema_registry import AsyncSchemaRegistryClient as CKAsyncClient
from confluent_kafka.schema_registry import Schema as CKSchema
from confluent_kafka.schema_registry import SchemaReference as CKReference
from confluent_kafka.schema_registry import SchemaRegistryClient as CKClient

from kafkawire.schema import Schema, SchemaReference
from kafkawire.testing.registry import ApicurioRegistry


def compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


INNER = compact({"type": "record", "name": "Inner", "namespace": "kw.interop", "fields": [{"name": "v", "type": "long"}]})
OUTER = compact({"type": "record", "name": "Outer", "namespace": "kw.interop",
                 "fields": [{"name": "i", "type": "kw.interop.Inner"}, {"name": "s", "type": "string"}]})


def test_confluent_reads_what_kafkawire_registered(registry: Any, confluent: Any, subject: str) -> None:
    registry.register_schema(subject + "-inner", Schema(INNER))
    ref = SchemaReference("kw.interop.Inner", subject + "-inner", 1)
    schema_id = registry.register_schema(subject, Schema(OUTER, references=[ref]))
    got = confluent.get_schema(schema_id)
    assert got.schema_str == OUTER and got.schema_type == "AVRO"
    assert [(r.name, r.subject, r.version) for r in got.references] == [("kw.interop.Inner", subject + "-inner", 1)]
    latest = confluent.get_latest_version(subject)
    assert (latest.schema_id, latest.subject, latest.version) == (schema_id, subject, 1)
    found = confluent.lookup_schema(subject, CKSchema(OUTER, "AVRO", [CKReference("kw.interop.Inner", subject + "-inner", 1)]))
    assert found.schema_id == schema_id and found.version == 1
    assert confluent.get_versions(subject) == [1]
    proto = 'syntax = "proto3";\npackage kw.interop;\n\nmessage P {\n  int64 n = 1;\n}\n'
    pid = registry.register_schema(subject + "-proto", Schema(proto, "PROTOBUF"))
    assert confluent.get_schema(pid).schema_type == "PROTOBUF"


def test_confluents_asyncio_client_reads_what_kafkawire_registered(registry: Any, apicurio_registry: ApicurioRegistry,
                                                                   subject: str) -> None:
    schema_id = registry.register_schema(subject, Schema(INNER))

    async def read() -> Any:
        return await CKAsyncClient({"url": apicurio_registry.url}).get_latest_version(subject)

    latest = asyncio.run(read())
    assert (latest.schema_id, latest.version, latest.schema.schema_str) == (schema_id, 1, INNER)


def test_kafkawire_reads_what_confluent_registered(registry: Any, confluent: Any, subject: str) -> None:
    inner_id = confluent.register_schema(subject + "-inner", CKSchema(INNER, "AVRO"))
    ref = CKReference("kw.interop.Inner", subject + "-inner", 1)
    schema_id = confluent.register_schema(subject, CKSchema(OUTER, "AVRO", [ref]))
    assert registry.get_schema(inner_id) == Schema(INNER)
    assert registry.get_schema(schema_id) == Schema(OUTER, references=[SchemaReference("kw.interop.Inner", subject + "-inner", 1)])
    latest = registry.get_latest_version(subject)
    assert (latest.schema_id, latest.subject, latest.version) == (schema_id, subject, 1)
    assert registry.lookup_schema(subject + "-inner", INNER).schema_id == inner_id
    # What one client registered the other registers again as the same id.
    assert registry.register_schema(subject + "-inner", INNER) == inner_id


def test_kafkawire_reads_the_id_in_confluent_serialized_records(registry: Any, apicurio_registry: ApicurioRegistry,
                                                                subject: str) -> None:
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = subject.removesuffix("-value")
    confluent = CKClient({"url": apicurio_registry.url, "timeout": 10})
    serializer = AvroSerializer(confluent, INNER)
    payload = serializer({"v": 42}, SerializationContext(topic, MessageField.VALUE))
    magic, schema_id = struct.unpack(">bI", payload[:5])
    assert magic == 0
    assert registry.get_schema(schema_id) == Schema(INNER)
    assert registry.get_latest_version(f"{topic}-value").schema_id == schema_id
