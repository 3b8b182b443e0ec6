"""Describing KIP-848 consumer groups on Apache Kafka 4: ``describe_groups`` asks
ConsumerGroupDescribe for a group the broker runs with the consumer protocol and
DescribeGroups for a classic one (each answers GROUP_ID_NOT_FOUND for the other's), in
both shells and through ``kafkawire groups describe``, with confluent-kafka's
``describe_consumer_groups`` as an independent view of the same group."""

from __future__ import annotations

import json
import time
from typing import Any

import confluent_kafka.admin as ck_admin
import pytest

from kafkawire.cli import main
from kafkawire.client.admin import NewTopic
from kafkawire.client.consumer import Consumer, TopicPartition
from settle import until_known
from shells import make_admin  # noqa: F401 - the fixture
from topics import unique_name


pytestmark = [pytest.mark.broker, pytest.mark.groups]

TIMEOUT = 30.0


class KIP848Group:
    """Two live group_protocol="consumer" members of one group on a 4-partition topic
    (the second subscribed by an RE2/J pattern), polled until the coordinator has shared
    the partitions out and both hold their share; and a classic group's one member."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.topic, self.group, self.classic = unique_name("cgd"), unique_name("g848"), unique_name("gcls")
        from kafkawire.client.admin import Admin

        with Admin(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(self.topic, 4, 1)], timeout=TIMEOUT)
            until_known(admin, self.topic, 4)
        common = dict(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        self.members = [Consumer(group_id=self.group, group_protocol="consumer", client_id=f"kw848-{i}", **common)
                        for i in range(2)]
        self.classic_member = Consumer(group_id=self.classic, client_id="kw-classic", **common)
        self.members[0].subscribe([self.topic])
        self.members[1].subscribe(pattern=self.topic)
        self.classic_member.subscribe([self.topic])
        everyone = [*self.members, self.classic_member]
        deadline = time.monotonic() + TIMEOUT
        while not (all(m.assignment() for m in everyone)
                   and sum(len(m.assignment()) for m in self.members) == 4
                   and all(m.group_state()["state"] == "stable" for m in everyone)):
            assert time.monotonic() < deadline, [m.group_state() for m in everyone]
            for m in everyone:
                m.poll(timeout=0.1)

    def close(self) -> None:
        for m in [*self.members, self.classic_member]:
            m.close()


@pytest.fixture
def live(kafka_broker):
    g = KIP848Group(kafka_broker.bootstrap)
    try:
        yield g
    finally:
        g.close()


def _by_client(members: list[Any]) -> dict[str, Any]:
    return {m.client_id: m for m in members}


def test_describe_groups_gives_a_kip848_groups_members_epochs_and_assignments(live, make_admin):
    unknown = unique_name("g-none")
    with make_admin(bootstrap_servers=live.bootstrap) as admin:
        got = admin.describe_groups([live.group, live.classic, unknown], timeout=TIMEOUT)
        # Asked again, each group goes first to the API that described it last.
        again = admin.describe_groups([live.classic, live.group], timeout=TIMEOUT)
    d = got[live.group]
    assert (d.group_type, d.state, d.protocol_type, d.protocol) == ("consumer", "Stable", "consumer", "uniform")
    assert d.group_epoch >= 1 and d.assignment_epoch == d.group_epoch
    assert d.coordinator == 1
    described = _by_client(d.members)
    assert sorted(described) == ["kw848-0", "kw848-1"]
    for i, consumer in enumerate(live.members):
        m, mine = described[f"kw848-{i}"], consumer.group_state()
        assert m.member_id == mine["member_id"] and m.member_epoch == mine["member_epoch"] >= 1
        assert {TopicPartition(live.topic, p) for p in m.assignment[live.topic]} == consumer.assignment()
        assert m.target_assignment == m.assignment  # reconciled: nothing on its way
        assert m.subscription == ([live.topic] if i == 0 else [])
        assert m.subscribed_topic_regex == (None if i == 0 else live.topic)
        assert (m.member_type, m.group_instance_id, m.rack_id) == ("consumer", None, None)
        assert m.host.lstrip("/") == "127.0.0.1" and m.raw_assignment == m.raw_metadata == b""
    assert sorted(p for m in d.members for p in m.assignment[live.topic]) == [0, 1, 2, 3]

    c = got[live.classic]
    assert (c.group_type, c.state, c.protocol_type, c.protocol) == ("classic", "Stable", "consumer", "range")
    (cm,) = c.members
    assert cm.client_id == "kw-classic" and cm.member_epoch is None and cm.target_assignment is None
    assert {TopicPartition(live.topic, p) for p in cm.assignment[live.topic]} == live.classic_member.assignment()

    u = got[unknown]
    assert (u.group_type, u.state, u.members) == (None, "Dead", [])
    assert again == {live.classic: c, live.group: d}

    # confluent-kafka (librdkafka 2.16) describes the same members with the same assignments.
    ck = ck_admin.AdminClient({"bootstrap.servers": live.bootstrap, "log_level": 3})  # held: its futures need it
    theirs = ck.describe_consumer_groups([live.group], request_timeout=TIMEOUT)[live.group].result(TIMEOUT)
    assert {x.member_id: (x.client_id, sorted(tp.partition for tp in x.assignment.topic_partitions),
                          sorted(tp.partition for tp in x.target_assignment.topic_partitions))
            for x in theirs.members} == {m.member_id: (m.client_id, m.assignment[live.topic],
                                                       m.target_assignment[live.topic]) for m in d.members}
    assert str(theirs.type).endswith("CONSUMER") and theirs.partition_assignor == d.protocol


def test_cli_groups_describe_shows_a_kip848_group(live, capsys):
    assert main(["groups", "describe", "-b", live.bootstrap, live.group]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert header.startswith(f"group {live.group}  state Stable  type consumer (KIP-848)  assignor uniform  group epoch ")
    assert "Dead" not in out
    table = out.split("\n\n")[1].splitlines()
    assert table[0].split() == ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "SUBSCRIPTION",
                                "ASSIGNMENT", "TARGET-ASSIGNMENT"]
    rows = {row.split()[2]: row.split() for row in table[1:]}
    assert sorted(rows) == ["kw848-0", "kw848-1"]
    for i, consumer in enumerate(live.members):
        mine = consumer.group_state()
        parts = "+".join(str(tp.partition) for tp in sorted(consumer.assignment()))
        assert rows[f"kw848-{i}"] == [mine["member_id"], "-", f"kw848-{i}", "/127.0.0.1", str(mine["member_epoch"]),
                                      live.topic, f"{live.topic}:{parts}", f"{live.topic}:{parts}"]

    assert main(["groups", "describe", "-b", live.bootstrap, live.group, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["group_type"], doc["state"], doc["protocol"]) == ("consumer", "Stable", "uniform")
    assert doc["assignment_epoch"] == doc["group_epoch"] >= 1
    members = {m["client_id"]: m for m in doc["members"]}
    assert members["kw848-1"]["subscribed_topic_regex"] == live.topic
    for i, consumer in enumerate(live.members):
        m = members[f"kw848-{i}"]
        assert m["member_epoch"] == consumer.group_state()["member_epoch"]
        assert m["assignment"] == m["target_assignment"] == {
            live.topic: sorted(tp.partition for tp in consumer.assignment())}
    # Each partition's row names the member that owns it.
    owners = {r["partition"]: r["member_id"] for r in doc["partitions"]}
    for consumer in live.members:
        for tp in consumer.assignment():
            assert owners[tp.partition] == consumer.group_state()["member_id"]


def test_a_broker_before_kip848_describes_its_classic_groups(kafka39_broker, make_admin):
    """Kafka 3.9 lists ConsumerGroupDescribe but, with the consumer protocol off (its
    default), answers it UNSUPPORTED_VERSION for every group; DescribeGroups v5 then
    describes the classic group, and an unknown one as "Dead"."""
    b = kafka39_broker.bootstrap
    topic, group, unknown = unique_name("cgd39"), unique_name("g39"), unique_name("g39-none")
    from kafkawire.client.admin import Admin

    with Admin(bootstrap_servers=b) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)], timeout=TIMEOUT)
        until_known(admin, topic, 2)
    member = Consumer(bootstrap_servers=b, group_id=group, client_id="kw-39", enable_auto_commit=False)
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while len(member.assignment()) < 2 or member.group_state()["state"] != "stable":
            assert time.monotonic() < deadline, member.group_state()
            member.poll(timeout=0.1)
        with make_admin(bootstrap_servers=b) as admin:
            got = admin.describe_groups([group, unknown], timeout=TIMEOUT)
    finally:
        member.close()
    d = got[group]
    assert (d.group_type, d.state, d.protocol) == ("classic", "Stable", "range")
    assert [(m.client_id, m.assignment) for m in d.members] == [("kw-39", {topic: [0, 1]})]
    assert (got[unknown].group_type, got[unknown].state) == (None, "Dead")
