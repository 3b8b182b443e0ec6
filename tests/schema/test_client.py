"""The Schema Registry client against a real registry (Apicurio Registry's Confluent-
compatible API), in both shells.  Where Apicurio differs from Confluent's registry the
test says so in one line and checks what Apicurio does."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import pytest

from kafkawire.errors import KafkaTimeoutError
from kafkawire.schema import RegisteredSchema, Schema, SchemaReference, errors
from kafkawire.testing._process import free_port
from kafkawire.testing.registry import ApicurioRegistry


def record(name: str, *fields: tuple[Any, ...], namespace: str = "kw.test") -> Schema:
    """A record schema from (name, type[, default]) fields, in the text the registry gives back."""
    def field(f: tuple[Any, ...]) -> dict[str, Any]:
        return {"name": f[0], "type": f[1], **({"default": f[2]} if len(f) > 2 else {})}

    return Schema(json.dumps({"type": "record", "name": name, "namespace": namespace,
                              "fields": [field(f) for f in fields]},
                             separators=(",", ":")))


V1 = record("R", ("a", "int"))
V2 = record("R", ("a", "int"), ("b", ["null", "string"], None))  # adds an optional field
BREAKS = record("R", ("b", "int"))  # drops a, adds a field without a default


def test_register_and_read_back(registry: Any, subject: str) -> None:
    schema_id = registry.register_schema(subject, V1)
    assert isinstance(schema_id, int) and schema_id > 0
    assert registry.register_schema(subject, V1) == schema_id  # the same schema: the same id
    assert registry.get_schema(schema_id) == V1
    latest = registry.get_latest_version(subject)
    assert latest == RegisteredSchema(schema_id, V1, subject, 1)
    assert registry.get_version(subject, 1) == latest
    assert registry.lookup_schema(subject, V1) == latest
    second = registry.register_schema(subject, V2)
    assert second != schema_id
    assert registry.get_versions(subject) == [1, 2]
    assert registry.get_latest_version(subject).schema_id == second
    assert subject in registry.get_subjects()
    # Apicurio ignores subjectPrefix and lists every subject (Confluent's registry filters).
    assert subject in registry.get_subjects(prefix=subject)
    # One schema text has one id in the whole registry (other tests register V2 too).
    assert subject in registry.get_subjects_for_id(second)
    assert (subject, 2) in registry.get_versions_for_id(second)
    assert set(registry.get_schema_types()) >= {"AVRO", "PROTOBUF", "JSON"}


def test_other_schema_types(registry: Any, subject: str) -> None:
    proto = Schema('syntax = "proto3";\npackage kw.test;\n\nmessage M {\n  string s = 1;\n}\n', "PROTOBUF")
    pid = registry.register_schema(subject, proto)
    got = registry.get_schema(pid)
    assert got.schema_type == "PROTOBUF" and "message M" in got.schema_str
    js = Schema('{"type":"object","properties":{"n":{"type":"integer"}}}', "JSON")
    jid = registry.register_schema(subject + "-json", js)
    assert registry.get_schema(jid).schema_type == "JSON"


def test_references(registry: Any, subject: str) -> None:
    inner = record("Inner", ("v", "int"))
    registry.register_schema(subject + "-inner", inner)
    outer = Schema(json.dumps({"type": "record", "name": "Outer", "namespace": "kw.test",
                               "fields": [{"name": "i", "type": "kw.test.Inner"}]}, separators=(",", ":")),
                   references=[SchemaReference("kw.test.Inner", subject + "-inner", 1)])
    oid = registry.register_schema(subject, outer)
    assert registry.get_schema(oid).references == (SchemaReference("kw.test.Inner", subject + "-inner", 1),)
    assert registry.get_latest_version(subject).schema.references == outer.references
    assert registry.get_referenced_by(subject + "-inner", 1) == [oid]
    with pytest.raises(errors.ReferenceExistsError) as info:
        registry.delete_subject(subject + "-inner")
    assert info.value.code == 42206 and not info.value.retriable


def test_serializing_many_records_asks_once_per_schema(registry: Any, subject: str) -> None:
    before = registry.requests_sent
    schema_id = registry.register_schema(subject, V1)
    for _ in range(100_000):
        assert registry.register_schema(subject, V1) == schema_id
        assert registry.get_schema(schema_id) == V1
    assert registry.requests_sent - before == 1


def test_not_found_errors(registry: Any, subject: str) -> None:
    with pytest.raises(errors.SubjectNotFoundError) as info:
        registry.get_versions(subject)
    assert info.value.code == 40401 and info.value.status == 404 and subject in str(info.value)
    registry.register_schema(subject, V1)
    with pytest.raises(errors.VersionNotFoundError) as info2:
        registry.get_version(subject, 9)
    assert info2.value.code == 40402
    with pytest.raises(errors.SchemaNotFoundError) as info3:
        registry.get_schema(987654)
    assert info3.value.code == 40403 and "987654" in str(info3.value)
    with pytest.raises(errors.SchemaNotFoundError):  # a schema never registered under it
        registry.lookup_schema(subject, V2)


def test_invalid_schema(registry: Any, subject: str) -> None:
    with pytest.raises(errors.InvalidSchemaError) as info:
        registry.register_schema(subject, Schema('{"type": "recrod"}'))
    assert info.value.code == 42201 and info.value.status == 422 and not info.value.retriable


def test_compatibility(registry: Any, subject: str) -> None:
    registry.register_schema(subject, V1)
    # Apicurio's global default is NONE (Confluent's is BACKWARD): set the subject's own.
    assert registry.set_config("backward", subject) == "BACKWARD"
    assert registry.get_config(subject) == "BACKWARD"
    assert registry.test_compatibility(subject, V2) is True
    assert registry.test_compatibility(subject, BREAKS) is False
    assert registry.test_compatibility(subject, BREAKS, version=None) is False
    with pytest.raises(errors.IncompatibleSchemaError) as info:
        registry.register_schema(subject, BREAKS)
    assert info.value.code == 409 and "set_config" in str(info.value) and not info.value.retriable
    registry.register_schema(subject, V2)
    with pytest.raises(errors.InvalidCompatibilityLevelError) as info2:
        registry.set_config("SIDEWAYS", subject)
    assert info2.value.code == 42203
    assert registry.delete_config(subject) == "BACKWARD"
    # Apicurio answers a subject without a level of its own with the global one (Confluent: 40408).
    assert registry.get_config(subject, default_to_global=True) == registry.get_config()


def test_mode(registry: Any, subject: str) -> None:
    registry.register_schema(subject, V1)
    assert registry.get_mode() == "READWRITE"
    assert registry.set_mode("readonly", subject) == "READONLY"
    assert registry.get_mode(subject) == "READONLY"
    assert registry.delete_mode(subject) == "READONLY"
    # Apicurio answers a subject without a mode of its own with the global one (Confluent: 40409).
    assert registry.get_mode(subject) == "READWRITE"
    # Apicurio calls an unknown mode an invalid schema, 42201 (Confluent: 42204 invalid mode).
    with pytest.raises((errors.InvalidModeError, errors.InvalidSchemaError)):
        registry.set_mode("SIDEWAYS", subject)


def test_soft_and_hard_deletes(registry: Any, subject: str) -> None:
    first = registry.register_schema(subject, V1)
    registry.register_schema(subject, V2)
    assert registry.delete_version(subject, 1) == 1
    assert registry.get_versions(subject) == [2]
    assert registry.get_versions(subject, deleted=True) == [1, 2]
    with pytest.raises(errors.VersionNotSoftDeletedError) as info:
        registry.delete_version(subject, 2, permanent=True)
    assert info.value.code == 40407
    assert registry.delete_version(subject, 1, permanent=True) == 1
    assert registry.get_versions(subject, deleted=True) == [2]
    assert registry.delete_subject(subject) == [2]
    assert subject not in registry.get_subjects()
    assert subject in registry.get_subjects(deleted=True)
    with pytest.raises(errors.SubjectNotFoundError):
        registry.get_latest_version(subject)  # the cache forgot it too
    assert registry.delete_subject(subject, permanent=True) == [2]
    assert subject not in registry.get_subjects(deleted=True)
    assert registry.get_schema(first) == V1  # ids keep naming their schema (cached for good)


def test_contexts(registry: Any, subject: str) -> None:
    contexts = registry.get_contexts()
    # Apicurio lists its one context as ":.:" (Confluent: "."), and keeps a qualified
    # subject ":.ctx:name" as a plain subject of that name in it.
    assert contexts in ([":.:"], ["."])
    qualified = f":.kwctx:{subject}"
    schema_id = registry.register_schema(qualified, V1)
    assert registry.get_latest_version(qualified).schema_id == schema_id
    assert registry.get_schema(schema_id, subject=qualified) == V1


@pytest.mark.deadlines
def test_an_unreachable_registry_is_retried_until_the_deadline(make_client: Callable[..., Any]) -> None:
    client = make_client(f"http://127.0.0.1:{free_port()}", timeout_ms=1500, retry_backoff_ms=50,
                         retry_backoff_max_ms=200)
    started = time.monotonic()
    with pytest.raises(errors.SchemaRegistryTimeoutError) as info:
        client.get_schema(1)
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 3.0, elapsed
    assert isinstance(info.value, KafkaTimeoutError) and info.value.retriable
    assert len(info.value.attempts) >= 4 and client.requests_sent == len(info.value.attempts)
    assert all(isinstance(a, errors.SchemaRegistryConnectionError) for a in info.value.attempts)


@pytest.mark.registry  # starts a registry of its own
def test_a_registry_that_comes_up_during_the_call_answers_it(make_client: Callable[..., Any]) -> None:
    import threading

    registry = ApicurioRegistry(port=free_port())
    client = make_client(registry.url, timeout_ms=90_000, retry_backoff_ms=100, retry_backoff_max_ms=500)
    starter = threading.Timer(1.0, registry.start)
    starter.start()
    try:
        assert client.get_subjects() == []
        assert client.requests_sent >= 2  # refused before the registry came up
    finally:
        starter.join()
        registry.close()


@pytest.mark.deadlines
def test_a_registry_that_does_not_answer_ends_the_call_by_its_deadline(make_client: Callable[..., Any]) -> None:
    import socket

    with socket.socket() as silent:  # connections are taken into its backlog, never answered
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        client = make_client(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_ms=1200,
                             request_timeout_ms=500, retry_backoff_ms=50)
        started = time.monotonic()
        with pytest.raises(errors.SchemaRegistryTimeoutError) as info:
            client.get_latest_version("s")
        elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 2.5, elapsed
    assert 2 <= len(info.value.attempts) <= 3
    assert all("no answer within" in str(a) for a in info.value.attempts)


def test_the_v8_api_root(apicurio_registry: ApicurioRegistry, make_client: Callable[..., Any], subject: str) -> None:
    v8 = make_client(apicurio_registry.url.replace("/v7", "/v8"))
    schema_id = v8.register_schema(subject, V1)
    assert v8.get_latest_version(subject).schema_id == schema_id
    assert make_client(apicurio_registry.url).get_schema(schema_id) == V1
