"""A real Schema Registry for the schema tests: Apicurio Registry (Confluent-compatible
API under /apis/ccompat/v7) started once per session on free loopback ports, and the
client in both shells behind one blocking interface."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from typing import Any, Callable, Iterator

import pytest

from kafkawire.testing.registry import ApicurioRegistry


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "registry: uses the Apicurio Schema Registry (a JVM; run once, "
                                       "not again under the twin)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "apicurio_registry" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.registry)


@pytest.fixture(scope="session")
def apicurio_registry() -> Iterator[ApicurioRegistry]:
    """One Apicurio Registry (in-memory storage) shared by the session: tests use subjects
    of their own (the ``subject`` fixture)."""
    with ApicurioRegistry() as registry:
        yield registry


@pytest.fixture
def subject() -> str:
    """A subject no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}-value"


class AsyncBlocking:
    """An AsyncSchemaRegistryClient whose awaitables are run to completion on one loop,
    so that one test body checks both shells."""

    def __init__(self, *args: Any, **options: Any):
        from kafkawire.schema import AsyncSchemaRegistryClient

        self._loop = asyncio.new_event_loop()
        self.client = AsyncSchemaRegistryClient(*args, **options)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            return self._loop.run_until_complete(result) if inspect.isawaitable(result) else result

        return call

    def close(self) -> None:
        self._loop.run_until_complete(self.client.close())
        self._loop.close()


@pytest.fixture(params=["sync", "asyncio"])
def make_client(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``make_client(url, **options)``: a SchemaRegistryClient, or an
    AsyncSchemaRegistryClient behind the same blocking calls; closed when the test ends."""
    made: list[Any] = []

    def make(*args: Any, **options: Any) -> Any:
        if request.param == "sync":
            from kafkawire.schema import SchemaRegistryClient

            client = SchemaRegistryClient(*args, **options)
        else:
            client = AsyncBlocking(*args, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def registry(apicurio_registry: ApicurioRegistry, make_client: Callable[..., Any]) -> Any:
    """A client of the session's registry, in each shell."""
    return make_client(apicurio_registry.url)


@pytest.fixture
def client(apicurio_registry: ApicurioRegistry) -> Iterator[Any]:
    """A blocking client of the session's registry: what the serializers take."""
    from kafkawire.schema import SchemaRegistryClient

    with SchemaRegistryClient(apicurio_registry.url) as c:
        yield c


@pytest.fixture
def confluent(apicurio_registry: ApicurioRegistry) -> Any:
    """confluent-kafka's client of the session's registry, to hold kafkawire's answers against."""
    # confluent-kafka sets no HTTP timeout of its own: an answer stalled under load would hang
    # the test; with one, its client retries the request (max.retries) on a new connection.
    from confluent_kafka.schema_registry import SchemaRegistryClient as CKClient

    return CKClient({"url": apicurio_registry.url, "timeout": 10})
