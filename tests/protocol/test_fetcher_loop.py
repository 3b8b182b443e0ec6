"""The fetch loop's decisions both consumer shells share (protocol/fetcher.py), no I/O:
which brokers are fetched from now, what a failed fetch means (back off and refresh, or
raise), and how long an idle poll waits."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkawire.errors import ConnectionClosedError, KafkaTimeoutError
from kafkawire.protocol import apis
from kafkawire.protocol.api import ApiVersionError
from kafkawire.protocol.fetcher import Fetcher, TopicPartition
from kafkawire.protocol.metadata import ClusterMetadata, PartitionMetadata, TopicMetadata

FETCH = apis.get("Fetch")
A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def setup(leaders: dict[TopicPartition, int]) -> tuple[Fetcher, ClusterMetadata]:
    cfg = SimpleNamespace(isolation_level="read_uncommitted", key_deserializer=None, value_deserializer=None,
                          retry_backoff_ms=100, request_timeout_ms=30000, fetch_max_wait_ms=500, fetch_min_bytes=1,
                          fetch_max_bytes=1 << 20, max_partition_fetch_bytes=1 << 16, check_crcs=True)
    f = Fetcher(cfg)
    f.assign(list(leaders))
    for tp in leaders:
        f.seek(tp, 0)
    meta = ClusterMetadata(300000, 100)
    for tp, leader in leaders.items():
        t = meta.topics.setdefault(tp.topic, TopicMetadata(tp.topic, 0, None, {}))
        if leader >= 0:
            t.partitions[tp.partition] = PartitionMetadata(tp.partition, leader, 0, 0, [], [])
    meta.need_refresh = False
    return f, meta


def test_busy_and_backing_off_brokers_wait_and_a_leaderless_partition_asks_for_a_refresh():
    f, meta = setup({A: 1, B: 2, C: -1})
    due, offsets, buffered = f.due(meta, 10.0, busy={2: "in flight"})
    assert due == [(1, [A])] and offsets == {A: 0, B: 0, C: 0} and not buffered and meta.need_refresh
    req, positions = f.request([A], offsets, buffered, meta.topics)
    f.fetch_failed(positions, ConnectionClosedError("reset"), meta, 1, 10.0)
    assert not f.in_flight(A)  # fetched again once the backoff passes
    assert f.due(meta, 10.05, busy={})[0] == [(2, [B])]
    assert f.due(meta, 10.1, busy={})[0] == [(1, [A]), (2, [B])]


def test_a_fetch_error_that_waiting_cannot_fix_is_raised_by_the_next_poll():
    f, meta = setup({A: 1})
    _req, positions = f.request([A], *f.due(meta, 0.0, {})[1:], meta.topics)
    f.fetch_failed(positions, ApiVersionError("no Fetch version"), meta, 1, 0.0)
    assert not meta.need_refresh and f.backoff == {} and not f.in_flight(A)
    with pytest.raises(ApiVersionError):
        f.raise_pending()
    f.raise_pending()  # once


def test_a_retriable_error_for_the_whole_answer_backs_off_from_the_broker():
    f, meta = setup({A: 1})
    _req, positions = f.request([A], *f.due(meta, 0.0, {})[1:], meta.topics)
    f.fetched(FETCH.Response(error_code=7, responses=[]), positions, meta, 1, 5.0)  # REQUEST_TIMED_OUT
    assert f.backoff == {1: pytest.approx(5.1)} and f.pending_error is None
    _req, positions = f.request([A], *f.due(meta, 6.0, {})[1:], meta.topics)
    f.fetched(FETCH.Response(error_code=6, responses=[]), positions, meta, 1, 6.0)  # NOT_LEADER
    assert meta.need_refresh


def test_an_idle_poll_waits_for_a_fetch_or_a_backoff_to_end():
    f, _meta = setup({A: 1})
    assert f.idle_wait(5.0, fetching=True, connect_delay=2.0) == 5.0
    assert f.idle_wait(5.0, fetching=False) == pytest.approx(0.1)
    assert f.idle_wait(5.0, fetching=False, connect_delay=2.0) == 2.0
    assert f.idle_wait(0.01, fetching=False, connect_delay=2.0) == 0.01


def test_after_a_fork_the_parents_fetches_are_forgotten():
    f, meta = setup({A: 1})
    f.request([A], *f.due(meta, 0.0, {})[1:], meta.topics)
    f.fetch_failed({B: 0}, KafkaTimeoutError("late"), meta, 2, 0.0)
    f.forget_fetches()
    assert not f.in_flight(A) and f.backoff == {}


def test_a_partition_gets_its_leader_from_the_next_metadata_refresh():
    f, meta = setup({A: 1, C: -1})
    due, offsets, _ = f.due(meta, 10.0, busy={})
    assert due == [(1, [A])] and C in offsets and meta.need_refresh
    assert f.due(meta, 10.0, busy={1: "in flight"})[0] == []  # no refresh yet: still leaderless
    M = apis.get("Metadata").Response
    T = M.MetadataResponseTopic
    meta.apply(M(brokers=[], topics=[T(name="u", error_code=0, partitions=[T.MetadataResponsePartition(
        partition_index=0, leader_id=2, leader_epoch=1, error_code=0, replica_nodes=[2], isr_nodes=[2])])]), 11.0)
    assert f.due(meta, 11.0, busy={1: "in flight"})[0] == [(2, [C])]
