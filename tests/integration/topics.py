"""Topics made for a test with the partition count it needs (Kafka auto-creates one
partition, Tansu more: a test that uses several asks for them)."""

from __future__ import annotations

import uuid
from typing import Any

from kafkawire.client.admin import Admin, NewTopic


def unique_name(prefix: str) -> str:
    """``prefix-<random>``: a topic or group name no other test (or earlier run) used."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, prefix: str, partitions: int = 1, **configs: Any) -> str:
    """A new topic named ``prefix-<random>`` with ``partitions`` partitions; its name."""
    return ensure_topic(bootstrap, unique_name(prefix), partitions, **configs)


def ensure_topic(bootstrap: str, name: str, partitions: int = 1, **configs: Any) -> str:
    """Create topic ``name`` with ``partitions`` partitions unless it exists; its name."""
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, -1, {k: str(v) for k, v in configs.items()})],
                            timeout=30, raise_on_error=False)
    return name
