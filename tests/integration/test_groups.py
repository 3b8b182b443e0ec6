"""Consumer groups against real brokers: members share partitions, hand them over when
one leaves or dies, commit offsets that survive a restart, and mix with other clients.

Broker quirks met here, one line each:
* Tansu completes a JoinGroup only after half the session timeout, so every rebalance
  takes at least that long (session timeouts here are short to keep the tests quick).
* Tansu auto-creates a topic with 4 partitions on first use.
* The librdkafka mock closes the connection on JoinGroup v6+ / SyncGroup v4+ and cuts its
  LeaveGroup v3+ answers short (without applying the leave): tests pin those APIs below them.
* The mock answers OffsetCommit with REBALANCE_IN_PROGRESS while a rebalance is being
  prepared (Kafka accepts the current generation's commits then), so a commit before
  revoking fails there and those records are read again by the next owner.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter

import pytest
from groupmates import groupmates  # noqa: F401 - the fixture
from shells import shell  # noqa: F401 - the fixture

from kafkawire import Consumer, Producer
from kafkawire.client.group import ConsumerRebalanceListener
from kafkawire.errors import CommitFailedError

pytestmark = [pytest.mark.broker, pytest.mark.groups]

SESSION_MS = 4000  # Tansu answers a JoinGroup after half of it: short keeps rebalances quick
MOCK_VERSIONS = {"JoinGroup": 5, "SyncGroup": 3, "LeaveGroup": 2}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _member(bootstrap: str, group: str, shell=None, **options) -> Consumer:
    opts = dict(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
    opts.update(options)
    return (shell.Consumer if shell else Consumer)(**opts)


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 4) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for i in range(n):
            p.send(topic, b"%d" % i, partition=i % partitions)
        p.flush(20)


def _stable(members: list[Consumer], partitions: int) -> bool:
    states = [m.group_state() for m in members]
    owned = [tp for s in states for tp in s["assignment"]]
    return (all(s["state"] == "stable" and not s["rejoin_needed"] for s in states)
            and len({s["generation"] for s in states}) == 1
            and len(owned) == partitions and len(set(owned)) == partitions)


def _poll_until(members: list[Consumer], done, timeout: float, sink: list | None = None) -> float:
    """Poll every member in turn until ``done()``; the seconds it took."""
    start = time.monotonic()
    while not done():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not reached within {timeout}s: {[m.group_state() for m in members]}")
        for m in members:
            got = m.poll(0.05)
            if sink is not None:
                sink.extend((r.topic, r.partition, r.offset) for r in got)
    return time.monotonic() - start


class _Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, list]] = []

    def on_partitions_revoked(self, partitions):
        self.calls.append(("revoked", list(partitions)))

    def on_partitions_assigned(self, partitions):
        self.calls.append(("assigned", list(partitions)))

    def on_partitions_lost(self, partitions):
        self.calls.append(("lost", list(partitions)))


def test_members_split_partitions_and_take_over_on_close(tansu_broker, shell):
    boot, topic, group = tansu_broker.bootstrap, _name("split"), _name("g")
    _produce(boot, topic, 400)
    a, b, c = (_member(boot, group, shell) for _ in range(3))
    consumed: list = []
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        _poll_until([a, b], lambda: _stable([a, b], 4), 30, consumed)
        assert [len(m.group_state()["assignment"]) for m in (a, b)] == [2, 2]
        c.subscribe([topic])
        _poll_until([a, b, c], lambda: _stable([a, b, c], 4), 30, consumed)
        assert sorted(len(m.group_state()["assignment"]) for m in (a, b, c)) == [1, 1, 2]
        leader = [m for m in (a, b, c) if m.group_state()["is_leader"]]
        assert len(leader) == 1
        c.close(5)  # leaves the group: the others rebalance without waiting for its session to end
        took = _poll_until([a, b], lambda: _stable([a, b], 4), 30, consumed)
        assert took < SESSION_MS / 1000, f"the takeover after a LeaveGroup took {took:.1f}s"
        _poll_until([a, b], lambda: len(set(consumed)) >= 400, 30, consumed)
    finally:
        for m in (a, b, c):
            m.close(5)
    counts = Counter(consumed)
    assert set(p for _t, p, _o in counts) == {0, 1, 2, 3}
    assert len(counts) == 400  # every record at least once
    print(f"duplicates across two rebalances: {sum(counts.values()) - len(counts)}")


_KILLED_MEMBER = textwrap.dedent("""
    import sys, time
    from kafkawire import Consumer
    c = Consumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], session_timeout_ms=%d,
                 heartbeat_interval_ms=500, auto_offset_reset="earliest")
    c.subscribe([sys.argv[3]])
    while True:
        c.poll(0.1)
        s = c.group_state()
        if s["state"] == "stable" and s["assignment"] and not s["rejoin_needed"]:
            print("assigned", len(s["assignment"]), s["generation"], flush=True)
""" % SESSION_MS)


def test_killed_member_is_replaced_within_the_session_timeout(tansu_broker):
    boot, topic, group = tansu_broker.bootstrap, _name("kill"), _name("g")
    _produce(boot, topic, 40)
    survivor = _member(boot, group)
    survivor.subscribe([topic])
    _poll_until([survivor], lambda: _stable([survivor], 4), 30)
    child = subprocess.Popen([sys.executable, "-c", _KILLED_MEMBER, boot, group, topic],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        # The child joins: both stable with 2 partitions each.
        _poll_until([survivor], lambda: len(survivor.group_state()["assignment"]) == 2
                    and survivor.group_state()["state"] == "stable", 40)
        line = ""
        deadline = time.monotonic() + 20
        while not line.startswith("assigned 2") and time.monotonic() < deadline:
            survivor.poll(0.05)
            line = child.stdout.readline()
        assert line.startswith("assigned 2"), line
        os.kill(child.pid, signal.SIGKILL)  # no LeaveGroup: only its session timeout frees its partitions
        child.wait(10)
        took = _poll_until([survivor], lambda: _stable([survivor], 4), 30)
        # Session timeout, then Tansu's join delay of half of it, plus scheduling slack.
        assert took < SESSION_MS / 1000 * 1.5 + 5, took
        state = survivor.group_state()
        assert state["last_rebalance_reason"]
        assert state["last_heartbeat_result"] in ("ok", "REBALANCE_IN_PROGRESS")
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        survivor.close(5)


def test_committed_offsets_survive_a_restart(tansu_broker, shell):
    boot, topic, group = tansu_broker.bootstrap, _name("restart"), _name("g")
    _produce(boot, topic, 200)
    first = _member(boot, group, shell, enable_auto_commit=False)
    got: list = []
    try:
        first.subscribe([topic])
        _poll_until([first], lambda: len(got) >= 100, 30, got)
        positions = {tp: first.position(tp) for tp in first.assignment()}
        first.commit()
        assert first.committed(list(positions)) == positions
    finally:
        first.close(5)
    second = _member(boot, group, shell, enable_auto_commit=False)
    rest: list = []
    try:
        second.subscribe([topic])
        _poll_until([second], lambda: len(rest) + len(got) >= 200, 30, rest)
        for tp, offset in positions.items():
            seen = [o for t, p, o in rest if (t, p) == tp]
            assert not seen or min(seen) == offset, (tp, offset, min(seen))
        assert len(set(rest) | set(got)) == 200
    finally:
        second.close(5)


def test_auto_commit_commits_only_what_poll_returned(tansu_broker):
    boot, topic, group = tansu_broker.bootstrap, _name("auto"), _name("g")
    _produce(boot, topic, 400)
    c = _member(boot, group, auto_commit_interval_ms=100, max_poll_records=10)
    got: list = []
    try:
        c.subscribe([topic])
        _poll_until([c], lambda: len(got) >= 50, 30, got)
        time.sleep(0.2)
        c.poll(0.05, max_records=1)  # the auto-commit goes out at the start of this poll
        returned = {}
        for t, p, o in got:
            returned[(t, p)] = max(returned.get((t, p), -1), o + 1)
        deadline = time.monotonic() + 10
        while True:
            committed = c.committed([(topic, p) for p in range(4)])
            if any(v is not None for v in committed.values()) or time.monotonic() > deadline:
                break
            c.poll(0.05, max_records=1)
        # Never ahead of what poll() handed out before the commit went out.
        for tp, offset in committed.items():
            if offset is not None:
                assert offset <= returned.get(tuple(tp), 0) + 1, (tp, offset, returned)
        assert any(v is not None for v in committed.values())
    finally:
        c.close(5)
    # close() committed everything returned so far.
    with _member(boot, group, enable_auto_commit=False) as check:
        check.subscribe([topic])
        final = check.committed([(topic, p) for p in range(4)])
    assert sum(v or 0 for v in final.values()) >= len(got)


def test_commit_after_being_expelled_is_a_typed_error(tansu_broker):
    boot, topic, group = tansu_broker.bootstrap, _name("expel"), _name("g")
    _produce(boot, topic, 40)
    slow = _member(boot, group, max_poll_interval_ms=2000, enable_auto_commit=False)
    listener = _Recorder()
    try:
        slow.subscribe([topic], listener=listener)
        _poll_until([slow], lambda: _stable([slow], 4), 30)
        time.sleep(3.0)  # longer than max_poll_interval_ms: the group thread leaves the group
        assert slow.group_state()["rejoin_needed"]
        with pytest.raises(CommitFailedError) as info:
            slow.poll(0.01)
            slow.commit({(topic, 0): 1}, timeout=5)
        assert "not a member" in str(info.value)
        assert ("lost", [(topic, p) for p in range(4)]) in listener.calls
        _poll_until([slow], lambda: _stable([slow], 4), 30)  # polling again rejoins
    finally:
        slow.close(5)


def test_cooperative_rebalance_revokes_only_what_moves(tansu_broker, shell):
    boot, topic, group = tansu_broker.bootstrap, _name("coop"), _name("g")
    _produce(boot, topic, 40)
    la, lb = _Recorder(), _Recorder()
    a = _member(boot, group, shell, partition_assignment_strategy=["cooperative-sticky"])
    b = _member(boot, group, shell, partition_assignment_strategy=["cooperative-sticky"])
    try:
        a.subscribe([topic], listener=la)
        _poll_until([a], lambda: _stable([a], 4), 30)
        before = set(a.assignment())
        b.subscribe([topic], listener=lb)
        _poll_until([a, b], lambda: _stable([a, b], 4), 40)
        assert a.group_state()["rebalance_protocol"] == "cooperative"
        revoked = [p for kind, ps in la.calls if kind == "revoked" for p in ps]
        kept = set(a.assignment())
        assert len(kept) == 2 and kept <= before
        assert sorted(revoked) == sorted(before - kept)  # only the two that moved
        assert set(b.assignment()) == before - kept
        assert not [c for c in lb.calls if c[0] != "assigned"]
    finally:
        a.close(5)
        b.close(5)


def test_static_member_rejoins_without_a_rebalance(tansu_broker):
    boot, topic, group = tansu_broker.bootstrap, _name("static"), _name("g")
    _produce(boot, topic, 40)
    other_listener = _Recorder()
    # A static member keeps its place for a session timeout after it goes: long enough here
    # for the restart, short enough that nothing else times out.
    static = dict(session_timeout_ms=10000, heartbeat_interval_ms=1000)
    other = _member(boot, group, group_instance_id="other", **static)
    first = _member(boot, group, group_instance_id="restarting", **static)
    try:
        other.subscribe([topic], listener=other_listener)
        first.subscribe([topic])
        _poll_until([other, first], lambda: _stable([other, first], 4), 40)
        generation = other.group_state()["generation"]
        mine = set(first.assignment())
        first.close(5)  # a static member sends no LeaveGroup (KIP-345)
        calls = len(other_listener.calls)
        again = _member(boot, group, group_instance_id="restarting", **static)
        try:
            again.subscribe([topic])
            _poll_until([other, again], lambda: _stable([other, again], 4), 40)
            assert set(again.assignment()) == mine
            assert other.group_state()["generation"] == generation
            assert other_listener.calls[calls:] == []
        finally:
            again.close(5)
    finally:
        other.close(5)


def test_pattern_subscription_follows_new_topics(tansu_broker):
    boot, prefix, group = tansu_broker.bootstrap, _name("pat"), _name("g")
    _produce(boot, f"{prefix}-a", 8)
    c = _member(boot, group, metadata_max_age_ms=500)
    try:
        c.subscribe(pattern=f"{prefix}-.*")
        _poll_until([c], lambda: _stable([c], 4), 30)
        assert c.subscription() == {f"{prefix}-a"}
        _produce(boot, f"{prefix}-b", 8)
        _poll_until([c], lambda: _stable([c], 8), 30)
        assert {tp.topic for tp in c.assignment()} == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        c.close(5)


def test_mixed_group_with_confluent_kafka(tansu_broker):
    ck = pytest.importorskip("confluent_kafka")
    boot, topic, group = tansu_broker.bootstrap, _name("mixed"), _name("g")
    _produce(boot, topic, 400)
    kw = _member(boot, group, partition_assignment_strategy=["range"], enable_auto_commit=False)
    other = ck.Consumer({"bootstrap.servers": boot, "group.id": group, "session.timeout.ms": SESSION_MS,
                         "partition.assignment.strategy": "range", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "log_level": 3})
    try:
        kw.subscribe([topic])
        other.subscribe([topic])
        got_kw: list = []
        got_ck: list = []

        def both_assigned():
            theirs = {(tp.topic, tp.partition) for tp in other.assignment()}
            mine = set(kw.assignment())
            return (kw.group_state()["state"] == "stable" and len(mine) == 2 and len(theirs) == 2
                    and not mine & theirs and mine | theirs == {(topic, p) for p in range(4)})

        start = time.monotonic()
        while not both_assigned() or len(got_kw) + len(got_ck) < 400:
            assert time.monotonic() - start < 60, (kw.group_state(), other.assignment())
            got_kw += [(r.partition, r.offset) for r in kw.poll(0.05)]
            m = other.poll(0.05)
            if m is not None and not m.error():
                got_ck.append((m.partition(), m.offset()))
        assert not {p for p, _ in got_kw} & {p for p, _ in got_ck}
        mine = sorted(kw.assignment())
        kw.commit()
        other.commit(asynchronous=False)
        theirs = [(tp.topic, tp.partition) for tp in other.assignment()]
        # Each reads what the other committed.
        seen_by_ck = {(tp.topic, tp.partition): tp.offset
                      for tp in other.committed([ck.TopicPartition(t, p) for t, p in mine], 10)}
        assert seen_by_ck == {tp: kw.position(tp) for tp in mine}
        seen_by_kw = kw.committed(theirs)
        assert seen_by_kw == {tp: 1 + max(o for p, o in got_ck if p == tp[1]) for tp in theirs}
    finally:
        kw.close(5)
        other.close()


def test_group_on_the_mock_cluster(mock_cluster, shell):
    boot, topic, group = mock_cluster.bootstrap, _name("mock"), _name("g")
    mock_cluster.create_topic(topic, 4)
    _produce(boot, topic, 100)
    a = _member(boot, group, shell, api_version_overrides=MOCK_VERSIONS, enable_auto_commit=False)
    b = _member(boot, group, shell, api_version_overrides=MOCK_VERSIONS, enable_auto_commit=False)
    got: list = []
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        _poll_until([a, b], lambda: _stable([a, b], 4) and len(set(got)) >= 100, 40, got)
        assert not set(a.assignment()) & set(b.assignment())
        a.commit()
        assert a.committed(sorted(a.assignment())) == {tp: a.position(tp) for tp in a.assignment()}
    finally:
        a.close(5)
        b.close(5)


def test_commit_async_calls_back_inside_poll(tansu_broker, shell):
    boot, topic, group = tansu_broker.bootstrap, _name("async"), _name("g")
    _produce(boot, topic, 40)
    c = _member(boot, group, shell, enable_auto_commit=False)
    calls: list = []
    try:
        c.subscribe([topic])
        got: list = []
        _poll_until([c], lambda: len(got) >= 40, 30, got)
        c.commit_async(callback=lambda offsets, exc: calls.append((dict(offsets), exc)))
        assert calls == []  # not before a later poll, commit or close
        _poll_until([c], lambda: calls, 10)
        ((offsets, exc),) = calls
        assert exc is None
        assert offsets == {(topic, p): 10 for p in range(4)}
        assert c.committed(list(offsets)) == offsets
    finally:
        c.close(5)


def test_close_with_the_broker_gone_keeps_its_deadline(tansu_broker_factory):
    broker = tansu_broker_factory()
    topic, group = _name("gone"), _name("g")
    _produce(broker.bootstrap, topic, 8)
    c = _member(broker.bootstrap, group)
    try:
        c.subscribe([topic])
        _poll_until([c], lambda: _stable([c], 4), 30)
        c.poll(0.2)
    finally:
        broker.stop()
    start = time.monotonic()
    c.close(2)  # the commit and the LeaveGroup cannot be answered: close() still returns in time
    assert time.monotonic() - start < 3


def test_a_slow_caller_stays_in_the_group(tansu_broker):
    # Heartbeats come from the group thread: a caller busy for longer than the session
    # timeout (but within max_poll_interval_ms) keeps its partitions and generation.
    boot, topic, group = tansu_broker.bootstrap, _name("slow"), _name("g")
    _produce(boot, topic, 8)
    c = _member(boot, group)
    try:
        c.subscribe([topic])
        _poll_until([c], lambda: _stable([c], 4), 30)
        before = c.group_state()
        time.sleep(SESSION_MS / 1000 + 1)
        c.poll(0.1)
        after = c.group_state()
        assert (after["generation"], after["member_id"], after["assignment"]) == \
            (before["generation"], before["member_id"], before["assignment"])
        assert after["state"] == "stable" and not after["rejoin_needed"]
        assert after["last_heartbeat_result"] == "ok" and after["last_heartbeat_age"] < 2
    finally:
        c.close(5)


def test_mixed_group_of_three_clients_shares_and_reads_commits(tansu_broker, groupmates):
    # kafkawire in this process, confluent-kafka and kafka-python members in children,
    # all with the range assignor: disjoint assignments covering every partition, and
    # each member starts from what the others committed.
    pytest.importorskip("kafka")
    pytest.importorskip("confluent_kafka")
    boot, topic, group = tansu_broker.bootstrap, _name("three"), _name("g")
    _produce(boot, topic, 400)
    kw = _member(boot, group, partition_assignment_strategy=["range"], enable_auto_commit=False)
    try:
        kw.subscribe([topic])
        ck = groupmates.start("confluent", boot, topic, group, "range", session_timeout_ms=SESSION_MS)
        kp = groupmates.start("kafka-python", boot, topic, group, "range", session_timeout_ms=SESSION_MS)
        every = set(range(4))

        def settled():
            mine = {p for _t, p in kw.assignment()}
            theirs = [ck.partitions(), kp.partitions()]
            return (kw.group_state()["state"] == "stable" and not kw.group_state()["rejoin_needed"]
                    and mine and all(theirs) and sum(map(len, theirs)) + len(mine) == 4
                    and mine | theirs[0] | theirs[1] == every)

        got: list = []
        _poll_until([kw], settled, 60, got)
        mine = {p for _t, p in kw.assignment()}
        assert not mine & ck.partitions() and not mine & kp.partitions() and not ck.partitions() & kp.partitions()
        _poll_until([kw], lambda: len({(p, o) for _t, p, o in got}) >= 100 * len(mine), 30, got)
        kw.commit()
        ck.commit()
        kp.commit()
        theirs = {tp.partition: off for m in (ck, kp) for tp, off in m.committed().items()}
        # kafkawire reads what the others committed ...
        assert kw.committed([(topic, p) for p in theirs]) == {(topic, p): off for p, off in theirs.items()}
        mine_committed = kw.committed([(topic, p) for p in mine])
    finally:
        kw.close(5)
    # ... and after kafkawire leaves, the others take its partitions from its commits.
    ck.wait_for(lambda: len(ck.partitions() | kp.partitions()) == 4, 30, "takeover")
    for m in (ck, kp):
        for p in m.partitions() & mine:
            first = min(o for q, o in m.consumed() if q == p) if any(q == p for q, _ in m.consumed()) else None
            assert first in (None, mine_committed[(topic, p)])
