"""kafkawire.Admin against real brokers, cross-checked with confluent-kafka; each test
runs on the sync Admin and the asyncio AsyncAdmin (behind the same blocking interface,
see shells.py), on Apache Kafka and on the cheap brokers alike.

What every broker answers alike runs on Apache Kafka and Tansu (``modern_admin``), the
group offset calls on the mock too (``any_broker``); the calls only Kafka answers are in
test_kafka_admin.py.  Where Kafka differs from the other two:
* Kafka's metadata is eventually consistent: CreateTopics, DeleteTopics and AlterConfigs
  answer once the controller has the change, and the broker answering Metadata or
  DescribeConfigs has it a moment later (the tests wait for it); Tansu is at once.
* DescribeConfigs on Kafka lists every config of a topic, the unset ones with the source
  of their value (DEFAULT_CONFIG, or STATIC_BROKER_CONFIG for what the fixture sets in
  server.properties); Tansu lists only the ones set on the topic.

What the two other test brokers answer (ApiVersions, then trying each API):
* Tansu 0.6: CreateTopics, DeleteTopics, Metadata, DescribeConfigs, IncrementalAlterConfigs,
  FindCoordinator, ListGroups, DescribeGroups, OffsetFetch, OffsetCommit, DeleteGroups,
  ListOffsets.  It lacks CreatePartitions, AlterConfigs and OffsetDelete (not listed; if
  sent anyway it closes the connection), and lists DeleteRecords but its memory storage
  panics on it ("not yet implemented") and drops the connection.
* librdkafka's mock: Metadata, ListOffsets, FindCoordinator, OffsetCommit, OffsetFetch and
  group membership; none of the topic, config or group-admin APIs.
"""

from __future__ import annotations

import time

import pytest

import kafkawire
from kafkawire import errors
from kafkawire.client.admin import (
    Admin,
    AdminError,
    ConfigResource,
    NewTopic,
    OffsetAndMetadata,
)
from kafkawire.client.consumer import TopicPartition
from kafkawire.errors import ClientClosedError, KafkaTimeoutError
from kafkawire.client.producer import Producer
from kafkawire.protocol import consumer as consumer_protocol
from kafkawire.protocol.admin import _decoded_member
from kafkawire.protocol.api import ApiVersionError
from settle import eventually, until_known
from shells import make_admin  # noqa: F401 - the fixture
from topics import unique_name

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.broker


@pytest.fixture
def tansu_admin(tansu_broker, make_admin):
    with make_admin(bootstrap_servers=tansu_broker.bootstrap, request_timeout_ms=5000) as admin:
        yield admin


@pytest.fixture
def mock_admin(mock_cluster, make_admin):
    with make_admin(bootstrap_servers=mock_cluster.bootstrap, request_timeout_ms=5000) as admin:
        yield admin


@pytest.fixture(params=[pytest.param("kafka", marks=pytest.mark.kafka),
                        pytest.param("tansu", marks=pytest.mark.tansu)])
def modern_admin(request, make_admin):
    """(kind, broker, admin) on Apache Kafka, then Tansu: the calls both answer alike."""
    broker = request.getfixturevalue(f"{request.param}_broker")
    with make_admin(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000) as admin:
        yield request.param, broker, admin


def _ck_topics(bootstrap: str) -> dict:
    md = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "log_level": 3})
    try:
        return md.list_topics(timeout=10).topics
    finally:
        md.close()


def _ck_consumer(bootstrap: str, group: str, **extra):
    return ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                        "enable.auto.commit": False, "log_level": 3, **extra})


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    # One record per batch: Tansu's ListOffsets "latest" is the last batch's base offset
    # + 1, below the high watermark when a batch holds several records.
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        for partition, n in per_partition.items():
            for i in range(n):
                p.send(topic, b"v%d" % i, partition=partition)
                p.flush(10)


def _topic_on(broker_kind: str, request, admin: Admin, partitions: int) -> str:
    topic = unique_name("adm")
    if broker_kind == "mock":  # the mock has no CreateTopics
        request.getfixturevalue("mock_cluster").create_topic(topic, partitions, 1)
    else:
        admin.create_topics([topic], num_partitions=partitions)
        # Kafka: an OffsetCommit for a topic its metadata does not have yet is refused.
        until_known(admin, topic, partitions)
    return topic


_FIXTURES = {"kafka": "kafka_broker", "tansu": "tansu_broker", "mock": "mock_cluster"}


def _broker_and_admin(request, make_admin):
    broker = request.getfixturevalue(_FIXTURES[request.param])
    with make_admin(bootstrap_servers=broker.bootstrap, request_timeout_ms=5000) as admin:
        yield request.param, broker.bootstrap, admin


@pytest.fixture(params=[pytest.param(kind, marks=getattr(pytest.mark, kind)) for kind in _FIXTURES])
def any_broker(request, make_admin):
    """(kind, bootstrap, admin) for each broker that speaks the group offset APIs."""
    yield from _broker_and_admin(request, make_admin)


@pytest.fixture(params=[pytest.param(kind, marks=getattr(pytest.mark, kind)) for kind in ("kafka", "mock")])
def exact_end_broker(request, make_admin):
    """(kind, bootstrap, admin) for the brokers whose ListOffsets "latest" is the high
    watermark (Tansu's may fall short)."""
    yield from _broker_and_admin(request, make_admin)


# -- topics and cluster --------------------------------------------------------------------


def test_admin_is_exported():
    assert kafkawire.Admin is Admin and "Admin" in kafkawire.__all__


def test_created_topics_are_seen_by_confluent_and_deleted(modern_admin):
    _kind, broker, admin = modern_admin
    a, b = unique_name("ct"), unique_name("ct")
    created = admin.create_topics(
        [NewTopic(a, num_partitions=3, replication_factor=1, configs={"retention.ms": "123456"}), b],
        num_partitions=2)
    assert (created[a].num_partitions, created[b].num_partitions) == (3, 2)
    assert created[a].topic_id is not None and created[a].topic_id != created[b].topic_id
    eventually(lambda: {t: len(x.partitions) for t, x in _ck_topics(broker.bootstrap).items() if t in (a, b)},
                {a: 3, b: 2})
    described = admin.describe_topics([a])[a]
    assert sorted(described.partitions) == [0, 1, 2]
    assert all(p.leader in admin.describe_cluster().brokers for p in described.partitions.values())
    assert {a, b} <= set(admin.list_topics())

    deleted = admin.delete_topics([b, unique_name("missing")], raise_on_error=False)
    assert deleted[b] is None
    missing = [v for k, v in deleted.items() if k != b][0]
    assert isinstance(missing, errors.UnknownTopicOrPartitionError) and missing.code == 3
    eventually(lambda: (b in admin.list_topics(), a in admin.list_topics()), (False, True))


def test_per_item_errors_raise_one_error_naming_each(modern_admin):
    _kind, _broker, admin = modern_admin
    dup, new = unique_name("dup"), unique_name("new")
    admin.create_topics([dup], num_partitions=1)
    with pytest.raises(AdminError) as info:
        admin.create_topics([dup, new], num_partitions=1)
    exc = info.value
    assert exc.code == 36 and set(exc.errors) == {dup}
    assert isinstance(exc.errors[dup], errors.TopicAlreadyExistsError)
    assert exc.results[new].num_partitions == 1  # the other topic was still created
    assert dup in str(exc) and "TOPIC_ALREADY_EXISTS" in str(exc) and "raise_on_error" in str(exc)
    # The same answer, returned instead of raised.
    again = admin.create_topics([dup], num_partitions=1, raise_on_error=False)
    assert isinstance(again[dup], errors.TopicAlreadyExistsError)


def test_describe_missing_topic_does_not_create_it(modern_admin):
    # The Kafka fixture auto-creates topics on Metadata requests that allow it.
    _kind, _broker, admin = modern_admin
    ghost = unique_name("ghost")
    got = admin.describe_topics([ghost], raise_on_error=False)
    assert isinstance(got[ghost], errors.UnknownTopicOrPartitionError)
    time.sleep(0.2)  # what an auto-creation would need to show up
    assert ghost not in admin.list_topics()


def test_describe_cluster(tansu_broker, tansu_admin, mock_cluster, mock_admin):
    t = tansu_admin.describe_cluster()
    assert t.cluster_id == tansu_broker.cluster_id
    assert [(x.host, x.port) for x in t.brokers.values()] == [("127.0.0.1", tansu_broker.port)]
    assert t.controller_id in t.brokers
    m = mock_admin.describe_cluster()
    assert {n: (x.host, x.port) for n, x in m.brokers.items()} == mock_cluster.brokers
    assert m.cluster_id


# -- APIs a broker lacks -------------------------------------------------------------------


@pytest.mark.parametrize("call, api", [
    (lambda a: a.create_topics(["x"]), "CreateTopics"),
    (lambda a: a.delete_topics(["x"]), "DeleteTopics"),
    (lambda a: a.list_groups(), "ListGroups"),
    (lambda a: a.describe_groups(["g"]), "DescribeGroups"),
    (lambda a: a.delete_groups(["g"]), "DeleteGroups"),
    (lambda a: a.describe_configs([("topic", "x")]), "DescribeConfigs"),
    (lambda a: a.delete_records({("x", 0): 0}), None),  # needs a leader first: see below
])
def test_mock_lacks_admin_apis_and_says_which(mock_cluster, mock_admin, call, api):
    if api is None:
        topic = unique_name("dr")
        mock_cluster.create_topic(topic, 1, 1)
        call, api = (lambda a: a.delete_records({(topic, 0): 0})), "DeleteRecords"
    start = time.monotonic()
    with pytest.raises(ApiVersionError) as info:
        call(mock_admin)
    assert time.monotonic() - start < 2  # not retried until the deadline
    assert f"{api} (key" in str(info.value) and "does not list it" in str(info.value)
    assert "127.0.0.1:" in str(info.value)  # which broker


def test_alter_configs_names_both_apis_when_neither_is_there(mock_admin):
    with pytest.raises(ApiVersionError, match=r"IncrementalAlterConfigs .*AlterConfigs \(key 33\)"):
        mock_admin.alter_configs({("topic", "x"): {"retention.ms": "1"}})


def test_tansu_lacks_create_partitions_and_offset_delete(tansu_admin):
    topic = unique_name("np")
    tansu_admin.create_topics([topic], num_partitions=1)
    with pytest.raises(ApiVersionError, match=r"CreatePartitions \(key 37\).*does not list it"):
        tansu_admin.create_partitions({topic: 2})
    with pytest.raises(ApiVersionError, match=r"OffsetDelete \(key 47\).*does not list it"):
        tansu_admin.delete_group_offsets("g", [(topic, 0)])
    assert len(tansu_admin.describe_topics([topic])[topic].partitions) == 1


def test_broker_that_drops_the_connection_costs_only_the_timeout(tansu_admin):
    # Tansu lists DeleteRecords, but its memory storage panics on it and closes the connection.
    topic = unique_name("dr")
    tansu_admin.create_topics([topic], num_partitions=1)
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as info:
        tansu_admin.delete_records({(topic, 0): 0}, timeout=1.0)
    assert time.monotonic() - start < 2.0
    assert f"{topic}[0]" in str(info.value) and "closed the connection" in str(info.value)
    assert topic in tansu_admin.list_topics(timeout=2)  # and the client still works


# -- configs -------------------------------------------------------------------------------


def test_describe_and_incrementally_alter_topic_configs(modern_admin):
    kind, _broker, admin = modern_admin
    topic = unique_name("cfg")
    admin.create_topics([topic], num_partitions=1,
                        configs={"retention.ms": "1000000", "cleanup.policy": "compact"})
    res = ConfigResource("topic", topic)
    eventually(lambda: not isinstance(admin.describe_configs([res], raise_on_error=False)[res], Exception), True)
    before = admin.describe_configs([res])[res]
    assert before["retention.ms"].value == "1000000" and before["cleanup.policy"].value == "compact"

    assert admin.alter_configs({("topic", topic): {"retention.ms": "2000000",
                                                   "max.message.bytes": "5000"}}) == {res: None}

    def values() -> tuple:
        now = admin.describe_configs([res])[res]
        return tuple(now[k].value for k in ("retention.ms", "max.message.bytes", "cleanup.policy"))

    eventually(values, ("2000000", "5000", "compact"))  # incremental: cleanup.policy stays

    admin.alter_configs({res: {"retention.ms": None}})  # None deletes (back to default)
    if kind == "tansu":  # Tansu lists only the configs set on the topic
        eventually(lambda: "retention.ms" in admin.describe_configs([res])[res], False)
    else:  # Kafka lists every config, an unset one with where its value comes from
        eventually(lambda: admin.describe_configs([res])[res]["retention.ms"].source, "STATIC_BROKER_CONFIG")
        assert admin.describe_configs([res])[res]["retention.ms"].value == "-1"  # the fixture's log.retention.ms


def test_describe_configs_with_keys_honours_the_deadline(tansu_admin):
    # Tansu fails to decode a DescribeConfigs request naming keys and closes the connection.
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="closed the connection"):
        tansu_admin.describe_configs([("topic", "anything")], keys=["retention.ms"], timeout=0.8)
    assert time.monotonic() - start < 1.8


# -- group offsets ----------------------------------------------------------------------------


def test_offsets_admin_commits_are_read_back_by_confluent(any_broker, request):
    kind, bootstrap, admin = any_broker
    topic = _topic_on(kind, request, admin, 2)
    _produce(bootstrap, topic, {0: 4, 1: 2})
    group = unique_name("g-alter")
    assert admin.alter_group_offsets(group, {(topic, 0): 3, TopicPartition(topic, 1): OffsetAndMetadata(1)}) == {
        (topic, 0): None, (topic, 1): None}
    c = _ck_consumer(bootstrap, group)
    try:
        got = c.committed([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], timeout=10)
    finally:
        c.close()
    assert [(tp.partition, tp.offset) for tp in got] == [(0, 3), (1, 1)]


def test_offsets_confluent_commits_are_seen_by_admin(any_broker, request):
    kind, bootstrap, admin = any_broker
    topic = _topic_on(kind, request, admin, 3)
    group = unique_name("g-ck")
    c = _ck_consumer(bootstrap, group)
    try:
        c.commit(offsets=[ck.TopicPartition(topic, 0, 7), ck.TopicPartition(topic, 2, 11)], asynchronous=False)
    finally:
        c.close()
    asked = admin.list_group_offsets(group, [(topic, 0), (topic, 1), (topic, 2)])
    assert {tp: (om.offset if om else None) for tp, om in asked.items()} == {
        (topic, 0): 7, (topic, 1): None, (topic, 2): 11}
    if kind != "mock":
        # Every committed partition; the mock answers this form with a null topic array.
        assert {tp: om.offset for tp, om in admin.list_group_offsets(group).items()} == {
            (topic, 0): 7, (topic, 2): 11}
        assert group in admin.list_groups()


def test_group_lag_and_list_offsets(exact_end_broker, request):
    kind, bootstrap, admin = exact_end_broker
    topic = _topic_on(kind, request, admin, 2)
    with Producer(bootstrap_servers=bootstrap, linger_ms=20) as p:
        for i in range(10):
            p.send(topic, b"x", partition=0 if i < 7 else 1)
        p.flush(10)
    ends = admin.list_offsets({(topic, 0): "latest", (topic, 1): "latest"})
    assert (ends[(topic, 0)].offset, ends[(topic, 1)].offset) == (7, 3)
    assert admin.list_offsets({(topic, 1): "earliest"})[(topic, 1)].offset == 0
    group = unique_name("g-lag")
    admin.alter_group_offsets(group, {(topic, 0): 2, (topic, 1): 3})
    lag = admin.group_lag(group, [(topic, 0), (topic, 1)])
    assert lag.partitions[TopicPartition(topic, 0)].lag == 5
    assert lag.partitions[TopicPartition(topic, 1)].lag == 0
    assert lag.total == 5
    bad = admin.list_offsets({(topic, 9): "latest"}, raise_on_error=False)
    assert isinstance(bad[(topic, 9)], errors.UnknownTopicOrPartitionError)


def test_coordinator_errors_are_retried_within_the_deadline(mock_cluster_factory, make_admin):
    cluster = mock_cluster_factory(3)
    topic = unique_name("coord")
    cluster.create_topic(topic, 1, 1)
    opts = dict(bootstrap_servers=cluster.bootstrap, request_timeout_ms=5000, retry_backoff_ms=20)
    with make_admin(**opts) as admin:
        admin.alter_group_offsets("g", {(topic, 0): 4})
    with make_admin(**opts) as admin:  # a new client: it has to find the coordinator first
        # FindCoordinator: not available twice; OffsetFetch: not coordinator, then loading.
        cluster.push_request_errors(10, [15, 15])
        cluster.push_request_errors(9, [16, 14])
        assert admin.list_group_offsets("g", [(topic, 0)])[(topic, 0)].offset == 4
        cluster.push_request_errors(9, [15] * 200)
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="COORDINATOR_NOT_AVAILABLE"):
            admin.list_group_offsets("g", [(topic, 0)], timeout=0.6)
        assert time.monotonic() - start < 1.5
        cluster.clear_request_errors(9)


def test_slow_broker_never_makes_a_call_hang(mock_cluster_factory, make_admin):
    cluster = mock_cluster_factory(1)
    with make_admin(bootstrap_servers=cluster.bootstrap, request_timeout_ms=5000) as admin:
        # Known first (the constructor asks no broker): a broker that slows down later.
        admin.list_topics()
        cluster.broker_set_rtt(-1, 3000)
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="list_topics did not finish within 0.5s"):
            admin.list_topics(timeout=0.5)
        assert time.monotonic() - start < 1.5
        cluster.broker_set_rtt(-1, 0)
    with pytest.raises(ClientClosedError):
        admin.list_topics()


# -- groups with members -----------------------------------------------------------------------


def test_describe_group_with_a_confluent_member_and_reset_rules(tansu_broker, tansu_admin):
    topic = unique_name("grp")
    tansu_admin.create_topics([topic], num_partitions=2)
    group = unique_name("g-live")
    # Tansu completes JoinGroup after half the session timeout: 2 s keeps the join near 1 s.
    # (Two members kept rebalancing on Tansu in our tries, so this uses one.)
    c = _ck_consumer(tansu_broker.bootstrap, group, **{
        "session.timeout.ms": 2000, "heartbeat.interval.ms": 300, "client.id": "kw-test"})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 10
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.1)
        assert len(c.assignment()) == 2
        # Tansu lists only groups with committed offsets, not one that only has members.
        assert group not in tansu_admin.list_groups()
        d = tansu_admin.describe_groups([group])[group]
        assert d.state == "Stable" and d.protocol_type == "consumer"
        assert d.coordinator in tansu_admin.describe_cluster().brokers
        assert len(d.members) == 1 and d.members[0].member_id.startswith("kw-test-")
        # Tansu leaves client id, host, protocol name and the assignment bytes empty.
        assert d.members[0].assignment is None and d.members[0].raw_assignment == b""

        with pytest.raises(AdminError) as info:  # an outsider cannot commit for a live group
            tansu_admin.alter_group_offsets(group, {(topic, 0): 1})
        assert info.value.code == 25 and isinstance(info.value.errors[(topic, 0)], errors.UnknownMemberIdError)
    finally:
        c.close()
    assert tansu_admin.describe_groups([group])[group].state == "Empty"
    tansu_admin.alter_group_offsets(group, {(topic, 0): 1})
    assert tansu_admin.list_group_offsets(group)[(topic, 0)].offset == 1


def test_consumer_assignment_is_decoded():
    # Tansu leaves DescribeGroups assignments empty and the mock has no DescribeGroups:
    # the decoding is checked on the consumer protocol's own bytes.
    raw = consumer_protocol.encode_assignment(consumer_protocol.assignment_from_map({"t": [2, 0], "u": [1]}))
    sub = consumer_protocol.encode_subscription(consumer_protocol.ConsumerProtocolSubscription(topics=["t", "u"]))

    class Member:  # the DescribeGroups member fields _decoded_member reads
        member_id, group_instance_id, client_id, client_host = "m-1", "static", "app", "/10.0.0.1"
        member_assignment, member_metadata = raw, sub

    m = _decoded_member("consumer", Member)
    assert {t: sorted(ps) for t, ps in m.assignment.items()} == {"t": [0, 2], "u": [1]}
    assert m.subscription == ["t", "u"] and m.group_instance_id == "static"
    assert _decoded_member("connect", Member).assignment is None  # other protocols stay raw


def test_delete_groups_forgets_committed_offsets(modern_admin, request):
    kind, broker, admin = modern_admin
    topic = _topic_on(kind, request, admin, 1)
    group = unique_name("g-del")
    admin.alter_group_offsets(group, {(topic, 0): 5})
    assert group in admin.list_groups()
    assert admin.delete_groups([group]) == {group: None}
    assert group not in admin.list_groups()
    assert admin.list_group_offsets(group) == {}
    c = _ck_consumer(broker.bootstrap, group)
    try:
        assert c.committed([ck.TopicPartition(topic, 0)], timeout=10)[0].offset == ck.OFFSET_INVALID
    finally:
        c.close()
