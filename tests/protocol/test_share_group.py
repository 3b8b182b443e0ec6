"""The share-group member (kafkawire.protocol.share_group) on a fake clock, no broker: the
coordinator lookup and heartbeat, share sessions and their epochs, acquired records and
delivery counts, implicit and explicit acknowledgement, commits, callbacks' results, close."""

from __future__ import annotations

import uuid

import pytest

from kafkawire import codec
from kafkawire.protocol import apis
from kafkawire.protocol.metadata import PartitionMetadata, TopicMetadata
from kafkawire.protocol.share_group import (
    ACCEPT,
    REJECT,
    RELEASE,
    AcknowledgementStateError,
    Failed,
    ShareGroupFatalError,
    ShareGroupMember,
    ack_batches,
)

FIND = apis.get("FindCoordinator")
HB = apis.get("ShareGroupHeartbeat")
SF = apis.get("ShareFetch")
SA = apis.get("ShareAcknowledge")
TID = uuid.UUID(int=0x1234)


class Meta:
    """What the member reads of the cluster metadata: one topic 't', 2 partitions on node 1."""

    def __init__(self) -> None:
        parts = {p: PartitionMetadata(p, 1, 0, 0, [1], [1]) for p in (0, 1)}
        self.topics = {"t": TopicMetadata("t", 0, TID, parts)}
        self.topic_names = {TID: "t"}

    def leader_for(self, topic: str, partition: int) -> int | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions[partition].leader


def find_answer(node: int = 1, code: int = 0) -> object:
    return FIND.Response(coordinators=[FIND.Response.Coordinator(
        key="g", node_id=node, host="127.0.0.1", port=9092, error_code=code, error_message=None)])


def hb_answer(epoch: int, parts: list[int] | None, code: int = 0) -> object:
    assignment = None
    if parts is not None:
        assignment = HB.Response.Assignment(topic_partitions=[
            HB.Response.Assignment.TopicPartitions(topic_id=TID, partitions=parts)])
    return HB.Response(error_code=code, member_id=None, member_epoch=epoch, heartbeat_interval_ms=5000,
                       assignment=assignment)


def fetch_answer(partition: int, offsets: range | list[int], acquired: list[tuple[int, int, int]],
                 ack_code: int = 0, code: int = 0) -> object:
    T = SF.Response.ShareFetchableTopicResponse
    P = T.PartitionData
    data = b""
    offsets = list(offsets)
    if offsets:
        data = codec.encode_record_batch([(None, b"v%d" % o) for o in offsets], base_offset=offsets[0])
    p = P(partition_index=partition, records=data, acknowledge_error_code=ack_code,
          acquired_records=[P.AcquiredRecords(first_offset=f, last_offset=l, delivery_count=c)
                            for f, l, c in acquired])
    return SF.Response(error_code=code, acquisition_lock_timeout_ms=30000,
                       responses=[T(topic_id=TID, partitions=[p])])


def ack_answer(codes: dict[int, int] | None = None, code: int = 0) -> object:
    T = SA.Response.ShareAcknowledgeTopicResponse
    parts = [T.PartitionData(partition_index=p, error_code=c) for p, c in (codes or {}).items()]
    return SA.Response(error_code=code, responses=[T(topic_id=TID, partitions=parts)] if parts else [])


def joined(parts: list[int] = [0], **options) -> tuple[ShareGroupMember, Meta]:
    m = ShareGroupMember("g", member_id="m1", **options)
    meta = Meta()
    m.subscribe(["t"], 0.0)
    (find,) = m.poll(0.0, meta)
    assert find.kind == "find" and find.node is None
    m.on_answer(find, find_answer(), 0.0)
    (hb,) = m.poll(0.0, meta)
    assert hb.kind == "heartbeat" and hb.node == 1
    assert hb.request.member_epoch == 0 and hb.request.subscribed_topic_names == ["t"]
    assert hb.request.member_id == "m1"
    m.on_answer(hb, hb_answer(1, parts), 0.0)
    assert m.member_epoch == 1
    return m, meta


def one_fetch(m: ShareGroupMember, meta: Meta, now: float = 0.0):
    sends = [s for s in m.poll(now, meta) if s.kind == "fetch"]
    assert len(sends) == 1
    return sends[0]


def batches(send) -> dict[int, list[tuple[int, int, list[int]]]]:
    return {p.partition_index: [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                                for b in p.acknowledgement_batches]
            for t in send.request.topics for p in t.partitions}


def test_ack_batches_runs_and_types():
    assert ack_batches({0: 1, 1: 1, 2: 1}) == [(0, 2, [1])]
    assert ack_batches({0: 1, 1: 2, 2: 1, 5: 3}) == [(0, 2, [1, 2, 1]), (5, 5, [3])]
    assert ack_batches({}) == []


def test_join_fetch_implicit_acknowledgement_and_session_epochs():
    m, meta = joined([0, 1])
    f = one_fetch(m, meta)
    assert f.node == 1 and f.request.share_session_epoch == 0
    assert f.request.member_id == "m1" and f.request.group_id == "g"
    assert sorted(p.partition_index for t in f.request.topics for p in t.partitions) == [0, 1]
    assert batches(f) == {0: [], 1: []}  # a session's opening request carries no acknowledgement
    m.on_answer(f, fetch_answer(0, range(5), [(0, 4, 1)]), 0.1, meta)
    assert m.acquisition_lock_timeout_ms == 30000
    # No second fetch while records wait to be taken.
    assert not [s for s in m.poll(0.1, meta) if s.kind == "fetch"]
    got = m.take_records(3)
    assert [(r.offset, r.value, r.delivery_count) for r in got] == [(0, b"v0", 1), (1, b"v1", 1), (2, b"v2", 1)]
    got = m.take_records(10)  # the first three are accepted by this poll
    assert [r.offset for r in got] == [3, 4]
    m.take_records(10)
    f = one_fetch(m, meta, 0.2)
    assert f.request.share_session_epoch == 1
    assert batches(f)[0] == [(0, 4, [ACCEPT])]
    m.on_answer(f, fetch_answer(0, [], []), 0.3, meta)
    (done,) = m.completions()
    assert done.error is None and done.offsets == {("t", 0): [0, 1, 2, 3, 4]}
    f = one_fetch(m, meta, 0.3)
    assert f.request.share_session_epoch == 2 and batches(f) == {0: [], 1: []}


def test_only_acquired_records_with_their_delivery_count_and_gaps_acknowledged():
    m, meta = joined()
    f = one_fetch(m, meta)
    # The batch holds offsets 0-9; this member acquired 3-5 (a second delivery) and 8-11,
    # where 10 and 11 hold no record (a transaction marker, say).
    m.on_answer(f, fetch_answer(0, range(10), [(3, 5, 2), (8, 11, 1)]), 0.0, meta)
    got = m.take_records(100)
    assert [(r.offset, r.delivery_count) for r in got] == [(3, 2), (4, 2), (5, 2), (8, 1), (9, 1)]
    m.take_records(100)
    f = one_fetch(m, meta)
    assert batches(f)[0] == [(3, 5, [ACCEPT]), (8, 11, [ACCEPT, ACCEPT, 0, 0])]
    m.on_answer(f, fetch_answer(0, [], []), 0.0, meta)
    (done,) = m.completions()
    assert done.offsets == {("t", 0): [3, 4, 5, 8, 9]}  # gaps are not the caller's records


def test_explicit_acknowledgement_per_record():
    m, meta = joined(acknowledgement_mode="explicit")
    f = one_fetch(m, meta)
    m.on_answer(f, fetch_answer(0, range(4), [(0, 3, 1)]), 0.0, meta)
    recs = m.take_records(10)
    m.acknowledge(recs[0], ACCEPT)
    m.acknowledge(recs[1], RELEASE)
    with pytest.raises(AcknowledgementStateError, match="2 record"):
        m.take_records(10)
    m.acknowledge(("t", 0, 2), REJECT)
    m.acknowledge(recs[3])
    with pytest.raises(AcknowledgementStateError, match="already"):
        m.acknowledge(recs[3], REJECT)
    with pytest.raises(AcknowledgementStateError, match="not delivered"):
        m.acknowledge(("t", 0, 99), ACCEPT)
    with pytest.raises(ValueError):
        m.acknowledge(recs[0], 7)
    assert m.take_records(10) == []
    f = one_fetch(m, meta)
    assert batches(f)[0] == [(0, 3, [ACCEPT, RELEASE, REJECT, ACCEPT])]


def test_commit_sends_share_acknowledge_and_reports_per_partition():
    m, meta = joined([0, 1])
    f = one_fetch(m, meta)
    m.on_answer(f, fetch_answer(0, range(3), [(0, 2, 1)]), 0.0, meta)
    m.take_records(10)
    c = m.commit(0.0)
    assert not c.done
    sends = m.poll(0.0, meta)
    (ack,) = [s for s in sends if s.kind == "ack"]
    assert ack.request.share_session_epoch == 1 and ack.node == 1
    assert batches(ack) == {0: [(0, 2, [ACCEPT])]}
    assert not [s for s in m.poll(0.0, meta) if s.kind in ("fetch", "ack")]  # one request per session
    m.on_answer(ack, ack_answer({0: 121}), 0.0, meta)  # INVALID_RECORD_STATE: the lock ran out
    assert c.done and type(c.results[("t", 0)]).__name__ == "InvalidRecordStateError"
    (done,) = m.completions()
    assert done.offsets == {("t", 0): [0, 1, 2]} and done.error is c.results[("t", 0)]
    assert m.commit(0.0).done  # nothing held: nothing to send
    assert one_fetch(m, meta).request.share_session_epoch == 2


def test_lost_session_starts_again_at_epoch_zero_and_fails_its_acknowledgements():
    m, meta = joined()
    f = one_fetch(m, meta)
    m.on_answer(f, fetch_answer(0, range(2), [(0, 1, 1)]), 0.0, meta)
    m.take_records(10)
    m.take_records(10)
    f = one_fetch(m, meta)
    assert f.request.share_session_epoch == 1
    m.on_answer(f, SF.Response(error_code=123, responses=[]), 0.0, meta)  # INVALID_SHARE_SESSION_EPOCH
    (done,) = m.completions()
    assert done.error is not None and done.offsets == {("t", 0): [0, 1]}
    f = one_fetch(m, meta)
    assert f.request.share_session_epoch == 0 and batches(f) == {0: []}


def test_partition_moved_away_releases_what_was_held_for_it():
    m, meta = joined([0, 1])
    f = one_fetch(m, meta)
    m.on_answer(f, fetch_answer(1, range(2), [(0, 1, 1)]), 0.0, meta)
    (hb,) = [s for s in m.poll(5.0, meta) if s.kind == "heartbeat"]
    m.on_answer(hb, hb_answer(2, [0]), 5.0)
    assert m.take_records(10) == []
    # The release goes in a ShareAcknowledge: a ShareFetch naming partition 1 would acquire
    # there again (the released records among them, one delivery count higher, released
    # again: after group.share.delivery.count.limit rounds archived, never given to anyone).
    (ack,) = [s for s in m.poll(5.0, meta) if s.kind in ("fetch", "ack")]
    assert ack.kind == "ack" and ack.request.share_session_epoch == 1
    assert batches(ack) == {1: [(0, 1, [RELEASE])]}
    assert not [s for s in m.poll(5.0, meta) if s.kind in ("fetch", "ack")]  # one request per session
    m.on_answer(ack, ack_answer({1: 0}), 5.0, meta)
    (done,) = m.completions()
    assert done.error is None and done.offsets == {("t", 1): [0, 1]}
    f = one_fetch(m, meta, 5.0)
    assert f.request.share_session_epoch == 2 and batches(f) == {0: []}
    forgotten = {p for t in f.request.forgotten_topics_data for p in t.partitions}
    assert forgotten == {1}


def test_fenced_member_joins_again_with_epoch_zero_and_its_subscription():
    m, meta = joined()
    (hb,) = [s for s in m.poll(5.0, meta) if s.kind == "heartbeat"]
    assert hb.request.member_epoch == 1 and hb.request.subscribed_topic_names is None
    m.on_answer(hb, hb_answer(0, None, code=110), 5.0)  # FENCED_MEMBER_EPOCH
    assert m.assignment == set()
    (hb,) = [s for s in m.poll(5.0, meta) if s.kind == "heartbeat"]
    assert hb.request.member_epoch == 0 and hb.request.subscribed_topic_names == ["t"]
    assert hb.request.member_id == "m1"


def test_heartbeat_timing_and_coordinator_moved():
    m, meta = joined()
    assert m.next_wakeup(0.0) == 5.0
    assert not [s for s in m.poll(4.9, meta) if s.kind == "heartbeat"]
    (hb,) = [s for s in m.poll(5.0, meta) if s.kind == "heartbeat"]
    m.on_answer(hb, hb_answer(1, None, code=16), 5.0)  # NOT_COORDINATOR
    assert [s.kind for s in m.poll(5.0, meta) if s.kind != "fetch"] == ["find"]


def test_fatal_heartbeat_error_names_the_fix():
    m = ShareGroupMember("g", member_id="m1")
    meta = Meta()
    m.subscribe(["t"], 0.0)
    (find,) = m.poll(0.0, meta)
    m.on_answer(find, find_answer(), 0.0)
    (hb,) = m.poll(0.0, meta)
    m.on_answer(hb, hb_answer(0, None, code=30), 0.0)  # GROUP_AUTHORIZATION_FAILED
    (ev,) = [e for e in m.events() if isinstance(e, Failed)]
    assert isinstance(ev.error, ShareGroupFatalError) and "grant" in str(ev.error)
    assert m.poll(1.0, meta) == []


def test_close_releases_buffered_accepts_polled_closes_sessions_then_leaves():
    m, meta = joined()
    f = one_fetch(m, meta)
    m.on_answer(f, fetch_answer(0, range(4), [(0, 3, 1)]), 0.0, meta)
    m.take_records(2)  # 0 and 1 polled; 2 and 3 held, never given
    m.close(0.0)
    sends = m.poll(0.0, meta)
    assert [s.kind for s in sends] == ["ack"]  # the session closes before the group is left
    (ack,) = sends
    assert ack.request.share_session_epoch == -1
    assert batches(ack) == {0: [(0, 3, [ACCEPT, ACCEPT, RELEASE, RELEASE])]}
    m.on_answer(ack, ack_answer({0: 0}), 0.0, meta)
    (leave,) = m.poll(0.0, meta)
    assert leave.kind == "leave" and leave.request.member_epoch == -1
    assert not m.closed
    m.on_answer(leave, hb_answer(-1, None), 0.0)
    assert m.closed
    assert m.poll(0.0, meta) == []


def test_close_in_explicit_mode_releases_unacknowledged():
    m, meta = joined(acknowledgement_mode="explicit")
    f = one_fetch(m, meta)
    m.on_answer(f, fetch_answer(0, range(2), [(0, 1, 1)]), 0.0, meta)
    recs = m.take_records(10)
    m.acknowledge(recs[0], ACCEPT)
    m.close(0.0)
    (ack,) = m.poll(0.0, meta)
    assert batches(ack) == {0: [(0, 1, [ACCEPT, RELEASE])]}


def test_connection_failure_resets_the_session_and_backs_off():
    m, meta = joined()
    f = one_fetch(m, meta)
    m.on_failure(f, ConnectionError("reset"), 0.0)
    assert not [s for s in m.poll(0.05, meta) if s.kind == "fetch"]
    f = one_fetch(m, meta, 0.2)
    assert f.request.share_session_epoch == 0


def test_share_options_mode_and_group_id():
    from kafkawire.core.config import Config
    from kafkawire.errors import ConfigError
    from kafkawire.protocol.share_group import member_for, share_mode

    rest, mode = share_mode({"share.acknowledgement.mode": "EXPLICIT", "group_id": "g"})
    assert rest == {"group_id": "g"} and mode == "explicit"
    assert share_mode({})[1] == "implicit"
    with pytest.raises(ConfigError, match="implicit"):
        share_mode({"share_acknowledgement_mode": "auto"})
    m = member_for(Config.consumer(bootstrap_servers="127.0.0.1:9", group_id="g", max_poll_records=7,
                                   fetch_max_wait_ms=100), mode)
    assert m.explicit and m.max_records == 7 and m.max_wait_ms == 100
    with pytest.raises(ConfigError, match="group_id"):
        member_for(Config.consumer(bootstrap_servers="127.0.0.1:9"), "implicit")


def test_explicit_commit_sends_what_is_acknowledged_and_keeps_the_rest():
    m, meta = joined(acknowledgement_mode="explicit")
    f = one_fetch(m, meta)
    m.on_answer(f, fetch_answer(0, range(3), [(0, 2, 1)]), 0.0, meta)
    recs = m.take_records(10)
    m.acknowledge(recs[1], REJECT)
    c = m.commit(0.0)
    (ack,) = [s for s in m.poll(0.0, meta) if s.kind == "ack"]
    assert batches(ack) == {0: [(1, 1, [REJECT])]}
    m.on_answer(ack, ack_answer({0: 0}), 0.0, meta)
    assert c.done and c.results == {("t", 0): None}
    with pytest.raises(AcknowledgementStateError, match="2 record"):
        m.take_records(10)
    m.acknowledge(recs[0])
    m.acknowledge(recs[2], RELEASE)
    assert m.take_records(10) == []
    assert batches(one_fetch(m, meta))[0] == [(0, 0, [ACCEPT]), (2, 2, [RELEASE])]


def test_records_arriving_after_close_are_released_with_the_last_request():
    m, meta = joined()
    f = one_fetch(m, meta)
    m.close(0.0)
    assert m.poll(0.0, meta) == []  # the fetch in flight comes back first
    m.on_answer(f, fetch_answer(0, range(3), [(0, 2, 1)]), 0.0, meta)
    (ack,) = m.poll(0.0, meta)
    assert ack.request.share_session_epoch == -1 and batches(ack) == {0: [(0, 2, [RELEASE])]}
    assert m.take_records(10) == []


def test_no_wakeup_due_while_the_coordinator_lookup_is_in_flight():
    # Only its answer moves the member on: a wake-up time in the past would make the
    # shell's wait return at once, again and again, until it came.
    m = ShareGroupMember("g", member_id="m1")
    meta = Meta()
    m.subscribe(["t"], 0.0)
    (find,) = [s for s in m.poll(0.0, meta) if s.kind == "find"]
    assert m.next_wakeup(0.5) is None
    m.on_failure(find, ConnectionError("refused"), 0.5)
    assert m.next_wakeup(0.5) == pytest.approx(0.6)  # retry_backoff_ms after the failure
    (find,) = [s for s in m.poll(0.6, meta) if s.kind == "find"]
    m.on_answer(find, find_answer(), 0.7)
    assert m.next_wakeup(0.7) == 0.0  # the heartbeat is due
