"""kafkawire.aio.AsyncAdmin on Apache Kafka.

The calls themselves are checked on both shells by the suites that test Admin: the
tests of test_admin.py and test_kafka_admin.py take either shell (``make_admin``).
What is the asyncio shell's own is here: awaited calls, several at once on one client,
the same typed errors at once, and a deadline on every call.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from kafkawire import errors
from kafkawire.aio import AsyncAdmin
from kafkawire.client.admin import (
    AclBinding,
    AclBindingFilter,
    AdminError,
    ClientQuotaEntity,
    ConfigResource,
    NewTopic,
    OffsetAndMetadata,
    ScramCredentialInfo,
    TopicPartition,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafkawire.errors import ClientClosedError, KafkaTimeoutError, NoBrokersAvailableError
from kafkawire.protocol.api import ApiVersionError
from topics import unique_name

pytestmark = pytest.mark.broker

# A permanent refusal comes back at once, not after retries up to the deadline.
PROMPT = 3.0

def _on(broker) -> AsyncAdmin:
    return AsyncAdmin(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def on_kafka(test):
    """The test ``await test(admin, kafka_broker)``, with an AsyncAdmin on the session's Kafka."""
    def run_on(kafka_broker):
        async def main():
            async with _on(kafka_broker) as admin:
                await test(admin, kafka_broker)

        run(main())

    run_on.__name__ = run_on.__qualname__ = test.__name__
    return run_on


async def _prompt(call):
    """Await ``call`` expecting an error; return it, checking it came without retrying."""
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        await call
    assert time.monotonic() - start < PROMPT, f"{info.value!r} took {time.monotonic() - start:.1f}s"
    return info.value


def test_async_admin_is_exported():
    import kafkawire.aio

    assert "AsyncAdmin" in kafkawire.aio.__all__ and kafkawire.aio.AsyncAdmin is AsyncAdmin


@on_kafka
async def test_topics_partitions_configs_awaited_and_at_once(admin, kafka_broker):
    a, b = unique_name("aio"), unique_name("aio")
    # Two calls on one client at once, each with its own deadline.
    made_a, made_b = await asyncio.gather(
        admin.create_topics([NewTopic(a, 1, 1, {"retention.ms": "123456"})], timeout=20),
        admin.create_topics([b], num_partitions=2, timeout=20))
    assert (made_a[a].num_partitions, made_b[b].num_partitions) == (1, 2)
    assert made_a[a].topic_id is not None and made_a[a].topic_id != made_b[b].topic_id
    await _until(lambda: admin.describe_topics([a, b], raise_on_error=False),
                 lambda got: all(not isinstance(v, Exception) for v in got.values()))
    assert await admin.create_partitions({a: 3}) == {a: None}
    await _until(lambda: admin.describe_topics([a]), lambda got: sorted(got[a].partitions) == [0, 1, 2])
    cluster = await admin.describe_cluster()
    assert cluster.cluster_id == kafka_broker.cluster_id and list(cluster.brokers) == [1]
    assert {a, b} <= set(await admin.list_topics())

    res = ConfigResource("topic", a)
    assert (await admin.describe_configs([res]))[res]["retention.ms"].value == "123456"
    assert await admin.alter_configs({res: {"retention.ms": "654321"}}) == {res: None}
    await _until(lambda: admin.describe_configs([res], keys=["retention.ms"]),
                 lambda got: got[res]["retention.ms"].value == "654321")

    assert await admin.delete_topics([b]) == {b: None}
    await _until(admin.list_topics, lambda got: b not in got and a in got)


@on_kafka
async def test_groups_and_offsets_awaited(admin, kafka_broker):
    topic, group = unique_name("aio-g"), unique_name("g-aio")
    await admin.create_topics([topic], num_partitions=2)
    await _until(lambda: admin.describe_topics([topic], raise_on_error=False),
                 lambda got: not isinstance(got[topic], Exception) and len(got[topic].partitions) == 2)
    await _until(lambda: admin.alter_group_offsets(group, {(topic, 0): 0, (topic, 1): 0},
                                                   raise_on_error=False),
                 lambda got: all(v is None for v in got.values()))
    assert await admin.alter_group_offsets(group, {(topic, 0): 3, (topic, 1): OffsetAndMetadata(1, "m")}) \
        == {(topic, 0): None, (topic, 1): None}
    got = await admin.list_group_offsets(group)
    assert {tp: (om.offset, om.metadata) for tp, om in got.items()} == {
        (topic, 0): (3, ""), (topic, 1): (1, "m")}
    ends = await admin.list_offsets({(topic, 0): "latest", (topic, 1): "earliest"})
    assert (ends[(topic, 0)].offset, ends[(topic, 1)].offset) == (0, 0)
    lag = await admin.group_lag(group)
    assert lag.total == 0 and lag.partitions[TopicPartition(topic, 0)].committed == 3
    listed, described = await asyncio.gather(admin.list_groups(), admin.describe_groups([group]))
    assert listed[group].state == "Empty" and described[group].state == "Empty"
    assert await admin.delete_group_offsets(group, [(topic, 1)]) == {(topic, 1): None}
    assert list(await admin.list_group_offsets(group)) == [(topic, 0)]
    assert await admin.delete_groups([group]) == {group: None}
    assert await admin.list_group_offsets(group) == {}


@on_kafka
async def test_refusals_are_the_sync_shells_typed_errors_at_once(admin, kafka_broker):
    dup, ghost = unique_name("dup"), unique_name("ghost")
    await admin.create_topics([dup], num_partitions=1)
    exc = await _prompt(admin.create_topics([dup], num_partitions=1))
    assert isinstance(exc, AdminError) and exc.code == 36
    assert isinstance(exc.errors[dup], errors.TopicAlreadyExistsError) and "raise_on_error" in str(exc)
    exc = await _prompt(admin.create_topics([NewTopic(ghost, 1, 1, {"cleanup.policy": "sometimes"})]))
    assert isinstance(exc.errors[ghost], errors.InvalidConfigError) and "cleanup.policy" in str(exc)
    exc = await _prompt(admin.delete_topics([ghost]))
    assert isinstance(exc.errors[ghost], errors.UnknownTopicOrPartitionError) and exc.code == 3
    got = await admin.describe_topics([ghost], raise_on_error=False)
    assert isinstance(got[ghost], errors.UnknownTopicOrPartitionError)
    exc = await _prompt(admin.alter_configs({("topic", ghost): {"retention.ms": "1000"}}))
    assert isinstance(exc.errors[ConfigResource("topic", ghost)], errors.UnknownTopicOrPartitionError)
    exc = await _prompt(admin.delete_group_offsets(unique_name("g-ghost"), [(dup, 0)]))
    assert isinstance(exc, errors.GroupIdNotFoundError)
    # Refused before anything is sent, as Admin refuses them.
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        await admin.list_topics(timeout=-1)
    with pytest.raises(TypeError, match="NewTopic"):
        await admin.create_topics([3])
    with pytest.raises(ValueError, match="offset spec"):
        await admin.list_offsets({(dup, 0): "soon"})
    await admin.close()
    with pytest.raises(ClientClosedError):
        await admin.list_topics()


@on_kafka
async def test_scram_credentials_awaited(admin, kafka_broker):
    # Kafka keeps SCRAM credentials in its metadata log: a PLAINTEXT client manages them.
    user = unique_name("scram")
    made = await admin.alter_user_scram_credentials([  # two of one user: sent one after the other
        UserScramCredentialUpsertion(user, "SCRAM-SHA-256", "pw", iterations=4096),
        UserScramCredentialUpsertion(user, "SCRAM-SHA-512", "pw", iterations=8192)])
    assert made == {user: None}
    got = await _until(lambda: admin.describe_user_scram_credentials([user], raise_on_error=False),
                       lambda got: not isinstance(got[user], Exception) and len(got[user]) == 2)
    assert got[user] == [ScramCredentialInfo("SCRAM-SHA-256", 4096), ScramCredentialInfo("SCRAM-SHA-512", 8192)]
    exc = await _prompt(admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, "SCRAM-SHA-256", "pw", iterations=16385)]))  # Kafka's cap: 16384
    assert isinstance(exc.errors[user], errors.UnacceptableCredentialError)
    assert await admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, "SCRAM-SHA-256"),
                                                     UserScramCredentialDeletion(user, "SCRAM-SHA-512")]) == {user: None}
    await _until(lambda: admin.describe_user_scram_credentials([user], raise_on_error=False),
                 lambda got: isinstance(got[user], errors.ResourceNotFoundError))


def test_every_call_has_a_deadline(kafka_broker):
    # A listener that accepts and never answers: the call ends at its timeout, saying so.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)

    async def main():
        start = time.monotonic()
        with pytest.raises((NoBrokersAvailableError, KafkaTimeoutError)):
            await AsyncAdmin(bootstrap_servers=f"127.0.0.1:{silent.getsockname()[1]}").start(timeout=0.5)
        assert time.monotonic() - start < 2.0
        async with _on(kafka_broker) as admin:
            # A broker that takes longer than the call may: the deadline ends the wait.
            topic = unique_name("aio-t")
            start = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match=r"create_topics did not finish within 0\.001s"):
                await admin.create_topics([topic], num_partitions=1, timeout=0.001)
            assert time.monotonic() - start < 1.0
            assert (await admin.describe_cluster(timeout=5)).brokers  # and the client goes on

    try:
        run(main())
    finally:
        silent.close()


@pytest.mark.deadlines
def test_every_call_ends_at_its_deadline_with_every_broker_stopped(tansu_broker_factory):
    broker = tansu_broker_factory()
    topic, group = unique_name("aio-down"), unique_name("g-aio-down")
    tp, t = (topic, 0), 0.8
    calls = {  # every call of AsyncAdmin, with arguments that would need the broker
        "describe_cluster": (), "list_topics": (), "describe_topics": ([topic],),
        "create_topics": ([f"{topic}-n"],), "delete_topics": ([topic],), "create_partitions": ({topic: 3},),
        "list_offsets": ({tp: "latest"},), "delete_records": ({tp: 1},), "list_groups": (),
        "describe_groups": ([group],), "delete_groups": ([group],), "list_group_offsets": (group,),
        "alter_group_offsets": (group, {tp: 1}), "delete_group_offsets": (group, [tp]), "group_lag": (group,),
        "describe_configs": ([("topic", topic)],), "alter_configs": ({("topic", topic): {"retention.ms": "1"}},),
        "describe_user_scram_credentials": (),
        "alter_user_scram_credentials": ([UserScramCredentialUpsertion("u", "SCRAM-SHA-256", "pw")],),
        "create_acls": ([AclBinding("topic", topic, "User:u", "read")],), "describe_acls": (),
        "delete_acls": ([AclBindingFilter(principal="User:u")],), "list_transactions": (),
        "describe_transactions": (["tid"],), "describe_producers": ([tp],), "abort_transaction": (tp, 1, 0, 0),
        "describe_client_quotas": (), "alter_client_quotas": ({ClientQuotaEntity(user="u"): {"producer_byte_rate": 1}},),
        "alter_partition_reassignments": ({tp: [1]},), "list_partition_reassignments": (),
        "elect_leaders": ("preferred", [tp]), "describe_log_dirs": (), "alter_replica_log_dirs": ({(topic, 0, 1): "/d"},),
        "describe_features": (), "update_features": ({"transaction.version": 2},),
        "describe_topic_partitions": ([topic],),
        "list_share_groups": (), "describe_share_groups": ([group],), "list_share_group_offsets": (group,),
        "alter_share_group_offsets": (group, {tp: 0}), "delete_share_group_offsets": (group, [topic]),
    }
    public = {n for n in dir(AsyncAdmin) if not n.startswith("_") and asyncio.iscoroutinefunction(getattr(AsyncAdmin, n))}
    assert public - {"start", "close"} == set(calls)

    async def main():
        admin = AsyncAdmin(bootstrap_servers=broker.bootstrap, request_timeout_ms=1000,
                           reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
        try:
            await admin.create_topics([topic], num_partitions=1, timeout=10)
            await admin.alter_group_offsets(group, {tp: 0}, timeout=10)
            broker.stop()
            for name, args in calls.items():
                start = time.monotonic()
                with pytest.raises(KafkaTimeoutError):
                    await getattr(admin, name)(*args, timeout=t)
                assert time.monotonic() - start < t + 1.0, name
        finally:
            await admin.close()

    run(main())


def test_an_api_the_broker_lacks_is_named_at_once(mock_cluster):
    # librdkafka's mock has no CreateTopics: the same ApiVersionError as Admin's, at once.
    async def main():
        async with AsyncAdmin(bootstrap_servers=mock_cluster.bootstrap, request_timeout_ms=5000) as admin:
            exc = await _prompt(admin.create_topics(["x"]))
            assert isinstance(exc, ApiVersionError)
            assert "create_topics: " in str(exc) and "CreateTopics (key" in str(exc) and "127.0.0.1:" in str(exc)

    run(main())


async def _until(call, ok, timeout: float = 15.0):
    """Await ``call()`` until ``ok(result)``: Kafka's metadata settles a moment after a change."""
    deadline = time.monotonic() + timeout
    while True:
        got = await call()
        if ok(got):
            return got
        assert time.monotonic() < deadline, f"still {got!r}"
        await asyncio.sleep(0.1)
