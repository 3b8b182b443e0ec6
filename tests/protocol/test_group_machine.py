"""The group membership state machine (kafkawire.protocol.group) driven step by step.

No broker and no clock: time is a float passed in, responses are built with the API
classes, and the requests that come out are checked field by field and encoded at the
oldest and newest versions kafkawire declares (so each one is valid on the wire at both).
The leader's side of a rebalance (kafkawire.protocol.consumer.leader_assign and friends)
is checked through encoded subscriptions and decoded assignments.

Tests named ``test_bug_*`` show behaviour the Kafka protocol (or the module's own
docstrings) requires and the module does not have yet.
"""

from __future__ import annotations

import pytest

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol import consumer
from kafkawire.protocol.group import (
    AWAITING_ASSIGNMENT,
    JOINING,
    STABLE,
    SYNCING,
    UNJOINED,
    Assigned,
    AssignmentNeeded,
    Failed,
    GroupMembership,
    Joined,
    Lost,
    Outgoing,
    RejoinNeeded,
)

FC = apis.get("FindCoordinator")
JG = apis.get("JoinGroup")
SG = apis.get("SyncGroup")
HB = apis.get("Heartbeat")
LG = apis.get("LeaveGroup")
OC = apis.get("OffsetCommit")
OF = apis.get("OffsetFetch")

JG_MEMBER = JG.Response.JoinGroupResponseMember
OC_TOPIC = OC.Response.OffsetCommitResponseTopic
OC_PART = OC_TOPIC.OffsetCommitResponsePartition
OF_TOPIC = OF.Response.OffsetFetchResponseTopic
OF_PART = OF_TOPIC.OffsetFetchResponsePartition
OF_GROUP = OF.Response.OffsetFetchResponseGroup
OF_GTOPIC = OF_GROUP.OffsetFetchResponseTopics
OF_GPART = OF_GTOPIC.OffsetFetchResponsePartitions

# Error codes, spelled out here rather than imported from the module under test.
NONE = 0
REQUEST_TIMED_OUT = 7
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
GROUP_AUTHORIZATION_FAILED = 30
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
UNSTABLE_OFFSET_COMMIT = 88

COORD = (3, "broker-3", 9093)
# Short, distinct timeouts so the arithmetic below is easy to follow (seconds).
HB_S, SESSION_S, POLL_S, BACKOFF_S = 3.0, 10.0, 60.0, 0.1


def machine(**kw) -> GroupMembership:
    opts = dict(session_timeout_ms=10000, rebalance_timeout_ms=60000, heartbeat_interval_ms=3000,
                retry_backoff_ms=100, request_timeout_ms=5000)
    opts.update(kw)
    return GroupMembership("g", **opts)


def sub(topics, owned=None, generation=-1, protocol=consumer.RANGE) -> bytes:
    return consumer.subscription_metadata(protocol, topics, owned or {}, generation)


def only(outs: list[Outgoing], kind: str) -> Outgoing:
    assert [o.kind for o in outs] == [kind], outs
    return outs[0]


def kinds(events) -> list[type]:
    return [type(e) for e in events]


def round_trip(out: Outgoing, version: int):
    """Encode the request at ``version`` (it must be valid there) and decode it back."""
    data = out.api.encode_request(out.request, version).getvalue()
    return out.api.decode_request(data, version)


def oldest_and_newest(out: Outgoing):
    return round_trip(out, out.api.min_version), round_trip(out, out.api.max_version)


def find_resp(code=NONE, coord=COORD, v4=False):
    node, host, port = coord
    if v4:
        return FC.Response(coordinators=[FC.Response.Coordinator(
            key="g", node_id=node, host=host, port=port, error_code=code)])
    return FC.Response(error_code=code, node_id=node, host=host, port=port)


def join_resp(code=NONE, gen=1, member="m1", leader="m1", protocol=consumer.RANGE, members=()):
    return JG.Response(error_code=code, generation_id=gen, protocol_name=protocol, leader=leader,
                       member_id=member, members=list(members))


def sync_resp(code=NONE, assignment=b""):
    return SG.Response(error_code=code, assignment=assignment)


def commit_resp(codes: dict[tuple[str, int], int]):
    topics: dict[str, list] = {}
    for (t, p), code in sorted(codes.items()):
        topics.setdefault(t, []).append(OC_PART(partition_index=p, error_code=code))
    return OC.Response(topics=[OC_TOPIC(name=t, partitions=ps) for t, ps in topics.items()])


def find_coordinator(m: GroupMembership, now: float) -> None:
    m.on_response(only(m.poll(now), "find"), find_resp(), now)
    assert m.coordinator == COORD


MY_ASSIGNMENT = consumer.encode_assignment(consumer.assignment_from_map({"t": [0, 1]}))


def stable(now: float = 0.0, *, leader: bool = False, gen: int = 1, m: GroupMembership | None = None,
           **kw) -> GroupMembership:
    """A member of generation ``gen`` with id "m1" (the leader when ``leader``), its
    SyncGroup answered at ``now``; the events so far are drained."""
    m = m or machine(**kw)
    m.start_join([(consumer.RANGE, sub(["t"]))], now)
    if m.coordinator is None:
        find_coordinator(m, now)
    join = only(m.poll(now), "join")
    members = [JG_MEMBER(member_id="m1", metadata=sub(["t"]))] if leader else []
    m.on_response(join, join_resp(gen=gen, member="m1", leader="m1" if leader else "m0",
                                  members=members), now)
    if leader:
        m.set_assignments(gen, {"m1": MY_ASSIGNMENT})
    sync = only(m.poll(now), "sync")
    m.on_response(sync, sync_resp(assignment=MY_ASSIGNMENT), now)
    assert m.state == STABLE and m.generation == gen
    m.events()
    return m


# ---------------------------------------------------------------------------------------
# Joining: FindCoordinator, JoinGroup (KIP-394), SyncGroup
# ---------------------------------------------------------------------------------------


def test_nothing_is_sent_before_start_join():
    m = machine()
    assert m.state == UNJOINED
    assert m.poll(0.0) == []
    assert m.poll(100.0) == []
    assert m.events() == []


def test_join_as_leader_with_member_id_required_then_sync_and_assigned():
    m = machine()
    meta = sub(["t", "u"])
    m.start_join([(consumer.COOPERATIVE_STICKY, b"coop"), (consumer.RANGE, meta)], 0.0)
    assert m.state == JOINING

    # 1. FindCoordinator, to any broker (there is no coordinator yet).
    find = only(m.poll(0.0), "find")
    assert find.api is FC and not find.to_coordinator
    v0, newest = oldest_and_newest(find)
    assert v0.key == "g"
    assert newest.coordinator_keys == ["g"] and newest.key_type == 0
    assert m.poll(0.05) == []  # one FindCoordinator in flight at a time
    m.on_response(find, find_resp(), 0.1)
    assert m.coordinator == COORD

    # 2. JoinGroup with no member id.
    join = only(m.poll(0.1), "join")
    assert join.api is JG and join.to_coordinator
    # The coordinator holds JoinGroup up to the rebalance timeout: wait longer than that.
    assert join.timeout > POLL_S
    v0, newest = oldest_and_newest(join)
    for req in (v0, newest):
        assert req.group_id == "g" and req.member_id == ""
        assert req.session_timeout_ms == 10000 and req.protocol_type == "consumer"
        assert [(p.name, bytes(p.metadata)) for p in req.protocols] == [
            (consumer.COOPERATIVE_STICKY, b"coop"), (consumer.RANGE, meta)]
    assert newest.rebalance_timeout_ms == 60000 and newest.group_instance_id is None
    assert newest.reason  # KIP-800: why it joins

    # 3. KIP-394: the first JoinGroup of a v4+ member only gets a member id; join again
    # at once (no backoff) with that id.
    m.on_response(join, join_resp(code=MEMBER_ID_REQUIRED, gen=-1, member="m1", leader=""), 0.2)
    assert m.events() == []
    assert m.state == JOINING and m.member_id == "m1" and m.generation == -1
    join2 = only(m.poll(0.2), "join")
    assert round_trip(join2, JG.max_version).member_id == "m1"
    assert round_trip(join2, 4).member_id == "m1"

    # 4. Joined as leader: the member list comes with the response.
    other = sub(["t"])
    m.on_response(join2, join_resp(gen=5, member="m1", leader="m1", protocol=consumer.RANGE, members=[
        JG_MEMBER(member_id="m1", metadata=meta), JG_MEMBER(member_id="m2", metadata=other)]), 0.3)
    ev = m.events()
    assert kinds(ev) == [Joined, AssignmentNeeded]
    assert (ev[0].generation, ev[0].member_id, ev[0].leader, ev[0].protocol) == (5, "m1", "m1", "range")
    need = ev[1]
    assert need.generation == 5 and need.protocol == "range"
    assert need.members == [("m1", None, meta), ("m2", None, other)]
    assert m.state == AWAITING_ASSIGNMENT and m.generation == 5 and m.leader == "m1"
    assert m.poll(0.3) == []  # no SyncGroup (nor heartbeat) until the assignment is set

    # 5. The leader's assignment goes out in SyncGroup.
    assignments = consumer.leader_assign(need.protocol, need.members, {"t": 4, "u": 1})
    m.set_assignments(5, assignments)
    assert m.state == SYNCING
    sync = only(m.poll(0.4), "sync")
    assert sync.api is SG and sync.generation == 5
    v0, newest = oldest_and_newest(sync)
    for req in (v0, newest):
        assert (req.group_id, req.generation_id, req.member_id) == ("g", 5, "m1")
        assert {a.member_id: bytes(a.assignment) for a in req.assignments} == assignments
    assert newest.protocol_type == "consumer" and newest.protocol_name == "range"

    # 6. SyncGroup's answer is this member's assignment.
    m.on_response(sync, sync_resp(assignment=assignments["m1"]), 0.5)
    ev = m.events()
    assert kinds(ev) == [Assigned]
    assert ev[0].generation == 5 and ev[0].protocol == "range"
    assert consumer.assignment_to_map(consumer.decode_assignment(ev[0].assignment)) == {
        "t": [0, 1], "u": [0]}
    assert m.state == STABLE and m.assignment == assignments["m1"]
    snap = m.snapshot(0.5)
    assert snap["is_leader"] and snap["state"] == "stable" and snap["generation"] == 5


def test_find_coordinator_v4_response_shape():
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(v4=True), 0.0)
    assert m.coordinator == COORD
    assert only(m.poll(0.0), "join").to_coordinator


def test_find_coordinator_retriable_error_backs_off_and_fatal_error_fails():
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(code=COORDINATOR_NOT_AVAILABLE), 0.0)
    assert m.coordinator is None
    assert m.poll(0.05) == []
    m.on_response(only(m.poll(0.1), "find"), find_resp(code=GROUP_AUTHORIZATION_FAILED, v4=True), 0.1)
    ev = m.events()
    assert kinds(ev) == [Failed]
    assert isinstance(ev[0].error, errors.for_code(GROUP_AUTHORIZATION_FAILED))


def test_find_coordinator_connection_failure_retries_after_backoff():
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find = only(m.poll(0.0), "find")
    m.on_failure(find, ConnectionError("refused"), 0.0)
    assert m.poll(0.09) == []
    only(m.poll(0.1), "find")


def test_follower_sends_an_empty_sync_group():
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    m.on_response(only(m.poll(0.0), "join"), join_resp(gen=2, member="m2", leader="m1",
                                                       members=[]), 0.1)
    ev = m.events()
    assert kinds(ev) == [Joined]  # no AssignmentNeeded for a follower
    assert m.state == SYNCING and not m.snapshot(0.1)["is_leader"]
    sync = only(m.poll(0.1), "sync")
    for req in oldest_and_newest(sync):
        assert req.assignments == [] and req.member_id == "m2" and req.generation_id == 2
    m.on_response(sync, sync_resp(assignment=MY_ASSIGNMENT), 0.2)
    ev = m.events()
    assert kinds(ev) == [Assigned] and ev[0].assignment == MY_ASSIGNMENT


def test_an_empty_assignment_is_a_valid_answer():
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    m.on_response(only(m.poll(0.0), "join"), join_resp(gen=2, member="m2", leader="m1"), 0.0)
    m.on_response(only(m.poll(0.0), "sync"), sync_resp(assignment=b""), 0.0)
    ev = m.events()
    assert kinds(ev) == [Joined, Assigned] and ev[1].assignment == b""
    assert consumer.assignment_to_map(consumer.decode_assignment(ev[1].assignment)) == {}


def test_set_assignments_for_an_old_generation_is_ignored():
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    m.on_response(only(m.poll(0.0), "join"), join_resp(gen=4, members=[
        JG_MEMBER(member_id="m1", metadata=sub(["t"]))]), 0.0)
    m.set_assignments(3, {"m1": MY_ASSIGNMENT})
    assert m.state == AWAITING_ASSIGNMENT
    assert m.poll(0.0) == []
    m.set_assignments(4, {"m1": MY_ASSIGNMENT})
    assert m.state == SYNCING


def test_a_static_leader_told_to_skip_the_assignment_syncs_without_one():
    # KIP-814 (JoinGroup v9): a static leader that rejoins a stable group gets the
    # members (to watch their topics) but no say: the group keeps its assignment.
    m = machine(group_instance_id="i1")
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    members = [JG_MEMBER(member_id="m9", group_instance_id="i1", metadata=sub(["t"])),
               JG_MEMBER(member_id="m2", group_instance_id="i2", metadata=sub(["t", "u"]))]
    resp = JG.Response(error_code=NONE, generation_id=4, protocol_name=consumer.RANGE, leader="m9",
                       skip_assignment=True, member_id="m9", members=members)
    m.on_response(only(m.poll(0.0), "join"), resp, 0.1)
    ev = m.events()
    assert kinds(ev) == [Joined, AssignmentNeeded]
    need = ev[1]
    assert need.skip_assignment and need.generation == 4
    assert [(mid, iid) for mid, iid, _meta in need.members] == [("m9", "i1"), ("m2", "i2")]
    assert m.state == SYNCING  # no waiting for set_assignments()
    m.set_assignments(4, {"m9": MY_ASSIGNMENT})  # too late to matter: nothing is assigned
    sync = only(m.poll(0.1), "sync")
    for req in oldest_and_newest(sync):
        assert req.assignments == [] and req.member_id == "m9" and req.generation_id == 4
    m.on_response(sync, sync_resp(assignment=MY_ASSIGNMENT), 0.2)
    ev = m.events()
    assert kinds(ev) == [Assigned] and ev[0].assignment == MY_ASSIGNMENT
    assert m.state == STABLE and m.snapshot(0.2)["is_leader"]


def test_a_leader_not_told_to_skip_assigns():
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    m.on_response(only(m.poll(0.0), "join"), join_resp(gen=1, members=[
        JG_MEMBER(member_id="m1", metadata=sub(["t"]))]), 0.0)
    ev = m.events()
    assert kinds(ev) == [Joined, AssignmentNeeded] and not ev[1].skip_assignment
    assert m.state == AWAITING_ASSIGNMENT and m.poll(0.0) == []  # the SyncGroup waits for it


def test_start_join_needs_a_protocol():
    with pytest.raises(ValueError):
        machine().start_join([], 0.0)
    with pytest.raises(ValueError):
        GroupMembership("")


# ---------------------------------------------------------------------------------------
# JoinGroup and SyncGroup errors
# ---------------------------------------------------------------------------------------


def joining(now=0.0, **kw) -> tuple[GroupMembership, Outgoing]:
    m = machine(**kw)
    m.start_join([(consumer.RANGE, sub(["t"]))], now)
    find_coordinator(m, now)
    m.on_response(only(m.poll(now), "join"), join_resp(code=MEMBER_ID_REQUIRED, member="m1"), now)
    return m, only(m.poll(now), "join")


@pytest.mark.parametrize("code", [REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION])
def test_join_rebalancing_or_old_generation_is_retried_at_once_with_the_same_member_id(code):
    m, join = joining(1.0)
    m.on_response(join, join_resp(code=code, gen=-1, member="", leader=""), 1.0)
    assert m.events() == []
    assert m.state == JOINING and m.member_id == "m1"
    again = only(m.poll(1.0), "join")
    assert round_trip(again, JG.max_version).member_id == "m1"


def test_join_unknown_member_id_rejoins_with_no_member_id():
    m, join = joining(1.0)
    m.on_response(join, join_resp(code=UNKNOWN_MEMBER_ID, gen=-1, member="", leader=""), 1.0)
    assert m.state == JOINING and m.member_id == ""
    assert round_trip(only(m.poll(1.0), "join"), JG.max_version).member_id == ""


def test_join_coordinator_loading_is_retried_after_the_backoff():
    m, join = joining(1.0)
    m.on_response(join, join_resp(code=COORDINATOR_LOAD_IN_PROGRESS, gen=-1, member="", leader=""), 1.0)
    assert m.events() == [] and m.state == JOINING
    assert m.coordinator == COORD  # loading: same coordinator, just not yet
    assert m.poll(1.05) == []
    assert m.next_wakeup(1.05) == pytest.approx(0.05)
    only(m.poll(1.0 + BACKOFF_S), "join")


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE])
def test_join_coordinator_moved_looks_it_up_again(code):
    m, join = joining(1.0)
    m.on_response(join, join_resp(code=code, gen=-1, member="", leader=""), 1.0)
    assert m.coordinator is None and m.state == JOINING
    assert m.poll(1.0) == []
    find = only(m.poll(1.0 + BACKOFF_S), "find")
    m.on_response(find, find_resp(coord=(4, "broker-4", 9094)), 1.2)
    assert m.coordinator == (4, "broker-4", 9094)
    assert round_trip(only(m.poll(1.2), "join"), JG.max_version).member_id == "m1"


@pytest.mark.parametrize("code, cls", [
    (INCONSISTENT_GROUP_PROTOCOL, "InconsistentGroupProtocolError"),
    (GROUP_AUTHORIZATION_FAILED, "GroupAuthorizationFailedError"),
    (INVALID_SESSION_TIMEOUT, "InvalidSessionTimeoutError"),
    (GROUP_MAX_SIZE_REACHED, "GroupMaxSizeReachedError"),
])
def test_fatal_join_errors_fail_the_member_clearly(code, cls):
    m, join = joining(1.0)
    m.on_response(join, join_resp(code=code, gen=-1, member="", leader=""), 1.0)
    ev = m.events()
    assert kinds(ev) == [Failed]
    err = ev[0].error
    assert type(err).__name__ == cls and err.code == code
    assert errors.for_code(code).name in str(err) and "'g'" in str(err)
    assert m.state == UNJOINED and not m.rejoin_needed
    assert m.poll(1.0) == [] and m.poll(100.0) == []  # no retry
    assert m.snapshot(1.0)["last_error"] == str(err)


def test_a_join_answer_after_leaving_is_ignored():
    m, join = joining(1.0)
    m.leave()
    m.on_response(join, join_resp(gen=3, member="m1", leader="m1"), 1.1)
    assert m.events() == []
    assert m.state == UNJOINED and m.generation == -1


def test_a_stale_sync_answer_from_an_older_generation_is_ignored():
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    m.on_response(only(m.poll(0.0), "join"), join_resp(gen=1, member="m2", leader="m1"), 0.0)
    sync1 = only(m.poll(0.0), "sync")
    # The group rebalanced again before the answer came: rejoin, generation 2.
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.5, reason="test")
    m.on_response(only(m.poll(0.5), "join"), join_resp(gen=2, member="m2", leader="m1"), 0.6)
    sync2 = only(m.poll(0.6), "sync")
    m.events()
    m.on_response(sync1, sync_resp(assignment=b"old"), 0.7)
    assert m.events() == [] and m.state == SYNCING
    m.on_response(sync2, sync_resp(assignment=MY_ASSIGNMENT), 0.8)
    ev = m.events()
    assert kinds(ev) == [Assigned] and ev[0].generation == 2 and ev[0].assignment == MY_ASSIGNMENT


def test_a_stale_sync_answer_does_not_release_the_sync_in_flight():
    # The machine keeps one request of a kind in flight.  The stale answer to the
    # generation-1 SyncGroup must not count as the answer to the generation-2 one still
    # in flight: a second SyncGroup now would replace the first at the coordinator, which
    # keeps one pending SyncGroup per member and leaves the replaced one unanswered.
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    m.on_response(only(m.poll(0.0), "join"), join_resp(gen=1, member="m2", leader="m1"), 0.0)
    sync1 = only(m.poll(0.0), "sync")
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.5, reason="test")
    m.on_response(only(m.poll(0.5), "join"), join_resp(gen=2, member="m2", leader="m1"), 0.6)
    only(m.poll(0.6), "sync")  # generation 2, in flight
    m.on_response(sync1, sync_resp(assignment=b"old"), 0.7)
    assert m.poll(0.7) == []


def test_a_superseded_join_timing_out_keeps_the_coordinator_and_the_new_join():
    # start_join() while a JoinGroup is in flight sends a new one (the consumer rejoins
    # after a RejoinNeeded).  The coordinator answers only the newest JoinGroup of a
    # member, so the first one times out: that failure says nothing about the coordinator
    # and must neither forget it nor abandon the JoinGroup still in flight.
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    join1 = only(m.poll(0.0), "join")
    m.start_join([(consumer.RANGE, sub(["t"]))], 1.0, reason="metadata changed")
    join2 = only(m.poll(1.0), "join")
    m.on_failure(join1, TimeoutError("no answer"), join1.timeout)
    assert m.coordinator == COORD
    assert m.poll(join1.timeout) == []  # join2 is still in flight
    m.on_response(join2, join_resp(gen=1, member="m2", leader="m1"), join1.timeout + 1)
    assert m.state == SYNCING


@pytest.mark.parametrize("code, member_after", [
    (REBALANCE_IN_PROGRESS, "m2"), (ILLEGAL_GENERATION, "m2"), (UNKNOWN_MEMBER_ID, "")])
def test_sync_errors_rejoin(code, member_after):
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    m.on_response(only(m.poll(0.0), "join"), join_resp(gen=1, member="m2", leader="m1"), 0.0)
    m.on_response(only(m.poll(0.0), "sync"), sync_resp(code=code), 0.1)
    assert m.state == JOINING and m.member_id == member_after and m.generation == -1
    assert round_trip(only(m.poll(0.1), "join"), JG.max_version).member_id == member_after


def test_sync_connection_failure_finds_the_coordinator_and_rejoins():
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    m.on_response(only(m.poll(0.0), "join"), join_resp(gen=1, member="m2", leader="m1"), 0.0)
    m.on_failure(only(m.poll(0.0), "sync"), ConnectionError("reset"), 0.1)
    assert m.coordinator is None and m.state == JOINING
    find_coordinator(m, 0.2)
    only(m.poll(0.2), "join")


def test_sync_refused_as_invalid_joins_again_a_few_times_then_fails():
    # The librdkafka mock refuses a follower's SyncGroup that comes after the leader's.
    m = machine()
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    now = 0.0
    for gen in range(1, 5):
        m.on_response(only(m.poll(now), "join"), join_resp(gen=gen, member="m2", leader="m1"), now)
        m.on_response(only(m.poll(now), "sync"), sync_resp(code=42), now + 0.1)
        now += 1.0
        if gen <= 3:
            assert m.state == JOINING and m.member_id == "m2" and m.generation == -1
            assert Failed not in kinds(m.events())
    ev = m.events()
    assert Failed in kinds(ev) and ev[-1].error.code == 42
    # a sync that succeeds in between starts the count again
    m2 = machine()
    m2.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m2, 0.0)
    for gen, code in enumerate([42, 42, 42, 0], start=1):
        m2.on_response(only(m2.poll(0.0), "join"), join_resp(gen=gen, member="m2", leader="m1"), 0.0)
        m2.on_response(only(m2.poll(0.0), "sync"), sync_resp(code=code), 0.1)
    assert m2.state == STABLE and m2._sync_refused == 0


def test_sync_fenced_instance_id_fails():
    m = machine(group_instance_id="i1")
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    m.on_response(only(m.poll(0.0), "join"), join_resp(gen=1, member="m2", leader="m1"), 0.0)
    assert kinds(m.events()) == [Joined]
    m.on_response(only(m.poll(0.0), "sync"), sync_resp(code=FENCED_INSTANCE_ID), 0.1)
    ev = m.events()
    assert kinds(ev) == [Failed] and ev[0].error.code == FENCED_INSTANCE_ID
    assert m.state == UNJOINED and m.poll(1.0) == []


# ---------------------------------------------------------------------------------------
# Heartbeats
# ---------------------------------------------------------------------------------------


def test_heartbeats_are_due_every_interval_and_not_before():
    m = stable(10.0)
    assert m.poll(10.0) == []
    assert m.poll(12.99) == []
    assert m.next_wakeup(12.5) == pytest.approx(0.5)
    hb = only(m.poll(10.0 + HB_S), "heartbeat")
    assert hb.to_coordinator and hb.generation == 1
    for req in oldest_and_newest(hb):
        assert (req.group_id, req.generation_id, req.member_id) == ("g", 1, "m1")
    assert m.poll(13.5) == []  # one in flight, and the next is not due
    m.on_response(hb, HB.Response(error_code=NONE), 13.1)
    assert m.last_heartbeat_time == 13.1
    assert m.snapshot(14.1)["last_heartbeat_age"] == pytest.approx(1.0)
    assert m.snapshot(14.1)["last_heartbeat_result"] == "ok"
    assert m.poll(15.99) == []
    only(m.poll(16.0), "heartbeat")
    assert m.events() == []


def test_heartbeat_rebalance_in_progress_asks_for_a_rejoin():
    m = stable(0.0)
    hb = only(m.poll(HB_S), "heartbeat")
    m.on_response(hb, HB.Response(error_code=REBALANCE_IN_PROGRESS), 3.1)
    ev = m.events()
    assert kinds(ev) == [RejoinNeeded] and ev[0].reason
    assert m.rejoin_needed and m.state == STABLE  # still a member until it rejoins
    snap = m.snapshot(3.1)
    assert snap["rejoin_needed"] and snap["rejoin_reason"] == ev[0].reason
    assert snap["last_heartbeat_result"] == "REBALANCE_IN_PROGRESS"
    # A second answer alike does not ask twice.
    m.on_response(only(m.poll(6.0), "heartbeat"), HB.Response(error_code=REBALANCE_IN_PROGRESS), 6.1)
    assert m.events() == []
    # The consumer revokes, then rejoins with its member id.
    m.start_join([(consumer.RANGE, sub(["t"]))], 6.2)
    assert not m.rejoin_needed and m.state == JOINING
    join = only(m.poll(6.2), "join")
    req = round_trip(join, JG.max_version)
    assert req.member_id == "m1" and req.reason == ev[0].reason


@pytest.mark.parametrize("code, member_after", [(ILLEGAL_GENERATION, "m1"), (UNKNOWN_MEMBER_ID, "")])
def test_heartbeat_generation_gone_loses_the_partitions(code, member_after):
    m = stable(0.0)
    m.on_response(only(m.poll(HB_S), "heartbeat"), HB.Response(error_code=code), 3.1)
    ev = m.events()
    assert kinds(ev) == [Lost] and errors.for_code(code).name in ev[0].reason
    assert m.state == UNJOINED and m.generation == -1 and m.assignment is None
    assert m.member_id == member_after  # only UNKNOWN_MEMBER_ID forgets the member id
    assert m.rejoin_needed
    assert m.poll(10.0) == []  # no heartbeat, no JoinGroup until the consumer rejoins
    m.start_join([(consumer.RANGE, sub(["t"]))], 10.0)
    assert round_trip(only(m.poll(10.0), "join"), JG.max_version).member_id == member_after


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE])
def test_heartbeat_coordinator_moved_finds_it_again_after_the_backoff(code):
    m = stable(0.0)
    m.on_response(only(m.poll(HB_S), "heartbeat"), HB.Response(error_code=code), 3.0)
    assert m.coordinator is None
    assert m.state == STABLE and m.generation == 1  # still a member of its generation
    assert m.events() == []
    assert m.poll(3.05) == []
    find = only(m.poll(3.0 + BACKOFF_S), "find")
    m.on_response(find, find_resp(), 3.2)
    hb = only(m.poll(3.2), "heartbeat")  # heartbeats the new coordinator at once
    assert round_trip(hb, HB.max_version).generation_id == 1


def test_heartbeat_connection_failure_forgets_the_coordinator():
    m = stable(0.0)
    hb = only(m.poll(HB_S), "heartbeat")
    m.on_failure(hb, ConnectionError("connection reset"), 3.5)
    assert m.coordinator is None
    assert "connection reset" in m.snapshot(3.5)["last_heartbeat_result"]
    assert m.poll(3.55) == []
    only(m.poll(3.5 + BACKOFF_S), "find")


def test_heartbeat_fenced_instance_id_fails():
    m = stable(0.0, group_instance_id="i1")
    hb = only(m.poll(HB_S), "heartbeat")
    assert round_trip(hb, HB.max_version).group_instance_id == "i1"
    m.on_response(hb, HB.Response(error_code=FENCED_INSTANCE_ID), 3.1)
    ev = m.events()
    assert kinds(ev) == [Failed]
    assert isinstance(ev[0].error, errors.for_code(FENCED_INSTANCE_ID))
    assert m.state == UNJOINED and not m.rejoin_needed
    assert m.poll(100.0) == []


def test_heartbeat_retriable_error_retries_after_backoff_without_losing_membership():
    m = stable(0.0)
    m.on_response(only(m.poll(HB_S), "heartbeat"), HB.Response(error_code=REQUEST_TIMED_OUT), 3.0)
    assert m.state == STABLE and m.coordinator == COORD and m.events() == []
    assert m.last_heartbeat_time is None  # an error is not a successful heartbeat


def test_a_stale_heartbeat_answer_is_ignored():
    m = stable(0.0)
    hb = only(m.poll(HB_S), "heartbeat")  # generation 1
    stable(4.0, gen=2, m=m)  # the group moved on to generation 2 meanwhile
    m.on_response(hb, HB.Response(error_code=ILLEGAL_GENERATION), 4.5)
    assert m.events() == []
    assert m.state == STABLE and m.generation == 2 and m.member_id == "m1"


# ---------------------------------------------------------------------------------------
# Session timeout and poll interval (KIP-62)
# ---------------------------------------------------------------------------------------


def test_session_timeout_without_a_successful_heartbeat_forgets_the_coordinator():
    m = stable(0.0)
    now = 0.0
    # Every heartbeat is answered, but with an error: none succeeds.
    while now + HB_S <= SESSION_S:
        now += HB_S
        m.poll_called(now)
        m.on_response(only(m.poll(now), "heartbeat"),
                      HB.Response(error_code=COORDINATOR_LOAD_IN_PROGRESS), now)
        assert m.coordinator == COORD
    m.poll_called(10.5)
    assert m.poll(10.5) == []
    assert m.coordinator is None
    assert m.state == STABLE  # not expelled: the coordinator is what is in doubt
    assert "coordinator" in m.snapshot(10.5)["last_rebalance_reason"]
    only(m.poll(10.5 + BACKOFF_S), "find")


def test_successful_heartbeats_keep_the_session():
    m = stable(0.0)
    for i in range(1, 10):  # 27 seconds, much more than the session timeout
        now = i * HB_S
        m.poll_called(now)
        m.on_response(only(m.poll(now), "heartbeat"), HB.Response(error_code=NONE), now)
    assert m.coordinator == COORD and m.events() == []


def test_session_timeout_applies_while_a_heartbeat_hangs():
    # The module docstring: "a member that has had no successful heartbeat for
    # session_timeout_ms takes its coordinator for dead".  Here a heartbeat is sent and
    # never answered; the request timeout (30 s) is longer than the session (10 s), so
    # the session timeout must fire first (the Java client checks it regardless of a
    # heartbeat in flight).
    m = stable(0.0, request_timeout_ms=30000)
    only(m.poll(HB_S), "heartbeat")
    m.poll_called(10.5)
    m.poll(10.5)
    assert m.coordinator is None


def test_poll_interval_exceeded_leaves_the_group():
    m = stable(0.0)
    now = 0.0
    for i in range(1, 21):  # heartbeats keep the session alive for 60 s...
        now = i * HB_S
        m.on_response(only(m.poll(now), "heartbeat"), HB.Response(error_code=NONE), now)
    assert m.state == STABLE and m.events() == []
    # ... but the consumer last polled at 0 (start_join): past max_poll_interval it leaves.
    outs = m.poll(60.5)
    leave = only(outs, "leave")
    assert leave.api is LG and leave.to_coordinator
    v0, newest = oldest_and_newest(leave)
    assert v0.group_id == "g" and v0.member_id == "m1"
    assert [x.member_id for x in newest.members] == ["m1"]
    assert "max_poll_interval_ms" in newest.members[0].reason
    ev = m.events()
    assert kinds(ev) == [Lost] and "max_poll_interval_ms" in ev[0].reason
    assert m.state == UNJOINED and m.rejoin_needed and m.member_id == "" and m.generation == -1
    assert m.poll(61.0) == []  # no more heartbeats, no JoinGroup until start_join


def test_polling_keeps_the_member_in_the_group():
    m = stable(0.0)
    for i in range(1, 40):
        now = i * HB_S
        m.poll_called(now)
        m.on_response(only(m.poll(now), "heartbeat"), HB.Response(error_code=NONE), now)
    assert m.state == STABLE and m.events() == []


def test_static_member_poll_timeout_sends_no_leave_group_and_keeps_its_member_id():
    m = stable(0.0, group_instance_id="i1")
    outs = m.poll(POLL_S + 1)
    assert [o.kind for o in outs] == []  # KIP-345: a static member keeps its place
    ev = m.events()
    assert kinds(ev) == [Lost]
    assert m.member_id == "m1" and m.group_instance_id == "i1" and m.state == UNJOINED
    m.start_join([(consumer.RANGE, sub(["t"]))], 70.0)
    req = round_trip(only(m.poll(70.0), "join"), JG.max_version)
    assert (req.member_id, req.group_instance_id) == ("m1", "i1")


def test_leave_sends_leave_group_for_a_dynamic_member():
    m = stable(0.0)
    leave = m.leave("shutting down")
    assert leave is not None and leave.kind == "leave" and leave.api is LG
    v0, newest = oldest_and_newest(leave)
    assert v0.member_id == "m1"
    assert [(x.member_id, x.group_instance_id, x.reason) for x in newest.members] == [
        ("m1", None, "shutting down")]
    assert m.state == UNJOINED and m.member_id == "" and m.generation == -1 and not m.rejoin_needed
    assert m.poll(100.0) == []
    assert m.on_response(leave, LG.Response(error_code=NONE), 0.1) is None
    assert m.events() == []  # leaving is not losing


def test_static_member_leave_sends_nothing_and_keeps_its_identity():
    m = stable(0.0, group_instance_id="i1")
    assert m.leave() is None
    assert m.state == UNJOINED and m.member_id == "m1" and m.group_instance_id == "i1"
    assert m.poll(100.0) == []


def test_leave_when_not_a_member_sends_nothing():
    m = machine()
    assert m.leave() is None
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    assert m.leave() is None  # no member id, no coordinator yet


def test_static_member_identity_in_every_request():
    m = machine(group_instance_id="i1")
    m.start_join([(consumer.RANGE, sub(["t"]))], 0.0)
    find_coordinator(m, 0.0)
    join = only(m.poll(0.0), "join")
    assert round_trip(join, JG.max_version).group_instance_id == "i1"
    assert round_trip(join, 5).group_instance_id == "i1"
    m.on_response(join, join_resp(gen=1, member="m1", leader="m0"), 0.0)
    sync = only(m.poll(0.0), "sync")
    assert round_trip(sync, SG.max_version).group_instance_id == "i1"
    m.on_response(sync, sync_resp(assignment=MY_ASSIGNMENT), 0.0)
    m.commit({("t", 0): (5, None)})
    commit = only(m.poll(0.0), "commit")
    assert round_trip(commit, OC.max_version).group_instance_id == "i1"
    # A static member that is expelled (UNKNOWN_MEMBER_ID) forgets its member id, never
    # its instance id.
    m.on_response(only(m.poll(HB_S), "heartbeat"), HB.Response(error_code=UNKNOWN_MEMBER_ID), 3.0)
    assert m.member_id == "" and m.group_instance_id == "i1"


# ---------------------------------------------------------------------------------------
# Offset commits
# ---------------------------------------------------------------------------------------


def test_commit_waits_for_the_coordinator_and_commits_as_a_simple_consumer():
    m = machine()
    m.commit({("u", 1): (7, None), ("t", 0): (5, "meta")}, token="tok")
    find = only(m.poll(0.0), "find")
    assert m.poll(0.01) == []  # the commit waits while the coordinator is looked up
    m.on_response(find, find_resp(), 0.02)
    commit = only(m.poll(0.02), "commit")
    assert commit.token == "tok" and commit.to_coordinator and commit.generation == -1
    v0, newest = oldest_and_newest(commit)
    assert v0.group_id == "g"
    assert [(t.name, [(p.partition_index, p.committed_offset, p.committed_metadata)
                      for p in t.partitions]) for t in v0.topics] == [
        ("t", [(0, 5, "meta")]), ("u", [(1, 7, None)])]
    assert newest.generation_id_or_member_epoch == -1 and newest.member_id == ""
    assert newest.group_instance_id is None
    v1 = round_trip(commit, 1)
    assert v1.generation_id_or_member_epoch == -1 and v1.member_id == ""
    got = m.on_response(commit, commit_resp({("t", 0): NONE, ("u", 1): NONE}), 0.03)
    assert got == {("t", 0): None, ("u", 1): None}
    assert m.poll(0.04) == []


def test_commit_as_a_member_carries_generation_and_member_id():
    m = stable(0.0)
    m.commit({("t", 0): (5, None), ("t", 1): (9, "x")})
    commit = only(m.poll(0.5), "commit")
    assert commit.generation == 1
    req = round_trip(commit, OC.max_version)
    assert req.generation_id_or_member_epoch == 1 and req.member_id == "m1"
    got = m.on_response(commit, commit_resp({("t", 0): NONE, ("t", 1): OFFSET_METADATA_TOO_LARGE}), 0.6)
    assert got[("t", 0)] is None
    assert isinstance(got[("t", 1)], errors.for_code(OFFSET_METADATA_TOO_LARGE))
    assert m.state == STABLE and m.events() == []


def test_commit_goes_out_with_a_heartbeat_when_both_are_due():
    m = stable(0.0)
    m.commit({("t", 0): (1, None)})
    outs = m.poll(HB_S)
    assert sorted(o.kind for o in outs) == ["commit", "heartbeat"]


@pytest.mark.parametrize("code, member_after", [(ILLEGAL_GENERATION, "m1"), (UNKNOWN_MEMBER_ID, "")])
def test_commit_generation_gone_raises_commit_failed_and_loses_the_partitions(code, member_after):
    m = stable(0.0)
    m.commit({("t", 0): (5, None), ("t", 1): (9, None)})
    commit = only(m.poll(0.5), "commit")
    got = m.on_response(commit, commit_resp({("t", 0): code, ("t", 1): code}), 0.6)
    err = got[("t", 0)]
    assert isinstance(err, errors.CommitFailedError) and got[("t", 1)] is err
    assert err.code == code
    assert err.partitions == {("t", 0): 5, ("t", 1): 9}
    ev = m.events()
    assert kinds(ev) == [Lost]
    assert m.state == UNJOINED and m.generation == -1 and m.member_id == member_after
    assert m.rejoin_needed


def test_commit_rebalance_in_progress_raises_commit_failed_and_asks_for_a_rejoin():
    m = stable(0.0)
    m.commit({("t", 0): (5, None)})
    got = m.on_response(only(m.poll(0.5), "commit"), commit_resp({("t", 0): REBALANCE_IN_PROGRESS}), 0.6)
    err = got[("t", 0)]
    assert isinstance(err, errors.CommitFailedError)
    assert err.code == REBALANCE_IN_PROGRESS and err.partitions == {("t", 0): 5}
    ev = m.events()
    assert kinds(ev) == [RejoinNeeded]
    assert m.state == STABLE and m.rejoin_needed and m.generation == 1 and m.member_id == "m1"


def test_a_commit_answered_after_the_generation_changed_does_not_expel_the_member():
    m = stable(0.0)
    m.commit({("t", 0): (5, None)})
    commit = only(m.poll(0.5), "commit")  # generation 1
    stable(1.0, gen=2, m=m)
    got = m.on_response(commit, commit_resp({("t", 0): ILLEGAL_GENERATION}), 1.5)
    assert isinstance(got[("t", 0)], errors.CommitFailedError)  # still failed for the caller
    assert m.events() == []
    assert m.state == STABLE and m.generation == 2


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE])
def test_commit_coordinator_moved_forgets_the_coordinator(code):
    m = stable(0.0)
    m.commit({("t", 0): (5, None)})
    got = m.on_response(only(m.poll(0.5), "commit"), commit_resp({("t", 0): code}), 0.6)
    assert isinstance(got[("t", 0)], errors.for_code(code)) and got[("t", 0)].retriable
    assert m.coordinator is None
    assert m.poll(0.65) == []
    only(m.poll(0.6 + BACKOFF_S), "find")


def test_commit_connection_failure_returns_the_error_and_forgets_the_coordinator():
    m = stable(0.0)
    m.commit({("t", 0): (5, None)})
    exc = ConnectionError("gone")
    assert m.on_failure(only(m.poll(0.5), "commit"), exc, 0.6) is exc
    assert m.coordinator is None and m.state == STABLE


def test_commit_failed_error_class():
    err = errors.CommitFailedError("x", code=ILLEGAL_GENERATION, partitions={("t", 0): 3})
    assert err.code == ILLEGAL_GENERATION and err.partitions == {("t", 0): 3}
    assert errors.CommitFailedError("y").partitions == {}


# ---------------------------------------------------------------------------------------
# Offset fetches
# ---------------------------------------------------------------------------------------


def fetching(tps, now=0.0):
    m = machine()
    m.fetch_offsets(tps, token=7)
    find_coordinator(m, now)
    out = only(m.poll(now), "fetch_offsets")
    assert out.token == 7 and out.to_coordinator
    return m, out


def test_fetch_offsets_request_at_every_shape():
    _m, out = fetching([("u", 0), ("t", 2), ("t", 0), ("t", 2)])
    v0, newest = oldest_and_newest(out)
    assert v0.group_id == "g"
    assert [(t.name, t.partition_indexes) for t in v0.topics] == [("t", [0, 2]), ("u", [0])]
    v7 = round_trip(out, 7)
    assert v7.require_stable is True and [t.name for t in v7.topics] == ["t", "u"]
    assert [g.group_id for g in newest.groups] == ["g"]
    assert [(t.name, t.partition_indexes) for t in newest.groups[0].topics] == [("t", [0, 2]), ("u", [0])]
    assert round_trip(out, 8).groups[0].topics[1].name == "u"


def test_fetch_offsets_old_response_shape():
    m, out = fetching([("t", 0), ("t", 1), ("t", 2)])
    resp = OF.Response(topics=[OF_TOPIC(name="t", partitions=[
        OF_PART(partition_index=0, committed_offset=42, metadata="m", error_code=NONE),
        OF_PART(partition_index=1, committed_offset=-1, metadata="", error_code=NONE),
    ])])
    got = m.on_response(out, resp, 0.1)
    assert got == {("t", 0): (42, "m"), ("t", 1): (-1, ""), ("t", 2): (-1, None)}


def test_fetch_offsets_new_response_shape():
    m, out = fetching([("t", 0), ("u", 3)])
    resp = OF.Response(groups=[OF_GROUP(group_id="g", error_code=NONE, topics=[
        OF_GTOPIC(name="t", partitions=[OF_GPART(partition_index=0, committed_offset=10,
                                                  metadata=None, error_code=NONE)]),
        OF_GTOPIC(name="u", partitions=[OF_GPART(partition_index=3, committed_offset=-1,
                                                  metadata="", error_code=NONE)]),
    ])])
    got = m.on_response(out, resp, 0.1)
    assert got == {("t", 0): (10, None), ("u", 3): (-1, "")}


def test_fetch_offsets_group_error_old_shape_raises_the_typed_error():
    m, out = fetching([("t", 0)])
    with pytest.raises(errors.for_code(GROUP_AUTHORIZATION_FAILED)) as info:
        m.on_response(out, OF.Response(error_code=GROUP_AUTHORIZATION_FAILED), 0.1)
    assert "'g'" in str(info.value)


def test_fetch_offsets_group_error_new_shape_raises_the_typed_error():
    m, out = fetching([("t", 0)])
    resp = OF.Response(groups=[OF_GROUP(group_id="g", error_code=COORDINATOR_LOAD_IN_PROGRESS, topics=[])])
    with pytest.raises(errors.for_code(COORDINATOR_LOAD_IN_PROGRESS)):
        m.on_response(out, resp, 0.1)
    assert m.coordinator == COORD


def test_fetch_offsets_not_coordinator_raises_and_forgets_the_coordinator():
    m, out = fetching([("t", 0)])
    resp = OF.Response(groups=[OF_GROUP(group_id="g", error_code=NOT_COORDINATOR, topics=[])])
    with pytest.raises(errors.for_code(NOT_COORDINATOR)):
        m.on_response(out, resp, 0.1)
    assert m.coordinator is None


def test_fetch_offsets_partition_error_raises_the_typed_error():
    m, out = fetching([("t", 0)])
    resp = OF.Response(topics=[OF_TOPIC(name="t", partitions=[
        OF_PART(partition_index=0, committed_offset=-1, error_code=UNSTABLE_OFFSET_COMMIT)])])
    with pytest.raises(errors.for_code(UNSTABLE_OFFSET_COMMIT)) as info:
        m.on_response(out, resp, 0.1)
    assert info.value.retriable


# ---------------------------------------------------------------------------------------
# snapshot() and next_wakeup()
# ---------------------------------------------------------------------------------------


def test_snapshot_fields():
    m = machine(group_instance_id="i1")
    snap = m.snapshot(0.0)
    assert set(snap) == {
        "group_id", "state", "member_id", "group_instance_id", "generation", "protocol", "leader",
        "is_leader", "coordinator", "rejoin_needed", "rejoin_reason", "last_rebalance_reason",
        "last_heartbeat_age", "last_heartbeat_result", "last_error"}
    assert snap["state"] == "unjoined" and snap["generation"] == -1 and snap["member_id"] == ""
    assert snap["coordinator"] is None and snap["last_heartbeat_age"] is None
    assert snap["last_error"] is None and not snap["is_leader"]

    stable(0.0, leader=True, m=m)
    m.on_response(only(m.poll(HB_S), "heartbeat"), HB.Response(error_code=NONE), 3.0)
    snap = m.snapshot(5.0)
    assert snap["state"] == "stable" and snap["group_id"] == "g" and snap["group_instance_id"] == "i1"
    assert (snap["member_id"], snap["generation"]) == ("m1", 1)
    assert (snap["protocol"], snap["leader"]) == ("range", "m1")
    assert snap["is_leader"] and snap["coordinator"] == COORD
    assert snap["last_heartbeat_age"] == pytest.approx(2.0)
    assert snap["last_heartbeat_result"] == "ok"
    assert snap["last_rebalance_reason"] and not snap["rejoin_needed"]

    m.on_failure(only(m.poll(6.0), "heartbeat"), ConnectionError("boom"), 6.0)
    snap = m.snapshot(6.0)
    assert snap["coordinator"] is None and "boom" in snap["last_error"]
    assert "coordinator lost" in snap["last_rebalance_reason"]


def test_next_wakeup_values():
    m = machine()
    assert m.next_wakeup(0.0) == 1.0  # nothing to do: at most a second
    m = stable(0.0, heartbeat_interval_ms=500)
    assert m.next_wakeup(0.0) == pytest.approx(0.5)
    assert m.next_wakeup(0.2) == pytest.approx(0.3)
    assert m.next_wakeup(0.7) == 0.0  # overdue
    hb = only(m.poll(0.7), "heartbeat")
    assert m.next_wakeup(0.7) == pytest.approx(0.5)
    m.on_response(hb, HB.Response(error_code=COORDINATOR_LOAD_IN_PROGRESS), 0.7)
    assert 0.0 < m.next_wakeup(0.7) <= 0.5
    m.commit({("t", 0): (1, None)})
    assert m.next_wakeup(0.7) == 0.0  # a commit to send now


def test_next_wakeup_does_not_spin_while_a_commit_waits_for_the_coordinator():
    # next_wakeup() is "seconds until poll() may have something to send".  A commit
    # queued while FindCoordinator is in flight cannot go out until the answer comes, so
    # poll() has nothing to send now; next_wakeup() must not answer 0 (the group thread
    # would then poll the network with a zero timeout in a busy loop).
    m = machine()
    m.commit({("t", 0): (5, None)})
    only(m.poll(0.0), "find")
    assert m.poll(0.0) == []
    assert m.next_wakeup(0.0) > 0.0


# ---------------------------------------------------------------------------------------
# The leader's part: subscriptions, assignors, assignments
# ---------------------------------------------------------------------------------------


def members(*specs):
    """(member id, group instance id, metadata) as JoinGroup gives them."""
    return [(mid, None, meta) for mid, meta in specs]


def decoded(assignments: dict[str, bytes]) -> dict[str, dict[str, list[int]]]:
    return {m: consumer.assignment_to_map(consumer.decode_assignment(a)) for m, a in assignments.items()}


def flat(maps):
    return {m: {(t, p) for t, ps in topics.items() for p in ps} for m, topics in maps.items()}


def test_subscription_metadata_per_assignor():
    owned = {"t": [2, 0], "u": []}
    for protocol in consumer.ASSIGNORS:
        meta = consumer.subscription_metadata(protocol, ["u", "t", "t"], owned, 7, rack="r1")
        s = consumer.decode_subscription(meta)
        assert consumer.header_version(meta) == consumer.SUBSCRIPTION_VERSION
        assert s.topics == ["t", "u"] and s.generation_id == 7 and s.rack_id == "r1"
        assert [(tp.topic, tp.partitions) for tp in s.owned_partitions] == [("t", [0, 2])]
        if protocol == consumer.STICKY:
            assert consumer.decode_sticky_user_data(s.user_data)[1] == 7
            assert consumer.decode_sticky_user_data(s.user_data)[0]["t"] == [0, 2]
        elif protocol == consumer.COOPERATIVE_STICKY:
            assert consumer.decode_cooperative_user_data(s.user_data) == 7
        else:
            assert s.user_data is None
    with pytest.raises(ValueError, match="unknown assignor"):
        consumer.subscription_metadata("bogus", ["t"], {}, -1)


def test_is_cooperative():
    assert consumer.is_cooperative(consumer.COOPERATIVE_STICKY)
    assert not any(consumer.is_cooperative(p) for p in (consumer.RANGE, consumer.ROUNDROBIN, consumer.STICKY))


def test_member_topics_is_the_union_of_subscriptions():
    ms = members(("a", sub(["t", "u"])), ("b", sub(["v"])), ("c", sub([])))
    assert consumer.member_topics(ms) == {"t", "u", "v"}
    assert consumer.member_topics([]) == set()


def test_leader_assign_range():
    ms = members(("m2", sub(["t"])), ("m1", sub(["t", "u"])))
    got = decoded(consumer.leader_assign(consumer.RANGE, ms, {"t": 5, "u": 2}))
    assert got == {"m1": {"t": [0, 1, 2], "u": [0, 1]}, "m2": {"t": [3, 4]}}


def test_leader_assign_roundrobin():
    ms = members(("m1", sub(["t", "u"], protocol=consumer.ROUNDROBIN)),
                 ("m2", sub(["t", "u"], protocol=consumer.ROUNDROBIN)))
    got = decoded(consumer.leader_assign(consumer.ROUNDROBIN, ms, {"t": 3, "u": 2}))
    assert got == {"m1": {"t": [0, 2], "u": [1]}, "m2": {"t": [1], "u": [0]}}


def test_leader_assign_gives_every_member_an_assignment_and_skips_unknown_topics():
    ms = members(("m1", sub(["t"])), ("m2", sub(["gone"])))
    raw = consumer.leader_assign(consumer.RANGE, ms, {"t": 2})
    assert set(raw) == {"m1", "m2"} and all(isinstance(v, bytes) for v in raw.values())
    assert decoded(raw) == {"m1": {"t": [0, 1]}, "m2": {}}


def test_leader_assign_unknown_protocol():
    with pytest.raises(ValueError, match="cannot run as leader"):
        consumer.leader_assign("bogus", members(("m1", sub(["t"]))), {"t": 1})


def sticky_group(protocol, owned_m1, gen=3, new_member="m2"):
    return members(
        ("m1", consumer.subscription_metadata(protocol, ["t"], {"t": owned_m1}, gen)),
        (new_member, consumer.subscription_metadata(protocol, ["t"], {}, -1)),
    )


def test_sticky_eager_moves_partitions_to_a_new_member_at_once():
    ms = sticky_group(consumer.STICKY, [0, 1, 2, 3])
    got = flat(decoded(consumer.leader_assign(consumer.STICKY, ms, {"t": 4})))
    assert len(got["m1"]) == len(got["m2"]) == 2
    assert got["m1"] <= {("t", p) for p in range(4)}
    assert got["m1"] | got["m2"] == {("t", p) for p in range(4)}  # nothing withheld


def test_cooperative_sticky_withholds_partitions_that_move_between_members():
    ms = sticky_group(consumer.COOPERATIVE_STICKY, [0, 1, 2, 3])
    first = flat(decoded(consumer.leader_assign(consumer.COOPERATIVE_STICKY, ms, {"t": 4})))
    # KIP-429: m1 keeps two and gives up two; the new member gets nothing yet, so no
    # partition is ever consumed by two members at once.
    assert len(first["m1"]) == 2 and first["m2"] == set()
    # m1 revokes the other two and rejoins: the second rebalance hands them to m2.
    kept = sorted(p for _, p in first["m1"])
    ms2 = sticky_group(consumer.COOPERATIVE_STICKY, kept, gen=4)
    second = flat(decoded(consumer.leader_assign(consumer.COOPERATIVE_STICKY, ms2, {"t": 4})))
    assert second["m1"] == first["m1"]
    assert second["m2"] == {("t", p) for p in range(4)} - first["m1"]


def test_cooperative_sticky_assigns_new_and_orphaned_partitions_at_once():
    # m0 left the group (its partitions are nobody's now) and the topic grew to 6.
    ms = members(
        ("m1", consumer.subscription_metadata(consumer.COOPERATIVE_STICKY, ["t"], {"t": [0, 1]}, 3)),
        ("m2", consumer.subscription_metadata(consumer.COOPERATIVE_STICKY, ["t"], {"t": [2, 3]}, 3)),
    )
    got = flat(decoded(consumer.leader_assign(consumer.COOPERATIVE_STICKY, ms, {"t": 6})))
    assert got["m1"] >= {("t", 0), ("t", 1)} and got["m2"] >= {("t", 2), ("t", 3)}
    assert got["m1"] | got["m2"] == {("t", p) for p in range(6)}
    assert len(got["m1"]) == len(got["m2"]) == 3


def test_cooperative_sticky_reads_the_generation_from_user_data_without_v2():
    # A v1 subscription (no generation_id) from an older client: the generation comes
    # from the cooperative user_data, so its newer claim wins over a stale one.
    cls = consumer.ConsumerProtocolSubscription
    old = consumer.encode_subscription(cls(
        topics=["t"], user_data=consumer.encode_cooperative_user_data(9),
        owned_partitions=[cls.TopicPartition(topic="t", partitions=[0])]), 1)
    stale = consumer.subscription_metadata(consumer.COOPERATIVE_STICKY, ["t"], {}, 8)
    got = flat(decoded(consumer.leader_assign(consumer.COOPERATIVE_STICKY,
                                              members(("a", stale), ("b", old)), {"t": 2})))
    assert ("t", 0) in got["b"]


@pytest.mark.parametrize("order", ["newer-first", "older-first"])
def test_cooperative_sticky_double_claim_stays_with_the_newer_generation(order):
    # m1 (generation 5) and m2 (a stale claim from generation 4) both say they own t-0.
    # sticky_assign's rule, which leader_assign's plan follows: "A partition claimed by
    # two members stays with the higher generation".  It does not move, so
    # cooperative-sticky has no reason to withhold it; whatever the members' order,
    # m1 keeps t-0.
    p = consumer.COOPERATIVE_STICKY
    m1 = ("m1", consumer.subscription_metadata(p, ["t"], {"t": [0]}, 5))
    m2 = ("m2", consumer.subscription_metadata(p, ["t"], {"t": [0, 1]}, 4))
    ms = members(m1, m2) if order == "newer-first" else members(m2, m1)
    got = flat(decoded(consumer.leader_assign(p, ms, {"t": 2})))
    assert got["m1"] == {("t", 0)}
    assert got["m2"] == {("t", 1)}


def test_sticky_reads_previous_assignment_from_user_data():
    ms = members(
        ("m1", consumer.subscription_metadata(consumer.STICKY, ["t"], {"t": [2, 3]}, 6)),
        ("m2", consumer.subscription_metadata(consumer.STICKY, ["t"], {"t": [0, 1]}, 6)),
    )
    got = decoded(consumer.leader_assign(consumer.STICKY, ms, {"t": 4}))
    assert got == {"m1": {"t": [2, 3]}, "m2": {"t": [0, 1]}}  # nothing moves


def test_a_whole_rebalance_through_the_machine_with_leader_assign():
    # Leader: the machine's AssignmentNeeded feeds leader_assign, SyncGroup carries it,
    # and the follower's bytes decode to its share.
    m = machine()
    m.start_join([(consumer.ROUNDROBIN, sub(["t"], protocol=consumer.ROUNDROBIN))], 0.0)
    find_coordinator(m, 0.0)
    join = only(m.poll(0.0), "join")
    m.on_response(join, join_resp(gen=1, member="a", leader="a", protocol=consumer.ROUNDROBIN, members=[
        JG_MEMBER(member_id="a", metadata=sub(["t"], protocol=consumer.ROUNDROBIN)),
        JG_MEMBER(member_id="b", metadata=sub(["t"], protocol=consumer.ROUNDROBIN))]), 0.0)
    need = [e for e in m.events() if isinstance(e, AssignmentNeeded)][0]
    assert consumer.member_topics(need.members) == {"t"}
    m.set_assignments(need.generation, consumer.leader_assign(need.protocol, need.members, {"t": 4}))
    sync = round_trip(only(m.poll(0.0), "sync"), SG.max_version)
    sent = decoded({a.member_id: bytes(a.assignment) for a in sync.assignments})
    assert sent == {"a": {"t": [0, 2]}, "b": {"t": [1, 3]}}


def test_commits_held_without_a_coordinator_expire_after_their_request_timeout():
    m = machine()
    m.commit({("t", 0): (5, None)}, token="c1")
    m.fetch_offsets([("t", 0)], token="f1")
    assert m.expire_held(0.0) == []  # the clock starts when they are first seen held
    timeout = m.request_timeout
    assert m.expire_held(timeout - 0.001) == []
    expired = m.expire_held(timeout + 0.001)
    assert sorted(o.token for o in expired) == ["c1", "f1"]
    assert m.expire_held(2 * timeout) == []  # dequeued: never sent later
    m.commit({("t", 0): (6, None)}, token="c2")
    m.coordinator = (1, "h", 1)
    assert m.expire_held(10 * timeout) == []  # a known coordinator sends them


def test_a_permanent_find_coordinator_error_ends_the_commits_and_fetches_held_for_it():
    # An assign()ed consumer's commit waits for a coordinator; a group id it may not use
    # means none will come: the held requests end with that error at once, not at their
    # request timeout (expire_held), and nothing else is dropped.
    m = machine()
    m.commit({("t", 0): (5, "")}, token="commit")
    m.fetch_offsets([("t", 0)], token="fetch")
    m.on_response(only(m.poll(0.0), "find"), find_resp(code=GROUP_AUTHORIZATION_FAILED), 0.0)
    refused = m.take_refused()
    assert sorted(o.token for o, _ in refused) == ["commit", "fetch"]
    assert all(isinstance(e, errors.for_code(GROUP_AUTHORIZATION_FAILED)) for _, e in refused)
    assert m.take_refused() == [] and m.expire_held(1000.0) == []
