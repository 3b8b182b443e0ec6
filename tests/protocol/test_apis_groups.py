"""Offset and group APIs: golden bytes from spec/002 and spec/003, round trips everywhere.

Golden vectors are written field by field (wirebytes.py) from the request grammars of
the spec documents (and, for the flexible versions, the Kafka protocol guide); they share
no code with kafkawire.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.api import ApiVersionError
from kafkawire.protocol.apis import groups
from kafkawire.protocol.headers import encode_request_header

# tests/protocol/strategies.py and wirebytes.py, importable because pytest puts this
# directory on sys.path
from strategies import requests, responses
from wirebytes import NO_TAGS, arr, b, carr, cb, cs, i8, i16, i32, i64, s, uvarint

ALL = [
    groups.OFFSET_COMMIT, groups.OFFSET_FETCH, groups.FIND_COORDINATOR, groups.JOIN_GROUP,
    groups.HEARTBEAT, groups.LEAVE_GROUP, groups.SYNC_GROUP, groups.DESCRIBE_GROUPS,
    groups.LIST_GROUPS, groups.DELETE_GROUPS,
]


def enc_req(api, obj, v) -> bytes:
    return api.encode_request(obj, v).getvalue()


def enc_resp(api, obj, v) -> bytes:
    return api.encode_response(obj, v).getvalue()


# ---------------------------------------------------------------------------------------
# Registry, version ranges, flexible versions
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key,name,versions,flexible_from",
    [
        (8, "OffsetCommit", (0, 9), 8),
        (9, "OffsetFetch", (0, 9), 6),
        (10, "FindCoordinator", (0, 6), 3),
        (11, "JoinGroup", (0, 9), 6),
        (12, "Heartbeat", (0, 4), 4),
        (13, "LeaveGroup", (0, 5), 4),
        (14, "SyncGroup", (0, 5), 4),
        (15, "DescribeGroups", (0, 6), 5),
        (16, "ListGroups", (0, 5), 3),
        (42, "DeleteGroups", (0, 2), 2),
    ],
)
def test_registered_with_versions(key, name, versions, flexible_from):
    api = apis.get(key)
    assert api is apis.get(name)
    assert api.name == name
    assert (api.min_version, api.max_version) == versions
    assert api.flexible_from == flexible_from
    assert api.request_header_version(flexible_from) == 2
    assert api.request_header_version(flexible_from - 1) == 1
    assert api.response_header_version(flexible_from) == 1
    assert api.response_header_version(flexible_from - 1) == 0


def test_version_outside_range_is_refused():
    with pytest.raises(ApiVersionError, match=r"OffsetCommit v10 is not supported"):
        groups.OFFSET_COMMIT.encode_request(groups.OFFSET_COMMIT.Request(), 10)


# ---------------------------------------------------------------------------------------
# spec/002: OffsetCommit v0, OffsetFetch v0, ConsumerMetadata (FindCoordinator v0)
# ---------------------------------------------------------------------------------------

OC = groups.OFFSET_COMMIT
OF = groups.OFFSET_FETCH
FC = groups.FIND_COORDINATOR


def test_offset_commit_v0_request_golden():
    # OffsetCommitRequest => ConsumerGroup [TopicName [Partition Offset Metadata]]
    req = OC.Request(
        group_id="my-group",
        topics=[
            OC.Request.OffsetCommitRequestTopic(name="events", partitions=[
                OC.Request.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=42, committed_metadata="ckpt"),
                OC.Request.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=3, committed_offset=2**40, committed_metadata=None),
            ]),
        ],
    )
    wire = s("my-group") + arr([
        s("events") + arr([
            i32(0) + i64(42) + s("ckpt"),
            i32(3) + i64(2**40) + s(None),
        ]),
    ])
    assert enc_req(OC, req, 0) == wire
    assert OC.decode_request(wire, 0) == req


def test_offset_commit_v0_whole_frame():
    # Size, then header v1 (ApiKey 8, ApiVersion 0, CorrelationId, ClientId), then the body.
    req = OC.Request(group_id="g", topics=[])
    body = enc_req(OC, req, 0)
    header = encode_request_header(8, 0, 7, "kw", OC.request_header_version(0))
    frame = i32(len(header) + len(body)) + header + body
    assert frame == i32(2 + 2 + 4 + 4 + 7) + i16(8) + i16(0) + i32(7) + s("kw") + s("g") + i32(0)


def test_offset_commit_v1_carries_the_spec_timestamp():
    # v1 adds generation/member and the per-partition TimeStamp (-1: broker stamps it).
    P = OC.Request.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    req = OC.Request(group_id="g", generation_id_or_member_epoch=3, member_id="m", topics=[
        OC.Request.OffsetCommitRequestTopic(name="t", partitions=[
            P(partition_index=1, committed_offset=5, commit_timestamp=-1, committed_metadata=""),
        ]),
    ])
    wire = s("g") + i32(3) + s("m") + arr([s("t") + arr([i32(1) + i64(5) + i64(-1) + s("")])])
    assert enc_req(OC, req, 1) == wire
    # v2 drops the timestamp and adds retention_time_ms (default -1).
    wire2 = s("g") + i32(3) + s("m") + i64(-1) + arr([s("t") + arr([i32(1) + i64(5) + s("")])])
    assert enc_req(OC, req, 2) == wire2


def test_offset_commit_v0_response_golden():
    # OffsetCommitResponse => [TopicName [Partition ErrorCode]]
    wire = arr([s("events") + arr([i32(0) + i16(0), i32(3) + i16(12)])])
    resp = OC.decode_response(wire, 0)
    (topic,) = resp.topics
    assert topic.name == "events"
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, 0), (3, 12)]
    assert errors.for_code(topic.partitions[1].error_code) is errors.OffsetMetadataTooLargeError
    assert enc_resp(OC, resp, 0) == wire


def test_offset_commit_v8_flexible_golden():
    P = OC.Request.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    req = OC.Request(
        group_id="g", generation_id_or_member_epoch=1, member_id="m", group_instance_id=None,
        topics=[OC.Request.OffsetCommitRequestTopic(name="t", partitions=[
            P(partition_index=2, committed_offset=9, committed_leader_epoch=4,
              committed_metadata=None),
        ])],
    )
    wire = (
        cs("g") + i32(1) + cs("m") + cs(None)
        + carr([cs("t") + carr([i32(2) + i64(9) + i32(4) + cs(None) + NO_TAGS]) + NO_TAGS])
        + NO_TAGS
    )
    assert enc_req(OC, req, 8) == wire
    assert OC.decode_request(wire, 8) == req
    assert enc_req(OC, req, 9) == wire  # v9 changes meaning (KIP-848), not layout


def test_offset_fetch_v0_request_and_response_golden():
    # OffsetFetchRequest => ConsumerGroup [TopicName [Partition]]
    req = OF.Request(group_id="grp", topics=[
        OF.Request.OffsetFetchRequestTopic(name="t1", partition_indexes=[0, 1]),
    ])
    wire = s("grp") + arr([s("t1") + arr([i32(0), i32(1)])])
    assert enc_req(OF, req, 0) == wire
    assert OF.decode_request(wire, 0) == req

    # OffsetFetchResponse => [TopicName [Partition Offset Metadata ErrorCode]]; no offset
    # stored: error 0, offset -1, empty metadata.
    rwire = arr([s("t1") + arr([
        i32(0) + i64(100) + s("meta") + i16(0),
        i32(1) + i64(-1) + s("") + i16(0),
    ])])
    resp = OF.decode_response(rwire, 0)
    parts = resp.topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in parts] == [
        (0, 100, "meta", 0), (1, -1, "", 0)]
    assert resp.error_code == 0 and resp.groups == []
    assert enc_resp(OF, resp, 0) == rwire


def test_offset_fetch_null_topics_means_all_from_v2():
    req = OF.Request(group_id="g", topics=None)
    assert enc_req(OF, req, 2) == s("g") + i32(-1)
    assert OF.decode_request(s("g") + i32(-1), 2).topics is None
    with pytest.raises(errors.EncodeError, match="topics is not nullable"):
        enc_req(OF, req, 1)


def test_offset_fetch_v8_batched_groups_golden():
    G = OF.Request.OffsetFetchRequestGroup
    req = OF.Request(groups=[
        G(group_id="a", topics=None),
        G(group_id="b", topics=[G.OffsetFetchRequestTopics(name="t", partition_indexes=[7])]),
    ], require_stable=True)
    wire = (
        carr([
            cs("a") + carr(None) + NO_TAGS,
            cs("b") + carr([cs("t") + carr([i32(7)]) + NO_TAGS]) + NO_TAGS,
        ])
        + b"\x01" + NO_TAGS
    )
    assert enc_req(OF, req, 8) == wire
    assert OF.decode_request(wire, 8) == req
    # v9 adds member_id (null) and member_epoch (-1) to each group (KIP-848).
    wire9 = (
        carr([
            cs("a") + cs(None) + i32(-1) + carr(None) + NO_TAGS,
            cs("b") + cs(None) + i32(-1) + carr([cs("t") + carr([i32(7)]) + NO_TAGS]) + NO_TAGS,
        ])
        + b"\x01" + NO_TAGS
    )
    assert enc_req(OF, req, 9) == wire9


def test_consumer_metadata_is_find_coordinator_v0():
    # ConsumerMetadataRequest => ConsumerGroup
    req = FC.Request(key="my-group")
    assert enc_req(FC, req, 0) == s("my-group")
    assert FC.decode_request(s("my-group"), 0) == req
    # ConsumerMetadataResponse => ErrorCode CoordinatorId CoordinatorHost CoordinatorPort
    wire = i16(0) + i32(2) + s("broker-2") + i32(9092)
    resp = FC.decode_response(wire, 0)
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 2, "broker-2", 9092)
    assert enc_resp(FC, resp, 0) == wire
    # The spec's ConsumerCoordinatorNotAvailableCode (15) while __consumer_offsets is missing.
    wire15 = i16(15) + i32(-1) + s("") + i32(-1)
    assert errors.for_code(FC.decode_response(wire15, 0).error_code) is (
        errors.CoordinatorNotAvailableError)


def test_find_coordinator_v1_and_v4_golden():
    assert enc_req(FC, FC.Request(key="tx", key_type=1), 1) == s("tx") + i8(1)
    req4 = FC.Request(key_type=0, coordinator_keys=["g1", "g2"])
    assert enc_req(FC, req4, 4) == i8(0) + carr([cs("g1"), cs("g2")]) + NO_TAGS
    C = FC.Response.Coordinator
    wire = i32(0) + carr([
        cs("g1") + i32(1) + cs("h1") + i32(9092) + i16(0) + cs(None) + NO_TAGS,
        cs("g2") + i32(-1) + cs("") + i32(-1) + i16(15) + cs("loading") + NO_TAGS,
    ]) + NO_TAGS
    resp = FC.decode_response(wire, 4)
    assert resp.coordinators == [
        C(key="g1", node_id=1, host="h1", port=9092, error_code=0, error_message=None),
        C(key="g2", node_id=-1, host="", port=-1, error_code=15, error_message="loading"),
    ]
    assert enc_resp(FC, resp, 4) == wire


# ---------------------------------------------------------------------------------------
# spec/003: the group membership APIs at v0
# ---------------------------------------------------------------------------------------

JG = groups.JOIN_GROUP


def _subscription_v0(topics: list[str]) -> bytes:
    # ProtocolMetadata => Version Subscription UserData (the consumer protocol, v0)
    return i16(0) + arr([s(t) for t in topics]) + b(b"")


def test_join_group_v0_request_golden():
    # JoinGroupRequest => GroupId SessionTimeout MemberId ProtocolType GroupProtocols
    #   GroupProtocols => [ProtocolName ProtocolMetadata]
    meta = _subscription_v0(["events"])
    req = JG.Request(
        group_id="grp", session_timeout_ms=30000, member_id="", protocol_type="consumer",
        protocols=[JG.Request.JoinGroupRequestProtocol(name="range", metadata=meta)],
    )
    wire = s("grp") + i32(30000) + s("") + s("consumer") + arr([s("range") + b(meta)])
    assert enc_req(JG, req, 0) == wire
    assert JG.decode_request(wire, 0) == req
    # v1 inserts RebalanceTimeout after SessionTimeout (default -1).
    wire1 = s("grp") + i32(30000) + i32(-1) + s("") + s("consumer") + arr([s("range") + b(meta)])
    assert enc_req(JG, req, 1) == wire1


def test_join_group_v0_response_golden():
    # JoinGroupResponse => ErrorCode GenerationId GroupProtocol LeaderId MemberId
    #   Members => [MemberId MemberMetadata]
    meta = _subscription_v0(["events"])
    wire = (
        i16(0) + i32(1) + s("range") + s("m-1") + s("m-1")
        + arr([s("m-1") + b(meta), s("m-2") + b(meta)])
    )
    resp = JG.decode_response(wire, 0)
    assert (resp.error_code, resp.generation_id, resp.protocol_name, resp.leader, resp.member_id) \
        == (0, 1, "range", "m-1", "m-1")
    assert [(m.member_id, m.metadata) for m in resp.members] == [("m-1", meta), ("m-2", meta)]
    assert resp.protocol_type is None and resp.skip_assignment is False
    assert enc_resp(JG, resp, 0) == wire


def test_join_group_v9_flexible_golden():
    R = JG.Response
    resp = R(
        throttle_time_ms=0, error_code=0, generation_id=2, protocol_type="consumer",
        protocol_name="range", leader="a", skip_assignment=True, member_id="a",
        members=[
            R.JoinGroupResponseMember(member_id="a", group_instance_id="i-a", metadata=b"\x01"),
        ],
    )
    wire = (
        i32(0) + i16(0) + i32(2) + cs("consumer") + cs("range") + cs("a") + b"\x01" + cs("a")
        + carr([cs("a") + cs("i-a") + cb(b"\x01") + NO_TAGS]) + NO_TAGS
    )
    assert enc_resp(JG, resp, 9) == wire
    assert JG.decode_response(wire, 9) == resp
    # v8 has no skip_assignment byte.
    assert enc_resp(JG, resp, 8) == wire.replace(cs("a") + b"\x01" + cs("a"), cs("a") + cs("a"), 1)


def test_heartbeat_sync_leave_v0_golden():
    hb = groups.HEARTBEAT
    # HeartbeatRequest => GroupId GenerationId MemberId
    assert enc_req(hb, hb.Request(group_id="g", generation_id=4, member_id="m"), 0) == (
        s("g") + i32(4) + s("m"))
    assert hb.decode_response(i16(27), 0).error_code == 27
    # v4 (flexible) adds the instance id and tagged fields.
    assert enc_req(hb, hb.Request(group_id="g", generation_id=4, member_id="m"), 4) == (
        cs("g") + i32(4) + cs("m") + cs(None) + NO_TAGS)

    sg = groups.SYNC_GROUP
    # SyncGroupRequest => GroupId GenerationId MemberId GroupAssignment
    #   GroupAssignment => [MemberId MemberAssignment]
    req = sg.Request(group_id="g", generation_id=4, member_id="m", assignments=[
        sg.Request.SyncGroupRequestAssignment(member_id="m", assignment=b"\x00\x00"),
    ])
    assert enc_req(sg, req, 0) == s("g") + i32(4) + s("m") + arr([s("m") + b(b"\x00\x00")])
    # SyncGroupResponse => ErrorCode MemberAssignment
    assert sg.decode_response(i16(0) + b(b"xy"), 0).assignment == b"xy"

    lg = groups.LEAVE_GROUP
    # LeaveGroupRequest => GroupId MemberId
    assert enc_req(lg, lg.Request(group_id="g", member_id="m"), 0) == s("g") + s("m")
    # v3 replaces MemberId with a batch of member identities (KIP-345).
    M = lg.Request.MemberIdentity
    req3 = lg.Request(group_id="g", members=[M(member_id="m", group_instance_id="i")])
    assert enc_req(lg, req3, 3) == s("g") + arr([s("m") + s("i")])
    assert enc_req(lg, req3, 5) == (
        cs("g") + carr([cs("m") + cs("i") + cs(None) + NO_TAGS]) + NO_TAGS)


def test_describe_and_list_groups_v0_golden():
    dg = groups.DESCRIBE_GROUPS
    # DescribeGroupsRequest => [GroupId]
    assert enc_req(dg, dg.Request(groups=["a", "b"]), 0) == arr([s("a"), s("b")])
    # DescribeGroupsResponse => [ErrorCode GroupId State ProtocolType Protocol Members]
    #   Members => [MemberId ClientId ClientHost MemberMetadata MemberAssignment]
    wire = arr([
        i16(0) + s("a") + s("Stable") + s("consumer") + s("range")
        + arr([s("m") + s("cid") + s("/127.0.0.1") + b(b"md") + b(b"as")]),
    ])
    resp = dg.decode_response(wire, 0)
    (grp,) = resp.groups
    assert (grp.group_state, grp.protocol_data) == ("Stable", "range")
    (m,) = grp.members
    assert (m.client_host, m.member_metadata, m.member_assignment) == ("/127.0.0.1", b"md", b"as")
    assert grp.authorized_operations == -(2**31)
    assert enc_resp(dg, resp, 0) == wire

    lg = groups.LIST_GROUPS
    # ListGroupsRequest => (empty); ListGroupsResponse => ErrorCode Groups [GroupId ProtocolType]
    assert enc_req(lg, lg.Request(), 0) == b""
    wire = i16(0) + arr([s("a") + s("consumer"), s("b") + s("")])
    resp = lg.decode_response(wire, 0)
    assert [(g.group_id, g.protocol_type) for g in resp.groups] == [("a", "consumer"), ("b", "")]
    # v4 filters by state, v5 by type.
    req = lg.Request(states_filter=["Stable"], types_filter=["classic"])
    assert enc_req(lg, req, 4) == carr([cs("Stable")]) + NO_TAGS
    assert enc_req(lg, req, 5) == carr([cs("Stable")]) + carr([cs("classic")]) + NO_TAGS


def test_delete_groups_golden():
    dg = groups.DELETE_GROUPS
    assert enc_req(dg, dg.Request(groups_names=["a"]), 0) == arr([s("a")])
    assert enc_req(dg, dg.Request(groups_names=["a"]), 2) == carr([cs("a")]) + NO_TAGS
    wire = i32(0) + arr([s("a") + i16(68)])
    resp = dg.decode_response(wire, 1)
    assert resp.results[0].error_code == errors.NonEmptyGroupError.code


# ---------------------------------------------------------------------------------------
# Decoding hostile or short input fails clearly
# ---------------------------------------------------------------------------------------


def test_truncated_response_raises():
    wire = i16(0) + i32(2) + s("broker-2") + i32(9092)
    with pytest.raises(errors.TruncatedDataError, match="int32"):
        FC.decode_response(wire[:-1], 0)


def test_huge_array_count_is_refused_before_allocating():
    wire = i32(2**31 - 1)  # claims 2 billion topics in 4 bytes
    with pytest.raises(errors.TruncatedDataError, match="array"):
        OC.decode_response(wire, 0)


# ---------------------------------------------------------------------------------------
# Round trips: every API, every version, requests and responses
# ---------------------------------------------------------------------------------------

CASES = [
    (api, v) for api in ALL for v in range(api.min_version, api.max_version + 1)
]


@pytest.mark.parametrize("api,version", CASES, ids=[f"{a.name}-v{v}" for a, v in CASES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(api, version, data):
    req = data.draw(requests(api, version))
    wire = enc_req(api, req, version)
    assert api.decode_request(wire, version) == req
    resp = data.draw(responses(api, version))
    wire = enc_resp(api, resp, version)
    back = api.decode_response(wire, version)
    assert back == resp
    assert enc_resp(api, back, version) == wire
