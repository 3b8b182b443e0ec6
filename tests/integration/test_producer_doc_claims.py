"""What the README says of ``Producer.send()``, on Apache Kafka with topic auto-creation off:
it waits for a missing topic up to ``max_block_ms`` (then a KafkaTimeoutError naming the
fix), and a delivery callback is called as ``callback(metadata, exc)`` on the producer's
sender thread, for a record acknowledged and for one the broker refused."""

from __future__ import annotations

import threading
import time

import pytest
from settle import until_known
from topics import unique_name

from kafkawire import Admin, Producer, errors
from kafkawire.core.records import RecordMetadata
from kafkawire.testing import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.kafka]


@pytest.fixture(scope="module")
def strict_kafka():
    with KafkaCluster(1, broker_config={"auto.create.topics.enable": "false"}) as cluster:
        yield cluster


def test_send_to_a_missing_topic_waits_max_block_ms_then_names_the_fix(strict_kafka):
    topic = unique_name("never-made")
    with Producer(bootstrap_servers=strict_kafka.bootstrap, max_block_ms=2000) as p:
        start = time.monotonic()
        with pytest.raises(errors.KafkaTimeoutError) as info:
            p.send(topic, b"v")
        waited = time.monotonic() - start
    assert 1.9 <= waited < 8, waited
    assert f"topic {topic!r} not found in metadata within max_block_ms=2000" in str(info.value)
    assert "auto.create.topics.enable is off" in str(info.value) and "Admin.create_topics" in str(info.value)


def test_the_callback_gets_metadata_or_the_error_on_the_sender_thread(strict_kafka):
    b = strict_kafka.bootstrap
    topic = unique_name("callbacks")
    with Admin(bootstrap_servers=b) as admin:
        admin.create_topics([topic], num_partitions=1, configs={"max.message.bytes": "2000"})
        until_known(admin, topic, 1)
    calls: list[tuple[str, object, object]] = []
    done = threading.Event()

    def callback(metadata, exc):
        calls.append((threading.current_thread().name, metadata, exc))
        if len(calls) == 2:
            done.set()

    with Producer(bootstrap_servers=b, linger_ms=0) as p:
        p.send(topic, b"small", callback=callback)
        p.flush(10)
        # Within the client's max_request_size, over the topic's max.message.bytes: the
        # broker refuses it (MESSAGE_TOO_LARGE, not retriable).
        p.send(topic, b"x" * 5000, callback=callback)
        assert done.wait(20)
    (ok_thread, metadata, no_exc), (bad_thread, no_metadata, exc) = calls
    assert isinstance(metadata, RecordMetadata) and no_exc is None
    assert (metadata.topic, metadata.partition, metadata.offset) == (topic, 0, 0)
    assert no_metadata is None and isinstance(exc, errors.KafkaWireError)
    main = threading.current_thread().name
    assert ok_thread == bad_thread == "kafkawire-producer" != main
