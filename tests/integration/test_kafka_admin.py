"""kafkawire.Admin on Apache Kafka: the calls Tansu and librdkafka's mock cannot answer
(CreatePartitions, DeleteRecords, AlterConfigs on topics and brokers, OffsetDelete,
DescribeGroups with its members' data, ListOffsets by time and max timestamp), each
checked through the data it changed and, where it gives one, confluent-kafka's
AdminClient as an independent view.

All of it runs on the session's single-node Kafka (``kafka_broker``): nothing here takes
a node down, and every test works on topics and groups of its own.  The three-node view
(node ids, controller, replicas) is in test_kafka_failover.py.
"""

from __future__ import annotations

import time

import pytest

from kafkawire import errors
from kafkawire.client.admin import Admin, AdminError, ConfigResource, NewTopic, OffsetAndMetadata
from kafkawire.client.consumer import Consumer, TopicPartition
from kafkawire.client.producer import Producer
from settle import eventually, until_known
from shells import make_admin  # noqa: F401 - the fixture
from topics import unique_name

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.broker

# A permanent refusal must come back at once, not after retries up to the deadline.
PROMPT = 3.0
TIMEOUT = 30.0


@pytest.fixture
def admin(kafka_broker, make_admin):
    """Admin, then AsyncAdmin behind the same interface."""
    with make_admin(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms=15000) as a:
        yield a


@pytest.fixture
def ck_admin_client(kafka_broker):
    return ck_admin.AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "log_level": 3})


def _topic(admin: Admin, partitions: int = 1, **configs: str) -> str:
    name = unique_name("kadm")
    admin.create_topics([NewTopic(name, partitions, 1, configs)], timeout=TIMEOUT)
    # Until the broker's metadata has the topic, an OffsetCommit for it is refused with
    # UNKNOWN_TOPIC_OR_PARTITION.
    until_known(admin, name, partitions)
    return name


def _produce(bootstrap: str, topic: str, values: dict[int, list[bytes]], timestamps=None) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        futs = []
        for partition, vals in values.items():
            for i, v in enumerate(vals):
                ts = None if timestamps is None else timestamps[i]
                futs.append(p.send(topic, v, partition=partition, timestamp=ts))
        p.flush(TIMEOUT)
        for f in futs:
            f.result(0)


def _read(bootstrap: str, topic: str, partition: int, until: int) -> list[tuple[int, bytes]]:
    """(offset, value) of ``topic[partition]`` from auto_offset_reset=earliest up to ``until``."""
    out: list[tuple[int, bytes]] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  enable_auto_commit=False, fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(topic, partition)])
        deadline = time.monotonic() + TIMEOUT
        while not out or out[-1][0] + 1 < until:
            assert time.monotonic() < deadline, f"read {out} of {topic}[{partition}], not up to {until}"
            out += [(r.offset, r.value) for r in c.poll(0.5)]
    return out


def _read_confluent(bootstrap: str, topic: str, partition: int, until: int) -> list[tuple[int, bytes]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("ck-read"),
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 3})
    out: list[tuple[int, bytes]] = []
    try:
        c.assign([ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT
        while not out or out[-1][0] + 1 < until:
            assert time.monotonic() < deadline, f"confluent read {out} of {topic}[{partition}]"
            for m in c.consume(100, 0.5):
                if not m.error():
                    out.append((m.offset(), m.value()))
    finally:
        c.close()
    return out


def _prompt(call):
    """Run ``call`` expecting an error; return it, checking it came without retrying."""
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        call()
    assert time.monotonic() - start < PROMPT, f"{info.value!r} took {time.monotonic() - start:.1f}s"
    return info.value


# -- cluster and topics --------------------------------------------------------------------


def test_describe_cluster_matches_confluent(kafka_broker, admin, ck_admin_client):
    d = admin.describe_cluster()
    assert d.cluster_id == kafka_broker.cluster_id
    assert {n: (b.host, b.port) for n, b in d.brokers.items()} == {1: ("127.0.0.1", kafka_broker[0].ports["PLAINTEXT"])}
    # KRaft: Metadata names a live broker as "controller" (clients never reach the quorum).
    assert d.controller_id == 1
    theirs = ck_admin_client.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert theirs.cluster_id == d.cluster_id
    assert {n.id for n in theirs.nodes} == set(d.brokers) and theirs.controller.id == d.controller_id


def test_create_partitions_then_produce_and_read_the_new_one(kafka_broker, admin, ck_admin_client):
    b = kafka_broker.bootstrap
    topic = _topic(admin, 2)
    _produce(b, topic, {0: [b"old"]})
    assert admin.create_partitions({topic: 5}) == {topic: None}
    # Answered once the controller has them; the broker's metadata a moment later.
    eventually(lambda: sorted(admin.describe_topics([topic])[topic].partitions), [0, 1, 2, 3, 4])
    parts = admin.describe_topics([topic])[topic].partitions
    assert all(p.leader == 1 for p in parts.values())
    ck_parts = ck_admin_client.list_topics(topic=topic, timeout=TIMEOUT).topics[topic].partitions
    assert sorted(ck_parts) == [0, 1, 2, 3, 4]
    # A producer that knew the topic with 2 partitions learns of the third to fifth.
    with Producer(bootstrap_servers=b, linger_ms=0, max_block_ms=10000) as p:
        p.send(topic, b"warm", partition=1).result(TIMEOUT)
        meta = p.send(topic, b"new partition", partition=4).result(TIMEOUT)
    assert (meta.partition, meta.offset) == (4, 0)
    assert _read(b, topic, 4, 1) == [(0, b"new partition")]
    assert _read_confluent(b, topic, 4, 1) == [(0, b"new partition")]


def test_create_partitions_refusals_are_typed_and_prompt(admin):
    topic = _topic(admin, 3)
    exc = _prompt(lambda: admin.create_partitions({topic: 2}))
    assert isinstance(exc, AdminError) and isinstance(exc.errors[topic], errors.InvalidPartitionsError)
    assert exc.code == 37 and topic in str(exc)
    same = admin.create_partitions({topic: 3}, raise_on_error=False)[topic]
    assert isinstance(same, errors.InvalidPartitionsError)
    ghost = unique_name("ghost")
    got = admin.create_partitions({ghost: 4}, raise_on_error=False)
    assert isinstance(got[ghost], errors.UnknownTopicOrPartitionError)
    # validate_only checks without creating.
    assert admin.create_partitions({topic: 6}, validate_only=True) == {topic: None}
    assert len(admin.describe_topics([topic])[topic].partitions) == 3


def test_create_topics_refusals_are_typed_and_prompt(admin):
    name = unique_name("rf")
    exc = _prompt(lambda: admin.create_topics([NewTopic(name, 1, 3)]))
    assert isinstance(exc.errors[name], errors.InvalidReplicationFactorError)
    exc = _prompt(lambda: admin.create_topics([NewTopic(name, 1, 1, {"cleanup.policy": "sometimes"})]))
    assert isinstance(exc.errors[name], errors.InvalidConfigError)
    assert "cleanup.policy" in str(exc)  # the broker's own message comes along
    exc = _prompt(lambda: admin.create_topics([NewTopic(name, 0, 1)]))
    assert isinstance(exc.errors[name], errors.InvalidPartitionsError)
    assert name not in admin.list_topics()


def test_delete_topics(kafka_broker, admin, ck_admin_client):
    keep, gone = _topic(admin), _topic(admin, 2)
    ghost = unique_name("ghost")
    out = admin.delete_topics([gone, ghost], raise_on_error=False)
    assert out[gone] is None and isinstance(out[ghost], errors.UnknownTopicOrPartitionError)
    # DeleteTopics answers once the controller has the deletion; the broker's metadata
    # cache has it a moment later.
    eventually(lambda: (gone in admin.list_topics(), keep in admin.list_topics()), (False, True))
    eventually(lambda: gone in ck_admin_client.list_topics(timeout=TIMEOUT).topics, False)
    exc = _prompt(lambda: admin.delete_topics([ghost]))
    assert exc.code == 3 and ghost in str(exc)


# -- records and offsets ------------------------------------------------------------------


def test_delete_records_moves_the_low_watermark(kafka_broker, admin):
    b = kafka_broker.bootstrap
    topic = _topic(admin, 2)
    _produce(b, topic, {0: [b"r%d" % i for i in range(10)], 1: [b"s%d" % i for i in range(4)]})
    out = admin.delete_records({(topic, 0): 6, (topic, 1): -1})
    assert out[TopicPartition(topic, 0)].low_watermark == 6
    assert out[TopicPartition(topic, 1)].low_watermark == 4  # -1: everything below the high watermark
    starts = admin.list_offsets({(topic, 0): "earliest", (topic, 1): "earliest"})
    assert (starts[(topic, 0)].offset, starts[(topic, 1)].offset) == (6, 4)
    # A reader from "earliest" starts at the new low watermark, in both clients.
    assert _read(b, topic, 0, 10) == [(i, b"r%d" % i) for i in range(6, 10)]
    assert _read_confluent(b, topic, 0, 10) == [(i, b"r%d" % i) for i in range(6, 10)]
    # Beyond the high watermark is refused at once, and nothing moves.
    bad = _prompt(lambda: admin.delete_records({(topic, 0): 11}))
    assert isinstance(bad.errors[(topic, 0)], errors.OffsetOutOfRangeError)
    assert admin.list_offsets({(topic, 0): "earliest"})[(topic, 0)].offset == 6
    missing = admin.delete_records({(topic, 7): 0}, raise_on_error=False)[(topic, 7)]
    assert isinstance(missing, errors.UnknownTopicOrPartitionError)


def test_list_offsets_by_time_and_max_timestamp(kafka_broker, admin, ck_admin_client):
    b = kafka_broker.bootstrap
    topic = _topic(admin, 1)
    stamps = [1_000_000, 5_000_000, 3_000_000, 2_000_000]
    _produce(b, topic, {0: [b"a", b"b", b"c", b"d"]}, timestamps=stamps)
    tp = TopicPartition(topic, 0)
    got = admin.list_offsets({tp: "earliest"})[tp]
    assert got.offset == 0
    assert admin.list_offsets({tp: "latest"})[tp].offset == 4
    # The first offset whose timestamp is at or after the time asked for.
    at = admin.list_offsets({tp: 2_500_000})[tp]
    assert (at.offset, at.timestamp) == (1, 5_000_000)
    at = admin.list_offsets({tp: 1_000_000})[tp]
    assert (at.offset, at.timestamp) == (0, 1_000_000)
    after = admin.list_offsets({tp: 6_000_000})[tp]
    assert after.offset == -1  # no record at or after it
    # KIP-734: the record with the largest timestamp, wherever it is.
    top = admin.list_offsets({tp: "max_timestamp"})[tp]
    assert (top.offset, top.timestamp) == (1, 5_000_000)
    theirs = ck_admin_client.list_offsets({ck.TopicPartition(topic, 0): ck_admin.OffsetSpec.max_timestamp()},
                                          request_timeout=TIMEOUT)
    assert next(iter(theirs.values())).result(TIMEOUT).offset == 1
    # The consumer's view agrees.
    with Consumer(bootstrap_servers=b) as c:
        assert c.offsets_for_times({tp: 2_500_000})[tp].offset == 1
        assert c.end_offsets([tp])[tp] == 4
    with pytest.raises(ValueError, match="max_timestamp"):
        admin.list_offsets({tp: "biggest"})
    missing = admin.list_offsets({(topic, 3): "latest"}, raise_on_error=False)[(topic, 3)]
    assert isinstance(missing, errors.UnknownTopicOrPartitionError)


# -- configs -------------------------------------------------------------------------------


def test_topic_configs_altered_incrementally_and_seen_by_confluent(admin, ck_admin_client):
    topic = _topic(admin, 1, **{"retention.ms": "3600000"})
    res = ConfigResource("topic", topic)
    before = admin.describe_configs([res])[res]
    assert before["retention.ms"].value == "3600000" and before["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
    assert before["cleanup.policy"].value == "delete" and before["cleanup.policy"].is_default
    assert admin.alter_configs({res: {"cleanup.policy": "compact", "max.message.bytes": "123456"}}) == {res: None}
    keys = ["retention.ms", "cleanup.policy", "max.message.bytes"]
    eventually(lambda: {k: e.value for k, e in admin.describe_configs([res], keys=keys)[res].items()},
                {"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "123456"})
    theirs = ck_admin_client.describe_configs(
        [ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)], request_timeout=TIMEOUT)
    ck_cfg = next(iter(theirs.values())).result(TIMEOUT)
    assert ck_cfg["cleanup.policy"].value == "compact" and ck_cfg["retention.ms"].value == "3600000"
    # None resets to the broker's value (the fixture's log.retention.ms: keep forever).
    admin.alter_configs({res: {"retention.ms": None}})
    eventually(lambda: admin.describe_configs([res], keys=["retention.ms"])[res]["retention.ms"].source,
                "STATIC_BROKER_CONFIG")
    reset = admin.describe_configs([res], keys=["retention.ms"])[res]["retention.ms"]
    assert reset.value == "-1" and not reset.is_default
    # validate_only changes nothing.
    admin.alter_configs({res: {"cleanup.policy": "delete"}}, validate_only=True)
    assert admin.describe_configs([res], keys=["cleanup.policy"])[res]["cleanup.policy"].value == "compact"


def test_config_refusals_are_typed_and_prompt(admin):
    topic = _topic(admin)
    res = ConfigResource("topic", topic)
    exc = _prompt(lambda: admin.alter_configs({res: {"retention.ms": "soon"}}))
    assert isinstance(exc.errors[res], errors.InvalidConfigError) and "retention.ms" in str(exc)
    exc = _prompt(lambda: admin.alter_configs({res: {"no.such.config": "1"}}))
    assert isinstance(exc.errors[res], errors.InvalidConfigError)
    ghost = ConfigResource("topic", unique_name("ghost"))
    got = admin.describe_configs([ghost], raise_on_error=False)[ghost]
    assert isinstance(got, errors.UnknownTopicOrPartitionError)
    exc = _prompt(lambda: admin.alter_configs({ghost: {"retention.ms": "1000"}}))
    assert isinstance(exc.errors[ghost], errors.UnknownTopicOrPartitionError)


def test_broker_dynamic_config(admin, ck_admin_client):
    # log.cleaner.backoff.ms is dynamic per broker and cluster-wide, and harmless to the
    # session's other tests.
    node, default = ConfigResource("broker", "1"), ConfigResource("broker", "")
    key = "log.cleaner.backoff.ms"
    start = admin.describe_configs([node], keys=[key])[node][key]
    assert start.value == "15000" and start.source == "DEFAULT_CONFIG"

    def seen() -> tuple[str | None, str]:
        got = admin.describe_configs([node], keys=[key])[node][key]
        return got.value, got.source

    try:
        admin.alter_configs({default: {key: "16000"}})
        eventually(seen, ("16000", "DYNAMIC_DEFAULT_BROKER_CONFIG"))
        admin.alter_configs({node: {key: "17000"}})  # the node's own value wins
        eventually(seen, ("17000", "DYNAMIC_BROKER_CONFIG"))
        theirs = ck_admin_client.describe_configs(
            [ck_admin.ConfigResource(ck_admin.ResourceType.BROKER, "1")], request_timeout=TIMEOUT)
        assert next(iter(theirs.values())).result(TIMEOUT)[key].value == "17000"
        # A static-only broker config cannot be changed while the broker runs.
        exc = _prompt(lambda: admin.alter_configs({node: {"log.dirs": "/elsewhere"}}))
        assert isinstance(exc.errors[node], errors.InvalidRequestError)
        with pytest.raises(ValueError, match="node id"):
            admin.describe_configs([("broker", "one")])
    finally:
        admin.alter_configs({node: {key: None}, default: {key: None}})
    eventually(seen, ("15000", "DEFAULT_CONFIG"))


# -- groups --------------------------------------------------------------------------------


def _wait_assigned(consumers, deadline: float) -> None:
    while not all(c.assignment() for c in consumers):
        assert time.monotonic() < deadline, "the group did not settle"
        for c in consumers:
            c.poll(0.1)


def test_live_group_described_listed_and_protected(kafka_broker, admin, ck_admin_client):
    b = kafka_broker.bootstrap
    topic = _topic(admin, 4)
    group = unique_name("g-live")
    members = [Consumer(bootstrap_servers=b, group_id=group, client_id=f"kw-member-{i}",
                        enable_auto_commit=False, auto_offset_reset="earliest",
                        session_timeout_ms=10000, heartbeat_interval_ms=300) for i in range(2)]
    try:
        for m in members:
            m.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while True:  # both in one generation, the four partitions shared out
            _wait_assigned(members, deadline)
            mine = [m.assignment() for m in members]
            if all(mine) and sum(len(a) for a in mine) == 4:
                break
        d = admin.describe_groups([group])[group]
        assert (d.state, d.protocol_type, d.coordinator) == ("Stable", "consumer", 1)
        assert d.protocol in ("range", "cooperative-sticky", "roundrobin", "sticky")
        by_client = {m.client_id: m for m in d.members}
        assert sorted(by_client) == ["kw-member-0", "kw-member-1"]
        for i, m in enumerate(members):
            desc = by_client[f"kw-member-{i}"]
            assert desc.member_id.startswith(f"kw-member-{i}-") and desc.host.lstrip("/") == "127.0.0.1"
            assert desc.subscription == [topic]
            assert {TopicPartition(topic, p) for p in desc.assignment[topic]} == m.assignment()
        theirs = ck_admin_client.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
        assert {x.member_id for x in theirs.members} == {m.member_id for m in d.members}
        assert {x.client_id: sorted(tp.partition for tp in x.assignment.topic_partitions)
                for x in theirs.members} == {m.client_id: sorted(m.assignment[topic]) for m in d.members}

        listed = admin.list_groups()
        assert listed[group].protocol_type == "consumer" and listed[group].state == "Stable"
        ck_listed = ck_admin_client.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
        assert group in {g.group_id for g in ck_listed.valid}

        # A group with members is neither deleted nor its offsets rewritten nor its
        # subscribed topic's offsets deleted: each refusal typed and prompt.
        exc = _prompt(lambda: admin.delete_groups([group]))
        assert isinstance(exc.errors[group], errors.NonEmptyGroupError)
        exc = _prompt(lambda: admin.alter_group_offsets(group, {(topic, 0): 1}))
        assert isinstance(exc.errors[(topic, 0)], errors.UnknownMemberIdError)  # as Tansu answers
        members[0].commit({TopicPartition(topic, p): 0 for p in range(4)
                           if TopicPartition(topic, p) in members[0].assignment()})
        exc = _prompt(lambda: admin.delete_group_offsets(group, [(topic, 0)]))
        assert isinstance(next(iter(exc.errors.values())), errors.GroupSubscribedToTopicError)
    finally:
        for m in members:
            m.close()
    assert admin.describe_groups([group])[group].state == "Empty"
    assert admin.delete_groups([group]) == {group: None}
    assert group not in admin.list_groups()


def test_delete_group_offsets_of_one_partition(kafka_broker, admin):
    b = kafka_broker.bootstrap
    topic = _topic(admin, 2)
    group = unique_name("g-offdel")
    admin.alter_group_offsets(group, {(topic, 0): 3, (topic, 1): OffsetAndMetadata(5, "kept")})
    assert admin.delete_group_offsets(group, [(topic, 0)]) == {(topic, 0): None}
    left = admin.list_group_offsets(group)
    assert {tp: om.offset for tp, om in left.items()} == {(topic, 1): 5}
    assert left[TopicPartition(topic, 1)].metadata == "kept"
    c = ck.Consumer({"bootstrap.servers": b, "group.id": group, "log_level": 3})
    try:
        got = c.committed([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], timeout=TIMEOUT)
    finally:
        c.close()
    assert [tp.offset for tp in got] == [ck.OFFSET_INVALID, 5]
    ghost = unique_name("g-ghost")
    exc = _prompt(lambda: admin.delete_group_offsets(ghost, [(topic, 0)]))
    assert isinstance(exc, errors.GroupIdNotFoundError) and ghost in str(exc)


def test_delete_groups_results_per_group(admin):
    topic = _topic(admin)
    empty, ghost = unique_name("g-empty"), unique_name("g-ghost")
    admin.alter_group_offsets(empty, {(topic, 0): 1})
    assert admin.list_groups()[empty].state == "Empty"
    out = admin.delete_groups([empty, ghost], raise_on_error=False)
    assert out[empty] is None and isinstance(out[ghost], errors.GroupIdNotFoundError)
    assert admin.list_group_offsets(empty) == {}
    d = admin.describe_groups([ghost], raise_on_error=False)[ghost]
    # Kafka 4 answers DescribeGroups v6 for an unknown group with GROUP_ID_NOT_FOUND.
    assert isinstance(d, errors.GroupIdNotFoundError) or d.state == "Dead"
