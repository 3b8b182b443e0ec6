"""Permanent errors end the call at once, typed, on Apache Kafka itself; retriable ones
wait for the call's deadline and then say what was missing (issue 25 item 7).

One single-node cluster serves the module: ACLs on (``super_users``: the SASL user
``admin`` and PLAINTEXT clients may do anything; ``bob`` has only the ACLs a test grants him
(Describe on one topic, Read on one group), so Kafka refuses his other calls with an
authorization error), ``message.max.bytes`` low enough to refuse a record of 150 kB, and
no auto-created topics (a topic not there is UNKNOWN_TOPIC_OR_PARTITION).

A call that waited for its deadline would end in KafkaTimeoutError after max_block_ms
(60 s by default): the typed error asserted below is what proves it ended at once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from settle import eventually, partition_count
from shells import shell  # noqa: F401 - the fixture
from topics import create_topic, ensure_topic, unique_name

from kafkawire import errors
from kafkawire.aio.cluster import AsyncCluster
from kafkawire.client.admin import AclBinding, Admin
from kafkawire.client.cluster import Cluster
from kafkawire.client.config import Config
from kafkawire.client.consumer import TopicPartition
from kafkawire.errors import KafkaTimeoutError, NoBrokersAvailableError
from kafkawire.client.producer import Producer
from kafkawire.testing.kafka import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

MAX_MESSAGE = 100_000
SASL_USERS = {"admin": "admin-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def kafka():
    with KafkaCluster(1, listeners=["SASL_PLAINTEXT"], users=SASL_USERS, super_users=["admin"],
                      broker_config={"message.max.bytes": MAX_MESSAGE,
                                     "auto.create.topics.enable": False}) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def topic4(kafka):
    return create_topic(kafka.bootstrap, "errors4", partitions=4)


@pytest.fixture(scope="module")
def bob(kafka):
    """Options of a SASL user with no ACL at all."""
    return kafka.client_config("SASL_PLAINTEXT", mechanism="PLAIN", user="bob")


# -- topic names and partitions: refused before anything is queued --------------------------

@pytest.mark.parametrize("name", ["bad topic!", "", ".", "..", "x" * 250, "caf\u00e9"])
def test_an_invalid_topic_name_is_refused_at_once(kafka, shell, name):
    with shell.Producer(bootstrap_servers=kafka.bootstrap) as p:
        with pytest.raises(errors.InvalidTopicError, match="invalid topic name") as info:
            p.send(name, b"v")
        assert "ASCII letters, digits" in str(info.value)
        with pytest.raises(errors.InvalidTopicError):
            p.partitions_for(name)
        assert p.metrics()["buffered_bytes"] == 0


def test_the_longest_legal_name_is_accepted(kafka, shell):
    name = ensure_topic(kafka.bootstrap, unique_name("n").ljust(249, "x"), 1)
    assert len(name) == 249
    with shell.Producer(bootstrap_servers=kafka.bootstrap) as p:
        assert p.partitions_for(name) == [0]


def test_the_broker_refuses_an_invalid_name_in_metadata_at_once(kafka):
    """The clusters ask the broker without the producers' local check: Kafka's own
    INVALID_TOPIC_EXCEPTION (17) in the Metadata answer ends partitions_for at once."""
    config = Config.producer(bootstrap_servers=kafka.bootstrap)
    with Cluster(config) as cluster:
        cluster.bootstrap(30)
        with pytest.raises(errors.InvalidTopicError, match="metadata for topic 'bad topic!'"):
            cluster.partitions_for("bad topic!", 60)

    async def aio() -> None:
        c = AsyncCluster(config)
        try:
            with pytest.raises(errors.InvalidTopicError, match="INVALID_TOPIC_EXCEPTION"):
                await c.partitions_for("bad topic!", 60)
        finally:
            await c.close()

    asyncio.run(aio())


def test_an_internal_topic_refuses_produce_with_invalid_topic(kafka, shell):
    """Produce to __consumer_offsets: Kafka answers INVALID_TOPIC_EXCEPTION (17) in Produce."""
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        admin.describe_groups([unique_name("g")], timeout=60)  # its FindCoordinator creates the topic
    with shell.Producer(bootstrap_servers=kafka.bootstrap, delivery_timeout_ms=60_000) as p:
        exc = p.send("__consumer_offsets", b"v", partition=0).exception(30)
        assert isinstance(exc, errors.InvalidTopicError), exc
        assert "internal topics" in str(exc)


def test_a_partition_the_topic_lacks_is_refused_at_once(kafka, shell, topic4):
    with shell.Producer(bootstrap_servers=kafka.bootstrap) as p:
        with pytest.raises(errors.UnknownPartitionError, match=r"has 4 partitions \(0-3\)") as info:
            p.send(topic4, b"v", partition=99)
        assert (info.value.topic, info.value.partition, info.value.count) == (topic4, 99, 4)
        with pytest.raises(errors.UnknownPartitionError):
            p.send(topic4, b"v", partition=4)
        assert p.send(topic4, b"v", partition=3).result(30).partition == 3


def test_a_partition_added_since_the_last_metadata_is_found(kafka, shell):
    # The count the producer knows is checked against a fresh answer before refusing.
    topic = create_topic(kafka.bootstrap, "grows", partitions=1)
    with shell.Producer(bootstrap_servers=kafka.bootstrap) as p:
        assert p.send(topic, b"v", partition=0).result(30).partition == 0
        with Admin(bootstrap_servers=kafka.bootstrap) as admin:
            admin.create_partitions({topic: 3}, timeout=30)
            eventually(lambda: partition_count(admin, topic), 3)
        assert p.send(topic, b"v", partition=2).result(30).partition == 2


def test_send_batch_refuses_a_missing_partition_and_takes_bare_values(kafka, topic4):
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        with pytest.raises(errors.UnknownPartitionError, match="has 4 partitions"):
            p.send_batch(topic4, 7, [b"a"])
        got = p.send_batch(topic4, 1, [b"v1", b"v2", (b"k3", b"v3")]).result(30)
        assert sum(b.count for b in got) == 3
        with pytest.raises(errors.EncodeError, match="item 1 is str 'two'.*encode str values first"):
            p.send_batch(topic4, 1, [b"one", "two"])
        with pytest.raises(errors.EncodeError, match="one bytes value"):
            p.send_batch(topic4, 1, b"one")


@pytest.fixture(scope="module")
def describe_only(kafka):
    """A topic bob may Describe (so Metadata answers him) but not Write or Read: his
    Produce and Fetch are refused by those calls themselves."""
    topic = create_topic(kafka.bootstrap, "describe-only", partitions=1)
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        p.send(topic, b"secret", partition=0).result(30)
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        admin.create_acls([AclBinding("topic", topic, "User:bob", "describe")], timeout=30)
    return topic


# -- authorization: a SASL user without ACLs ----------------------------------------------------

@pytest.mark.parametrize("idempotent, want, says", [
    # InitProducerId needs Write on some topic (KIP-679): refused for the cluster.
    (True, errors.ClusterAuthorizationFailedError, "InitProducerId"),
    (False, errors.TopicAuthorizationFailedError, "producing 1 record(s)"),
])
def test_produce_refused_by_the_broker_fails_the_record_at_once(shell, bob, describe_only, idempotent,
                                                                 want, says):
    with shell.Producer(**bob, enable_idempotence=idempotent, delivery_timeout_ms=60_000) as p:
        assert p.partitions_for(describe_only) == [0]  # Describe is allowed
        exc = p.send(describe_only, b"v", partition=0).exception(30)
        assert isinstance(exc, want), exc
        assert says in str(exc)


def test_fetch_refused_by_the_broker_ends_poll(shell, bob, describe_only):
    tp = TopicPartition(describe_only, 0)
    with shell.Consumer(**bob) as c:
        c.assign([tp])
        c.seek(tp, 0)  # ListOffsets needs only Describe: start from a known offset anyway
        with pytest.raises(errors.TopicAuthorizationFailedError, match="fetching"):
            for _ in range(100):
                c.poll(0.5)


def test_topic_authorization_ends_send_and_partitions_for_at_once(shell, bob, topic4):
    with shell.Producer(**bob) as p:
        with pytest.raises(errors.TopicAuthorizationFailedError, match="grant this client's principal"):
            p.send(topic4, b"v")
        with pytest.raises(errors.TopicAuthorizationFailedError):
            p.partitions_for(topic4)
        with pytest.raises(errors.TopicAuthorizationFailedError):
            p.send(topic4, b"v", partition=0)  # asked again: the broker's current word


def test_topic_authorization_ends_a_consumers_poll(shell, bob, topic4):
    with shell.Consumer(**bob, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic4, 0)])
        with pytest.raises(errors.TopicAuthorizationFailedError):
            for _ in range(100):  # bounded: the first error ends it
                c.poll(0.5)


def test_group_authorization_ends_a_group_consumers_poll(shell, bob, describe_only):
    # The topic may be described: the group (no ACL) is what FindCoordinator refuses.
    with shell.Consumer(**bob, group_id=unique_name("g"), auto_offset_reset="earliest") as c:
        c.subscribe([describe_only])
        with pytest.raises(errors.GroupAuthorizationFailedError, match="ACL on the group id"):
            for _ in range(100):
                c.poll(0.5)


@pytest.mark.parametrize("call", ["commit", "committed"])
def test_group_authorization_ends_commit_and_committed_at_once(shell, bob, describe_only, call):
    # assign() and a group id the user may not use: FindCoordinator's refusal ends the
    # call held for a coordinator, instead of the timeout.
    tp = (describe_only, 0)
    with shell.Consumer(**bob, group_id=unique_name("g")) as c:
        c.assign([tp])
        started = time.monotonic()
        with pytest.raises(errors.GroupAuthorizationFailedError):
            if call == "commit":
                c.commit({tp: 1}, timeout=60)
            else:
                c.committed([tp], timeout=60)
        assert time.monotonic() - started < 20


def test_a_subscribed_topic_the_member_may_not_describe_ends_poll(kafka, shell, bob, topic4):
    group = unique_name("g")
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        admin.create_acls([AclBinding("group", group, "User:bob", "read")], timeout=30)
    with shell.Consumer(**bob, group_id=group, auto_offset_reset="earliest") as c:
        c.subscribe([topic4])
        with pytest.raises(errors.TopicAuthorizationFailedError):
            for _ in range(40):
                c.poll(0.5)


def test_transactional_id_authorization_ends_init_transactions(shell, bob):
    with shell.Producer(**bob, transactional_id=unique_name("tx")) as p:
        with pytest.raises(errors.TransactionalIdAuthorizationFailedError, match="transactional id"):
            p.init_transactions(60)


@pytest.mark.parametrize("call, want", [
    (lambda a, t: a.create_topics([unique_name("denied")], num_partitions=1, timeout=60,
                                  raise_on_error=False), errors.TopicAuthorizationFailedError),
    (lambda a, t: a.list_offsets({(t, 0): "latest"}, timeout=60, raise_on_error=False),
     errors.TopicAuthorizationFailedError),
    (lambda a, t: a.delete_records({(t, 0): 0}, timeout=60, raise_on_error=False),
     errors.TopicAuthorizationFailedError),
    (lambda a, t: a.describe_groups([unique_name("g")], timeout=60, raise_on_error=False),
     errors.GroupAuthorizationFailedError),
    (lambda a, t: a.describe_configs([("broker", "1")], timeout=60, raise_on_error=False),
     errors.ClusterAuthorizationFailedError),
], ids=["create_topics", "list_offsets", "delete_records", "describe_groups", "describe_configs"])
def test_admin_calls_end_with_the_authorization_error(bob, topic4, call, want):
    with Admin(**bob) as admin:
        got = list(call(admin, topic4).values())
    assert len(got) == 1 and isinstance(got[0], want), got
    assert "grant this client's principal" in str(got[0]) or "cluster resource" in str(got[0])


def test_a_super_user_is_let_through(kafka, shell, topic4):
    admin = kafka.client_config("SASL_PLAINTEXT", mechanism="PLAIN", user="admin")
    with shell.Producer(**admin) as p:
        assert p.send(topic4, b"v").result(30).topic == topic4


# -- sizes and missing topics ---------------------------------------------------------------------

def test_a_record_above_message_max_bytes_fails_with_message_too_large(kafka, shell, topic4):
    with shell.Producer(bootstrap_servers=kafka.bootstrap, compression_type="none") as p:
        exc = p.send(topic4, b"x" * (MAX_MESSAGE + 50_000), partition=0).exception(30)
        assert isinstance(exc, errors.MessageTooLargeError), exc
        assert "message.max.bytes" in str(exc)
        assert p.send(topic4, b"small", partition=0).result(30).partition == 0


def test_a_record_without_a_key_on_a_compacted_topic_fails_with_invalid_record(kafka, shell):
    topic = create_topic(kafka.bootstrap, "compacted", 1, **{"cleanup.policy": "compact"})
    with shell.Producer(bootstrap_servers=kafka.bootstrap) as p:
        exc = p.send(topic, b"no key", partition=0).exception(30)
        assert isinstance(exc, errors.InvalidRecordError), exc
        assert "producing 1 record(s)" in str(exc)
        assert p.send(topic, b"keyed", key=b"k", partition=0).result(30).offset >= 0


def test_a_timestamp_older_than_the_topic_allows_fails_with_invalid_timestamp(kafka, shell):
    topic = create_topic(kafka.bootstrap, "recent", 1, **{"message.timestamp.before.max.ms": 3_600_000})
    with shell.Producer(bootstrap_servers=kafka.bootstrap) as p:
        exc = p.send(topic, b"old", partition=0, timestamp=1_000_000_000_000).exception(30)  # 2001
        assert isinstance(exc, errors.InvalidTimestampError), exc
        assert p.send(topic, b"now", partition=0).result(30).offset >= 0


def test_a_topic_that_does_not_exist_waits_for_the_deadline_and_says_so(kafka, shell):
    # UNKNOWN_TOPIC_OR_PARTITION is retriable (the topic may be being created).
    name = unique_name("absent")
    with shell.Producer(bootstrap_servers=kafka.bootstrap, max_block_ms=1000) as p:
        with pytest.raises(KafkaTimeoutError, match=rf"{name}.*it does not exist.*Admin.create_topics"):
            p.send(name, b"v")


# -- a fetch past the log end -----------------------------------------------------------------------

def _filled(kafka: KafkaCluster, records: int) -> str:
    topic = create_topic(kafka.bootstrap, "oor", partitions=1)
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        for i in range(records):
            p.send(topic, b"v%d" % i, partition=0)
        p.flush(30)
    return topic


def _poll_until(consumer: Any, want: int) -> list[Any]:
    got: list[Any] = []
    for _ in range(60):  # bounded
        got += consumer.poll(0.5)
        if len(got) >= want:
            break
    return got


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_a_position_past_the_end_resets_per_auto_offset_reset(kafka, shell, reset):
    topic = _filled(kafka, 5)
    tp = TopicPartition(topic, 0)
    with shell.Consumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset=reset) as c:
        c.assign([tp])
        c.seek(tp, 1000)
        if reset == "earliest":
            assert [r.offset for r in _poll_until(c, 5)] == [0, 1, 2, 3, 4]
        else:
            assert c.poll(1.0) == []
            with Producer(bootstrap_servers=kafka.bootstrap) as p:
                p.send(topic, b"after", partition=0).result(30)
            got = _poll_until(c, 1)
            assert [(r.offset, r.value) for r in got] == [(5, b"after")]


def test_a_position_past_the_end_raises_with_auto_offset_reset_none(kafka, shell):
    topic = _filled(kafka, 3)
    tp = TopicPartition(topic, 0)
    with shell.Consumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="none") as c:
        c.assign([tp])
        c.seek(tp, 1000)
        with pytest.raises(errors.OffsetOutOfRangeError, match="auto_offset_reset='none'"):
            for _ in range(60):
                c.poll(0.5)


def test_records_deleted_below_the_position_reset_to_the_new_start(kafka, shell):
    topic = _filled(kafka, 6)
    tp = TopicPartition(topic, 0)
    with Admin(bootstrap_servers=kafka.bootstrap) as admin:
        admin.delete_records({tp: 4}, timeout=30)
    with shell.Consumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 1)  # below the log start now
        assert [r.offset for r in _poll_until(c, 2)] == [4, 5]


# -- bootstrap ------------------------------------------------------------------------------------------

def test_a_refused_bootstrap_is_retried_to_its_deadline_saying_what_it_tried(shell):
    from kafkawire.testing._process import free_port

    boot = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    # A refused connection is retriable (a broker still starting): each address is tried
    # again after its reconnect backoff until the call's deadline, which the error names.
    # (The asyncio shell's start() bootstraps; the sync constructors ask no broker.)
    for make, call in ((lambda: shell.Producer(bootstrap_servers=boot, max_block_ms=1500),
                        lambda p: p.send("t", b"v")),
                       (lambda: shell.Consumer(bootstrap_servers=boot, request_timeout_ms=1500),
                        lambda c: c.end_offsets([("t", 0)]))):
        start = time.monotonic()
        with pytest.raises(NoBrokersAvailableError, match=r"gave up after 1\.\d s of the 1\.5 s allowed") as info:
            client = make()
            try:
                call(client)
            finally:
                client.close()
        assert 1.4 < time.monotonic() - start < 3.5
        assert str(info.value).count("refused") == 2 and "attempts, the last" in str(info.value)
        assert info.value.retriable
