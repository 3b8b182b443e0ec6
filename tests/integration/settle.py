"""Waiting for Apache Kafka's metadata to settle.

Kafka answers CreateTopics, CreatePartitions, DeleteTopics and AlterConfigs once its
controller has the change; the broker that answers Metadata, DescribeConfigs or an
OffsetCommit has it a moment later, when it replays the controller's log (Tansu and the
mock are at once).  A test that reads right after such a change waits here, bounded."""

from __future__ import annotations

import time
from typing import Any, Callable

from kafkawire.client.admin import Admin


def eventually(get: Callable[[], Any], want: Any, timeout: float = 10.0) -> None:
    """Ask ``get()`` until it returns ``want``; fail after ``timeout`` seconds naming both."""
    deadline = time.monotonic() + timeout
    while (got := get()) != want:
        assert time.monotonic() < deadline, f"still {got!r}, not {want!r}, after {timeout}s"
        time.sleep(0.05)


def partition_count(admin: Admin, topic: str) -> int:
    """How many partitions with a leader the broker's metadata has for ``topic`` (0: the
    topic is not there yet)."""
    got = admin.describe_topics([topic], raise_on_error=False)[topic]
    if isinstance(got, Exception):
        return 0
    return sum(1 for p in got.partitions.values() if p.leader >= 0)


def until_known(admin: Admin, topic: str, partitions: int, timeout: float = 10.0) -> None:
    """Wait until the broker's metadata has ``topic`` with ``partitions`` led partitions."""
    eventually(lambda: partition_count(admin, topic), partitions, timeout)
