"""With the broker stopped, every blocking call returns by its timeout with a typed error."""

import time
import uuid

import pytest

from kafkawire.client.cluster import Cluster
from kafkawire.client.config import Config
from kafkawire.client.consumer import Consumer
from kafkawire.client.errors import (
    DeliveryTimeoutError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
)
from kafkawire.client.producer import Producer


class _Clock:
    def __enter__(self):
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.elapsed = time.monotonic() - self.start


@pytest.mark.broker
def test_deadlines_with_the_broker_stopped(tansu_broker_factory):
    broker = tansu_broker_factory()
    bootstrap = broker.bootstrap
    topic = f"dl-{uuid.uuid4().hex[:6]}"
    producer = Producer(bootstrap_servers=bootstrap, linger_ms=0, request_timeout_ms=1000,
                        delivery_timeout_ms=2000, max_block_ms=1000)
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                        request_timeout_ms=1000, fetch_max_wait_ms=100)
    try:
        producer.send(topic, b"before", partition=0).result(10)
        consumer.assign([(topic, 0)])
        assert [r.value for r in consumer.poll(5)] == [b"before"]
        broker.stop()

        fut = producer.send(topic, b"after", partition=0)
        with _Clock() as clock, pytest.raises(KafkaTimeoutError, match="flush"):
            producer.flush(0.5)
        assert clock.elapsed < 1.5
        with _Clock() as clock, pytest.raises(DeliveryTimeoutError, match="delivery_timeout_ms"):
            fut.result(10)
        assert clock.elapsed < 4

        with _Clock() as clock:
            with pytest.raises(KafkaTimeoutError, match="not found in metadata"):
                producer.send(f"{topic}-new", b"x")  # needs metadata: max_block_ms
        assert clock.elapsed < 2.5

        with _Clock() as clock:
            assert consumer.poll(0.5) == []
        assert clock.elapsed < 1.5
        with _Clock() as clock, pytest.raises(KafkaTimeoutError):
            consumer.end_offsets([(topic, 0)], timeout=0.5)
        assert clock.elapsed < 1.5

        with _Clock() as clock, pytest.raises(NoBrokersAvailableError, match=bootstrap):
            Producer(bootstrap_servers=bootstrap, max_block_ms=500)
        assert clock.elapsed < 1.5
    finally:
        with _Clock() as clock:
            producer.close(1)
            consumer.close()
        assert clock.elapsed < 3


def test_refresh_with_every_broker_down_sleeps_between_attempts():
    from kafkawire.testing import free_port

    cfg = Config.client(bootstrap_servers=f"127.0.0.1:{free_port()}", reconnect_backoff_ms=50,
                        reconnect_backoff_max_ms=200)
    with Cluster(cfg) as cluster, _Clock() as clock:
        with pytest.raises(KafkaTimeoutError, match="refused"):
            cluster.refresh(0.6)
    assert 0.5 < clock.elapsed < 1.2
