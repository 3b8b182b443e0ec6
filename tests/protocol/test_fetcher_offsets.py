"""protocol/offsets.py's ListOffsets lookup as a step generator, no I/O: the leader is
asked, a missing or moved leader has the metadata refreshed, retriable errors wait
retry_backoff_ms until the deadline, a permanent one ends the lookup at once; reset_steps
applies auto_offset_reset."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafkawire.errors import KafkaConnectionError, KafkaTimeoutError, OffsetOutOfRangeError, TopicAuthorizationFailedError
from kafkawire.protocol import apis
from kafkawire.protocol.fetcher import EARLIEST, LATEST, Fetcher, TopicPartition
from kafkawire.protocol.metadata import ClusterMetadata, PartitionMetadata, TopicMetadata
from kafkawire.protocol.offsets import list_offsets_steps, reset_steps
from kafkawire.protocol.steps import Refresh, Request

from steps_sim import Sim

LO = apis.get("ListOffsets")
LOT = LO.Response.ListOffsetsTopicResponse
LOP = LOT.ListOffsetsPartitionResponse
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
BACKOFF = 0.1


def meta_with(leaders: dict[int, int], error: int = 0) -> ClusterMetadata:
    meta = ClusterMetadata(300000, 100)
    meta.brokers = {1: ("h", 1), 2: ("h", 2)}
    meta.topics["t"] = TopicMetadata("t", error, None, {
        p: PartitionMetadata(p, leader, 0, 0, [leader], [leader]) for p, leader in leaders.items()})
    meta.need_refresh = False
    meta.last_refresh = meta.topic_seen["t"] = 100.0
    return meta


def answer(parts: dict[int, tuple[int, int]], version: int = 5) -> Any:
    """{partition: (error, offset)}"""
    return LO.Response(topics=[LOT(name="t", partitions=[
        LOP(partition_index=p, error_code=e, offset=o, timestamp=-1, old_style_offsets=[o])
        for p, (e, o) in parts.items()])])


def asked(step: Request, version: int = 5) -> dict[int, int]:
    req = step.build(version)
    return {p.partition_index: p.timestamp for t in req.topics for p in t.partitions}


def test_each_leader_is_asked_for_its_partitions():
    meta = meta_with({0: 1, 1: 2})

    def broker(step, sim):
        assert isinstance(step, Request) and step.api is LO
        got = asked(step)
        return answer({p: (0, 10 * step.node + p) for p in got})

    sim = Sim(broker)
    out = sim.run(list_offsets_steps(meta, {TP0: EARLIEST, TP1: LATEST}, 0, 5.0, BACKOFF))
    assert out == {TP0: (10, -1), TP1: (21, -1)}
    assert sorted(s.node for s in sim.log) == [1, 2] and "t" in meta.interest


def test_version_0_answers_are_read_by_their_old_style_offsets():
    meta = meta_with({0: 1})

    def broker(step, sim):
        step.build(0)  # the runner negotiated v0
        return LO.Response(topics=[LOT(name="t", partitions=[LOP(partition_index=0, error_code=0,
                                                                 old_style_offsets=[42])])])

    assert Sim(broker).run(list_offsets_steps(meta, {TP0: LATEST}, 0, 5.0, BACKOFF)) == {TP0: (42, -1)}


def test_an_unknown_leader_refreshes_the_metadata_first():
    meta = meta_with({})

    def runner(step, sim):
        if isinstance(step, Refresh):
            assert meta.need_refresh and 0 < step.timeout <= 5.0
            meta.topics = meta_with({0: 2}).topics
            return None
        assert step.node == 2 and asked(step) == {0: LATEST}
        return answer({0: (0, 7)})

    sim = Sim(runner)
    assert sim.run(list_offsets_steps(meta, {TP0: LATEST}, 0, 5.0, BACKOFF)) == {TP0: (7, -1)}
    assert sim.kinds() == ["Refresh", "ListOffsets"]


def test_a_moved_leader_refreshes_waits_and_asks_the_new_one():
    meta = meta_with({0: 1})

    def runner(step, sim):
        if isinstance(step, Refresh):
            meta.topics = meta_with({0: 2}).topics
            meta.need_refresh, meta.last_refresh = False, sim.now
            return None
        asked(step)
        if step.node == 1:
            return answer({0: (6, -1)})  # NOT_LEADER_OR_FOLLOWER
        return answer({0: (0, 9)})

    sim = Sim(runner)
    assert sim.run(list_offsets_steps(meta, {TP0: LATEST}, 0, 5.0, BACKOFF)) == {TP0: (9, -1)}
    assert sim.kinds() == ["ListOffsets", "Sleep", "Refresh", "ListOffsets"]
    assert sim.log[1].seconds == BACKOFF


def test_a_permanent_error_ends_the_lookup_at_once():
    meta = meta_with({0: 1})
    sim = Sim(lambda step, sim: asked(step) and answer({0: (29, -1)}))  # TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(TopicAuthorizationFailedError):
        sim.run(list_offsets_steps(meta, {TP0: LATEST}, 0, 5.0, BACKOFF))
    assert sim.kinds() == ["ListOffsets"]


def test_a_topic_the_metadata_refuses_ends_the_lookup_at_once():
    meta = meta_with({}, error=29)
    sim = Sim(lambda step, sim: pytest.fail("nothing is asked"))
    with pytest.raises(TopicAuthorizationFailedError):
        sim.run(list_offsets_steps(meta, {TP0: LATEST}, 0, 5.0, BACKOFF))


def test_retriable_failures_wait_and_end_at_the_deadline_with_the_last_error():
    meta = meta_with({0: 1})

    def runner(step, sim):
        if isinstance(step, Refresh):
            meta.need_refresh, meta.last_refresh = False, sim.now
            return None
        raise KafkaConnectionError("connection refused")

    sim = Sim(runner)
    start = sim.now
    with pytest.raises(KafkaTimeoutError, match="not found within 1s; last error: connection refused"):
        sim.run(list_offsets_steps(meta, {TP0: LATEST}, 0, 1.0, BACKOFF))
    assert start + 1.0 <= sim.now <= start + 1.0 + 1e-6  # never past the deadline
    sleeps = [s.seconds for s in sim.log if type(s).__name__ == "Sleep"]
    # retry_backoff_ms between tries, the last one cut short by the deadline
    assert sum(sleeps) == pytest.approx(1.0) and len(sleeps) >= 10 and max(sleeps) == pytest.approx(BACKOFF)


def test_reset_steps_follow_auto_offset_reset():
    cfg = SimpleNamespace(isolation_level="read_uncommitted", key_deserializer=None, value_deserializer=None,
                          retry_backoff_ms=100, auto_offset_reset="earliest",
                          request_timeout_ms=30000, fetch_max_wait_ms=500)
    f = Fetcher(cfg)
    f.assign([TP0])
    f.assigned[TP0].reset_to = -1
    meta = meta_with({0: 1})

    def broker(step, sim):
        assert asked(step) == {0: EARLIEST}
        return answer({0: (0, 3)})

    Sim(broker).run(reset_steps(f, meta, [TP0], 5.0))
    assert f.assigned[TP0].position == 3 and f.assigned[TP0].reset_to is None
    cfg.auto_offset_reset = "none"
    f.assigned[TP0].reset_to = -1
    with pytest.raises(OffsetOutOfRangeError, match="outside the log"):
        Sim(broker).run(reset_steps(f, meta, [TP0], 5.0))
