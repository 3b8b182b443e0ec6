"""pytest fixtures that start real Kafka-protocol test brokers on 127.0.0.1.

Enable them with ``pytest_plugins = ["kafkawire.testing.plugin"]`` in a top-level
conftest.py (or ``pytest -p kafkawire.testing.plugin``).

* ``tansu_broker``: one :class:`~kafkawire.testing.TansuBroker` for the whole session.
* ``mock_cluster``: one 3-broker :class:`~kafkawire.testing.MockCluster` for the session.
* ``tansu_broker_factory`` / ``mock_cluster_factory``: call them to get fresh brokers for
  a test that breaks them; everything they started is stopped when the test ends.

Session brokers are shared: a test that takes brokers down or narrows versions should use
a factory, or put things back before it returns.  A missing broker makes the fixture
fail with the install hint, never skip.
"""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from kafkawire.testing.brokers import TansuBroker
from kafkawire.testing.mock import MockCluster

__all__ = ["tansu_broker", "mock_cluster", "tansu_broker_factory", "mock_cluster_factory"]


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
