"""Avro records through Apache Kafka and a real registry: kafkawire's clients with
kafkawire's serializers on one side, confluent-kafka's clients with its Avro serdes on the
other, both ways, sync and asyncio."""

from __future__ import annotations

import asyncio
import decimal
import datetime
import json
import time
import uuid
from typing import Any

import pytest
import confluent_kafka
from confluent_kafka.schema_registry import SchemaRegistryClient as CKClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as CKDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CKSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkawire.aio import AsyncConsumer, AsyncProducer
from kafkawire.client.consumer import Consumer
from kafkawire.client.producer import Producer
from kafkawire.schema import SchemaRegistryClient, errors
from kafkawire.schema.avro import AvroDeserializer, AvroSerializer

pytestmark = pytest.mark.broker

KEY = json.dumps({"type": "record", "name": "OrderKey", "namespace": "kw.e2e",
                  "fields": [{"name": "id", "type": "long"}]})
VALUE = json.dumps({"type": "record", "name": "Order", "namespace": "kw.e2e", "fields": [
    {"name": "customer", "type": "string"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "lines", "type": {"type": "array", "items": {"type": "map", "values": "int"}}},
]})
N = 30
AT = datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.timezone.utc)
RECORDS = [({"id": i}, {"customer": f"c{i}", "status": ("NEW", "PAID")[i % 2],
                        "amount": decimal.Decimal(i * 101) / 100, "at": AT + datetime.timedelta(seconds=i),
                        "note": None if i % 3 else f"n{i}", "lines": [{"q": i}] * (i % 3)})
           for i in range(N)]


def _topic() -> str:
    return f"avro-e2e-{uuid.uuid4().hex[:8]}"


def _confluent_read(bootstrap: str, topic: str, url: str) -> list[tuple[Any, Any]]:
    ck = CKClient({"url": url, "timeout": 10})
    kdes, vdes = CKDeserializer(ck), CKDeserializer(ck)
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "x",
                                  "enable.auto.commit": False, "log_level": 3})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got: list[tuple[Any, Any]] = []
        errs: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < N:
            assert time.monotonic() < deadline, f"confluent-kafka read {len(got)} of {N} in 30 s: {errs[:3]}"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errs.append(m.error())
                continue
            got.append((kdes(m.key(), SerializationContext(topic, MessageField.KEY)),
                        vdes(m.value(), SerializationContext(topic, MessageField.VALUE))))
        return got
    finally:
        c.close()


def _confluent_write(bootstrap: str, topic: str, url: str) -> None:
    ck = CKClient({"url": url, "timeout": 10})
    kser, vser = CKSerializer(ck, KEY), CKSerializer(ck, VALUE)
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "log_level": 3})
    for k, v in RECORDS:
        p.produce(topic, key=kser(k, SerializationContext(topic, MessageField.KEY)),
                  value=vser(v, SerializationContext(topic, MessageField.VALUE)), partition=0)
    assert p.flush(30) == 0


def test_kafkawire_producer_to_confluent_consumer(kafka_broker: Any, apicurio_registry: Any) -> None:
    topic = _topic()
    with SchemaRegistryClient(apicurio_registry.url) as registry:
        kser = AvroSerializer(registry, KEY, is_key=True).for_topic(topic)
        vser = AvroSerializer(registry, VALUE).for_topic(topic)
        with Producer(bootstrap_servers=kafka_broker.bootstrap, key_serializer=kser, value_serializer=vser,
                      linger_ms=2) as p:
            for k, v in RECORDS:
                p.send(topic, v, key=k, partition=0)
            p.flush(30)
        assert {f"{topic}-key", f"{topic}-value"} <= set(registry.get_subjects())
    assert _confluent_read(kafka_broker.bootstrap, topic, apicurio_registry.url) == RECORDS


def test_confluent_producer_to_kafkawire_consumer(kafka_broker: Any, apicurio_registry: Any) -> None:
    topic = _topic()
    _confluent_write(kafka_broker.bootstrap, topic, apicurio_registry.url)
    with SchemaRegistryClient(apicurio_registry.url) as registry:
        with Consumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest",
                      key_deserializer=AvroDeserializer(registry, is_key=True).for_topic(topic),
                      value_deserializer=AvroDeserializer(registry).for_topic(topic)) as c:
            c.assign([(topic, 0)])
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < N and time.monotonic() < deadline:
                got += c.poll(1.0)
    assert [(r.key, r.value) for r in got] == RECORDS
    # A payload that is not Avro reaches the consumer's caller as the serde's typed error.
    with Producer(bootstrap_servers=kafka_broker.bootstrap) as p:
        p.send(topic, b"plain bytes", partition=0).result(20)
    with SchemaRegistryClient(apicurio_registry.url) as registry:
        with Consumer(bootstrap_servers=kafka_broker.bootstrap,
                      value_deserializer=AvroDeserializer(registry).for_topic(topic)) as c:
            c.assign([(topic, 0)])
            c.seek((topic, 0), N)
            with pytest.raises(errors.UnknownMagicByteError, match=f"topic '{topic}'"):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    c.poll(1.0)


def test_asyncio_clients_both_ways(kafka_broker: Any, apicurio_registry: Any) -> None:
    mine, theirs = _topic(), _topic()
    _confluent_write(kafka_broker.bootstrap, theirs, apicurio_registry.url)

    async def main() -> list[Any]:
        with SchemaRegistryClient(apicurio_registry.url) as registry:
            async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=2,
                                     key_serializer=AvroSerializer(registry, KEY, is_key=True).for_topic(mine),
                                     value_serializer=AvroSerializer(registry, VALUE).for_topic(mine)) as p:
                for k, v in RECORDS:
                    await p.send(topic=mine, value=v, key=k, partition=0)
                await p.flush(30)
            got: list[Any] = []
            async with AsyncConsumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest",
                                     key_deserializer=AvroDeserializer(registry, is_key=True).for_topic(theirs),
                                     value_deserializer=AvroDeserializer(registry).for_topic(theirs)) as c:
                c.assign([(theirs, 0)])
                while len(got) < N:
                    got += await c.poll(1.0)
            return [(r.key, r.value) for r in got]

    assert asyncio.run(asyncio.wait_for(main(), 60)) == RECORDS
    assert _confluent_read(kafka_broker.bootstrap, mine, apicurio_registry.url) == RECORDS
