"""The offset lookup and the consumer's checks on a fake clock (no broker): a partition
its topic lacks is refused by the first Metadata answer of the call, and a partition
that stays without a leader has the metadata asked again every retry_backoff_ms, not in
a loop with no wait (which spun a CPU for the whole timeout)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkawire.errors import KafkaTimeoutError, UnknownPartitionError
from kafkawire.protocol.fetcher import LATEST, TopicPartition
from kafkawire.protocol.metadata import ClusterMetadata, PartitionMetadata, TopicMetadata, missing_partitions_steps
from kafkawire.protocol.offsets import list_offsets_steps
from kafkawire.protocol.steps import Refresh, Sleep, drive_async

BACKOFF = 0.1


def _meta(partitions: int, seen: float) -> ClusterMetadata:
    meta = ClusterMetadata(300000, 100)
    meta.brokers = {1: ("h", 1)}
    meta.topics["t"] = TopicMetadata("t", 0, None, {
        p: PartitionMetadata(p, 1, 0, 0, [1], [1]) for p in range(partitions)})
    meta.need_refresh = False
    meta.last_refresh = meta.topic_seen["t"] = seen
    return meta


def _run(steps: Any, meta: ClusterMetadata, on_refresh: Any = None) -> tuple[Any, list[Any], float]:
    clock = [1000.0]
    log: list[Any] = []

    async def do_step(step: Any) -> Any:
        log.append(step)
        if isinstance(step, Sleep):
            clock[0] += step.seconds
        elif isinstance(step, Refresh):
            clock[0] += 0.001  # the broker answers at once
            (on_refresh or (lambda: None))()
            meta.last_refresh = meta.topic_seen["t"] = clock[0]
            meta.need_refresh = False
        else:
            raise AssertionError(f"unexpected step {step!r}")

    async def main() -> Any:
        try:
            return await drive_async(steps, do_step, lambda: clock[0])
        except Exception as exc:  # noqa: BLE001 - returned for the test to look at
            return exc

    return asyncio.run(main()), log, clock[0] - 1000.0


def test_a_missing_partition_is_refused_by_the_first_answer_of_the_call():
    meta = _meta(3, seen=10.0)  # an old answer: it may predate partitions added since
    tp = TopicPartition("t", 9)
    out, log, _ = _run(list_offsets_steps(meta, {tp: LATEST}, 0, 30.0, BACKOFF), meta)
    assert isinstance(out, UnknownPartitionError) and "has 3 partitions (0-2)" in str(out)
    assert [type(s).__name__ for s in log] == ["Refresh"]
    out, log, _ = _run(missing_partitions_steps(meta, [tp, TopicPartition("t", 1)], 30.0), meta)
    assert isinstance(out, UnknownPartitionError) and (out.topic, out.partition, out.count) == ("t", 9, 3)


def test_a_new_partition_is_found_rather_than_refused():
    meta = _meta(3, seen=10.0)
    grown = _meta(10, seen=0.0)
    out, log, _ = _run(missing_partitions_steps(meta, [TopicPartition("t", 9)], 30.0), meta,
                       on_refresh=lambda: meta.topics.update(grown.topics))
    assert out is None and [type(s).__name__ for s in log] == ["Refresh"]


def test_a_partition_without_a_leader_is_asked_for_every_retry_backoff():
    meta = _meta(1, seen=10.0)
    meta.topics["t"].partitions[0].leader = -1  # an election under way
    out, log, spent = _run(list_offsets_steps(meta, {TopicPartition("t", 0): LATEST}, 0, 2.0, BACKOFF), meta)
    assert isinstance(out, KafkaTimeoutError)
    assert "its partitions have no leader yet" in str(out) and "within 0" not in str(out)
    refreshes = sum(isinstance(s, Refresh) for s in log)
    assert 10 <= refreshes <= 2.0 / BACKOFF + 1, refreshes
    assert all(isinstance(b, Sleep) for a, b in zip(log, log[1:]) if isinstance(a, Refresh)) or \
        isinstance(log[-1], Refresh)
    assert spent == pytest.approx(2.0, abs=0.05)
