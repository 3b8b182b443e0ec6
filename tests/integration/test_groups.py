"""Consumer groups (the classic protocol) on Apache Kafka: members share partitions, hand
them over when one leaves, dies or stops polling, commit offsets that survive a restart,
keep their place when static, move only what must move when cooperative, and share a
group with confluent-kafka and kafka-python members.

Everything runs on the session's Kafka node (``kafka_broker``) but one test of a fault
only librdkafka's mock injects on demand (the coordinator moving).  Kafka's rules shape the settings: ``group.min.session.timeout.ms`` is 6 s, so no
session here is shorter; the fixture's ``group.initial.rebalance.delay.ms=0`` answers a
first JoinGroup at once; auto-created topics have one partition, so each test creates its
4-partition topic.

Where the other implementations differ from Kafka (each tested where it is right), one
line each:
* Tansu completes a JoinGroup only after half the session timeout, so every rebalance
  there takes at least that long; Kafka answers as soon as every member has joined.
* Tansu answers MEMBER_ID_REQUIRED even at JoinGroup v0-v3; Kafka only from v4 (KIP-394):
  the oldest-versions test joins at v0.
* Tansu fails OffsetCommit v1; Kafka 4 serves v2 and later (KIP-896): the oldest-versions
  test commits at v2.
* The librdkafka mock closes the connection on JoinGroup v6+ / SyncGroup v4+ and cuts its
  LeaveGroup v3+ answers short (without applying the leave): the mock test pins below them.
* The mock answers OffsetCommit with REBALANCE_IN_PROGRESS while a rebalance is being
  prepared; Kafka accepts the current generation's commits then, so on Kafka an eager
  rebalance hands partitions over with no record read twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest
from groupmates import groupmates  # noqa: F401 - the fixture
from shells import shell  # noqa: F401 - the fixture

import kafkawire.protocol.group_member
from kafkawire import Admin, Consumer, Producer
from kafkawire.aio import AsyncConsumer
from kafkawire.client.group import ConsumerRebalanceListener
from kafkawire.errors import CommitFailedError
from topics import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.groups]

SESSION_MS = 6000  # Kafka's group.min.session.timeout.ms: the shortest session it accepts
HEARTBEAT_MS = 500
MOCK_VERSIONS = {"JoinGroup": 5, "SyncGroup": 3, "LeaveGroup": 2}
# The oldest version of each group API that Kafka 4 still serves (KIP-896 removed the rest).
OLDEST_VERSIONS = {"FindCoordinator": 0, "JoinGroup": 0, "SyncGroup": 0, "Heartbeat": 0,
                   "LeaveGroup": 0, "OffsetCommit": 2, "OffsetFetch": 1}


def _topic(bootstrap: str, prefix: str, partitions: int = 4) -> str:
    """A new topic of ``partitions`` partitions (Kafka would auto-create one of 1)."""
    name = unique_name(prefix)
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([name], num_partitions=partitions)
    return name


def _member(bootstrap: str, group: str, shell=None, **options) -> Consumer:
    opts = dict(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    opts.update(options)
    return (shell.Consumer if shell else Consumer)(**opts)


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 4) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for i in range(n):
            p.send(topic, b"%d" % i, partition=i % partitions)
        p.flush(20)


def _describe(bootstrap: str, group: str):
    with Admin(bootstrap_servers=bootstrap) as admin:
        return admin.describe_groups([group])[group]


def _stable(members: list[Consumer], partitions: int) -> bool:
    states = [m.group_state() for m in members]
    owned = [tp for s in states for tp in s["assignment"]]
    return (all(s["state"] == "stable" and not s["rejoin_needed"] for s in states)
            and len({s["generation"] for s in states}) == 1
            and len(owned) == partitions and len(set(owned)) == partitions)


def _poll_until(members: list[Consumer], done, timeout: float, sink: list | None = None) -> None:
    """Poll every member in turn until ``done()``."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout}s: {[m.group_state() for m in members]}")
        for m in members:
            got = m.poll(0.05)
            if sink is not None:
                sink.extend((r.topic, r.partition, r.offset) for r in got)


class _Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, list]] = []

    def on_partitions_revoked(self, partitions):
        self.calls.append(("revoked", list(partitions)))

    def on_partitions_assigned(self, partitions):
        self.calls.append(("assigned", list(partitions)))

    def on_partitions_lost(self, partitions):
        self.calls.append(("lost", list(partitions)))

    def of(self, kind: str) -> list:
        return [tp for k, ps in self.calls if k == kind for tp in ps]


def test_members_split_partitions_and_take_over_on_close(kafka_broker, shell):
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "split")
    _produce(boot, topic, 400)
    a, b, c = (_member(boot, group, shell, max_poll_records=20) for _ in range(3))
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
        gone = c.group_state()["member_id"]
        c.close(5)  # commits, then leaves the group (LeaveGroup)
        # The coordinator dropped c when it left, not when its session ran out.
        assert gone not in {m.member_id for m in _describe(boot, group).members}
        _poll_until([a, b], lambda: _stable([a, b], 4), 30, consumed)
        _poll_until([a, b], lambda: len(set(consumed)) >= 400, 30, consumed)
    finally:
        for m in (a, b, c):
            m.close(5)
    counts = Counter(consumed)
    assert set(p for _t, p, _o in counts) == {0, 1, 2, 3}
    assert len(counts) == 400  # every record at least once
    # Each rebalance was eager: the owner committed what poll() had returned before it
    # gave a partition up, and Kafka took that commit while preparing the rebalance, so
    # the next owner started exactly there (the librdkafka mock refuses such commits).
    assert sum(counts.values()) == 400, [k for k, n in counts.items() if n > 1][:10]


# A kafkawire member in a child process: commits after each batch but the last, reports
# on stdout, then stops consuming (its group thread or task keeps heartbeating) until killed.
_KILLED_MEMBER = textwrap.dedent("""
    import asyncio, json, sys, time
    from kafkawire import Consumer
    from kafkawire.aio import AsyncConsumer

    boot, group, topic, shell, hold_after = sys.argv[1:6]
    hold_after = int(hold_after)
    options = dict(bootstrap_servers=boot, group_id=group, session_timeout_ms=%(session)d,
                   heartbeat_interval_ms=%(heartbeat)d, auto_offset_reset="earliest",
                   enable_auto_commit=False, max_poll_records=5)

    seen = {}

    def say(*fields):
        print(json.dumps(fields), flush=True)

    def take(records):  # reports a poll's records; True once both partitions gave hold_after
        for r in records:
            say("consumed", r.partition, r.offset)
            seen[r.partition] = seen.get(r.partition, 0) + 1
        return len(seen) == 2 and all(n >= hold_after for n in seen.values())

    def sync_member():
        c = Consumer(**options)
        c.subscribe([topic])
        while True:
            got = c.poll(0.1)
            if take(got):
                say("holding", sorted(p for _t, p in c.assignment()))
                time.sleep(3600)  # the group thread goes on heartbeating
            if got:
                c.commit()
                say("committed", {p: c.position((t, p)) for t, p in c.assignment()})

    async def async_member():
        c = AsyncConsumer(**options)
        await c.start()
        c.subscribe([topic])
        while True:
            got = await c.poll(0.1)
            if take(got):
                say("holding", sorted(p for _t, p in c.assignment()))
                await asyncio.sleep(3600)  # the group task goes on heartbeating
            if got:
                await c.commit()
                say("committed", {p: await c.position((t, p)) for t, p in c.assignment()})

    sync_member() if shell == "sync" else asyncio.run(async_member())
""") % {"session": SESSION_MS, "heartbeat": HEARTBEAT_MS}


def test_killed_member_is_replaced_from_its_commits(kafka_broker, shell, request):
    # SIGKILL: no LeaveGroup and no last commit.  The survivor gets the dead member's
    # partitions once its session times out and reads them from its last commit on:
    # every record at least once, the ones it read but did not commit twice.
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "kill")
    _produce(boot, topic, 400)
    shell_name = request.node.callspec.params["shell"]
    survivor = _member(boot, group, shell, enable_auto_commit=False, max_poll_records=5)
    mine: list = []
    child = None
    try:
        survivor.subscribe([topic])
        _poll_until([survivor], lambda: _stable([survivor], 4), 30)
        child = subprocess.Popen([sys.executable, "-c", _KILLED_MEMBER, boot, group, topic, shell_name, "30"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.set_blocking(child.stdout.fileno(), False)
        reports: list = []
        partial = [""]  # a non-blocking read can end inside a line

        def read_child() -> None:
            *lines, partial[0] = (partial[0] + "".join(child.stdout.readlines())).split("\n")
            reports.extend(json.loads(line) for line in lines if line)

        def holding() -> bool:
            read_child()
            if child.poll() is not None:
                raise AssertionError(f"the member child exited: {child.stderr.read()}")
            return any(r[0] == "holding" for r in reports)

        _poll_until([survivor], lambda: _stable([survivor], 2) and holding(), 60, mine)
        theirs = {p for r in reports if r[0] == "holding" for p in r[1]}
        kept = {p for _t, p in survivor.assignment()}
        assert len(theirs) == 2 and not theirs & kept
        child_generation = survivor.group_state()["generation"]
        killed_at = len(mine)  # what the survivor reads from here on is the takeover
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        read_child()
        # Killed, not gone: the coordinator keeps it until its session runs out.
        assert len(_describe(boot, group).members) == 2
        _produce(boot, topic, 40)  # offsets 100-109: something to read past every commit
        _poll_until([survivor], lambda: _stable([survivor], 4), 3 * SESSION_MS / 1000, mine)
        state = survivor.group_state()
        assert state["generation"] > child_generation and state["last_rebalance_reason"]
        committed: dict[int, int] = {}
        for r in reports:
            if r[0] == "committed":
                committed.update({int(p): o for p, o in r[1].items()})
        assert set(committed) == theirs
        _poll_until([survivor], lambda: {(p, o) for _t, p, o in mine[killed_at:]} >= {
            (p, o) for p in theirs for o in range(committed[p], 110)}, 30, mine)
    finally:
        if child is not None and child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        survivor.close(5)
    read_by_child: dict[int, list[int]] = {}
    for r in reports:
        if r[0] == "consumed":
            read_by_child.setdefault(r[1], []).append(r[2])
    for p in theirs:
        after = [o for _t, q, o in mine[killed_at:] if q == p]
        # The takeover starts exactly at the dead member's last commit ...
        assert min(after) == committed[p], (p, committed[p], min(after))
    # ... which is behind what it had read (its last batch): those records are read again.
    # And nothing is lost: between them, every record was read.
    assert any(max(read_by_child[p]) >= committed[p] for p in theirs)
    everything = {(p, o) for p in range(4) for o in range(110)}
    assert {(p, o) for _t, p, o in mine} | {(p, o) for p, os_ in read_by_child.items() for o in os_} == everything


def test_committed_offsets_survive_a_restart(kafka_broker, shell):
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "restart")
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
        assert not set(rest) & set(got)  # nothing committed is read again
    finally:
        second.close(5)


def test_auto_commit_commits_only_what_poll_returned(kafka_broker):
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "auto")
    _produce(boot, topic, 400)
    c = _member(boot, group, auto_commit_interval_ms=100, max_poll_records=10)
    got: list = []
    try:
        c.subscribe([topic])
        _poll_until([c], lambda: len(got) >= 50, 30, got)
        time.sleep(0.2)
        # The auto-commit goes out at the start of this poll.
        got += [(r.topic, r.partition, r.offset) for r in c.poll(0.05, max_records=1)]
        deadline = time.monotonic() + 10
        while True:
            committed = c.committed([(topic, p) for p in range(4)])
            if any(v is not None for v in committed.values()) or time.monotonic() > deadline:
                break
            got += [(r.topic, r.partition, r.offset) for r in c.poll(0.05, max_records=1)]
        # Never ahead of what poll() had handed out when the commit was read back.
        returned: dict = {}
        for t, p, o in got:
            returned[(t, p)] = max(returned.get((t, p), -1), o + 1)
        for tp, offset in committed.items():
            if offset is not None:
                assert offset <= returned.get(tuple(tp), 0), (tp, offset, returned)
        assert any(v is not None for v in committed.values())
        got += [(r.topic, r.partition, r.offset) for r in c.poll(0.05)]
    finally:
        c.close(5)
    # close() committed everything returned so far, and nothing more.
    with _member(boot, group, enable_auto_commit=False) as check:
        final = check.committed([(topic, p) for p in range(4)])
    returned = Counter(p for _t, p, _o in got)
    assert {tp.partition: off or 0 for tp, off in final.items()} == {p: returned[p] for p in range(4)}


def test_a_member_that_stops_polling_is_expelled_and_rejoins(kafka_broker):
    # max_poll_interval_ms (KIP-62): the group thread leaves for a member that stopped
    # polling; the other member takes its partitions at once, its commit is refused, and
    # polling again rejoins.
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "expel")
    _produce(boot, topic, 40)
    slow = _member(boot, group, max_poll_interval_ms=2000, enable_auto_commit=False)
    busy = _member(boot, group, enable_auto_commit=False)
    listener = _Recorder()
    try:
        slow.subscribe([topic], listener=listener)
        _poll_until([slow], lambda: _stable([slow], 4), 30)
        busy.subscribe([topic])
        _poll_until([slow, busy], lambda: _stable([slow, busy], 4), 30)
        held = sorted(slow.assignment())
        assert len(held) == 2
        # Only busy polls, for longer than slow's max_poll_interval_ms.
        _poll_until([busy], lambda: _stable([busy], 4), 20)
        assert slow.group_state()["rejoin_needed"]
        with pytest.raises(CommitFailedError) as info:
            slow.poll(0.01)
            slow.commit({(topic, held[0][1]): 1}, timeout=5)
        assert "not a member" in str(info.value) and "poll()" in str(info.value)
        assert ("lost", held) in listener.calls
        assert "max_poll_interval_ms" in slow.group_state()["last_rebalance_reason"]
        _poll_until([slow, busy], lambda: _stable([slow, busy], 4), 30)  # polling again rejoins
    finally:
        slow.close(5)
        busy.close(5)


def test_cooperative_rebalance_moves_only_what_must_move(kafka_broker, shell):
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "coop")
    _produce(boot, topic, 40)
    la, lb = _Recorder(), _Recorder()
    a = _member(boot, group, shell, partition_assignment_strategy=["cooperative-sticky"])
    b = _member(boot, group, shell, partition_assignment_strategy=["cooperative-sticky"])
    try:
        a.subscribe([topic], listener=la)
        _poll_until([a], lambda: _stable([a], 4), 30)
        before = set(a.assignment())
        b.subscribe([topic], listener=lb)
        _poll_until([a, b], lambda: _stable([a, b], 4) and lb.calls, 40)
        assert a.group_state()["rebalance_protocol"] == "cooperative"
        assert a.group_state()["protocol"] == "cooperative-sticky"
        kept = set(a.assignment())
        assert len(kept) == 2 and kept <= before
        assert sorted(la.of("revoked")) == sorted(before - kept)  # only the two that moved
        assert set(b.assignment()) == before - kept
        assert [k for k, _ in lb.calls] == ["assigned"] * len(lb.calls)
        assert sorted(lb.of("assigned")) == sorted(before - kept)
        # b leaves: a takes b's partitions over without giving up its own.
        calls = len(la.calls)
        b.close(5)
        _poll_until([a], lambda: _stable([a], 4), 30)
        assert [(k, sorted(ps)) for k, ps in la.calls[calls:] if ps] == [("assigned", sorted(before - kept))]
    finally:
        a.close(5)
        b.close(5)


def test_static_member_rejoins_without_a_rebalance(kafka_broker, monkeypatch):
    # KIP-345: a static member that restarts within its session timeout gets its
    # partitions back; the group keeps its generation and the others notice nothing.
    # The restarting one leads the group: Kafka hands it back the leadership with
    # skip_assignment (KIP-814), and the group's assignment stays.
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "static")
    _produce(boot, topic, 40)
    assigned_by_leader: list = []
    real_assign = kafkawire.protocol.group_member.leader_assign

    def counting_assign(*args):
        assigned_by_leader.append(args[0])
        return real_assign(*args)

    monkeypatch.setattr(kafkawire.protocol.group_member, "leader_assign", counting_assign)
    other_listener = _Recorder()
    # Long enough for the restart, and no test here waits for it to run out.
    static = dict(session_timeout_ms=30000, heartbeat_interval_ms=1000)
    first = _member(boot, group, group_instance_id="restarting", **static)
    other = _member(boot, group, group_instance_id="other", **static)
    again = None
    try:
        first.subscribe([topic])
        _poll_until([first], lambda: _stable([first], 4), 30)
        other.subscribe([topic], listener=other_listener)
        _poll_until([other, first], lambda: _stable([other, first], 4), 40)
        assert first.group_state()["is_leader"]
        generation = other.group_state()["generation"]
        mine = set(first.assignment())
        first_id = first.group_state()["member_id"]
        first.close(5)  # a static member sends no LeaveGroup (KIP-345)
        described = _describe(boot, group)
        assert {m.group_instance_id for m in described.members} == {"restarting", "other"}
        calls = len(other_listener.calls)
        assignments = len(assigned_by_leader)
        again = _member(boot, group, group_instance_id="restarting", **static)
        again.subscribe([topic])
        _poll_until([other, again], lambda: _stable([other, again], 4), 40)
        state = again.group_state()
        assert set(again.assignment()) == mine
        assert state["generation"] == generation and state["member_id"] != first_id
        assert state["is_leader"]
        assert other.group_state()["generation"] == generation
        assert other_listener.calls[calls:] == []
        described = _describe(boot, group)
        assert described.state == "Stable"
        assert {m.group_instance_id: m.member_id for m in described.members}["restarting"] == state["member_id"]
        _poll_until([other, again], lambda: again.group_state()["last_heartbeat_result"] == "ok", 10)
        assert len(assigned_by_leader) == assignments  # skip_assignment: it ran no assignor
    finally:
        for m in (first, other, again):
            if m is not None:
                m.close(5)


def test_pattern_subscription_follows_new_topics(kafka_broker):
    boot, prefix, group = kafka_broker.bootstrap, unique_name("pat"), unique_name("g")
    with Admin(bootstrap_servers=boot) as admin:
        admin.create_topics([f"{prefix}-a"], num_partitions=4)
    c = _member(boot, group, metadata_max_age_ms=500)
    try:
        c.subscribe(pattern=f"{prefix}-.*")
        _poll_until([c], lambda: _stable([c], 4), 30)
        assert c.subscription() == {f"{prefix}-a"}
        with Admin(bootstrap_servers=boot) as admin:
            admin.create_topics([f"{prefix}-b"], num_partitions=4)
        _poll_until([c], lambda: _stable([c], 8), 30)
        assert {tp.topic for tp in c.assignment()} == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        c.close(5)


def test_group_state_matches_what_the_coordinator_says(kafka_broker, shell):
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "state")
    _produce(boot, topic, 8)
    a = _member(boot, group, shell, client_id="member-a")
    b = _member(boot, group, shell, client_id="member-b")
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        _poll_until([a, b], lambda: _stable([a, b], 4), 30)
        _poll_until([a, b], lambda: all(m.group_state()["last_heartbeat_result"] == "ok" for m in (a, b)), 10)
        sa, sb = a.group_state(), b.group_state()
        described = _describe(boot, group)
        assert described.state == "Stable" and described.protocol_type == "consumer"
        by_id = {m.member_id: m for m in described.members}
        assert set(by_id) == {sa["member_id"], sb["member_id"]}
        for s, client_id in ((sa, "member-a"), (sb, "member-b")):
            member = by_id[s["member_id"]]
            assert member.client_id == client_id
            assert {(t, p) for t, ps in member.assignment.items() for p in ps} == set(s["assignment"])
            assert member.subscription == [topic] and s["subscription"] == [topic]
            assert s["group_id"] == group and s["protocol"] == described.protocol == "range"
            assert s["coordinator"][0] == described.coordinator == kafka_broker[0].node_id
            assert s["rebalance_protocol"] == "eager" and s["group_instance_id"] is None
            assert s["last_heartbeat_age"] is not None and s["last_error"] is None
        assert sa["generation"] == sb["generation"] >= 1
        assert sa["leader"] == sb["leader"] and {sa["is_leader"], sb["is_leader"]} == {True, False}
        b.unsubscribe()  # leaves the group
        sb_left = b.group_state()
        assert sb_left["state"] == "unjoined" and sb_left["assignment"] == [] and sb_left["subscription"] is None
        _poll_until([a], lambda: _stable([a], 4), 30)
        sa = a.group_state()
        assert sa["generation"] > sb["generation"] and sa["is_leader"] and sa["leader"] == sa["member_id"]
        assert "rebalance" in sa["last_rebalance_reason"]
    finally:
        a.close(5)
        b.close(5)


def test_group_state_is_stable_only_with_the_assignment_taken(kafka_broker):
    # The group thread has the coordinator's SyncGroup answer before the consumer takes
    # the assignment, at its next poll: until then group_state() says "syncing", never
    # "stable" with the new generation's number beside the old generation's partitions.
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "taken")
    coop = dict(partition_assignment_strategy=["cooperative-sticky"])
    la = _Recorder()
    a, b = _member(boot, group, **coop), _member(boot, group, **coop)
    try:
        a.subscribe([topic], listener=la)
        _poll_until([a], lambda: _stable([a], 4), 30)
        first = a.group_state()["generation"]
        b.subscribe([topic])
        # a leads: it rejoins and assigns at its polls; between two of them b polls long
        # enough for a's SyncGroup to be answered.  Cooperative: a keeps its partitions
        # until it takes the new assignment, which gives two of them up.
        seen = []
        deadline = time.monotonic() + 30
        while not la.of("revoked"):
            assert time.monotonic() < deadline, a.group_state()
            a.poll(0)
            for _ in range(6):
                b.poll(0.05)
            s = a.group_state()
            seen.append(s["state"])
            if s["generation"] > first and not la.of("revoked"):
                assert s["state"] != "stable" and len(s["assignment"]) == 4, s
        assert "syncing" in seen  # the window was looked at
        _poll_until([a, b], lambda: _stable([a, b], 4), 30)
    finally:
        a.close(5)
        b.close(5)


class _OwnClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock is not time.monotonic() (as uvloop's, or a loop a test
    framework drives, may not be): the asyncio shell keeps its deadlines on the loop's."""

    def time(self) -> float:
        return super().time() + 100_000.0


def test_asyncio_member_on_a_loop_with_its_own_clock(kafka_broker):
    # The group's clocks (max_poll_interval_ms, commit deadlines) are the loop's: a member
    # that polls stays in its generation, a commit gets its full timeout, and one that
    # stops polling is still expelled after max_poll_interval_ms.
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "clock")
    _produce(boot, topic, 40)

    async def main() -> None:
        c = AsyncConsumer(bootstrap_servers=boot, group_id=group, auto_offset_reset="earliest",
                          session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                          enable_auto_commit=False, max_poll_interval_ms=3000)
        await c.start()
        try:
            c.subscribe([topic])
            got: list = []
            deadline = time.monotonic() + 30
            while len(got) < 40 or c.group_state()["state"] != "stable":
                assert time.monotonic() < deadline, c.group_state()
                got += await c.poll(0.1)
            generation = c.group_state()["generation"]
            for _ in range(10):  # a second of polling: still the same member and generation
                await c.poll(0.1)
            state = c.group_state()
            assert (state["state"], state["generation"], state["rejoin_needed"]) == ("stable", generation, False)
            await c.commit(timeout=5)
            assert await c.committed([(topic, p) for p in range(4)]) == {(topic, p): 10 for p in range(4)}
            await asyncio.sleep(3.5)  # no poll for longer than max_poll_interval_ms
            assert c.group_state()["rejoin_needed"]
            assert "max_poll_interval_ms" in c.group_state()["last_rebalance_reason"]
        finally:
            await c.close(5)

    loop = _OwnClockLoop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_commit_async_calls_back_inside_poll(kafka_broker, shell):
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "async")
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


def test_a_slow_caller_stays_in_the_group(kafka_broker):
    # Heartbeats come from the group thread: a caller busy for longer than the session
    # timeout (but within max_poll_interval_ms) keeps its partitions and generation.
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "slow")
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


def test_group_at_the_oldest_versions_kafka_serves(kafka_broker):
    # JoinGroup v0 (no rebalance timeout, no KIP-394 member id round), SyncGroup,
    # Heartbeat and LeaveGroup v0, OffsetCommit v2, OffsetFetch v1: the versions older
    # brokers speak, on a real one.
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "oldest")
    _produce(boot, topic, 40)
    a = _member(boot, group, api_version_overrides=OLDEST_VERSIONS, enable_auto_commit=False)
    b = _member(boot, group, api_version_overrides=OLDEST_VERSIONS, enable_auto_commit=False)
    got: list = []
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        _poll_until([a, b], lambda: _stable([a, b], 4) and len(set(got)) >= 40, 30, got)
        # Positions first: a rebalance late in the polls (b joining under load) can leave a
        # partition waiting for its committed offset, and commit() skips those, as Java's does.
        positions = {tp: a.position(tp) for tp in a.assignment()}
        a.commit(positions)
        assert a.committed(sorted(positions)) == positions
        b.close(5)  # LeaveGroup v0: a gets b's partitions, from b's commit (none: the start)
        _poll_until([a], lambda: _stable([a], 4), 30)
        assert a.committed(sorted(positions)) == positions
    finally:
        a.close(5)
        b.close(5)


def test_close_with_the_broker_not_answering_keeps_its_deadline(kafka_broker):
    # The broker is frozen (SIGSTOP: its connections stay open, nothing is answered), so
    # close()'s commit and LeaveGroup wait for answers that do not come: close() still
    # returns by its timeout.  The session's broker is thawed before the test ends.
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "frozen")
    _produce(boot, topic, 8)
    c = _member(boot, group)
    c.subscribe([topic])
    _poll_until([c], lambda: _stable([c], 4), 30)
    c.poll(0.2)
    pid = kafka_broker[0].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        c.close(2)
        took = time.monotonic() - start
    finally:
        os.kill(pid, signal.SIGCONT)
    assert took < 3


def test_the_coordinator_moves_on_the_mock_cluster(mock_cluster_factory, shell):
    # A fault only the mock injects on demand: the group's coordinator moves to another
    # broker.  The member's next request there is answered NOT_COORDINATOR; it finds the
    # new one and goes on in its generation; its commits land there.
    cluster = mock_cluster_factory(3)
    boot, topic, group = cluster.bootstrap, unique_name("mock"), unique_name("g")
    cluster.create_topic(topic, 4)
    _produce(boot, topic, 100)
    a = _member(boot, group, shell, api_version_overrides=MOCK_VERSIONS, enable_auto_commit=False)
    got: list = []
    try:
        a.subscribe([topic])
        _poll_until([a], lambda: _stable([a], 4) and len(set(got)) >= 100, 40, got)
        before = a.group_state()
        moved_to = next(n for n in cluster.brokers if n != before["coordinator"][0])
        cluster.coordinator_set("group", group, moved_to)
        _poll_until([a], lambda: a.group_state()["coordinator"] is not None
                    and a.group_state()["coordinator"][0] == moved_to, 20)
        a.commit()
        positions = {tp: a.position(tp) for tp in a.assignment()}
        assert a.committed(sorted(positions)) == positions == {(topic, p): 25 for p in range(4)}
        _poll_until([a], lambda: _stable([a], 4), 20)
    finally:
        a.close(5)


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_mixed_group_of_three_clients_shares_and_reads_commits(kafka_broker, groupmates, shell, assignor):
    # kafkawire in this process, confluent-kafka and kafka-python members in children,
    # all with the same assignor: disjoint assignments covering every partition, and
    # each member starts from what the others committed.
    pytest.importorskip("kafka")
    pytest.importorskip("confluent_kafka")
    boot, group = kafka_broker.bootstrap, unique_name("g")
    topic = _topic(boot, "three", partitions=6)
    _produce(boot, topic, 600, partitions=6)
    every = set(range(6))
    kw = _member(boot, group, shell, partition_assignment_strategy=[assignor], enable_auto_commit=False)
    try:
        kw.subscribe([topic])
        ck = groupmates.start("confluent", boot, topic, group, assignor, session_timeout_ms=SESSION_MS)
        kp = groupmates.start("kafka-python", boot, topic, group, assignor, session_timeout_ms=SESSION_MS)

        def settled():
            mine = {p for _t, p in kw.assignment()}
            theirs = [ck.partitions(), kp.partitions()]
            return (kw.group_state()["state"] == "stable" and not kw.group_state()["rejoin_needed"]
                    and mine and all(theirs) and sum(map(len, theirs)) + len(mine) == 6
                    and mine | theirs[0] | theirs[1] == every)

        got: list = []
        _poll_until([kw], settled, 60, got)
        mine = {p for _t, p in kw.assignment()}
        assert kw.group_state()["protocol"] == assignor
        assert sorted(map(len, (mine, ck.partitions(), kp.partitions()))) == [2, 2, 2]
        assert not mine & ck.partitions() and not mine & kp.partitions() and not ck.partitions() & kp.partitions()
        # kafkawire reads its share (from 0, or from where a peer that held a partition in
        # an earlier generation committed) and commits it; kafkawire is polled while the
        # peers finish theirs: the asyncio shell's member heartbeats only while its loop runs.
        _poll_until([kw], lambda: all(kw.position(tp) == 100 for tp in kw.assignment()), 30, got)
        kw.commit()
        every_tp = [(topic, p) for p in sorted(every)]
        # A peer commits after each batch it reads; such a commit that meets a rebalance is
        # refused, and with nothing left to read it is not made again: with the group
        # stable, each peer is asked to commit once more every 2 s.
        asked = [time.monotonic()]

        def all_committed() -> bool:
            if set(kw.committed(every_tp).values()) == {100}:
                return True
            if time.monotonic() - asked[0] > 2:
                for m in (ck, kp):
                    m.commit()
                asked[0] = time.monotonic()
            return False

        _poll_until([kw], all_committed, 30, got)
        # kafkawire committed only its own share, once: the rest is the peers' commits,
        # read back by kafkawire above; what the peers report committing agrees.
        for m in (ck, kp):
            assert {off for tp, off in m.committed().items() if tp.partition in m.partitions()} <= {100}
        marks = {m: len(m.consumed()) for m in (ck, kp)}
        events = {m: len(m.events()) for m in (ck, kp)}
    finally:
        kw.close(5)
    # ... and after kafkawire leaves, the others take its partitions from its commits.
    groupmates.wait_for(lambda: ck.partitions() | kp.partitions() == every, 30, "takeover")
    assert ck.partitions() & mine or kp.partitions() & mine
    _produce(boot, topic, 60, partitions=6)  # offsets 100-109 of every partition
    for m in (ck, kp):
        taken = m.partitions() & mine
        m.wait_for(lambda: {(p, o) for p in taken for o in range(100, 110)} <= set(m.consumed()), 20,
                   "the new records of the partitions it took over")
        for p in taken:
            assert min(o for q, o in m.consumed()[marks[m]:] if q == p) == 100  # kafkawire's commit
        if assignor == "cooperative-sticky":
            # Cooperative: the peers kept what they had and only gained kafkawire's share.
            assert not [e for e in m.events()[events[m]:]
                        if e["event"] in ("revoked", "lost") and e["partitions"]], m.describe()
