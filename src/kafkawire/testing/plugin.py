"""pytest fixtures that start real Kafka-protocol test brokers on 127.0.0.1.

Enable them with ``pytest_plugins = ["kafkawire.testing.plugin"]`` in a top-level
conftest.py (or ``pytest -p kafkawire.testing.plugin``).

* ``kafka_broker``: one single-node Apache Kafka (:class:`~kafkawire.testing.KafkaCluster`,
  KRaft, PLAINTEXT) for the whole session: the reference broker.
  ``kafka_cluster_factory(size=1, **KafkaCluster options)``: a fresh cluster for a test
  that needs its own (3 nodes, SASL/SSL listeners, features, nodes to kill).
  ``kafka39_broker``: one Apache Kafka 3.9 node for the session (the broker matrix).
* ``tansu_broker``: one :class:`~kafkawire.testing.TansuBroker` for the whole session.
* ``mock_cluster``: one 3-broker :class:`~kafkawire.testing.MockCluster` for the session.
* ``tansu_broker_factory`` / ``mock_cluster_factory``: call them to get fresh brokers for
  a test that breaks them; everything they started is stopped when the test ends.
* ``moto_s3``: one moto S3 server (:class:`~kafkawire.testing.s3.MotoS3Server`) for the
  session; ``tansu_cluster_factory(size=2)``: Tansu brokers sharing a fresh bucket on it
  (:class:`~kafkawire.testing.brokers.TansuCluster`), for failover tests.

Tests are marked by the brokers they use (``kafka``, ``tansu``, ``mock``), from their
fixtures, so ``pytest -m kafka`` runs what needs Apache Kafka and ``-m "not kafka"`` the rest.

Session brokers are shared: a test that takes brokers down or narrows versions should use
a factory, or put things back before it returns.  A missing broker makes the fixture
fail with the install hint, never skip.
"""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from kafkawire.testing.brokers import TansuBroker, TansuCluster
from kafkawire.testing.kafka import KAFKA_MATRIX_VERSION, KafkaCluster
from kafkawire.testing.mock import MockCluster
from kafkawire.testing.s3 import MotoS3Server

__all__ = ["kafka_broker", "kafka39_broker", "kafka_cluster_factory", "tansu_broker", "mock_cluster", "tansu_broker_factory", "mock_cluster_factory",
           "moto_s3", "tansu_cluster_factory"]


# Which fixtures mean which broker, for the markers.
_BROKER_FIXTURES = {
    "kafka": ("kafka_broker", "kafka39_broker", "kafka_cluster_factory"),
    "tansu": ("tansu_broker", "tansu_broker_factory", "tansu_cluster_factory", "tls_broker",
              "tls_broker_factory"),
    "mock": ("mock_cluster", "mock_cluster_factory"),
}


def pytest_configure(config: pytest.Config) -> None:
    for marker in _BROKER_FIXTURES:
        config.addinivalue_line("markers", f"{marker}: uses the {marker} test broker (from its fixtures)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in _BROKER_FIXTURES.items():
            if used.intersection(fixtures):
                item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaCluster]:
    """One Apache Kafka node (KRaft, PLAINTEXT), shared by the session."""
    with KafkaCluster(1) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka39_broker() -> Iterator[KafkaCluster]:
    """One Apache Kafka 3.9 node (KRaft, PLAINTEXT; ``KAFKAWIRE_KAFKA_MATRIX_VERSION``
    overrides the release), shared by the session: the last line before Kafka 4 removed
    the oldest API versions (KIP-896), so older versions meet a real broker."""
    with KafkaCluster(1, version=KAFKA_MATRIX_VERSION) as cluster:
        yield cluster


@pytest.fixture
def kafka_cluster_factory() -> Iterator[Callable[..., KafkaCluster]]:
    """``factory(size=1, **KafkaCluster options)`` starts a fresh Apache Kafka cluster for
    this test; it is stopped when the test ends."""
    started: list[KafkaCluster] = []

    def factory(size: int = 1, **options: object) -> KafkaCluster:
        cluster = KafkaCluster(size, **options)  # type: ignore[arg-type]
        started.append(cluster)
        return cluster.start()

    yield factory
    for cluster in reversed(started):
        cluster.close()


@pytest.fixture(scope="session")
def tansu_broker() -> Iterator[TansuBroker]:
    """A Tansu broker with in-memory storage, shared by the session."""
    with TansuBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def mock_cluster() -> Iterator[MockCluster]:
    """librdkafka's mock cluster with brokers 1, 2 and 3, shared by the session."""
    with MockCluster(3) as cluster:
        yield cluster


@pytest.fixture
def tansu_broker_factory() -> Iterator[Callable[..., TansuBroker]]:
    """``factory(**TansuBroker options)`` starts a fresh Tansu broker for this test."""
    started: list[TansuBroker] = []

    def factory(**options: object) -> TansuBroker:
        broker = TansuBroker(**options)  # type: ignore[arg-type]
        started.append(broker)
        return broker.start()

    yield factory
    for broker in reversed(started):
        broker.close()


@pytest.fixture
def mock_cluster_factory() -> Iterator[Callable[[int], MockCluster]]:
    """``factory(num_brokers=3)`` starts a fresh mock cluster for this test."""
    started: list[MockCluster] = []

    def factory(num_brokers: int = 3) -> MockCluster:
        cluster = MockCluster(num_brokers)
        started.append(cluster)
        return cluster

    yield factory
    for cluster in reversed(started):
        cluster.close()


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3Server]:
    """A moto S3 server on loopback, shared by the session (each cluster has its bucket)."""
    with MotoS3Server() as server:
        yield server


@pytest.fixture
def tansu_cluster_factory(moto_s3: MotoS3Server) -> Iterator[Callable[..., TansuCluster]]:
    """``factory(size=2, **TansuCluster options)`` starts Tansu brokers sharing a fresh S3
    bucket on ``moto_s3``; they are stopped when the test ends."""
    started: list[TansuCluster] = []

    def factory(size: int = 2, **options: object) -> TansuCluster:
        cluster = TansuCluster(size, s3=moto_s3, **options)  # type: ignore[arg-type]
        started.append(cluster)
        return cluster.start()

    yield factory
    for cluster in reversed(started):
        cluster.close()
