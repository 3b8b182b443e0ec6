"""Share groups (KIP-932) on Apache Kafka: kafkawire's ShareConsumer in groups of one and
several, records acquired under a lock and acknowledged one by one.

The cluster is this module's own: a 2 s acquisition lock (the default is 30 s) and a
delivery count limit of 2, so that a lock running out and archiving are seen within the
test; every group reads from the earliest offset (share.auto.offset.reset, a group
config set with IncrementalAlterConfigs on the GROUP resource).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Iterator

import pytest

from kafkawire import Producer
from kafkawire.aio.admin import AsyncAdmin
from kafkawire.aio.share_consumer import AsyncShareConsumer
from kafkawire.client.admin import Admin
from kafkawire.client.cluster import Cluster
from kafkawire.client.share_consumer import ShareConsumer
from kafkawire.core.config import Config
from kafkawire.protocol import apis
from kafkawire.protocol.share_group import ACCEPT, REJECT, RELEASE
from kafkawire.testing.kafka import KAFKA_VERSION, KafkaCluster, java_binary, kafka_jars
from topics import create_topic, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.kafka, pytest.mark.groups]

IAC = apis.get("IncrementalAlterConfigs")
GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
LOCK_S = 2.0


@pytest.fixture(scope="module")
def share_kafka() -> Iterator[KafkaCluster]:
    with KafkaCluster(1, broker_config={
        "group.share.record.lock.duration.ms": int(LOCK_S * 1000),
        "group.share.min.record.lock.duration.ms": 1000,
        "group.share.delivery.count.limit": 2,
        "group.share.min.delivery.count.limit": 2,
        # Members learn of a new assignment within a second rather than five.
        "group.share.heartbeat.interval.ms": 1000,
        "group.share.min.heartbeat.interval.ms": 1000,
    }) as cluster:
        yield cluster


def group_config(k: KafkaCluster, group: str, **configs: str) -> None:
    R = IAC.Request.AlterConfigsResource
    req = IAC.Request(resources=[R(resource_type=GROUP_RESOURCE, resource_name=group, configs=[
        R.AlterableConfig(name=n.replace("_", "."), config_operation=0, value=v) for n, v in configs.items()])])
    with Cluster(Config.client(bootstrap_servers=k.bootstrap)) as cluster:
        resp = cluster.request(None, IAC, req, 20.0)
    assert [r.error_code for r in resp.responses] == [0], resp


def new_group(k: KafkaCluster) -> str:
    group = unique_name("share")
    group_config(k, group, share_auto_offset_reset="earliest")
    return group


def produce(k: KafkaCluster, topic: str, n: int, start: int = 0, partitions: int = 0) -> None:
    """``n`` records; with ``partitions``, round-robin over them and one batch each, so that
    a ShareFetch can acquire a few at a time (the broker hands out whole batches) and every
    member of a group gets a share rather than the first to ask taking them all."""
    with Producer(bootstrap_servers=k.bootstrap) as p:
        for i in range(start, start + n):
            if partitions:
                p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
                p.flush(20)
            else:
                p.send(topic, key=b"k%d" % i, value=b"v%d" % i)
        p.flush(20)


def consumer(k: KafkaCluster, group: str, topic: str, **options: Any) -> ShareConsumer:
    c = ShareConsumer(bootstrap_servers=k.bootstrap, group_id=group, **options)
    c.subscribe([topic])
    return c


def drain(consumers: list[ShareConsumer], want: int, timeout: float = 40.0,
          ack: Any = None) -> list[list[Any]]:
    """Poll every consumer in turn until ``want`` records came in all, or ``timeout``."""
    got: list[list[Any]] = [[] for _ in consumers]
    deadline = time.monotonic() + timeout
    while sum(map(len, got)) < want and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            recs = c.poll(0.2)
            if ack is not None:
                for r in recs:
                    c.acknowledge(r, ack(r))
            got[i].extend(recs)
    return got


def test_one_consumer_reads_all_and_accepted_records_do_not_come_back(share_kafka):
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-one")
    group = new_group(k)
    produce(k, topic, 50)
    results: list[tuple[dict, Any]] = []
    with consumer(k, group, topic) as c:
        c.set_acknowledgement_commit_callback(lambda offsets, err: results.append((offsets, err)))
        (got,) = drain([c], 50)
        assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(50))
        assert {r.delivery_count for r in got} == {1}
        assert all(r.key == b"k%d" % r.offset and r.topic == topic and r.partition == 0 for r in got)
        assert c.acquisition_lock_timeout_ms == LOCK_S * 1000
        assert c.commit_sync(10) == {(topic, 0): None}  # the last poll's, accepted
        # Accepted: nothing comes again, even after the lock would have run out.
        time.sleep(LOCK_S + 0.5)
        assert c.poll(1.5) == []
    acked = sorted(o for offsets, err in results if err is None for o in offsets.get((topic, 0), []))
    assert acked == list(range(50))


def test_members_get_disjoint_parts_and_together_all(share_kafka):
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-many", partitions=2)
    group = new_group(k)
    consumers = [consumer(k, group, topic, max_poll_records=5) for _ in range(3)]
    try:
        # Everyone joined before the records come, so each has a chance at them.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(c.assignment() for c in consumers):
            for c in consumers:
                c.poll(0.1)
        assert all(c.assignment() for c in consumers)
        # Produced while the members poll: a member's fetch acquires records as they come,
        # and records acquired while nobody polls would outlive the 2 s lock.
        producing = threading.Thread(target=produce, args=(k, topic, 300), kwargs={"partitions": 2})
        producing.start()
        got = drain(consumers, 300)
        producing.join(30)
        keys = [[(r.partition, r.offset) for r in part] for part in got]
        flat = [x for part in keys for x in part]
        assert sorted(flat) == [(p, o) for p in (0, 1) for o in range(150)]  # all, each once
        assert sum(1 for part in got if part) >= 2, [len(p) for p in got]
        for c in consumers:
            c.commit_sync(10)
    finally:
        for c in consumers:
            c.close(10)


def test_release_redelivers_reject_never_and_past_the_limit_archived(share_kafka):
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-acks")
    group = new_group(k)
    produce(k, topic, 6)
    seen: dict[int, list[int]] = {}
    with consumer(k, group, topic, share_acknowledgement_mode="explicit") as c:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for r in c.poll(0.5):
                seen.setdefault(r.offset, []).append(r.delivery_count)
                # 0-1 released every time (archived after the limit of 2), 2-3 rejected,
                # 4-5 released once and then accepted.
                if r.offset < 2:
                    c.acknowledge(r, RELEASE)
                elif r.offset < 4:
                    c.acknowledge(r, REJECT)
                else:
                    c.acknowledge(r, RELEASE if r.delivery_count == 1 else ACCEPT)
            if seen.get(4) == [1, 2] and seen.get(5) == [1, 2] and seen.get(0) == [1, 2]:
                break
        results = c.commit_sync(10)
        assert all(v is None for v in results.values()), results
        # Nothing more: rejected never again, released twice = archived.
        assert c.poll(LOCK_S + 1.0) == []
    assert seen == {0: [1, 2], 1: [1, 2], 2: [1], 3: [1], 4: [1, 2], 5: [1, 2]}


def test_close_without_acknowledging_in_explicit_mode_releases_to_the_others(share_kafka):
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-close")
    group = new_group(k)
    produce(k, topic, 10)
    first = consumer(k, group, topic, share_acknowledgement_mode="explicit")
    (held,) = drain([first], 10)
    first.close(10)  # unacknowledged: released
    with consumer(k, group, topic) as second:
        (again,) = drain([second], 10, timeout=20)
    assert sorted(r.offset for r in again) == sorted(r.offset for r in held) == list(range(10))
    assert {r.delivery_count for r in again} == {2}


KILLED = textwrap.dedent("""
    import sys, time
    from kafkawire.client.share_consumer import ShareConsumer
    c = ShareConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2],
                      share_acknowledgement_mode="explicit")
    c.subscribe([sys.argv[3]])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < int(sys.argv[4]) and time.monotonic() < deadline:
        got += c.poll(0.5)
    print(len(got), flush=True)
    time.sleep(60)  # holding them, never acknowledged, until killed
""")


def test_killed_consumer_records_come_again_after_the_lock_with_delivery_count_2(share_kafka):
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-kill")
    group = new_group(k)
    produce(k, topic, 20)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", KILLED, k.bootstrap, group, topic, "20"],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.strip() == "20", line
        with consumer(k, group, topic) as other:
            # Held by the live process: nothing for the other member yet.
            assert other.poll(0.5) == []
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            killed_at = time.monotonic()
            (again,) = drain([other], 20, timeout=20)
            assert time.monotonic() - killed_at < LOCK_S + 10
        assert sorted(r.offset for r in again) == list(range(20))
        assert {r.delivery_count for r in again} == {2}
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_async_members_disjoint_all_release_and_callback(share_kafka):
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-aio", partitions=2)
    group = new_group(k)
    produce(k, topic, 200)

    async def main() -> tuple[list[list[Any]], list[Any], list[tuple[dict, Any]]]:
        results: list[tuple[dict, Any]] = []
        members = [AsyncShareConsumer(bootstrap_servers=k.bootstrap, group_id=group) for _ in range(2)]
        try:
            for c in members:
                await c.start()
                c.subscribe([topic])
                c.set_acknowledgement_commit_callback(lambda offsets, err: results.append((offsets, err)))
            got: list[list[Any]] = [[], []]
            released: list[Any] = []
            deadline = asyncio.get_running_loop().time() + 40
            while sum(map(len, got)) < 200 and asyncio.get_running_loop().time() < deadline:
                for i, c in enumerate(members):
                    for r in await c.poll(0.2):
                        if r.offset == 7 and r.partition == 0 and r.delivery_count == 1:
                            c.acknowledge(r, RELEASE)  # comes again, to one of them
                            released.append(r)
                        else:
                            got[i].append(r)
            for c in members:
                assert all(v is None for v in (await c.commit_sync(10)).values())
            return got, released, results
        finally:
            for c in members:
                await c.close(10)

    got, released, results = asyncio.run(asyncio.wait_for(main(), 90))
    flat = [(r.partition, r.offset) for part in got for r in part]
    assert len(flat) == len(set(flat)) == 200
    assert len(released) == 1
    again = [r for part in got for r in part if (r.partition, r.offset) == (0, 7)]
    assert [r.delivery_count for r in again] == [2]
    accepted = {(tp[1], o) for offsets, err in results if err is None for tp, offs in offsets.items() for o in offs}
    assert accepted == set(flat)  # every record given was accepted, (0, 7) on its second delivery


def test_admin_lists_describes_and_moves_share_group_offsets(share_kafka):
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-admin", partitions=2)
    group = new_group(k)
    with Producer(bootstrap_servers=k.bootstrap) as p:
        for i in range(20):
            p.send(topic, value=b"v%d" % i, partition=i % 2)
        p.flush(20)
    members = [consumer(k, group, topic) for _ in range(2)]
    with Admin(bootstrap_servers=k.bootstrap) as admin:
        try:
            early: list[Any] = []  # what polls gave while the members were joining
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not all(c.assignment() for c in members):
                for c in members:
                    early += c.poll(0.1)
            assert group in admin.list_share_groups()
            desc = admin.describe_share_groups([group])[group]
            assert desc.state == "Stable" and desc.group_epoch >= 1
            assert sorted(m.member_id for m in desc.members) == sorted(c.member_id for c in members)
            assert all(m.subscription == [topic] for m in desc.members)
            owned = sorted(p for m in desc.members for p in m.assignment.get(topic, []))
            assert owned == [0, 1]
            assert {(topic, p) for m in desc.members for p in m.assignment[topic]} == \
                set().union(*(c.assignment() for c in members))
            got = drain(members, 20 - len(early))
            assert sorted((r.partition, r.offset) for r in early + [r for part in got for r in part]) == \
                [(p, o) for p in (0, 1) for o in range(10)]
            for c in members:
                c.commit_sync(10)
        finally:
            for c in members:
                c.close(10)
        # Every record accepted: no lag left on either partition.  (Kafka 4.4 may still name
        # the start offset the group began at: the lag is what says all was acknowledged.)
        deadline = time.monotonic() + 20
        while True:
            offsets = admin.list_share_group_offsets(group)
            if [o.lag for o in offsets.values()] == [0, 0] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert sorted(offsets) == [(topic, 0), (topic, 1)]
        assert [o.lag for o in offsets.values()] == [0, 0]
        assert all(0 <= o.start_offset <= 10 for o in offsets.values())
        assert admin.describe_share_groups([group])[group].state == "Empty"
        assert admin.describe_share_groups(["no-such-share-group"])["no-such-share-group"].state == "Dead"

        # Back to 4 on partition 0: its records from there come again, as new deliveries.
        assert admin.alter_share_group_offsets(group, {(topic, 0): 4}) == {(topic, 0): None}
        assert admin.list_share_group_offsets(group, [(topic, 0)])[(topic, 0)].start_offset == 4
        with consumer(k, group, topic) as again:
            (recs,) = drain([again], 6, timeout=20)
        assert sorted((r.partition, r.offset, r.delivery_count) for r in recs) == [(0, o, 1) for o in range(4, 10)]

        assert admin.delete_share_group_offsets(group, [topic]) == {topic: None}
        assert admin.list_share_group_offsets(group) == {}

        async def described() -> Any:
            async with AsyncAdmin(bootstrap_servers=k.bootstrap) as aadmin:
                return (await aadmin.list_share_groups(), await aadmin.describe_share_groups([group]),
                        await aadmin.list_share_group_offsets(group))

        listed, adesc, aoffsets = asyncio.run(asyncio.wait_for(described(), 30))
        assert group in listed and adesc[group].state == "Empty" and aoffsets == {}


JAVA_READER = os.path.join(os.path.dirname(__file__), "java", "ShareReader.java")


def test_kafkawire_and_java_share_consumers_in_one_group(share_kafka):
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-java", partitions=3)
    group = new_group(k)
    libs = os.path.join(kafka_jars(KAFKA_VERSION), "*")
    java = subprocess.Popen([java_binary(), "-cp", libs, JAVA_READER, k.bootstrap, group, topic, "6", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    members = [consumer(k, group, topic, max_poll_records=5) for _ in range(2)]
    try:
        got: list[Any] = []
        with Admin(bootstrap_servers=k.bootstrap) as admin:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for c in members:
                    got += c.poll(0.2)
                desc = admin.describe_share_groups([group])[group]
                if len(desc.members) == 3 and all(m.assignment for m in desc.members):
                    break
            assert len(desc.members) == 3
            client_ids = {m.client_id for m in desc.members}
        producing = threading.Thread(target=produce, args=(k, topic, 300), kwargs={"partitions": 3})
        producing.start()
        while java.poll() is None:
            for c in members:
                got += c.poll(0.2)
        producing.join(30)
        out, _ = java.communicate(timeout=10)
        assert java.returncode == 0
        java_got = [tuple(int(x) for x in line.split("\t")[1:]) for line in out.splitlines()
                    if line.startswith("record\t")]
        deadline = time.monotonic() + 20
        while len(got) + len(java_got) < 300 and time.monotonic() < deadline:
            for c in members:
                got += c.poll(0.2)
        ours = [(r.partition, r.offset) for r in got]
        theirs = [(p, o) for p, o, _count in java_got]
        # Disjoint, and together every record, each handed to one reader once.  A record may
        # still come with delivery_count 2: this module's 2 s lock can lapse on a record one
        # member fetched ahead but had not handed out when the machine is busy (KIP-932
        # releases it to the group); what no member may do is hand it out a second time.
        assert java_got and ours, (len(java_got), len(ours), client_ids)
        assert sorted(ours + theirs) == [(p, o) for p in range(3) for o in range(100)]
    finally:
        if java.poll() is None:
            java.kill()
            java.wait(10)
        for c in members:
            c.close(10)


def test_records_held_for_a_partition_moved_away_go_to_the_member_that_has_it(share_kafka):
    # The member holding records fetched ahead learns that a second member took one of its
    # partitions: those records are released to the group (a ShareAcknowledge) and the new
    # owner gets them.  Released on a ShareFetch still naming the partition, they were
    # acquired again by the same fetch, released again, and archived at the module's
    # delivery count limit of 2: lost to both members.
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-moved", partitions=2)
    group = new_group(k)
    # Locks that outlast a busy machine's join: a lapsed one would redeliver what the
    # first member still holds and hands out, which is not what this test is about.
    group_config(k, group, share_record_lock_duration_ms="20000")
    with Producer(bootstrap_servers=k.bootstrap) as p:
        for i in range(20):
            p.send(topic, value=b"v%d" % i, partition=i % 2)
        p.flush(20)
    first = consumer(k, group, topic)
    second = None
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got += first.poll(0.2, max_records=1)  # the rest waits in its buffer
        assert len(got) == 1 and first.assignment() == {(topic, 0), (topic, 1)}
        assert first.acquisition_lock_timeout_ms == 20000
        second = consumer(k, group, topic)
        deadline = time.monotonic() + 20
        while (len(first.assignment()) != 1 or not second.assignment()) and time.monotonic() < deadline:
            got += second.poll(0.1)
            got += first.poll(0.1, max_records=1)
        assert len(first.assignment()) == 1 and second.assignment() and \
            first.assignment() | second.assignment() == {(topic, 0), (topic, 1)}
        alone = time.monotonic() + 1.0  # what the first does with them, the second not asking
        while time.monotonic() < alone:
            got += first.poll(0.1, max_records=1)
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += first.poll(0.2, max_records=1)
            got += second.poll(0.2)
        assert sorted((r.partition, r.offset) for r in got) == [(p, o) for p in (0, 1) for o in range(10)]
    finally:
        for c in (first, second):
            if c is not None:
                c.close(10)


EXAMPLE = '''
from kafkawire import Admin, AcknowledgeType, Producer, ShareConsumer

with Producer(bootstrap_servers=BOOTSTRAP) as producer:
    for job in (b"resize", b"flaky", b"poison", b"thumbnail"):
        producer.send("jobs", value=job)

# A new share group starts at the end of the topic: start this one at the beginning.
with Admin(bootstrap_servers=BOOTSTRAP) as admin:
    admin.alter_share_group_offsets("workers", {("jobs", 0): 0})

done = []
with ShareConsumer(bootstrap_servers=BOOTSTRAP, group_id="workers",
                   share_acknowledgement_mode="explicit") as worker:
    worker.subscribe(["jobs"])
    while len(done) < 4:
        for job in worker.poll(timeout=1.0):
            if job.value == b"flaky" and job.delivery_count == 1:
                worker.acknowledge(job, AcknowledgeType.RELEASE)  # delivered again, count 2
                continue
            if job.value == b"poison":
                worker.acknowledge(job, AcknowledgeType.REJECT)   # never delivered again
            else:
                worker.acknowledge(job, AcknowledgeType.ACCEPT)
            done.append((job.value, job.delivery_count))
print(sorted(done))
'''


def test_readme_work_queue_example(share_kafka, capsys):
    """The example given for the README's "work queues with share groups", run as written
    but on a fresh topic and group."""
    topic, group = create_topic(share_kafka.bootstrap, "jobs"), unique_name("workers")
    code = EXAMPLE.replace('"jobs"', repr(topic)).replace('"workers"', repr(group))
    exec(compile(code, "README example", "exec"), {"BOOTSTRAP": share_kafka.bootstrap})
    assert capsys.readouterr().out.strip() == \
        "[(b'flaky', 2), (b'poison', 1), (b'resize', 1), (b'thumbnail', 1)]"


def test_requests_wait_for_their_connection_instead_of_failing(share_kafka):
    # A new member's heartbeat and first ShareFetch go to brokers it has no connection to
    # yet: they are sent once connected, not failed (which would forget the coordinator,
    # reset the share session and fail the acknowledgements they carry).
    k = share_kafka
    topic = create_topic(k.bootstrap, "share-connect")
    group = new_group(k)
    produce(k, topic, 20)
    with consumer(k, group, topic) as c:
        failures: list[tuple[str, BaseException]] = []
        real = c._member.on_failure
        c._member.on_failure = lambda send, exc, now: (failures.append((send.kind, exc)), real(send, exc, now))
        (got,) = drain([c], 20)
        assert len(got) == 20
        assert c.commit_sync(10) == {(topic, 0): None}
        assert failures == []
