"""The sticky assignor without a broker: hand-worked cases and the rules on random groups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire.protocol.consumer import sticky_assign


def flat(result):
    return {m: {(t, p) for t, ps in topics.items() for p in ps} for m, topics in result.items()}


def test_fresh_group_is_balanced():
    got = flat(sticky_assign({"c1": ["t"], "c2": ["t"], "c3": ["t"]}, {"t": 7}))
    assert sorted(len(v) for v in got.values()) == [2, 2, 3]
    assert set().union(*got.values()) == {("t", p) for p in range(7)}


def test_a_joining_member_takes_the_fewest_partitions_possible():
    owned = {"c1": [("t", p) for p in range(4)], "c2": [("t", p) for p in range(4, 7)]}
    got = flat(sticky_assign({"c1": ["t"], "c2": ["t"], "c3": ["t"]}, {"t": 7}, owned))
    assert got["c1"] <= set(owned["c1"]) and got["c2"] <= set(owned["c2"])
    assert len(got["c3"]) == 2  # the two moves balance needs, no more
    assert sorted(len(v) for v in got.values()) == [2, 2, 3]


def test_a_leaving_members_partitions_are_shared_and_the_rest_stay():
    owned = {"c1": [("t", 0), ("t", 1)], "c2": [("t", 2), ("t", 3)], "c3": [("t", 4), ("t", 5)]}
    got = flat(sticky_assign({"c1": ["t"], "c2": ["t"]}, {"t": 6}, owned))
    assert got["c1"] >= {("t", 0), ("t", 1)} and got["c2"] >= {("t", 2), ("t", 3)}
    assert len(got["c1"]) == len(got["c2"]) == 3


def test_constrained_partitions_go_first():
    # c1 can only take t1; c2 takes t2 so that c1 is not left without partitions.
    got = sticky_assign({"c1": ["t1"], "c2": ["t1", "t2"]}, {"t1": 2, "t2": 2})
    assert got == {"c1": {"t1": [0, 1]}, "c2": {"t2": [0, 1]}}


def test_a_claim_by_two_members_stays_with_the_newer_generation():
    owned = {"c1": [("t", 0)], "c2": [("t", 0), ("t", 1)]}
    got = flat(sticky_assign({"c1": ["t"], "c2": ["t"]}, {"t": 2}, owned, {"c1": 5, "c2": 4}))
    assert got == {"c1": {("t", 0)}, "c2": {("t", 1)}}


def test_unsubscribed_and_vanished_partitions_are_dropped():
    owned = {"c1": [("gone", 0), ("t", 0), ("u", 0)]}
    got = sticky_assign({"c1": ["t"]}, {"t": 1, "u": 1}, owned)
    assert got == {"c1": {"t": [0]}}


@settings(max_examples=200, deadline=None)
@given(
    subs=st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]),
                         st.sets(st.sampled_from(["t1", "t2", "t3"]), min_size=1), min_size=1),
    counts=st.fixed_dictionaries({"t1": st.integers(0, 6), "t2": st.integers(0, 6), "t3": st.integers(0, 6)}),
    seed=st.randoms(use_true_random=False),
)
def test_rules_hold_and_a_stable_group_keeps_its_assignment(subs, counts, seed):
    got = flat(sticky_assign(subs, counts))
    wanted = {(t, p) for t in set().union(*subs.values()) for p in range(counts[t])}
    taken = [tp for tps in got.values() for tp in tps]
    assert sorted(taken) == sorted(wanted)  # every partition exactly once
    assert all(t in subs[m] for m, tps in got.items() for t, _ in tps)
    for m, tps in got.items():  # no partition could go to a member two or more lighter
        for t, _ in tps:
            assert all(len(got[o]) > len(tps) - 2 for o in subs if t in subs[o])
    again = flat(sticky_assign(subs, counts, {m: list(v) for m, v in got.items()}))
    assert again == got  # nothing moves when nothing changed
    # A member leaving a group whose members all subscribe alike: the others keep
    # everything they had (the leaver's partitions go to the lightest).
    if len(subs) > 1 and len({frozenset(t) for t in subs.values()}) == 1:
        gone = seed.choice(sorted(subs))
        rest = {m: t for m, t in subs.items() if m != gone}
        after = flat(sticky_assign(rest, counts, {m: list(v) for m, v in got.items()}))
        assert all(got[m] <= after[m] for m in rest)


def test_sticky_user_data_is_unprefixed_v1_and_reads_v0():
    from wirebytes import arr, i32, s

    from kafkawire.protocol.consumer import decode_sticky_user_data, encode_sticky_user_data

    v0 = arr([s("t") + arr([i32(0), i32(2)]), s("u") + arr([i32(1)])])
    v1 = v0 + i32(7)
    assert encode_sticky_user_data({"u": [1], "t": [2, 0]}, 7) == v1
    assert decode_sticky_user_data(v1) == ({"t": [0, 2], "u": [1]}, 7)
    assert decode_sticky_user_data(v0) == ({"t": [0, 2], "u": [1]}, -1)
    # Unreadable or empty user_data is ignored, as Kafka's assignor does.
    assert decode_sticky_user_data(b"\x00\x00") == ({}, -1)
    assert decode_sticky_user_data(b"") == ({}, -1)
    assert decode_sticky_user_data(None) == ({}, -1)


def test_cooperative_user_data_is_the_generation():
    from kafkawire.protocol.consumer import decode_cooperative_user_data, encode_cooperative_user_data

    assert encode_cooperative_user_data(12) == b"\x00\x00\x00\x0c"
    assert decode_cooperative_user_data(b"\x00\x00\x00\x0c") == 12
    assert decode_cooperative_user_data(b"") == -1


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64))
def test_any_user_data_bytes_decode_or_are_ignored(data):
    from kafkawire.protocol.consumer import decode_sticky_user_data

    owned, generation = decode_sticky_user_data(data)
    assert isinstance(owned, dict) and isinstance(generation, int)
