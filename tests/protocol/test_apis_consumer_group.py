"""KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): golden bytes
written field by field, and round trips.

The golden vectors are written with wirebytes.py from the layouts of the Kafka 4.4
broker's message classes (both APIs are flexible from v0: compact strings and arrays,
a tag section after every struct); they share no code with kafkawire.  The same bytes
came out of Kafka 4.4's own ``ConsumerGroupHeartbeatRequestData.write`` (and the other
three classes) when this file was written.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire.protocol import apis
from kafkawire.protocol.apis.consumer_group import CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT

# tests/protocol/strategies.py and wirebytes.py, importable because pytest puts this
# directory on sys.path
from strategies import requests, responses
from wirebytes import NO_TAGS, carr, cs, i8, i16, i32

HB = CONSUMER_GROUP_HEARTBEAT
DESCRIBE = CONSUMER_GROUP_DESCRIBE
T1 = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
T2 = uuid.UUID("00000000-0000-0000-0000-0000000000ff")


def enc_req(api, obj, v) -> bytes:
    return api.encode_request(obj, v).getvalue()


def enc_resp(api, obj, v) -> bytes:
    return api.encode_response(obj, v).getvalue()


def tp(topic_id: uuid.UUID, partitions: list[int]) -> bytes:
    """One TopicPartitions entry: uuid, compact int32 array, empty tags."""
    return topic_id.bytes + carr([i32(p) for p in partitions]) + NO_TAGS


@pytest.mark.parametrize("key,name", [(68, "ConsumerGroupHeartbeat"), (69, "ConsumerGroupDescribe")])
def test_registered_flexible_from_v0(key, name):
    api = apis.get(key)
    assert api is apis.get(name)
    assert (api.min_version, api.max_version, api.flexible_from) == (0, 1, 0)
    assert api.request_header_version(0) == 2 and api.response_header_version(0) == 1


# ---------------------------------------------------------------------------------------
# ConsumerGroupHeartbeat
# ---------------------------------------------------------------------------------------


def join_request(v: int):
    R = HB.Request
    return R(
        group_id="g1", member_id="m-1", member_epoch=0, instance_id="i-1", rack_id="r1",
        rebalance_timeout_ms=300000, subscribed_topic_names=["a", "bc"],
        subscribed_topic_regex="^x.*" if v >= 1 else None, server_assignor="uniform",
        topic_partitions=[])


def join_request_bytes(v: int) -> bytes:
    return (
        cs("g1") + cs("m-1") + i32(0) + cs("i-1") + cs("r1") + i32(300000)
        + carr([cs("a"), cs("bc")])
        + (cs("^x.*") if v >= 1 else b"")
        + cs("uniform")
        + carr([])  # topic_partitions: empty (not null) when joining
        + NO_TAGS
    )


@pytest.mark.parametrize("v", [0, 1])
def test_heartbeat_join_request_golden(v):
    data = join_request_bytes(v)
    assert enc_req(HB, join_request(v), v) == data
    assert HB.decode_request(data, v) == join_request(v)


def test_heartbeat_v0_has_no_regex_field():
    # v0 predates regex subscriptions (Kafka 4.0): the field is not on the wire at all.
    req = join_request(1)
    assert enc_req(HB, req, 0) == join_request_bytes(0)


@pytest.mark.parametrize("v", [0, 1])
def test_heartbeat_incremental_request_golden(v):
    # A steady member's heartbeat: every optional field null, -1 or unchanged.
    R = HB.Request
    req = R(group_id="g1", member_id="m-1", member_epoch=7,
            topic_partitions=[R.TopicPartitions(topic_id=T1, partitions=[0, 2])])
    data = (
        cs("g1") + cs("m-1") + i32(7) + cs(None) + cs(None) + i32(-1) + carr(None)
        + (cs(None) if v >= 1 else b"")
        + cs(None) + carr([tp(T1, [0, 2])]) + NO_TAGS
    )
    assert enc_req(HB, req, v) == data
    assert HB.decode_request(data, v) == req


@pytest.mark.parametrize("v", [0, 1])
def test_heartbeat_response_with_assignment_golden(v):
    S = HB.Response
    A = S.Assignment
    resp = S(throttle_time_ms=0, error_code=0, error_message=None, member_id="m-1", member_epoch=4,
             heartbeat_interval_ms=5000,
             assignment=A(topic_partitions=[A.TopicPartitions(topic_id=T1, partitions=[1]),
                                            A.TopicPartitions(topic_id=T2, partitions=[])]))
    data = (
        i32(0) + i16(0) + cs(None) + cs("m-1") + i32(4) + i32(5000)
        + i8(1)  # nullable struct: present
        + carr([tp(T1, [1]), tp(T2, [])]) + NO_TAGS  # the Assignment struct and its tags
        + NO_TAGS
    )
    assert enc_resp(HB, resp, v) == data
    assert HB.decode_response(data, v) == resp


@pytest.mark.parametrize("v", [0, 1])
def test_heartbeat_error_response_golden(v):
    S = HB.Response
    data = (
        i32(10) + i16(110) + cs("The member epoch is fenced.") + cs(None) + i32(-1) + i32(0)
        + i8(-1)  # no assignment
        + NO_TAGS
    )
    resp = HB.decode_response(data, v)
    assert resp == S(throttle_time_ms=10, error_code=110, error_message="The member epoch is fenced.",
                     member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    assert enc_resp(HB, resp, v) == data


def test_heartbeat_request_defaults_mean_unchanged():
    # A request built with only the always-sent fields says "nothing changed".
    req = HB.Request(group_id="g", member_id="m", member_epoch=3)
    assert (req.instance_id, req.rack_id, req.rebalance_timeout_ms, req.subscribed_topic_names,
            req.subscribed_topic_regex, req.server_assignor, req.topic_partitions) == \
        (None, None, -1, None, None, None, None)


# ---------------------------------------------------------------------------------------
# ConsumerGroupDescribe
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("v", [0, 1])
def test_describe_request_golden(v):
    req = DESCRIBE.Request(group_ids=["g1", "g2"], include_authorized_operations=True)
    data = carr([cs("g1"), cs("g2")]) + b"\x01" + NO_TAGS
    assert enc_req(DESCRIBE, req, v) == data
    assert DESCRIBE.decode_request(data, v) == req


def described_tp(topic_id: uuid.UUID, name: str, partitions: list[int]) -> bytes:
    return topic_id.bytes + cs(name) + carr([i32(p) for p in partitions]) + NO_TAGS


@pytest.mark.parametrize("v", [0, 1])
def test_describe_response_golden(v):
    member = (
        cs("m-1") + cs(None) + cs("r1") + i32(5) + cs("client-1") + cs("/127.0.0.1")
        + carr([cs("a")]) + cs(None)
        + carr([described_tp(T1, "a", [0, 1])]) + NO_TAGS  # assignment (not nullable here)
        + carr([described_tp(T1, "a", [0, 1, 2])]) + NO_TAGS  # target_assignment
        + (i8(1) if v >= 1 else b"")  # member_type (KIP-1099): 1, a consumer-protocol member
        + NO_TAGS
    )
    group = (
        i16(0) + cs(None) + cs("g1") + cs("Reconciling") + i32(6) + i32(6) + cs("uniform")
        + carr([member]) + i32(-(2**31)) + NO_TAGS
    )
    data = i32(0) + carr([group]) + NO_TAGS
    resp = DESCRIBE.decode_response(data, v)
    (g,) = resp.groups
    assert (g.error_code, g.error_message, g.group_id, g.group_state, g.group_epoch,
            g.assignment_epoch, g.assignor_name, g.authorized_operations) == \
        (0, None, "g1", "Reconciling", 6, 6, "uniform", -(2**31))
    (m,) = g.members
    assert (m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
            m.subscribed_topic_names, m.subscribed_topic_regex) == \
        ("m-1", None, "r1", 5, "client-1", "/127.0.0.1", ["a"], None)
    assert [(t.topic_id, t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [(T1, "a", [0, 1])]
    assert [(t.topic_id, t.topic_name, t.partitions) for t in m.target_assignment.topic_partitions] == \
        [(T1, "a", [0, 1, 2])]
    assert m.member_type == (1 if v >= 1 else -1)
    assert enc_resp(DESCRIBE, resp, v) == data


# ---------------------------------------------------------------------------------------
# Round trips of everything the declarations allow
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", [HB, DESCRIBE], ids=lambda a: a.name)
@pytest.mark.parametrize("v", [0, 1])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(api, v, data):
    req = data.draw(requests(api, v))
    assert api.decode_request(enc_req(api, req, v), v) == req
    resp = data.draw(responses(api, v))
    assert api.decode_response(enc_resp(api, resp, v), v) == resp
