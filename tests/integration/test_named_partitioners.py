"""librdkafka's partitioners by name (``partitioner="consistent_random"``, ...): kafkawire
puts each key on the partition confluent-kafka (librdkafka) puts it with the same
partitioner, on Apache Kafka, in both shells; and a client's options may come as one
dict, as confluent-kafka takes them, with the consumer listing topics as the admin does."""

from __future__ import annotations

import os
import uuid

import pytest

from kafkawire.core.partitioner import PARTITIONERS
from kafkawire.errors import ConfigError
from shells import shell  # noqa: F401 - the fixture

KEYS = [os.urandom(n) for n in (1, 2, 3, 4, 5, 7, 8, 13, 16, 33)] + [f"user-{i}".encode() for i in range(30)]
HASHED = [name for name in PARTITIONERS if name != "random"]


def _create(broker, partitions: int) -> str:
    from kafkawire import Admin

    topic = f"parts-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:  # the dict form, dotted names
        admin.create_topics([topic], num_partitions=partitions)
    return topic


def _librdkafka_partitions(bootstrap: str, topic: str, name: str, keys: list[bytes]) -> list[int]:
    import confluent_kafka

    got: dict[bytes, int] = {}
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "partitioner": name, "linger.ms": 0})

    def delivered(err, msg):
        assert err is None, err
        got[msg.key()] = msg.partition()

    for key in keys:
        p.produce(topic, value=b"v", key=key, on_delivery=delivered)
    assert p.flush(30) == 0
    return [got[k] for k in keys]


@pytest.mark.parametrize("name", HASHED)
def test_each_key_lands_where_librdkafka_puts_it(kafka_broker, shell, name):
    topic = _create(kafka_broker, 7)
    keys = KEYS + ([b""] if name != "consistent_random" else [])  # consistent_random spreads empty keys
    theirs = _librdkafka_partitions(kafka_broker.bootstrap, topic, name, keys)
    p = shell.Producer({"bootstrap.servers": kafka_broker.bootstrap}, partitioner=name, linger_ms=0)
    try:
        ours = [p.send(topic, b"v", key=k).result(30).partition for k in keys]
    finally:
        p.close()
    assert ours == theirs
    assert len(set(ours)) > 3  # the keys are spread, not all on one partition


def test_unkeyed_records_of_a_random_partitioner_stick_to_a_partition(kafka_broker, shell):
    topic = _create(kafka_broker, 5)
    p = shell.Producer(bootstrap_servers=kafka_broker.bootstrap, partitioner="murmur2_random", linger_ms=50)
    try:
        futures = [p.send(topic, b"v") for _ in range(20)]
        assert len({f.result(30).partition for f in futures}) == 1  # one batch, one partition (KIP-480)
    finally:
        p.close()


def test_unknown_partitioner_names_and_bad_positional_options_say_what_to_do(shell):
    with pytest.raises(ConfigError, match="unknown partitioner 'crc32'; the named ones are murmur2, "):
        shell.Producer(bootstrap_servers="127.0.0.1:1", partitioner="crc32")
    with pytest.raises(TypeError, match=r"takes its options as one dict or as keyword arguments"):
        shell.Producer("127.0.0.1:9092")
    with pytest.raises(ConfigError, match="given twice"):
        shell.Consumer({"bootstrap.servers": "127.0.0.1:1"}, bootstrap_servers="127.0.0.1:1")


def test_every_client_takes_its_options_as_one_dict():
    # The asyncio clients' constructors do no I/O: their config is all there is to see.
    from kafkawire.aio import AsyncAdmin, AsyncConsumer, AsyncProducer

    for cls in (AsyncProducer, AsyncConsumer, AsyncAdmin):
        client = cls({"bootstrap.servers": "127.0.0.1:1", "client.id": "dict"}, request_timeout_ms=1234)
        assert client.config.bootstrap_servers == [("127.0.0.1", 1)]
        assert (client.config.client_id, client.config.request_timeout_ms) == ("dict", 1234)
    with pytest.raises(ConfigError, match="unknown client option 'bootstrap.server'; did you mean"):
        AsyncAdmin({"bootstrap.server": "127.0.0.1:1"})


def test_the_consumer_and_the_producer_list_topics_and_partitions_alike(kafka_broker, shell):
    topic = _create(kafka_broker, 3)
    c = shell.Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    p = shell.Producer({"bootstrap.servers": kafka_broker.bootstrap})
    try:
        assert c.partitions_for(topic) == p.partitions_for(topic) == [0, 1, 2]
        c.assign([(topic, 0)])
        c.commit({(topic, 0): 0})  # the group's offsets make the internal topic
        topics = c.list_topics()
        assert topics[topic] == [0, 1, 2] and "__consumer_offsets" not in topics
        assert "__consumer_offsets" in c.list_topics(include_internal=True)
        assert p.list_topics()[topic] == [0, 1, 2] and "__consumer_offsets" not in p.list_topics()
        assert set(p.list_topics(include_internal=True)) == set(c.list_topics(include_internal=True))
        assert c.config.group_id is not None
    finally:
        p.close()
        c.close()
