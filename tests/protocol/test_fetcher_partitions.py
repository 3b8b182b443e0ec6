"""Many partitions, few with data (protocol/fetcher.py, no I/O): each broker's Fetch goes in
a fetch session (KIP-227), so a request lists only the partitions whose fetch offset
changed, and polls while a fetch is in flight never walk the assigned partitions."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from kafkawire import codec
from kafkawire.errors import ConnectionClosedError
from kafkawire.protocol import apis
from kafkawire.protocol.fetcher import Fetcher, PartitionState, TopicPartition
from kafkawire.protocol.metadata import ClusterMetadata, PartitionMetadata, TopicMetadata

FETCH = apis.get("Fetch")
METADATA = apis.get("Metadata")
_MdTopic = METADATA.Response.MetadataResponseTopic
_MdPartition = _MdTopic.MetadataResponsePartition
_Topic = FETCH.Response.FetchableTopicResponse
_Partition = _Topic.PartitionData
N = 1000
TPS = [TopicPartition("t", p) for p in range(N)]


def setup(n: int = N) -> tuple[Fetcher, ClusterMetadata]:
    cfg = SimpleNamespace(isolation_level="read_uncommitted", key_deserializer=None, value_deserializer=None,
                          retry_backoff_ms=100, request_timeout_ms=30000, fetch_max_wait_ms=500, fetch_min_bytes=1,
                          fetch_max_bytes=1 << 20, max_partition_fetch_bytes=1 << 16, check_crcs=True)
    f = Fetcher(cfg)
    f.assign(TPS[:n])
    for tp in TPS[:n]:
        f.seek(tp, 0)
    meta = ClusterMetadata(300000, 100)
    meta.topics["t"] = TopicMetadata("t", 0, None, {p: PartitionMetadata(p, 1, 0, 0, [], []) for p in range(n)})
    meta.need_refresh = False
    return f, meta


def send(f: Fetcher, meta: ClusterMetadata, now: float = 1.0) -> tuple:
    due, offsets, buffered = f.due(meta, now, busy={})
    assert [node for node, _ in due] == [1]
    return f.request(due[0][1], offsets, buffered, meta.topics)


def listed(req) -> dict[int, int]:
    return {p.partition: p.fetch_offset for t in req.topics for p in t.partitions}


def forgotten(req) -> list[int]:
    return sorted(p for t in req.forgotten_topics_data for p in t.partitions)


def answer(session_id: int, data: dict[int, int], error_code: int = 0):
    """A Fetch answer with one record at offset ``data[p]`` for each partition ``p``."""
    parts = [_Partition(partition_index=p, error_code=0, high_watermark=o + 1, last_stable_offset=o + 1,
                        records=memoryview(codec.encode_record_batch([(None, b"v%d" % p)], base_offset=o)))
             for p, o in data.items()]
    return FETCH.Response(error_code=error_code, session_id=session_id,
                          responses=[_Topic(topic="t", partitions=parts)] if parts else [])


def test_after_the_full_request_a_session_lists_only_partitions_that_moved():
    f, meta = setup()
    req, positions = send(f, meta)
    assert (req.session_id, req.session_epoch) == (0, 0)  # full: opens a session
    assert listed(req) == {p: 0 for p in range(N)}
    full_size = len(FETCH.encode_request(req, 12).getvalue())
    f.fetched(answer(77, {p: 0 for p in range(10)}), positions, meta, 1, 1.0)
    got = f.drain(500, False)
    assert sorted((r.partition, r.offset) for r in got) == [(p, 0) for p in range(10)]

    req, positions = send(f, meta)
    assert (req.session_id, req.session_epoch) == (77, 1)
    assert listed(req) == {p: 1 for p in range(10)} and forgotten(req) == []
    f.fetched(answer(77, {}), positions, meta, 1, 1.0)  # nothing new anywhere

    req, positions = send(f, meta)
    assert (req.session_id, req.session_epoch) == (77, 2)
    assert listed(req) == {} and forgotten(req) == []
    idle_size = len(FETCH.encode_request(req, 12).getvalue())
    assert full_size > 20_000 and idle_size < 100, (full_size, idle_size)
    # The partitions the session holds are still answered for, at their session offsets.
    f.fetched(answer(77, {500: 0, 3: 1}), positions, meta, 1, 1.0)
    assert sorted((r.partition, r.offset) for r in f.drain(500, False)) == [(3, 1), (500, 0)]
    req, _ = send(f, meta)
    assert listed(req) == {3: 2, 500: 1} and req.session_epoch == 3


def test_partitions_not_fetched_are_forgotten_and_listed_again_later():
    f, meta = setup(20)
    req, positions = send(f, meta)
    f.fetched(answer(5, {}), positions, meta, 1, 1.0)
    f.pause([TPS[4], TPS[7]])
    f.seek(TPS[9], 40)
    req, positions = send(f, meta)
    assert listed(req) == {9: 40} and forgotten(req) == [4, 7]
    f.fetched(answer(5, {}), positions, meta, 1, 1.0)
    f.pause([TPS[4]], False)
    req, _ = send(f, meta)
    assert listed(req) == {4: 0} and forgotten(req) == [] and req.session_epoch == 2


def test_a_partition_with_two_answers_buffered_leaves_the_session_until_drained():
    f, meta = setup(3)
    for epoch, offset in ((0, 0), (1, 1)):
        req, positions = send(f, meta)
        assert req.session_epoch == epoch and listed(req).get(0) == offset
        f.fetched(answer(9, {0: offset}), positions, meta, 1, 1.0)
    req, positions = send(f, meta)  # two answers buffered for partition 0: not fetched now
    assert forgotten(req) == [0] and listed(req) == {}
    f.fetched(answer(9, {}), positions, meta, 1, 1.0)
    assert [r.offset for r in f.drain(1, False)] == [0]
    req, _ = send(f, meta)
    assert listed(req) == {0: 2}


@pytest.mark.parametrize("code,session_id", [(70, 0), (71, 9), (106, 9)],
                         ids=["id-not-found", "invalid-epoch", "topic-id-error"])
def test_a_session_error_fetches_in_full_again_without_raising(code: int, session_id: int):
    f, meta = setup(50)
    req, positions = send(f, meta)
    f.fetched(answer(9, {}), positions, meta, 1, 1.0)
    req, positions = send(f, meta)
    assert req.session_epoch == 1 and listed(req) == {}
    f.fetched(answer(0, {}, error_code=code), positions, meta, 1, 1.0)
    f.raise_pending()  # nothing to raise
    assert 1 not in f.backoff
    req, _ = send(f, meta)
    # A full request again; an id the broker still knows is named, so it is closed.
    assert (req.session_id, req.session_epoch) == (session_id, 0) and len(listed(req)) == 50


def test_a_failed_fetch_and_a_broker_without_sessions_send_full_requests():
    f, meta = setup(50)
    req, positions = send(f, meta)
    f.fetched(answer(0, {}), positions, meta, 1, 1.0)  # no session (Tansu, Fetch v0-v6)
    req, positions = send(f, meta)
    assert (req.session_id, req.session_epoch) == (0, 0) and len(listed(req)) == 50
    f.fetched(answer(12, {}), positions, meta, 1, 1.0)
    req, positions = send(f, meta)
    assert req.session_epoch == 1
    f.fetch_failed(positions, ConnectionClosedError("reset"), meta, 1, 1.0)
    req, _ = send(f, meta, 2.0)  # after the backoff: the broker may not have seen epoch 1
    assert (req.session_id, req.session_epoch) == (12, 0) and len(listed(req)) == 50


def test_the_session_epoch_wraps_to_one():
    f, meta = setup(2)
    req, positions = send(f, meta)
    f.fetched(answer(3, {}), positions, meta, 1, 1.0)
    f.sessions[1].epoch = 2**31 - 1
    req, positions = send(f, meta)
    f.fetched(answer(3, {}), positions, meta, 1, 1.0)
    req, _ = send(f, meta)
    assert req.session_epoch == 1


class _NoWalk(dict):
    """The assigned partitions, refusing to be walked (lookups by key still work)."""

    walked = "a poll walked every assigned partition"

    def _walk(self, *a):
        raise AssertionError(self.walked)

    __iter__ = items = values = keys = _walk


def test_polls_while_the_fetch_is_in_flight_do_not_walk_the_partitions():
    f, meta = setup()
    req, positions = send(f, meta)
    f.fetched(answer(77, {p: 0 for p in range(0, N, 100)}), positions, meta, 1, 1.0)
    req, positions = send(f, meta)  # data came: the fetcher plans once, per answer
    assert f.needs_position() == []  # the first poll round looks once
    f.assigned = _NoWalk(f.assigned)
    for _ in range(3):  # poll rounds with the fetch in flight and records to hand out
        assert f.needs_position() == []
        assert f.due(meta, 1.0, busy={1: "in flight"})[0] == []
        out = f.drain(4, False)
        assert len(out) <= 4
    assert f.drain(500, False) == []
    assert f.due(meta, 1.0, busy={1: "in flight"}) == ([], {}, False)


def test_partitions_a_group_adds_get_a_position_lookup_once_their_commits_are_known():
    # The group member puts new partitions straight into the assignment, waiting for
    # their committed offsets; one without a commit is then looked up (auto_offset_reset).
    f, meta = setup(5)
    meta.topics["t"].partitions[7] = PartitionMetadata(7, 1, 0, 0, [], [])
    assert f.needs_position() == []
    f.assigned.pop(TPS[0])
    f.assigned[TPS[7]] = PartitionState()  # one out, one in: the same count
    assert f.needs_position({TPS[7]}) == []
    assert f.needs_position() == [TPS[7]]
    f.apply_reset({TPS[7]: (3, -1)})
    assert f.needs_position() == []
    assert listed(send(f, meta)[0]) == {1: 0, 2: 0, 3: 0, 4: 0, 7: 3}


class _CountingMeta(ClusterMetadata):
    """Cluster metadata counting the leader lookups plans make."""

    lookups = 0

    def leader_for(self, topic: str, partition: int):
        self.lookups += 1
        return super().leader_for(topic, partition)


def counting_setup(n: int = N) -> tuple[Fetcher, _CountingMeta]:
    f, plain = setup(n)
    meta = _CountingMeta(300000, 100)
    meta.topics, meta.need_refresh, meta.last_refresh = plain.topics, False, 1.0
    return f, meta


def lookups(f: Fetcher, meta: _CountingMeta, busy=None) -> tuple[int, list]:
    meta.lookups = 0
    due = f.due(meta, 1.0, busy=busy or {})[0]
    return meta.lookups, due


def test_a_plan_looks_again_only_at_partitions_that_changed():
    f, meta = counting_setup()
    n, due = lookups(f, meta)
    assert n == N and len(due[0][1]) == N
    req, positions = f.request(due[0][1], f.plan(meta.leader_for)[1], False, meta.topics)
    f.fetched(answer(5, {p: 0 for p in range(0, N, 100)}), positions, meta, 1, 1.0)
    n, due = lookups(f, meta)  # ten partitions answered with data
    assert n == 10 and len(due[0][1]) == N
    assert len(f.drain(500, False)) == 10
    f.seek(TPS[3], 40)
    f.pause([TPS[4]])
    n, due = lookups(f, meta)
    assert n == 1  # the paused partition's leader is not needed
    planned = due[0][1]
    assert TPS[4] not in planned and len(planned) == N - 1
    assert f.plan(meta.leader_for)[1][TPS[3]] == 40 and meta.lookups == 1
    f.pause([TPS[4]], False)
    n, due = lookups(f, meta)
    assert n == 1 and TPS[4] in due[0][1] and len(due[0][1]) == N


def test_a_metadata_refresh_or_assign_plans_every_partition_again():
    f, meta = counting_setup()
    assert lookups(f, meta)[0] == N
    # A refresh replaces the topic's entry: partition 3 now led by broker 2.
    parts = dict(meta.topics["t"].partitions)
    parts[3] = PartitionMetadata(3, 2, 1, 0, [], [])
    meta.topics["t"] = TopicMetadata("t", 0, None, parts)
    n, due = lookups(f, meta)
    assert n == N and dict(due)[2] == [TPS[3]] and len(dict(due)[1]) == N - 1
    meta.last_refresh = 2.0  # a refresh that found the same leaders
    assert lookups(f, meta)[0] == N
    assert lookups(f, meta)[0] == 0  # nothing changed
    f.assign(TPS[:500])
    n, due = lookups(f, meta)
    assert n == 500 and sum(len(tps) for _, tps in due) == 500


def _expected_plan(f: Fetcher, meta: ClusterMetadata) -> tuple[dict, dict]:
    """What a plan from scratch finds: every partition looked at."""
    by_node: dict[int, set] = {}
    offsets = {}
    for tp, st in f.assigned.items():
        if tp in f._in_flight or st.paused or st.position is None or st.reset_to is not None:
            continue
        offset = st.next_fetch()
        if offset is None:
            continue
        offsets[tp] = offset
        leader = meta.leader_for(*tp)
        if leader is not None:
            by_node.setdefault(leader, set()).add(tp)
    return by_node, offsets


def test_plans_made_from_changes_match_plans_made_from_scratch():
    import random

    rnd = random.Random(7)
    n = 60
    f, meta = setup(n)
    meta.last_refresh = 1.0
    in_flight = []
    for step in range(400):
        by_node, offsets, _buffered, _leaderless = f.plan(meta.leader_for)
        assert ({node: set(tps) for node, tps in by_node.items()}, offsets) == _expected_plan(f, meta), step
        op = rnd.randrange(7)
        tp = TPS[rnd.randrange(n)]
        if op == 0:
            f.seek(tp, rnd.randrange(100))
        elif op == 1:
            f.pause([tp], rnd.random() < 0.5)
        elif op == 2 and by_node:
            node, tps = rnd.choice(sorted(by_node.items()))
            in_flight.append((node, f.request(tps, offsets, False, meta.topics)[1]))
        elif op == 3 and in_flight:
            node, positions = in_flight.pop(rnd.randrange(len(in_flight)))
            data = {p.partition: o for p, o in positions.items() if rnd.random() < 0.3}
            f.fetched(answer(0, data), positions, meta, node, 1.0)
        elif op == 4:
            f.drain(rnd.randrange(1, 5), False)
        elif op == 5:
            parts = dict(meta.topics["t"].partitions)
            leader = rnd.choice([1, 2, -1])
            parts[tp.partition] = PartitionMetadata(tp.partition, leader, 0, 0, [], [])
            meta.topics["t"] = TopicMetadata("t", 0, None, parts)
            meta.last_refresh += 1
        elif op == 6:
            f.apply_reset({tp: (rnd.randrange(100), -1)})


class _TopicsNoWalk(_NoWalk):
    """Metadata topics refusing to be walked (lookups by name still work)."""

    walked = "every topic of the metadata looked at for one Fetch answer"


def test_an_answer_naming_topics_by_id_is_read_without_a_look_at_every_topic():
    # A pattern subscription's metadata holds every topic of the cluster: a Fetch v13+
    # answer (topics by id) is named from ClusterMetadata.topic_names, one look-up a topic.
    f, meta = setup(2)
    ids = {name: uuid.UUID(int=i + 1) for i, name in enumerate(["t", *(f"other-{i}" for i in range(1000))])}
    meta.apply(METADATA.Response(brokers=[], topics=[
        _MdTopic(error_code=0, name=name, topic_id=topic_id, partitions=[
            _MdPartition(error_code=0, partition_index=p, leader_id=1, leader_epoch=0, replica_nodes=[1],
                         isr_nodes=[1], offline_replicas=[]) for p in ((0, 1) if name == "t" else (0,))])
        for name, topic_id in ids.items()]), 0.0)
    req, positions = send(f, meta)
    assert [t.topic_id for t in req.topics] == [ids["t"]]
    part = _Partition(partition_index=1, error_code=0, high_watermark=1, last_stable_offset=1,
                      records=memoryview(codec.encode_record_batch([(None, b"v1")], base_offset=0)))
    resp = FETCH.Response(responses=[_Topic(topic="", topic_id=ids["t"], partitions=[part]),
                                     _Topic(topic="", topic_id=uuid.UUID(int=99999), partitions=[part])])
    meta.topics = _TopicsNoWalk(meta.topics)
    f.fetched(resp, positions, meta, 1, 1.0)
    assert [(r.topic, r.partition, r.value) for r in f.drain(10, False)] == [("t", 1, b"v1")]
