"""The KIP-848 membership machine (kafkawire.protocol.consumer_group) driven step by step.

No broker and no clock: time is a float passed in, ConsumerGroupHeartbeat answers are
built with the API classes, and every heartbeat that comes out is checked field by field
and encoded at v0 and v1 (so it is valid on the wire at both).
"""

from __future__ import annotations

import re
import uuid

import pytest

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.consumer_group import (
    ACKNOWLEDGING,
    JOINING,
    RECONCILING,
    STABLE,
    UNJOINED,
    ConsumerGroupMembership,
    Failed,
    Joined,
    Lost,
    MetadataNeeded,
    NonFatal,
    Outgoing,
    Reconcile,
    new_member_id,
)

# The classic machine's test helpers, importable because pytest puts this directory on
# sys.path.
from test_group_machine import COORD, commit_resp, find_resp, kinds, only

CGH = apis.get("ConsumerGroupHeartbeat")
OF = apis.get("OffsetFetch")
ASSIGNED = CGH.Response.Assignment
ASSIGNED_TP = ASSIGNED.TopicPartitions

# Error codes, spelled out here rather than imported from the module under test.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_MAX_SIZE_REACHED = 81
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
INVALID_REGULAR_EXPRESSION = 128

A = uuid.UUID("00000000-0000-0000-0000-00000000000a")
B = uuid.UUID("00000000-0000-0000-0000-00000000000b")
C = uuid.UUID("00000000-0000-0000-0000-00000000000c")
NAMES = {A: "a", B: "b", C: "c"}
# Seconds: the broker's heartbeat interval, the poll interval, the retry backoff.
HB_S, POLL_S, SESSION_S, BACKOFF_S = 3.0, 60.0, 10.0, 0.1


def machine(**kw) -> ConsumerGroupMembership:
    opts = dict(member_id="member-1", rebalance_timeout_ms=60000, session_timeout_ms=10000,
                retry_backoff_ms=100, request_timeout_ms=5000)
    opts.update(kw)
    return ConsumerGroupMembership("g", **opts)


def on_wire(out: Outgoing, version: int = 1):
    """The request as the broker reads it at ``version``."""
    data = out.api.encode_request(out.request, version).getvalue()
    return out.api.decode_request(data, version)


def hb_resp(epoch: int, assignment: dict | None = None, *, code: int = NONE, interval_ms: int = 3000,
            member_id: str | None = "member-1", message: str | None = None):
    assigned = None
    if assignment is not None:
        assigned = ASSIGNED(topic_partitions=[ASSIGNED_TP(topic_id=t, partitions=list(ps))
                                              for t, ps in assignment.items()])
    if code:
        return CGH.Response(error_code=code, error_message=message, member_id=None, member_epoch=-1)
    return CGH.Response(member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=interval_ms,
                        assignment=assigned)


def owned_on_wire(req) -> dict | None:
    if req.topic_partitions is None:
        return None
    return {tp.topic_id: list(tp.partitions) for tp in req.topic_partitions}


def joined(now: float = 0.0, assignment: dict | None = None, epoch: int = 1, *, m=None, topics=("a", "b"),
           **kw) -> ConsumerGroupMembership:
    """A member with epoch ``epoch`` that took ``assignment`` (topic id -> partitions) and
    acknowledged it; the events so far are drained."""
    m = m or machine(**kw)
    m.set_topic_names(NAMES)
    m.subscribe(list(topics))
    m.join(now)
    if m.coordinator is None:
        m.on_response(only(m.poll(now), "find"), find_resp(), now)
    hb = only(m.poll(now), "heartbeat")
    m.on_response(hb, hb_resp(epoch, assignment or {}), now)
    for ev in m.events():
        if isinstance(ev, Reconcile):
            m.reconciled(ev)
    if assignment:
        ack = only(m.poll(now), "heartbeat")
        m.on_response(ack, hb_resp(epoch), now)
    assert m.state == STABLE and m.member_epoch == epoch
    m.events()
    return m


# ---------------------------------------------------------------------------------------
# Member ids (KIP-1082)
# ---------------------------------------------------------------------------------------


def test_member_id_is_made_by_the_client_in_kafkas_uuid_text_form():
    ids = {new_member_id() for _ in range(200)}
    assert len(ids) == 200
    for mid in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", mid) and not mid.startswith("-")
    m = ConsumerGroupMembership("g")
    assert len(m.member_id) == 22 and m.member_epoch == 0


def test_empty_strings_are_refused_where_the_broker_wants_null():
    for kw in ("group_instance_id", "rack_id", "server_assignor", "member_id"):
        with pytest.raises(ValueError, match="None or a non-empty string"):
            machine(**{kw: ""})


def test_classic_calls_say_what_to_call_instead():
    m = machine()
    with pytest.raises(TypeError, match=r"subscribe\(\) and join\(\)"):
        m.start_join([("range", b"")], 0.0)
    with pytest.raises(TypeError, match="assigns on the coordinator"):
        m.set_assignments(1, {})


# ---------------------------------------------------------------------------------------
# Joining
# ---------------------------------------------------------------------------------------


def test_nothing_is_sent_before_join_and_join_needs_a_subscription():
    m = machine()
    assert m.poll(0.0) == [] and m.state == UNJOINED
    with pytest.raises(ValueError, match=r"join\(\) before subscribe\(\)"):
        m.join(0.0)
    m.subscribe(["a"])
    assert m.poll(0.0) == []  # subscribing alone does not join


def test_join_sends_the_full_state_with_epoch_0_and_takes_the_epoch():
    m = machine(server_assignor="uniform", rack_id="rack-1")
    m.subscribe(["b", "a", "a"])
    m.join(0.0)
    assert m.state == JOINING
    find = only(m.poll(0.0), "find")
    assert not find.to_coordinator and on_wire(find, 0).key == "g"
    m.on_response(find, find_resp(), 0.1)

    hb = only(m.poll(0.1), "heartbeat")
    assert hb.api is CGH and hb.to_coordinator and hb.timeout == 5.0
    for v in (0, 1):
        req = on_wire(hb, v)
        assert (req.group_id, req.member_id, req.member_epoch) == ("g", "member-1", 0)
        assert req.instance_id is None and req.rack_id == "rack-1"
        assert req.rebalance_timeout_ms == 60000  # max_poll_interval_ms
        assert req.subscribed_topic_names == ["a", "b"]
        assert req.server_assignor == "uniform"
        assert req.topic_partitions == []  # joining: owns nothing (not null)
    assert on_wire(hb, 1).subscribed_topic_regex is None
    assert m.poll(0.2) == []  # one heartbeat in flight at a time

    m.on_response(hb, hb_resp(1, {}), 0.3)
    assert m.state == STABLE and m.member_epoch == 1 and m.generation == 1
    (ev,) = m.events()
    assert isinstance(ev, Joined) and (ev.generation, ev.member_id, ev.protocol) == (1, "member-1", "uniform")


def test_an_older_broker_hands_out_the_member_id():
    m = machine()
    m.subscribe(["a"])
    m.join(0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    m.on_response(only(m.poll(0.0), "heartbeat"), hb_resp(1, {}, member_id="from-broker"), 0.0)
    assert m.member_id == "from-broker"
    assert on_wire(only(m.poll(HB_S), "heartbeat")).member_id == "from-broker"


def test_regex_subscription_sends_the_regex_and_an_empty_name_list():
    m = machine()
    m.subscribe(regex="^orders-.*")
    m.join(0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    hb = only(m.poll(0.0), "heartbeat")
    v1 = on_wire(hb, 1)
    # KIP-848: the broker evaluates the regex; an empty (not null) name list keeps the
    # request a full one.
    assert (v1.subscribed_topic_regex, v1.subscribed_topic_names) == ("^orders-.*", [])
    assert on_wire(hb, 0).subscribed_topic_regex is None  # v0 has no such field


def test_subscribe_refuses_what_the_broker_cannot_take():
    m = machine()
    with pytest.raises(ValueError, match="exactly one"):
        m.subscribe(["a"], regex="a")
    with pytest.raises(ValueError, match="exactly one"):
        m.subscribe()
    with pytest.raises(ValueError, match="compiled Python pattern"):
        m.subscribe(regex=re.compile("a"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty topic names"):
        m.subscribe([])


def test_a_join_error_that_can_be_retried_is_retried_after_the_backoff_with_epoch_0():
    m = machine()
    m.subscribe(["a"])
    m.join(0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    m.on_response(only(m.poll(0.0), "heartbeat"), hb_resp(0, code=COORDINATOR_LOAD_IN_PROGRESS), 0.0)
    assert m.state == JOINING
    assert m.poll(0.05) == []
    assert m.next_wakeup(0.05) == pytest.approx(0.05)
    again = on_wire(only(m.poll(BACKOFF_S), "heartbeat"))
    assert again.member_epoch == 0 and again.topic_partitions == [] and again.subscribed_topic_names == ["a"]


# ---------------------------------------------------------------------------------------
# Assignments by topic id, reconciliation, acknowledgement
# ---------------------------------------------------------------------------------------


def test_assignment_by_topic_id_is_reconciled_then_acknowledged():
    m = machine()
    m.set_topic_names(NAMES)
    m.subscribe(["a", "b"])
    m.join(0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    m.on_response(only(m.poll(0.0), "heartbeat"), hb_resp(2, {A: [1, 0], B: [2]}), 0.5)
    joined_ev, rec = m.events()
    assert isinstance(joined_ev, Joined)
    assert isinstance(rec, Reconcile) and rec.epoch == 2
    assert rec.revoke == [] and rec.assign == [("a", 0), ("a", 1), ("b", 2)]
    assert rec.assignment == rec.assign
    assert m.state == RECONCILING
    assert m.poll(1.0) == []  # nothing to say until the consumer took them

    m.reconciled(rec)
    assert m.state == ACKNOWLEDGING
    assert m.next_wakeup(1.0) == 0.0
    ack = only(m.poll(1.0), "heartbeat")  # at once, not after the interval
    req = on_wire(ack)
    assert req.member_epoch == 2 and owned_on_wire(req) == {A: [0, 1], B: [2]}
    assert m.state == STABLE
    m.reconciled(rec)  # a second call changes nothing
    assert m.state == STABLE


def test_an_assignment_of_an_unknown_topic_id_waits_for_its_name():
    m = machine()
    m.set_topic_names({A: "a"})
    m.subscribe(regex="a|c")
    m.join(0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    m.on_response(only(m.poll(0.0), "heartbeat"), hb_resp(1, {A: [0], C: [0, 1]}), 0.0)
    _joined, need, rec = m.events()
    assert isinstance(need, MetadataNeeded) and need.topic_ids == [C]
    assert rec.assign == [("a", 0)]  # what is known is taken meanwhile
    assert m.unresolved_topic_ids == [C]
    m.reconciled(rec)
    ack = only(m.poll(0.1), "heartbeat")
    assert owned_on_wire(on_wire(ack)) == {A: [0]}
    assert m.state == RECONCILING  # still waiting for c's name
    m.on_response(ack, hb_resp(1), 0.1)
    assert m.snapshot(0.1)["unresolved_topic_ids"] == [str(C)]

    m.set_topic_names({A: "a"})  # nothing new: no event
    assert m.events() == []
    m.set_topic_names({C: "c"})
    (rec2,) = m.events()
    assert rec2.revoke == [] and rec2.assign == [("c", 0), ("c", 1)]
    assert rec2.assignment == [("a", 0), ("c", 0), ("c", 1)]
    m.reconciled(rec2)
    assert owned_on_wire(on_wire(only(m.poll(0.2), "heartbeat"))) == {A: [0], C: [0, 1]}
    assert m.state == STABLE and m.unresolved_topic_ids == []


def test_incremental_rebalance_revokes_first_commits_ahead_then_takes_the_new_ones():
    m = joined(assignment={A: [0, 1]}, epoch=1)

    # 1. Another member joined: the coordinator takes a[1] away (same epoch until the
    #    member gives it up).
    hb = only(m.poll(HB_S), "heartbeat")
    assert on_wire(hb).topic_partitions is None  # nothing changed since the last one
    m.on_response(hb, hb_resp(1, {A: [0]}), HB_S)
    (rec,) = m.events()
    assert (rec.revoke, rec.assign, rec.assignment) == ([("a", 1)], [], [("a", 0)])
    assert m.state == RECONCILING

    # The consumer commits what it read of a[1] (epoch 1), then acknowledges: the commit
    # goes out ahead of the heartbeat that gives the partition up.
    m.commit({("a", 1): (42, "")})
    m.reconciled(rec)
    commit, ack = m.poll(HB_S + 0.1)
    assert (commit.kind, ack.kind) == ("commit", "heartbeat")
    oc = on_wire(commit, 9)
    assert (oc.generation_id_or_member_epoch, oc.member_id) == (1, "member-1")
    assert owned_on_wire(on_wire(ack)) == {A: [0]}
    m.on_response(commit, commit_resp({("a", 1): NONE}), HB_S + 0.2)

    # 2. The revocation is seen: a new epoch, and the member's share of the new target.
    m.on_response(ack, hb_resp(2, {A: [0], B: [0]}), HB_S + 0.2)
    (rec2,) = m.events()
    assert (rec2.epoch, rec2.revoke, rec2.assign) == (2, [], [("b", 0)])
    m.reconciled(rec2)
    assert owned_on_wire(on_wire(only(m.poll(HB_S + 0.3), "heartbeat"))) == {A: [0], B: [0]}
    assert m.generation == 2


def test_the_same_owned_set_is_sent_again_after_each_reconciliation():
    # a[1] given, then taken back before the member said it took it: the owned set it
    # then has equals the last one it sent, but the coordinator moves on from a
    # revocation only when a heartbeat after it lists the owned partitions, so it goes
    # out again.
    m = joined(assignment={A: [0]}, epoch=1)  # {a: [0]} sent
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(2, {A: [0, 1]}), HB_S)
    (rec,) = m.events()
    hb = only(m.poll(2 * HB_S), "heartbeat")  # the interval's, while the consumer reconciles
    assert owned_on_wire(on_wire(hb)) is None
    m.reconciled(rec)  # {a: [0, 1]}, not sent yet: a heartbeat is in flight
    m.on_response(hb, hb_resp(2, {A: [0]}), 2 * HB_S)
    (rec2,) = m.events()
    assert rec2.revoke == [("a", 1)]
    m.reconciled(rec2)  # {a: [0]} again
    ack = only(m.poll(2 * HB_S), "heartbeat")
    assert owned_on_wire(on_wire(ack)) == {A: [0]}


def test_a_new_target_while_the_consumer_reconciles_waits_for_it():
    m = joined(assignment={A: [0, 1]}, epoch=1)
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(1, {A: [0]}), HB_S)
    (rec,) = m.events()
    # The next answer moves the target on; one reconciliation at a time.
    m.on_response(only(m.poll(2 * HB_S), "heartbeat"), hb_resp(2, {A: [0], B: [1]}), 2 * HB_S)
    assert m.events() == []
    m.reconciled(rec)
    (rec2,) = m.events()
    assert (rec2.revoke, rec2.assign) == ([], [("b", 1)])
    ack = on_wire(only(m.poll(2 * HB_S), "heartbeat"))
    assert owned_on_wire(ack) == {A: [0]}  # what the consumer has now
    m.reconciled(rec2)


def test_an_epoch_bump_without_an_assignment_changes_only_the_epoch():
    m = joined(assignment={A: [0]}, epoch=1)
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(5), HB_S)
    assert m.events() == [] and m.member_epoch == 5 and m.state == STABLE
    req = on_wire(only(m.poll(2 * HB_S), "heartbeat"))
    assert req.member_epoch == 5 and req.topic_partitions is None


def test_heartbeats_follow_the_interval_the_broker_gives():
    m = joined(epoch=1)
    assert m.poll(1.0) == []
    assert m.next_wakeup(1.0) == 1.0  # at most a second
    assert m.next_wakeup(2.5) == pytest.approx(HB_S - 2.5)
    hb = only(m.poll(HB_S), "heartbeat")
    m.on_response(hb, hb_resp(1, interval_ms=1500), HB_S)
    assert m.poll(HB_S + 1.0) == []
    assert only(m.poll(HB_S + 1.5), "heartbeat")


# ---------------------------------------------------------------------------------------
# What each heartbeat carries (KIP-848: only what changed)
# ---------------------------------------------------------------------------------------


def test_a_steady_heartbeat_carries_only_the_member_fields():
    m = joined(assignment={A: [0]}, epoch=3, server_assignor="range", rack_id="r", group_instance_id="i-1")
    for v in (0, 1):
        out = only(m.poll(HB_S * (v + 1)), "heartbeat")
        req = on_wire(out, v)
        assert (req.group_id, req.member_id, req.member_epoch) == ("g", "member-1", 3)
        assert req.instance_id == "i-1"  # always, as the Java client sends it
        assert (req.rack_id, req.rebalance_timeout_ms, req.subscribed_topic_names, req.server_assignor,
                req.topic_partitions) == (None, -1, None, None, None)
        if v:
            assert req.subscribed_topic_regex is None
        m.on_response(out, hb_resp(3), HB_S * (v + 1))


def test_a_subscription_change_goes_out_at_once_and_once():
    m = joined(epoch=1)
    m.subscribe(["a", "c"])
    assert m.next_wakeup(0.5) == 0.0
    hb = only(m.poll(0.5), "heartbeat")
    req = on_wire(hb)
    assert req.subscribed_topic_names == ["a", "c"] and req.rebalance_timeout_ms == -1
    m.on_response(hb, hb_resp(2), 0.6)
    assert on_wire(only(m.poll(0.6 + HB_S), "heartbeat")).subscribed_topic_names is None


def test_switching_between_names_and_a_regex_clears_the_other():
    m = joined(epoch=1)
    m.subscribe(regex="a.*")
    hb = only(m.poll(0.5), "heartbeat")
    req = on_wire(hb)
    assert (req.subscribed_topic_names, req.subscribed_topic_regex) == ([], "a.*")
    m.on_response(hb, hb_resp(2), 0.5)
    hb = only(m.poll(0.5 + HB_S), "heartbeat")
    assert on_wire(hb).subscribed_topic_regex is None
    m.on_response(hb, hb_resp(2), 0.5 + HB_S)

    m.subscribe(["b"])
    hb = only(m.poll(4.0), "heartbeat")
    req = on_wire(hb)
    # "" drops the regex: a null would leave it in place on the coordinator.
    assert (req.subscribed_topic_names, req.subscribed_topic_regex) == (["b"], "")
    m.on_response(hb, hb_resp(3), 4.0)
    assert on_wire(only(m.poll(4.0 + HB_S), "heartbeat")).subscribed_topic_regex is None


def test_after_an_error_the_next_heartbeat_carries_everything():
    m = joined(assignment={A: [0]}, epoch=4, server_assignor="uniform")
    hb = only(m.poll(HB_S), "heartbeat")
    m.on_response(hb, hb_resp(0, code=COORDINATOR_LOAD_IN_PROGRESS), HB_S)
    assert m.state == STABLE and m.member_epoch == 4
    req = on_wire(only(m.poll(HB_S + BACKOFF_S), "heartbeat"))
    assert req.member_epoch == 4
    assert req.rebalance_timeout_ms == 60000 and req.subscribed_topic_names == ["a", "b"]
    assert req.server_assignor == "uniform" and owned_on_wire(req) == {A: [0]}


# ---------------------------------------------------------------------------------------
# Fenced, unknown, coordinator moves, session
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID])
def test_fenced_or_unknown_member_loses_its_partitions_and_rejoins_with_epoch_0(code):
    m = joined(assignment={A: [0, 1]}, epoch=5)
    # A reconciliation is under way when the fence comes.
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(5, {A: [0]}), HB_S)
    (rec,) = m.events()
    hb = only(m.poll(2 * HB_S), "heartbeat")
    m.on_response(hb, hb_resp(0, code=code, message="the epoch is fenced"), 2 * HB_S)
    (lost,) = m.events()
    assert isinstance(lost, Lost) and errors.for_code(code).name in lost.reason
    assert m.state == UNJOINED and m.rejoin_needed and m.member_epoch == 0 and m.generation == -1
    assert m.member_id == "member-1"  # kept for the member's lifetime (KIP-1082)
    assert "the epoch is fenced" in str(m.last_error)
    assert m.poll(3 * HB_S) == []  # no heartbeat until the consumer dropped its partitions
    m.reconciled(rec)  # the consumer acting on the old Reconcile: ignored
    assert m.state == UNJOINED

    m.join(3 * HB_S)
    req = on_wire(only(m.poll(3 * HB_S), "heartbeat"))
    assert (req.member_id, req.member_epoch, req.topic_partitions) == ("member-1", 0, [])
    assert req.rebalance_timeout_ms == 60000 and req.subscribed_topic_names == ["a", "b"]


def test_a_response_to_a_heartbeat_from_before_a_fence_is_ignored():
    m = joined(assignment={A: [0]}, epoch=2)
    hb = only(m.poll(HB_S), "heartbeat")
    m.on_failure(hb, ConnectionError("reset"), HB_S)  # the coordinator is looked up again
    m.on_response(only(m.poll(HB_S + BACKOFF_S), "find"), find_resp(), HB_S + BACKOFF_S)
    hb2 = only(m.poll(HB_S + BACKOFF_S), "heartbeat")
    m.on_response(hb2, hb_resp(0, code=FENCED_MEMBER_EPOCH), HB_S)
    m.events()
    m.on_response(hb, hb_resp(2, {A: [0, 1]}), HB_S)  # late, for a request already replaced
    assert m.events() == [] and m.state == UNJOINED


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE])
def test_coordinator_move_finds_the_new_one_and_tells_it_everything(code):
    m = joined(assignment={A: [0]}, epoch=3)
    hb = only(m.poll(HB_S), "heartbeat")
    m.on_response(hb, hb_resp(0, code=code), HB_S)
    assert m.coordinator is None and m.state == STABLE and m.member_epoch == 3
    find = only(m.poll(HB_S + BACKOFF_S), "find")
    m.on_response(find, find_resp(coord=(4, "broker-4", 9094)), HB_S + BACKOFF_S)
    assert m.coordinator == (4, "broker-4", 9094)
    req = on_wire(only(m.poll(HB_S + BACKOFF_S), "heartbeat"))  # at once, not after the interval
    assert req.member_epoch == 3 and owned_on_wire(req) == {A: [0]}
    assert req.rebalance_timeout_ms == 60000 and req.subscribed_topic_names == ["a", "b"]
    assert m.events() == []  # the member never left


def test_a_failed_heartbeat_looks_the_coordinator_up_again():
    m = joined(assignment={A: [0]}, epoch=3)
    hb = only(m.poll(HB_S), "heartbeat")
    m.on_failure(hb, ConnectionError("reset"), HB_S)
    assert m.coordinator is None
    assert only(m.poll(HB_S + BACKOFF_S), "find")


def test_no_answer_for_the_session_timeout_looks_the_coordinator_up_again():
    m = joined(assignment={A: [0]}, epoch=1)  # last answer at 0
    only(m.poll(HB_S), "heartbeat")  # never answered
    m.poll_called(SESSION_S)
    assert m.poll(SESSION_S) == [] and m.coordinator == COORD
    assert m.poll(SESSION_S + 0.5) == []  # the coordinator is given up on ...
    assert m.coordinator is None and m.state == STABLE
    find = only(m.poll(SESSION_S + 0.5 + BACKOFF_S), "find")  # ... and looked up again
    m.on_response(find, find_resp(), SESSION_S + 0.7)
    req = on_wire(only(m.poll(SESSION_S + 0.7), "heartbeat"))
    assert req.member_epoch == 1 and owned_on_wire(req) == {A: [0]}


# ---------------------------------------------------------------------------------------
# Leaving, static members, the poll interval
# ---------------------------------------------------------------------------------------


def test_a_dynamic_member_leaves_with_epoch_minus_1():
    m = joined(assignment={A: [0]}, epoch=4)
    out = m.leave("closing")
    assert out.kind == "leave" and out.to_coordinator
    req = on_wire(out)
    assert (req.group_id, req.member_id, req.member_epoch, req.instance_id) == ("g", "member-1", -1, None)
    assert req.topic_partitions is None and req.subscribed_topic_names is None
    assert m.state == UNJOINED and m.member_epoch == 0 and not m.rejoin_needed
    assert m.poll(10.0) == [] and m.leave() is None
    assert m.on_response(out, hb_resp(-1, member_id="member-1"), 0.1) is None


@pytest.mark.parametrize("for_good,epoch", [(False, -2), (True, -1)])
def test_a_static_member_leaves_with_epoch_minus_2_unless_for_good(for_good, epoch):
    m = joined(assignment={A: [0]}, epoch=4, group_instance_id="host-7")
    req = on_wire(m.leave(for_good=for_good))
    # -2 (KIP-848): the coordinator keeps host-7's partitions until its session times
    # out, for the same instance id joining again.
    assert (req.member_epoch, req.instance_id) == (epoch, "host-7")


def test_leave_answers():
    m = joined(epoch=2)
    out = m.leave()
    with pytest.raises(errors.BrokerError, match="leaving group 'g'"):
        m.on_response(out, hb_resp(0, code=GROUP_MAX_SIZE_REACHED), 0.1)
    m = joined(epoch=2)
    out = m.leave()
    assert m.on_response(out, hb_resp(0, code=UNKNOWN_MEMBER_ID), 0.1) is None  # gone already


def test_poll_interval_expiry_leaves_loses_the_partitions_and_rejoins_at_the_next_poll():
    m = joined(assignment={A: [0]}, epoch=6)
    m.poll_called(1.0)
    for t in (HB_S, 2 * HB_S):
        m.on_response(only(m.poll(t), "heartbeat"), hb_resp(6), t)
    out = m.poll(1.0 + POLL_S + 0.5)
    leave = only(out, "leave")
    assert on_wire(leave).member_epoch == -1
    (lost,) = m.events()
    assert isinstance(lost, Lost) and "max_poll_interval_ms=60000" in lost.reason
    assert m.state == UNJOINED and m.rejoin_needed
    assert m.poll(1.0 + POLL_S + 1) == []

    m.join(1.0 + POLL_S + 2)  # the consumer polled again and dropped its partitions
    req = on_wire(only(m.poll(1.0 + POLL_S + 2), "heartbeat"))
    assert (req.member_epoch, req.topic_partitions) == (0, [])


def test_poll_interval_expiry_of_a_static_member_keeps_its_place():
    m = joined(assignment={A: [0]}, epoch=6, group_instance_id="host-7")
    m.poll_called(0.0)
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(6), HB_S)
    leave = only(m.poll(POLL_S + 1), "leave")
    assert on_wire(leave).member_epoch == -2


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("code,fix", [
    (UNSUPPORTED_ASSIGNOR, "group_remote_assignor"),
    (UNRELEASED_INSTANCE_ID, "group_instance_id"),
    (GROUP_MAX_SIZE_REACHED, "group.consumer.max.size"),
    (INVALID_REGULAR_EXPRESSION, "RE2/J"),
    (35, "group_protocol='classic'"),
])
def test_fatal_heartbeat_errors_end_the_membership_and_name_the_fix(code, fix):
    m = machine(server_assignor="sticky")
    m.subscribe(["a"])
    m.join(0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    m.on_response(only(m.poll(0.0), "heartbeat"), hb_resp(0, code=code, message="from the broker"), 0.0)
    (ev,) = m.events()
    assert isinstance(ev, Failed) and ev.error.code == code
    assert fix in str(ev.error) and "from the broker" in str(ev.error)
    assert m.state == UNJOINED and not m.rejoin_needed
    assert m.poll(10.0) == []


def test_a_fatal_error_with_partitions_owned_loses_them_first():
    m = joined(assignment={A: [0]}, epoch=2)
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(0, code=UNRELEASED_INSTANCE_ID), HB_S)
    assert kinds(m.events()) == [Lost, Failed]


def test_a_heartbeat_the_shell_refuses_to_send_ends_the_membership():
    # The shell saw in the broker's ApiVersions that it cannot serve the heartbeat (no
    # ConsumerGroupHeartbeat, or v0 only for a regex): the member fails at once, without
    # the retries an unanswered heartbeat would get.
    m = machine()
    m.subscribe(regex="a.*")
    m.join(0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    hb = only(m.poll(0.0), "heartbeat")
    err = errors.UnsupportedVersionError("needs ConsumerGroupHeartbeat v1: use group_protocol='classic'")
    m.refuse(hb, err)
    (ev,) = m.events()
    assert isinstance(ev, Failed) and ev.error is err
    assert m.state == UNJOINED and not m.rejoin_needed
    assert m.poll(10.0) == [] and m.events() == []
    # With partitions owned, they are lost first (as for a fatal answer).
    m = joined(assignment={A: [0]}, epoch=2)
    m.refuse(only(m.poll(HB_S), "heartbeat"), err)
    assert kinds(m.events()) == [Lost, Failed]
    # A heartbeat that is no longer the one in flight is not the member's end.
    m = joined(epoch=2)
    old = only(m.poll(HB_S), "heartbeat")
    m.on_failure(old, ConnectionError("gone"), HB_S)
    m.refuse(old, err)
    assert m.events() == [] and m.state == STABLE


def test_topic_authorization_failed_is_reported_and_the_member_stays():
    m = joined(assignment={A: [0]}, epoch=2)
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(0, code=TOPIC_AUTHORIZATION_FAILED), HB_S)
    (ev,) = m.events()
    assert isinstance(ev, NonFatal) and ev.error.code == TOPIC_AUTHORIZATION_FAILED
    assert m.state == STABLE and m.member_epoch == 2
    assert on_wire(only(m.poll(2 * HB_S), "heartbeat")).rebalance_timeout_ms == 60000  # full again


# ---------------------------------------------------------------------------------------
# Commits carry the member epoch (OffsetCommit v9+)
# ---------------------------------------------------------------------------------------


def test_commit_carries_the_member_epoch_and_member_id():
    m = joined(assignment={A: [0]}, epoch=7, group_instance_id="host-7")
    m.commit({("a", 0): (100, "meta")})
    out = only(m.poll(0.1), "commit")
    req = on_wire(out, 9)
    assert (req.group_id, req.generation_id_or_member_epoch, req.member_id, req.group_instance_id) == \
        ("g", 7, "member-1", "host-7")
    ((t, p),) = [(t.name, [(x.partition_index, x.committed_offset, x.committed_metadata) for x in t.partitions])
                 for t in req.topics]
    assert (t, p) == ("a", [(0, 100, "meta")])
    assert m.on_response(out, commit_resp({("a", 0): NONE}), 0.2) == {("a", 0): None}


def test_commit_before_joining_goes_as_a_simple_consumer():
    m = machine()
    m.commit({("a", 0): (5, "")})
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    req = on_wire(only(m.poll(0.0), "commit"), 9)
    assert (req.generation_id_or_member_epoch, req.member_id, req.group_instance_id) == (-1, "", None)


def test_stale_member_epoch_on_commit_is_retriable_while_the_member_stays():
    m = joined(assignment={A: [0]}, epoch=3)
    m.commit({("a", 0): (9, "")})
    out = only(m.poll(0.1), "commit")
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(4), HB_S)  # the epoch moved on
    result = m.on_response(out, commit_resp({("a", 0): STALE_MEMBER_EPOCH}), HB_S)
    err = result[("a", 0)]
    assert isinstance(err, errors.BrokerError) and err.code == STALE_MEMBER_EPOCH and err.retriable
    assert "still in the group (epoch 4 now)" in str(err)
    m.commit({("a", 0): (9, "")})  # the retry carries the new epoch
    assert on_wire(only(m.poll(HB_S), "commit"), 9).generation_id_or_member_epoch == 4
    assert m.state == STABLE


def test_stale_member_epoch_on_commit_after_the_member_left_is_commit_failed():
    m = joined(assignment={A: [0]}, epoch=3)
    m.commit({("a", 0): (9, "")})
    out = only(m.poll(0.1), "commit")
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(0, code=FENCED_MEMBER_EPOCH), HB_S)
    result = m.on_response(out, commit_resp({("a", 0): STALE_MEMBER_EPOCH}), HB_S)
    err = result[("a", 0)]
    assert isinstance(err, errors.CommitFailedError) and err.code == STALE_MEMBER_EPOCH
    assert err.partitions == {("a", 0): 9} and "no longer in group 'g'" in str(err)


def test_unknown_member_on_commit_loses_the_partitions():
    m = joined(assignment={A: [0]}, epoch=3)
    m.commit({("a", 0): (9, "")})
    out = only(m.poll(0.1), "commit")
    result = m.on_response(out, commit_resp({("a", 0): UNKNOWN_MEMBER_ID}), 0.2)
    assert isinstance(result[("a", 0)], errors.CommitFailedError)
    assert kinds(m.events()) == [Lost]
    assert m.state == UNJOINED and m.member_id == "member-1"


def test_offset_fetch_is_the_classic_machines():
    m = joined(assignment={A: [0]}, epoch=3)
    m.fetch_offsets([("a", 0)])
    out = only(m.poll(0.1), "fetch_offsets")
    assert out.api is OF and on_wire(out, 9).groups[0].group_id == "g"


# ---------------------------------------------------------------------------------------
# group_state()
# ---------------------------------------------------------------------------------------


def test_snapshot_shows_the_members_side_of_the_protocol():
    m = joined(assignment={A: [1, 0]}, epoch=8, server_assignor="range")
    snap = m.snapshot(HB_S - 1)
    assert snap["group_protocol"] == "consumer"
    assert (snap["state"], snap["member_id"], snap["member_epoch"], snap["generation"]) == \
        (STABLE, "member-1", 8, 8)
    assert snap["assignment"] == [("a", 0), ("a", 1)] and snap["target_assignment"] == [("a", 0), ("a", 1)]
    assert snap["server_assignor"] == "range" and snap["subscription"] == ["a", "b"]
    assert snap["coordinator"] == COORD and snap["last_heartbeat_result"] == "ok"
    assert snap["last_heartbeat_age"] == pytest.approx(HB_S - 1)
    assert snap["heartbeat_interval_ms"] == 3000 and snap["is_leader"] is False


# ---------------------------------------------------------------------------------------
# Corners
# ---------------------------------------------------------------------------------------


def test_an_empty_target_revokes_everything():
    m = joined(assignment={A: [0], B: [1]}, epoch=2)
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(2, {}), HB_S)
    (rec,) = m.events()
    assert (rec.revoke, rec.assign, rec.assignment) == ([("a", 0), ("b", 1)], [], [])
    m.reconciled(rec)
    assert owned_on_wire(on_wire(only(m.poll(HB_S), "heartbeat"))) == {}


def test_metadata_is_asked_for_once_per_set_of_unknown_ids():
    d = uuid.UUID(int=0xD)
    m = joined(epoch=1)
    m.on_response(only(m.poll(HB_S), "heartbeat"), hb_resp(2, {d: [0]}), HB_S)
    assert kinds(m.events()) == [MetadataNeeded]
    assert m.state == RECONCILING
    m.on_response(only(m.poll(2 * HB_S), "heartbeat"), hb_resp(2), 2 * HB_S)
    assert m.events() == []
    m.set_topic_names({uuid.UUID(int=0): "zero"})  # no id: ignored
    assert m.topic_names.get(uuid.UUID(int=0)) is None


def test_leaving_while_the_join_is_in_flight_ignores_its_answer():
    m = machine()
    m.set_topic_names(NAMES)
    m.subscribe(["a"])
    m.join(0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    hb = only(m.poll(0.0), "heartbeat")
    out = m.leave()
    assert on_wire(out).member_epoch == -1  # the coordinator may have made it a member already
    m.on_response(hb, hb_resp(1, {A: [0]}), 0.1)
    assert m.events() == [] and m.state == UNJOINED and m.member_epoch == 0


def test_a_retried_heartbeat_of_a_regex_subscriber_is_full():
    m = machine()
    m.set_topic_names(NAMES)
    m.subscribe(regex="[ab]")
    m.join(0.0)
    m.on_response(only(m.poll(0.0), "find"), find_resp(), 0.0)
    m.on_response(only(m.poll(0.0), "heartbeat"), hb_resp(1, {}), 0.0)
    hb = only(m.poll(HB_S), "heartbeat")
    steady = on_wire(hb)
    assert (steady.subscribed_topic_names, steady.subscribed_topic_regex) == (None, None)
    m.on_failure(hb, ConnectionError("reset"), HB_S)
    m.on_response(only(m.poll(HB_S + BACKOFF_S), "find"), find_resp(), HB_S + BACKOFF_S)
    full = on_wire(only(m.poll(HB_S + BACKOFF_S), "heartbeat"))
    assert (full.subscribed_topic_names, full.subscribed_topic_regex) == ([], "[ab]")
