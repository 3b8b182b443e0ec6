"""The consumer protocol's embedded subscription and assignment, and the assignors."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire import errors
from kafkawire.protocol import consumer
from kafkawire.protocol.apis import groups
from kafkawire.protocol.consumer import ConsumerProtocolAssignment as Assignment
from kafkawire.protocol.consumer import ConsumerProtocolSubscription as Subscription
from wirebytes import arr, b, i16, i32, s


def tp(topic: str, parts: list[int]) -> bytes:
    return s(topic) + arr([i32(p) for p in parts])


SubTP = Subscription.TopicPartition
AsgTP = Assignment.TopicPartition

FULL_SUB = Subscription(
    topics=["a", "b"],
    user_data=b"ud",
    owned_partitions=[SubTP(topic="a", partitions=[0, 2])],
    generation_id=7,
    rack_id="rack-1",
)

# The same subscription at each version, field by field.
SUB_WIRE = {
    0: i16(0) + arr([s("a"), s("b")]) + b(b"ud"),
    1: i16(1) + arr([s("a"), s("b")]) + b(b"ud") + arr([tp("a", [0, 2])]),
    2: i16(2) + arr([s("a"), s("b")]) + b(b"ud") + arr([tp("a", [0, 2])]) + i32(7),
    3: i16(3) + arr([s("a"), s("b")]) + b(b"ud") + arr([tp("a", [0, 2])]) + i32(7) + s("rack-1"),
}


# ---------------------------------------------------------------------------------------
# Subscription
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_golden_at_every_version(version):
    assert consumer.encode_subscription(FULL_SUB, version) == SUB_WIRE[version]
    back = consumer.decode_subscription(SUB_WIRE[version])
    assert consumer.header_version(SUB_WIRE[version]) == version
    # Fields newer than the version come back as their defaults.
    expected = Subscription(
        topics=["a", "b"],
        user_data=b"ud",
        owned_partitions=FULL_SUB.owned_partitions if version >= 1 else [],
        generation_id=7 if version >= 2 else -1,
        rack_id="rack-1" if version >= 3 else None,
    )
    assert back == expected


def test_subscription_defaults_and_null_user_data():
    sub = Subscription(topics=["t"])
    assert sub.user_data is None and sub.generation_id == -1 and sub.rack_id is None
    wire = consumer.encode_subscription(sub)
    assert wire == i16(3) + arr([s("t")]) + b(None) + arr([]) + i32(-1) + s(None)
    assert consumer.decode_subscription(wire) == sub


def test_subscription_newer_version_reads_known_prefix():
    # A v5 subscription from a newer client: the v3 fields, then fields kafkawire does not
    # know.  It must decode as v3 and ignore the tail.
    future = i16(5) + SUB_WIRE[3][2:] + s("unknown-field") + i32(123)
    assert consumer.decode_subscription(future) == FULL_SUB
    assert consumer.header_version(future) == 5


def test_subscription_inside_join_group_round_trip():
    jg = groups.JOIN_GROUP
    meta = consumer.encode_subscription(FULL_SUB, 1)
    req = jg.Request(
        group_id="g", session_timeout_ms=10000, member_id="", protocol_type=consumer.PROTOCOL_TYPE,
        protocols=[jg.Request.JoinGroupRequestProtocol(name=consumer.RANGE, metadata=meta)],
    )
    back = jg.decode_request(jg.encode_request(req, 5).getvalue(), 5)
    sub = consumer.decode_subscription(back.protocols[0].metadata)
    assert sub.owned_partitions == FULL_SUB.owned_partitions and sub.generation_id == -1


def test_decode_bad_input_fails_clearly():
    with pytest.raises(errors.TruncatedDataError, match="consumer protocol version"):
        consumer.decode_subscription(b"\x00")
    with pytest.raises(errors.CodecError, match="negative version -2"):
        consumer.decode_subscription(i16(-2) + arr([]))
    with pytest.raises(errors.TruncatedDataError):
        consumer.decode_subscription(SUB_WIRE[3][:-3])


def test_encode_bad_input_fails_clearly():
    with pytest.raises(errors.EncodeError, match=r"subscription version 4 .* \(0 to 3\)"):
        consumer.encode_subscription(FULL_SUB, 4)
    with pytest.raises(errors.EncodeError, match="expected a ConsumerProtocolSubscription"):
        consumer.encode_subscription(Assignment())  # type: ignore[arg-type]
    with pytest.raises(errors.EncodeError, match="expected a ConsumerProtocolAssignment"):
        consumer.encode_assignment(FULL_SUB)


# ---------------------------------------------------------------------------------------
# Assignment
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_golden_at_every_version(version):
    asg = Assignment(
        assigned_partitions=[AsgTP(topic="a", partitions=[0, 1]), AsgTP(topic="b", partitions=[4])],
        user_data=None,
    )
    wire = i16(version) + arr([tp("a", [0, 1]), tp("b", [4])]) + b(None)
    assert consumer.encode_assignment(asg, version) == wire
    assert consumer.decode_assignment(wire) == asg


def test_assignment_forward_compatible_and_empty():
    wire = i16(9) + arr([tp("a", [3])]) + b(b"x") + b"\x01\x02\x03"
    asg = consumer.decode_assignment(wire)
    assert consumer.assignment_to_map(asg) == {"a": [3]} and asg.user_data == b"x"
    # A member the leader left out gets empty bytes in SyncGroup.
    assert consumer.decode_assignment(b"") == Assignment()


def test_assignment_map_helpers():
    asg = consumer.assignment_from_map({"b": [2, 0], "a": [1]}, user_data=b"u")
    assert [(t.topic, t.partitions) for t in asg.assigned_partitions] == [("a", [1]), ("b", [0, 2])]
    assert consumer.assignment_to_map(asg) == {"a": [1], "b": [0, 2]}
    assert consumer.decode_assignment(consumer.encode_assignment(asg)) == asg


_names = st.text("abcdef", min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(
    version=st.integers(0, 3),
    topics=st.lists(_names, max_size=4),
    user_data=st.none() | st.binary(max_size=8),
    owned=st.lists(st.tuples(_names, st.lists(st.integers(0, 2**31 - 1), max_size=3)), max_size=3),
    gen=st.integers(-(2**31), 2**31 - 1),
    rack=st.none() | _names,
)
def test_subscription_round_trip(version, topics, user_data, owned, gen, rack):
    sub = Subscription(
        topics=topics, user_data=user_data,
        owned_partitions=[SubTP(topic=t, partitions=p) for t, p in owned] if version >= 1 else [],
        generation_id=gen if version >= 2 else -1,
        rack_id=rack if version >= 3 else None,
    )
    assert consumer.decode_subscription(consumer.encode_subscription(sub, version)) == sub


# ---------------------------------------------------------------------------------------
# Assignors
# ---------------------------------------------------------------------------------------


def test_range_chunks_spec_004_example():
    # spec/004: three consumers, two brokers with three partitions each, partitions sorted
    # as broker-partition: A gets [0-0, 0-1], B [0-2, 1-0], C [1-1, 1-2].
    partitions = [(broker, p) for broker in (1, 0) for p in (2, 0, 1)]  # any order in
    out = consumer.range_chunks(partitions, ["C", "A", "B"])
    assert out == {
        "A": [(0, 0), (0, 1)],
        "B": [(0, 2), (1, 0)],
        "C": [(1, 1), (1, 2)],
    }
    assert list(out) == ["A", "B", "C"]


def test_range_chunks_extras_go_to_the_earliest_consumers():
    # 18 partitions over 4 consumers: 5-5-4-4, never 4-4-4-5 or 4-5-4-4.
    out = consumer.range_chunks(range(18), ["c4", "c2", "c1", "c3"])
    assert [len(out[c]) for c in ("c1", "c2", "c3", "c4")] == [5, 5, 4, 4]
    assert out["c1"] == [0, 1, 2, 3, 4] and out["c2"] == [5, 6, 7, 8, 9]
    assert out["c3"] == [10, 11, 12, 13] and out["c4"] == [14, 15, 16, 17]
    # Fewer items than consumers: the last consumers get nothing.
    assert consumer.range_chunks([0, 1], ["x", "y", "z"]) == {"x": [0], "y": [1], "z": []}
    with pytest.raises(ValueError, match="no consumers"):
        consumer.range_chunks([0], [])


def test_range_assign_per_topic():
    subs = {"m2": ["t1", "t2"], "m1": ["t1", "t2"], "m3": ["t1"]}
    out = consumer.range_assign(subs, {"t1": 7, "t2": 3})
    assert out == {
        "m1": {"t1": [0, 1, 2], "t2": [0, 1]},
        "m2": {"t1": [3, 4], "t2": [2]},
        "m3": {"t1": [5, 6]},
    }


def test_range_assign_spec_example_as_one_topic():
    # The spec's six broker-partitions as one topic's six partitions, three consumers.
    out = consumer.range_assign({"A": ["t"], "B": ["t"], "C": ["t"]}, {"t": 6})
    assert out == {"A": {"t": [0, 1]}, "B": {"t": [2, 3]}, "C": {"t": [4, 5]}}


def test_assignors_skip_unknown_topics_and_keep_idle_members():
    subs = {"a": ["known", "missing"], "b": ["known"], "idle": []}
    for assign in (consumer.range_assign, consumer.round_robin_assign):
        out = assign(subs, {"known": [0]})
        assert out["idle"] == {} and "missing" not in out["a"]
        assert sum(len(v.get("known", [])) for v in out.values()) == 1


def test_round_robin_assign():
    subs = {"A": ["t", "u"], "B": ["t"]}
    out = consumer.round_robin_assign(subs, {"t": 3, "u": 2})
    # t0 A, t1 B, t2 A, u0 (B not subscribed) A, u1 (B passed over again) A.
    assert out == {"A": {"t": [0, 2], "u": [0, 1]}, "B": {"t": [1]}}
    out = consumer.round_robin_assign({"c1": ["t"], "c2": ["t"], "c3": ["t"]}, {"t": 7})
    assert out == {"c1": {"t": [0, 3, 6]}, "c2": {"t": [1, 4]}, "c3": {"t": [2, 5]}}


def test_assignor_input_errors():
    with pytest.raises(TypeError, match="wrap it in a list"):
        consumer.range_assign({"m": "topic"}, {"topic": 1})
    with pytest.raises(ValueError, match="negative"):
        consumer.round_robin_assign({"m": ["t"]}, {"t": -1})
    with pytest.raises(ValueError, match="not a non-negative int"):
        consumer.range_assign({"m": ["t"]}, {"t": [0, -3]})


@settings(max_examples=60, deadline=None)
@given(
    subs=st.dictionaries(
        st.text("mnop", min_size=1, max_size=3),
        st.lists(st.sampled_from(["t1", "t2", "t3"]), unique=True),
        max_size=5,
    ),
    counts=st.fixed_dictionaries({t: st.integers(0, 9) for t in ("t1", "t2", "t3")}),
    which=st.sampled_from(["range", "roundrobin"]),
)
def test_assignors_assign_each_partition_once_and_balance(subs, counts, which):
    assign = consumer.range_assign if which == "range" else consumer.round_robin_assign
    out = assign(subs, counts)
    assert set(out) == set(subs)
    seen = Counter((t, p) for m in out.values() for t, ps in m.items() for p in ps)
    wanted = {(t, p) for t in {t for ts in subs.values() for t in ts} for p in range(counts[t])}
    assert set(seen) == wanted and all(n == 1 for n in seen.values())
    for member, topics in out.items():
        assert set(topics) <= set(subs[member])
    # Per topic, the range assignor's shares differ by at most one between its subscribers.
    if which == "range":
        for t in counts:
            shares = [len(out[m].get(t, [])) for m in subs if t in subs[m]]
            if shares:
                assert max(shares) - min(shares) <= 1
