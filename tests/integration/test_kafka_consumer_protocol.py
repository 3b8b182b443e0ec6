"""KIP-848's consumer group protocol (``group_protocol="consumer"``) on Apache Kafka 4, in
both shells: the coordinator assigns, members reconcile incrementally, commits carry the
member epoch, a killed member's partitions move after its session, a regex subscription
is matched by the broker, a static member gets its partitions back, both of Kafka's
server assignors work, and kafkawire members share a group with confluent-kafka members
on the classic protocol.  Kafka 3.9 refuses the protocol: the consumer says to use classic.

The tests share one Kafka node of their own whose group.consumer.* settings are short
(Kafka's defaults: a heartbeat every 5 s, a session of 45 s and no shorter, a regex
matched again at most every 10 minutes, here 10 s), so a rebalance takes about a second here.
Its group.consumer.migration.policy is Kafka 4's default, ``bidirectional``: nothing had
to be set for classic members to join a consumer group (the mixed test checks it).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from typing import Any

import pytest
from groupmates import groupmates  # noqa: F401 - the fixture
from rawsocket import RawConnection
from settle import until_known
from shells import shell  # noqa: F401 - the fixture
from test_groups import _poll_until, _Recorder
from topics import create_topic, unique_name

from kafkawire import Admin, Producer
from kafkawire.errors import ConfigError
from kafkawire.errors import UnsupportedVersionError
from kafkawire.protocol import apis
from kafkawire.testing import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.groups, pytest.mark.kafka]

SESSION_MS = 3000
BROKER_CONFIG = {
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": 1000,
    # Internal: how often at most the coordinator matches a group's regex subscriptions
    # against the topics again (10 minutes by default; 10 s is its minimum).
    "group.consumer.regex.refresh.interval.ms": 10000,
}
CGD = apis.get("ConsumerGroupDescribe")


@pytest.fixture(scope="module")
def kafka():
    with KafkaCluster(1, broker_config=BROKER_CONFIG) as cluster:
        yield cluster


def _member(boot: str, group: str, shell: Any, **options: Any) -> Any:
    opts = dict(bootstrap_servers=boot, group_id=group, group_protocol="consumer",
                auto_offset_reset="earliest")
    opts.update(options)
    return shell.Consumer(**opts)


def _produce(boot: str, topic: str, n: int, partitions: int, start: int = 0) -> None:
    with Producer(bootstrap_servers=boot, linger_ms=5) as p:
        for i in range(start, start + n):
            p.send(topic, b"%d" % i, partition=i % partitions)
        p.flush(20)


def _settled(members: list, partitions: int) -> bool:
    states = [m.group_state() for m in members]
    owned = [tp for s in states for tp in s["assignment"]]
    return (all(s["state"] == "stable" and not s["reconciling"] and s["assignment"] for s in states)
            and len(owned) == partitions and len(set(owned)) == partitions
            and all(s["target_assignment"] == s["assignment"] for s in states))


def _describe(kafka: KafkaCluster, group: str) -> Any:
    with RawConnection(kafka[0].ports["PLAINTEXT"], timeout=15.0) as rc:
        rc.negotiate()
        (g,) = rc.request(CGD, CGD.Request(group_ids=[group])).response.groups
    assert g.error_code == 0, g
    return g


def test_options_the_coordinator_owns_are_refused(shell):
    # Not a broker's answer: the options are refused before anything is sent, as Java does.
    boot = "127.0.0.1:9"
    for option in ({"session_timeout_ms": 10000}, {"heartbeat.interval.ms": 1000},
                   {"partition_assignment_strategy": ["range"]}):
        with pytest.raises(ConfigError, match="group_protocol='consumer'.*Remove it"):
            shell.Consumer(bootstrap_servers=boot, group_id="g", group_protocol="consumer", **option)
    with pytest.raises(ConfigError, match="group_remote_assignor.*set group_protocol='consumer'"):
        shell.Consumer(bootstrap_servers=boot, group_id="g", group_remote_assignor="uniform")
    with pytest.raises(ConfigError, match="OffsetCommit v9"):
        shell.Consumer(bootstrap_servers=boot, group_id="g", group_protocol="consumer",
                       api_version_overrides={"OffsetCommit": 8})


def test_a_third_member_takes_some_partitions_and_the_others_keep_the_rest(kafka, shell):
    # Incremental (KIP-848): the third member's share is revoked from the other two, who
    # keep the rest without losing anything; every record is read exactly once, since a
    # revoked partition's position is committed (and nothing more handed out) before the
    # coordinator hands it over.
    boot, group = kafka.bootstrap, unique_name("cp")
    topic = create_topic(boot, "cp-incr", 6)
    _produce(boot, topic, 600, 6)
    listeners = [_Recorder() for _ in range(3)]
    a, b, c = (_member(boot, group, shell, max_poll_records=10, auto_commit_interval_ms=200) for _ in range(3))
    got: list = []
    try:
        a.subscribe([topic], listener=listeners[0])
        _poll_until([a], lambda: _settled([a], 6), 20, got)
        b.subscribe([topic], listener=listeners[1])
        _poll_until([a, b], lambda: _settled([a, b], 6), 20, got)
        before = {id(m): set(m.assignment()) for m in (a, b)}
        assert sorted(len(s) for s in before.values()) == [3, 3]
        marks = [len(rec.calls) for rec in listeners]
        c.subscribe([topic], listener=listeners[2])
        _poll_until([a, b, c], lambda: _settled([a, b, c], 6), 20, got)
        after = {id(m): set(m.assignment()) for m in (a, b, c)}
        assert sorted(map(len, after.values())) == [2, 2, 2]
        for m, rec, mark in zip((a, b), listeners, marks):
            calls = rec.calls[mark:]
            assert after[id(m)] <= before[id(m)]  # kept what it had, minus c's share
            assert [k for k, _ in calls] == ["revoked", "assigned"] * (len(calls) // 2)
            assert {tp for k, ps in calls if k == "revoked" for tp in ps} == before[id(m)] - after[id(m)]
            assert not rec.of("lost") and not [ps for k, ps in calls if k == "assigned" and ps]
        # c may get its share in steps, as each owner releases its part.
        assert {k for k, _ in listeners[2].calls} == {"assigned"}
        assert set(listeners[2].of("assigned")) == after[id(c)]
        s = c.group_state()
        assert (s["group_protocol"], s["rebalance_protocol"]) == ("consumer", "cooperative")
        assert s["member_epoch"] == s["generation"] >= 1 and s["subscription"] == [topic]
        _produce(boot, topic, 60, 6, start=600)
        _poll_until([a, b, c], lambda: len(set(got)) >= 660, 20, got)
    finally:
        for m in (a, b, c):
            m.close(5)
    counts = Counter(got)
    assert len(counts) == 660
    assert sum(counts.values()) == 660, [k for k, n in counts.items() if n > 1][:10]


def test_commits_survive_and_the_next_member_starts_there(kafka, shell):
    boot, group = kafka.bootstrap, unique_name("cp")
    topic = create_topic(boot, "cp-commit", 4)
    _produce(boot, topic, 200, 4)
    first = _member(boot, group, shell, enable_auto_commit=False, max_poll_records=25)
    got: list = []
    calls: list = []
    try:
        first.subscribe([topic])
        _poll_until([first], lambda: len(set(got)) >= 100, 20, got)
        positions = {tp: first.position(tp) for tp in first.assignment()}
        first.commit_async(callback=lambda offsets, exc: calls.append((dict(offsets), exc)))
        _poll_until([first], lambda: calls, 10)
        assert calls == [(positions, None)]
        assert first.committed(list(positions)) == positions
        epoch = first.group_state()["member_epoch"]
    finally:
        first.close(5)  # leaves the group: epoch -1
    g = _describe(kafka, group)
    assert (g.group_state, list(g.members)) == ("Empty", [])  # gone now, not after its session
    _produce(boot, topic, 40, 4, start=200)  # something past every commit
    second = _member(boot, group, shell, enable_auto_commit=False)
    rest: list = []
    try:
        second.subscribe([topic])
        _poll_until([second], lambda: len(set(got)) + len(set(rest)) >= 240, 20, rest)
        assert second.group_state()["member_epoch"] > epoch  # the group went on
        for tp, offset in positions.items():
            assert min(o for t, p, o in rest if (t, p) == tp) == offset
        assert not set(rest) & set(got)  # nothing committed read again
        assert len(set(rest) | set(got)) == 240
    finally:
        second.close(5)


# A kafkawire member in a child process: commits after each poll and reports where, then,
# once it has read ``hold_after`` records, stops polling (its group thread or task goes on
# heartbeating) until it is killed.
_KILLED_MEMBER = textwrap.dedent("""
    import asyncio, json, sys
    from kafkawire import Consumer
    from kafkawire.aio import AsyncConsumer

    boot, group, topic, shell, hold_after = sys.argv[1:6]
    options = dict(bootstrap_servers=boot, group_id=group, group_protocol="consumer",
                   auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=5)

    def say(*fields):
        print(json.dumps(fields), flush=True)

    async def main():
        if shell == "sync":
            c = Consumer(**options)
            poll, commit = (lambda: asyncio.sleep(0, c.poll(0.1))), (lambda: asyncio.sleep(0, c.commit()))
        else:
            c = AsyncConsumer(**options)
            await c.start()
            poll, commit = (lambda: c.poll(0.1)), c.commit
        c.subscribe([topic])
        read = 0
        while read < int(hold_after):
            got = await poll()
            if got:
                await commit()
                read += len(got)
                say("committed", {p: c._assigned[(t, p)].position for t, p in c.assignment()})
        say("holding", sorted(p for _t, p in c.assignment()), c.group_state()["member_id"])
        await asyncio.sleep(3600)  # heartbeats go on until the SIGKILL

    asyncio.run(main())
""")


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(kafka, shell, request):
    # SIGKILL: no leave, no last commit.  The coordinator keeps the dead member for its
    # session (3 s here), then the survivor gets its partitions and reads them from the
    # dead member's commits on.
    boot, group = kafka.bootstrap, unique_name("cp")
    topic = create_topic(boot, "cp-kill", 4)
    _produce(boot, topic, 200, 4)  # 50 a partition
    survivor = _member(boot, group, shell, enable_auto_commit=False)
    child = None
    reports: list = []
    mine: list = []
    try:
        survivor.subscribe([topic])
        _poll_until([survivor], lambda: _settled([survivor], 4), 20)
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED_MEMBER, boot, group, topic,
             request.node.callspec.params["shell"], "40"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.set_blocking(child.stdout.fileno(), False)

        def holding() -> bool:
            reports.extend(json.loads(line) for line in child.stdout.readlines())
            assert child.poll() is None, child.stderr.read()
            return any(r[0] == "holding" for r in reports)

        _poll_until([survivor], lambda: holding() and len(survivor.assignment()) == 2, 30, mine)
        ((_, theirs, dead_id),) = [r for r in reports if r[0] == "holding"]
        committed = {int(p): o for r in reports if r[0] == "committed" for p, o in r[1].items()}
        assert sorted(committed) == sorted(theirs)
        assert not {(topic, p) for p in theirs} & set(survivor.assignment())
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        killed_at = time.monotonic()
        mark = len(mine)
        assert dead_id in {m.member_id for m in _describe(kafka, group).members}  # not gone yet
        _poll_until([survivor], lambda: len(survivor.assignment()) == 4, 3 * SESSION_MS / 1000, mine)
        took = time.monotonic() - killed_at
        assert SESSION_MS / 1000 - 1 <= took, took  # the coordinator waited for the session

        def taken_over() -> list:
            return [(p, o) for _t, p, o in mine[mark:] if p in theirs]

        _poll_until([survivor], lambda: len(taken_over()) >= sum(50 - committed[p] for p in theirs), 20, mine)
    finally:
        if child is not None and child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        survivor.close(5)
    # The takeover starts exactly at the dead member's last commit, and reads on from there.
    assert sorted(taken_over()) == [(p, o) for p in sorted(theirs) for o in range(committed[p], 50)]


def test_a_regex_subscription_picks_up_a_new_matching_topic(kafka, shell):
    # The coordinator matches the regex against the topics its metadata has: the first
    # topic must be there before the member joins (else the first match misses it), and a
    # topic made later is matched at the group's next refresh, up to 10 s on here.
    boot, group, prefix = kafka.bootstrap, unique_name("cp"), unique_name("cp-rx")
    first = create_topic(boot, f"{prefix}-a", 2)
    with Admin(bootstrap_servers=boot) as admin:
        until_known(admin, first, 2)
    c = _member(boot, group, shell)
    got: list = []
    try:
        with pytest.raises(ValueError, match="RE2/J.*as a string"):
            c.subscribe(pattern=re.compile(f"{prefix}-.*"))
        c.subscribe(pattern=f"{re.escape(prefix)}-.*")
        _poll_until([c], lambda: _settled([c], 2), 20)
        assert c.group_state()["subscribed_regex"] == f"{re.escape(prefix)}-.*"
        second = create_topic(boot, f"{prefix}-b", 3)
        create_topic(boot, f"other-{prefix}", 1)  # no match: the regex must match the whole name
        _produce(boot, second, 30, 3)
        _poll_until([c], lambda: _settled([c], 5) and len(set(got)) >= 30, 20, got)
        assert {t for t, _p in c.assignment()} == {first, second} == c.subscription()
        assert set(got) == {(second, i % 3, i // 3) for i in range(30)}
    finally:
        c.close(5)


def test_a_static_member_gets_its_partitions_back(kafka, shell):
    # Closing a static member sends epoch -2: the coordinator keeps its partitions for it
    # until its session ends; a restart with the same group_instance_id gets them back
    # and the other member is not disturbed.
    boot, group = kafka.bootstrap, unique_name("cp")
    topic = create_topic(boot, "cp-static", 4)
    other_calls = _Recorder()
    static = _member(boot, group, shell, group_instance_id="host-1")
    other = _member(boot, group, shell)
    again = None
    try:
        static.subscribe([topic])
        other.subscribe([topic], listener=other_calls)
        _poll_until([static, other], lambda: _settled([static, other], 4), 20)
        mine = set(static.assignment())
        static.close(5)
        # Epoch -2: the coordinator keeps host-1 (and its partitions) for its session.
        assert "host-1" in {m.instance_id for m in _describe(kafka, group).members}
        seen = len(other_calls.calls)
        again = _member(boot, group, shell, group_instance_id="host-1")
        again.subscribe([topic])
        _poll_until([again, other], lambda: set(again.assignment()) == mine and _settled([again, other], 4), 20)
        assert other_calls.calls[seen:] == []  # nothing revoked, lost or assigned meanwhile
        assert again.group_state()["group_instance_id"] == "host-1"
    finally:
        for m in (static, other, again):
            if m is not None:
                m.close(5)


def test_range_and_uniform_server_assignors(kafka, shell):
    # Two topics of 4 partitions, two members: "range" gives each member the same
    # partition numbers of both topics (co-partitioned), "uniform" spreads them evenly.
    boot = kafka.bootstrap
    topics = [create_topic(boot, "cp-assign", 4) for _ in range(2)]
    for assignor in ("range", "uniform"):
        group = unique_name(f"cp-{assignor}")
        a, b = (_member(boot, group, shell, group_remote_assignor=assignor) for _ in range(2))
        try:
            a.subscribe(topics)
            b.subscribe(topics)
            _poll_until([a, b], lambda: _settled([a, b], 8), 20)
            assert a.group_state()["server_assignor"] == assignor
            assert _describe(kafka, group).assignor_name == assignor
            for m in (a, b):
                by_topic = [{p for t, p in m.assignment() if t == topic} for topic in topics]
                assert sum(map(len, by_topic)) == 4
                if assignor == "range":
                    assert by_topic[0] == by_topic[1] and len(by_topic[0]) == 2
        finally:
            a.close(5)
            b.close(5)


def test_a_mixed_group_with_classic_confluent_members(kafka, shell, groupmates):
    # A confluent-kafka member on the classic protocol starts the group (a classic group);
    # a kafkawire member on the consumer protocol joins, which makes it a consumer group
    # (Kafka's online upgrade, allowed by group.consumer.migration.policy=bidirectional,
    # Kafka 4's default); another classic member and another kafkawire one join it.  Every
    # record is read once across the four.
    pytest.importorskip("confluent_kafka")
    boot, group = kafka.bootstrap, unique_name("cp-mixed")
    with Admin(bootstrap_servers=boot) as admin:
        ((_, entries),) = admin.describe_configs([("broker", str(kafka[0].node_id))],
                                                 keys=["group.consumer.migration.policy"]).items()
    assert entries["group.consumer.migration.policy"].value == "bidirectional"
    topic = create_topic(boot, "cp-mixed", 8)
    _produce(boot, topic, 400, 8)
    every = {(topic, p) for p in range(8)}
    got: list = []
    ck1 = groupmates.start("confluent", boot, topic, group, "range", name="ck1")
    ck1.wait_partitions(set(range(8)), 30)
    a = _member(boot, group, shell, max_poll_records=20, auto_commit_interval_ms=200)
    b = _member(boot, group, shell, max_poll_records=20, auto_commit_interval_ms=200)
    try:
        a.subscribe([topic])
        _poll_until([a], lambda: a.assignment() and ck1.assignment(), 30, got)
        ck2 = groupmates.start("confluent", boot, topic, group, "range", name="ck2")
        b.subscribe([topic])

        def settled() -> bool:
            mine = [set(a.assignment()), set(b.assignment()), set(ck1.assignment()), set(ck2.assignment())]
            return (all(mine) and sum(map(len, mine)) == 8 and set().union(*mine) == every
                    and _settled([a, b], sum(map(len, mine[:2])))
                    and _describe(kafka, group).group_state == "Stable")

        _poll_until([a, b], settled, 40, got)
        g = _describe(kafka, group)
        assert sorted(m.member_type for m in g.members) == [0, 0, 1, 1]  # classic, consumer
        _produce(boot, topic, 400, 8, start=400)

        def all_read() -> bool:
            theirs = [(t, p, o) for m in (ck1, ck2) for t, p, o, _v in m.consumed_records()]
            return len(set(theirs) | set(got)) >= 800

        _poll_until([a, b], all_read, 30, got)
        theirs = Counter((t, p, o) for m in (ck1, ck2) for t, p, o, _v in m.consumed_records())
        assert not [e for m in (ck1, ck2) for e in m.errors()]
    finally:
        a.close(5)
        b.close(5)
    counts = Counter(got) + theirs
    assert len(counts) == 800
    assert sum(counts.values()) == 800, sorted(k for k, n in counts.items() if n > 1)[:10]


def test_kafka_3_9_refuses_the_consumer_protocol_at_once(kafka39_broker, shell):
    # Kafka 3.9 lists ConsumerGroupHeartbeat v0 but answers it UNSUPPORTED_VERSION (the
    # protocol is off there); a regex subscription needs v1 and is refused before sending.
    boot = kafka39_broker.bootstrap
    topic = create_topic(boot, "cp-39", 1)
    for subscribe, says in (({"topics": [topic]}, "use group_protocol='classic'"),
                            ({"pattern": "cp-39-.*"}, "ConsumerGroupHeartbeat v1.*offers v0-v0")):
        c = _member(boot, unique_name("cp"), shell)
        try:
            c.subscribe(**subscribe)
            start = time.monotonic()
            with pytest.raises(UnsupportedVersionError, match=says) as info:
                while time.monotonic() - start < 15:
                    c.poll(0.1)
            assert time.monotonic() - start < 5
            assert info.value.code == 35 and not info.value.retriable
            assert c.group_state()["state"] == "unjoined"
            assert c.poll(0.1) == []  # out of the group for good: no retries
        finally:
            c.close(5)
