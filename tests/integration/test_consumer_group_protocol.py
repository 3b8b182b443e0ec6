"""The KIP-848 membership machine (kafkawire.protocol.consumer_group) on Apache Kafka 4,
driven over raw sockets by the small blocking driver below (the shells' drivers come
later): joins, the coordinator's assignments by topic id, an incremental rebalance with
revocation and commits carrying the member epoch, a regex subscription, a fence, and a
static member's leave with epoch -2.  ConsumerGroupDescribe gives the coordinator's view
to compare with.

The session's single-node Kafka (``kafka_broker``) keeps its defaults: a heartbeat
every 5 s, so a rebalance reaches an existing member within about that long.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import pytest
from rawsocket import RawConnection

from kafkawire.protocol import apis
from kafkawire.protocol.consumer_group import (
    STABLE,
    ConsumerGroupMembership,
    Failed,
    Lost,
    MetadataNeeded,
    Outgoing,
    Reconcile,
)
from topics import unique_name

pytestmark = pytest.mark.broker

CGD = apis.get("ConsumerGroupDescribe")
TIMEOUT = 40.0


class Member:
    """One machine and the sockets it talks through; acts on its events the way a
    consumer would (a commit of what it gives up, then reconciled())."""

    def __init__(self, port: int, group: str, **options: Any):
        self.port = port
        self.m = ConsumerGroupMembership(group, request_timeout_ms=15000, **options)
        self.owned: set[tuple[str, int]] = set()
        self.lost = 0
        self.commits: list[dict] = []
        self._conns: dict[int, RawConnection] = {}

    def connection(self, port: int) -> RawConnection:
        rc = self._conns.get(port)
        if rc is None:
            rc = self._conns[port] = RawConnection(port, timeout=15.0)
            rc.negotiate()
        return rc

    def send(self, out: Outgoing) -> Any:
        port = self.m.coordinator[2] if out.to_coordinator else self.port
        return self.connection(port).request(out.api, out.request).response

    def step(self) -> None:
        for out in self.m.poll(time.monotonic()):
            resp = self.send(out)
            result = self.m.on_response(out, resp, time.monotonic())
            if out.kind == "commit":
                self.commits.append(result)
        for ev in self.m.events():
            if isinstance(ev, Failed):
                raise ev.error
            if isinstance(ev, Lost):
                self.owned.clear()
                self.lost += 1
                self.m.join(time.monotonic(), ev.reason)
            elif isinstance(ev, MetadataNeeded):
                self.m.set_topic_names(topic_names(self.connection(self.port)))
            elif isinstance(ev, Reconcile):
                assert set(ev.revoke) <= self.owned and not set(ev.assign) & self.owned
                if ev.revoke:
                    # What a consumer read of them: it goes out ahead of the acknowledgement.
                    self.m.commit({tp: (100 + tp[1], "") for tp in ev.revoke})
                self.owned -= set(ev.revoke)
                self.owned |= set(ev.assign)
                assert sorted(self.owned) == ev.assignment
                self.m.reconciled(ev)
        self.m.poll_called(time.monotonic())

    def leave(self, **kw: Any) -> int:
        out = self.m.leave(**kw)
        assert out is not None
        epoch = out.request.member_epoch
        assert self.m.on_response(out, self.send(out), time.monotonic()) is None
        self.owned.clear()
        return epoch

    def close(self) -> None:
        for rc in self._conns.values():
            rc.close()


def topic_names(rc: RawConnection) -> dict[uuid.UUID, str]:
    md = apis.get("Metadata")
    resp = rc.request(md, md.Request(topics=None, allow_auto_topic_creation=False)).response
    return {t.topic_id: t.name for t in resp.topics if t.error_code == 0}


def create_topic(port: int, name: str, partitions: int) -> None:
    ct = apis.get("CreateTopics")
    topic = ct.Request.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    with RawConnection(port, timeout=15.0) as rc:
        rc.negotiate()
        resp = rc.request(ct, ct.Request(topics=[topic], timeout_ms=10000)).response
    assert [(t.name, t.error_code) for t in resp.topics] == [(name, 0)]


def run(members: list[Member], until: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for mb in members:
            mb.step()
        if until():
            return
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s: " + "; ".join(
            f"{mb.m.member_id} {mb.m.state} epoch {mb.m.member_epoch} owns {sorted(mb.owned)}" for mb in members)
        time.sleep(min(0.05, *(mb.m.next_wakeup(time.monotonic()) for mb in members)))


def settled(*members: Member) -> Callable[[], bool]:
    return lambda: all(mb.m.state == STABLE and not mb.m.snapshot(0)["reconciling"] for mb in members)


def describe(port: int, group: str) -> Any:
    with RawConnection(port, timeout=15.0) as rc:
        rc.negotiate()
        resp = rc.request(CGD, CGD.Request(group_ids=[group])).response
    (g,) = resp.groups
    assert g.error_code == 0, g
    return g


@pytest.fixture
def port(kafka_broker) -> int:
    return kafka_broker[0].ports["PLAINTEXT"]


@pytest.fixture
def members():
    made: list[Member] = []
    yield made
    for mb in made:
        mb.close()


def test_two_members_share_a_topic_through_an_incremental_rebalance(port, members):
    topic, group = unique_name("cgp"), unique_name("cgp-group")
    create_topic(port, topic, 4)
    all_tps = {(topic, p) for p in range(4)}
    m1 = Member(port, group, server_assignor="uniform")
    m2 = Member(port, group, server_assignor="uniform")
    members += [m1, m2]
    for mb in (m1, m2):
        mb.m.subscribe([topic])

    m1.m.join(time.monotonic())
    run([m1], lambda: m1.owned == all_tps and settled(m1)(), "m1 takes the whole topic")
    assert m1.m.member_epoch >= 1 and m1.m.generation == m1.m.member_epoch

    m2.m.join(time.monotonic())
    run([m1, m2], lambda: len(m1.owned) == 2 and len(m2.owned) == 2 and settled(m1, m2)(),
        "the topic split between m1 and m2")
    assert m1.owned | m2.owned == all_tps
    # m1 committed what it gave up, with its member epoch, before acknowledging.
    revoked = all_tps - m1.owned
    assert {tp: err for c in m1.commits for tp, err in c.items()} == {tp: None for tp in revoked}

    g = describe(port, group)
    assert (g.group_state, g.assignor_name) == ("Stable", "uniform")
    seen = {mb.member_id: (mb.member_epoch, {(t.topic_name, p) for t in mb.assignment.topic_partitions
                                              for p in t.partitions}) for mb in g.members}
    assert seen == {m1.m.member_id: (m1.m.member_epoch, m1.owned), m2.m.member_id: (m2.m.member_epoch, m2.owned)}

    # m2 reads what m1 committed for the partitions it took over.
    m2.m.fetch_offsets(sorted(m2.owned))
    (out,) = [o for o in m2.m.poll(time.monotonic()) if o.kind == "fetch_offsets"]
    got = m2.m.on_response(out, m2.send(out), time.monotonic())
    assert {tp: off for tp, (off, _meta) in got.items()} == {tp: 100 + tp[1] for tp in m2.owned}

    assert m1.leave() == -1
    run([m2], lambda: m2.owned == all_tps and settled(m2)(), "m2 takes everything back")
    assert m2.leave() == -1


def test_a_regex_subscription_is_matched_by_the_broker(port, members):
    prefix = unique_name("cgp-rx")
    t1, t2 = f"{prefix}-one", f"{prefix}-two"
    create_topic(port, t1, 1)
    create_topic(port, t2, 2)
    mb = Member(port, unique_name("cgp-rx-group"))
    members.append(mb)
    mb.m.subscribe(regex=f"{prefix}-.*")  # names unknown to the member: MetadataNeeded
    mb.m.join(time.monotonic())
    run([mb], lambda: mb.owned == {(t1, 0), (t2, 0), (t2, 1)} and settled(mb)(), "the regex's topics assigned")
    assert describe(port, mb.m.group_id).members[0].subscribed_topic_regex == f"{prefix}-.*"
    mb.leave()


def test_a_fenced_member_loses_its_partitions_and_rejoins_with_its_member_id(port, members):
    topic = unique_name("cgp-fence")
    create_topic(port, topic, 2)
    mb = Member(port, unique_name("cgp-fence-group"))
    members.append(mb)
    mb.m.subscribe([topic])
    mb.m.join(time.monotonic())
    run([mb], lambda: len(mb.owned) == 2 and settled(mb)(), "joined")
    member_id, epoch = mb.m.member_id, mb.m.member_epoch
    # An epoch the coordinator never gave: it answers FENCED_MEMBER_EPOCH.
    mb.m._set_epoch(epoch + 7)
    mb.m.subscribe([topic])  # a heartbeat at once
    run([mb], lambda: mb.lost == 1 and len(mb.owned) == 2 and settled(mb)(), "fenced, then joined again")
    assert "FENCED_MEMBER_EPOCH" in str(mb.m.last_error)
    # Kafka 4 keeps a fenced member that joins again with epoch 0 (apache/kafka#21305):
    # the same member, its epoch as it was.
    assert mb.m.member_id == member_id and mb.m.member_epoch >= 1
    mb.leave()


def test_a_static_member_leaving_with_minus_2_gets_its_partitions_back(port, members):
    topic, group = unique_name("cgp-static"), unique_name("cgp-static-group")
    create_topic(port, topic, 2)
    first = Member(port, group, group_instance_id="host-1")
    other = Member(port, group)
    members += [first, other]
    for mb in (first, other):
        mb.m.subscribe([topic])
    first.m.join(time.monotonic())
    run([first], lambda: len(first.owned) == 2 and settled(first)(), "the static member joined")
    other.m.join(time.monotonic())
    run([first, other], lambda: len(first.owned) == 1 and len(other.owned) == 1 and settled(first, other)(),
        "split")
    mine = set(first.owned)
    assert first.leave() == -2  # a restart is coming: the coordinator keeps host-1's partition

    # The "restarted" process: a new member id, the same instance id.
    again = Member(port, group, group_instance_id="host-1")
    members.append(again)
    again.m.subscribe([topic])
    again.m.join(time.monotonic())
    run([again, other], lambda: again.owned == mine and settled(again, other)(), "host-1 back")
    assert other.owned == {(topic, 0), (topic, 1)} - mine and other.lost == 0
    assert again.leave(for_good=True) == -1
