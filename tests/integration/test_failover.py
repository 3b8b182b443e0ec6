"""Broker failover: two Tansu brokers sharing one S3 bucket (moto's server on loopback),
one killed with SIGKILL (or restarted) while kafkawire produces and consumes.

What Tansu 0.6 does on shared storage (measured; the fixture is kafkawire.testing's
TansuCluster):
- There is no cluster membership: each broker answers Metadata with itself alone, as node
  111 at its own advertised address, controller and leader of every partition. Topics and
  producer state (meta.json), watermarks, batches (one object each), groups and committed
  offsets live in the bucket, so every broker answers for the whole cluster.
- When a client's broker dies, nobody moves leadership: the client finds the survivor
  through its bootstrap list, and there node 111 has a new address. A client must follow
  a node id to a new address to survive this (librdkafka does).
- A Produce is answered after the batch object and the partition's watermark.json are in
  the bucket, so an acknowledged record survives the broker's SIGKILL.
- A batch the dying broker wrote but did not acknowledge is written again by the survivor
  when the producer retries it: a duplicate, unless the producer is idempotent.
- Idempotent produce is not crash-safe: the batch's sequence is taken in meta.json before
  the batch is written, so a kill in between loses the batch and its retry is answered
  DUPLICATE_SEQUENCE_NUMBER (confluent-kafka's idempotent producer loses records the same
  way). That case, and only when the bucket proves it, ends as an expected failure.

Every record whose future resolved is read back by kafkawire's consumer and by
confluent-kafka's, from the bucket through a broker that did not die: none may be lost,
each must be at its acknowledged offset, and the two readers must see the same log.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict

import pytest

from kafkawire.client.admin import Admin
from kafkawire.client.consumer import Consumer, TopicPartition
from kafkawire.client.producer import Producer

pytestmark = [pytest.mark.broker, pytest.mark.failover]

PARTITIONS = 4
NODE_ID = 111  # Tansu's fixed node id, on every broker
# Records acknowledged before the kill, and records sent after it that must be
# acknowledged (through the survivor) before the producer stops.
BEFORE, AFTER = 300, 300
# The machine is shared and loaded: every wait is generous, every one is bounded.
PHASE_TIMEOUT = 90.0
READ_TIMEOUT = 90.0
CLIENT = dict(
    request_timeout_ms=15000,
    retry_backoff_ms=100,
    retry_backoff_max_ms=1000,
    reconnect_backoff_ms=50,
    reconnect_backoff_max_ms=1000,
)


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = Admin(bootstrap_servers=bootstrap, **CLIENT)
    try:
        admin.create_topics([topic], num_partitions=partitions, replication_factor=1, timeout=30)
    finally:
        admin.close()


def _index_of(cluster, address: tuple[str, int]) -> int:
    """Which broker of ``cluster`` listens on ``address``."""
    for i, broker in enumerate(cluster.brokers):
        if (broker.host, broker.port) == tuple(address):
            return i
    raise AssertionError(f"{address} is none of the cluster's brokers {cluster!r}")


class _Sent:
    """Every record the test sends: its value, its partition, and how its future ended
    (counted by a callback, so the loop never scans the futures)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: list[tuple[bytes, int, object]] = []  # (value, partition, future)
        self.acked = 0
        self.acked_since_mark = 0
        self.mark_at = 0  # records[mark_at:] are the ones sent after the mark
        self.failures: list[BaseException] = []

    def callback(self, index: int):
        def done(meta, exc) -> None:
            with self.lock:
                if exc is not None:
                    self.failures.append(exc)
                else:
                    self.acked += 1
                    if index >= self.mark_at:
                        self.acked_since_mark += 1
        return done

    def mark(self) -> None:
        with self.lock:
            self.mark_at = len(self.records)
            self.acked_since_mark = 0


def _pump(producer: Producer, topic: str, sent: _Sent, run: str, enough, what: str) -> None:
    """Send records round-robin over the partitions (a few hundred a second) until
    ``enough()``; fails after PHASE_TIMEOUT, or as soon as a future fails."""
    deadline = time.monotonic() + PHASE_TIMEOUT
    while not enough():
        assert not sent.failures, f"{what}: a send failed: {sent.failures[:3]!r}"
        assert time.monotonic() < deadline, (
            f"{what}: not reached within {PHASE_TIMEOUT}s ({sent.acked} of {len(sent.records)} "
            f"acknowledged, {sent.acked_since_mark} since the last broker change)"
            + ("; nothing got through since: the client must find node 111 at the survivor's "
               "address (bootstrap list) and connect there" if sent.mark_at and not sent.acked_since_mark else "")
        )
        i = len(sent.records)
        value = f"{run}-{i}".encode()
        partition = i % PARTITIONS
        fut = producer.send(topic, value, partition=partition, callback=sent.callback(i))
        sent.records.append((value, partition, fut))
        time.sleep(0.002)


def _acknowledged(sent: _Sent) -> dict[bytes, tuple[int, int]]:
    """value -> (partition, offset) of every record whose future resolved successfully."""
    out = {}
    for value, partition, fut in sent.records:
        assert fut.done(), "every future must be resolved after flush()"
        if fut.exception(0) is None:
            meta = fut.result(0)
            assert meta.partition == partition
            out[value] = (meta.partition, meta.offset)
    return out


def _targets(acked: dict[bytes, tuple[int, int]]) -> dict[int, int]:
    """Per partition, the offset a reader must reach: one past the last acknowledged."""
    ends: dict[int, int] = defaultdict(int)
    for partition, offset in acked.values():
        ends[partition] = max(ends[partition], offset + 1)  # -1: a duplicate's ack, no offset
    return dict(ends)


def _read_kafkawire(bootstrap: str, topic: str, targets: dict[int, int]) -> dict[int, list]:
    """partition -> [(offset, value), ...] read from the beginning by kafkawire's consumer
    up to ``targets`` (and whatever follows within a short idle wait)."""
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                        enable_auto_commit=False, fetch_max_wait_ms=200, **CLIENT)
    log: dict[int, list] = defaultdict(list)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning(timeout=30)
        deadline = time.monotonic() + READ_TIMEOUT
        while not all(log[p] and log[p][-1][0] + 1 >= end for p, end in targets.items()):
            assert time.monotonic() < deadline, (
                f"kafkawire's consumer did not reach {targets} within {READ_TIMEOUT}s: "
                f"{ {p: (rs[-1][0] + 1 if rs else 0) for p, rs in log.items()} }"
            )
            for r in consumer.poll(1.0):
                log[r.partition].append((r.offset, r.value))
        for r in consumer.poll(1.0):  # anything past the last acknowledged record
            log[r.partition].append((r.offset, r.value))
    finally:
        consumer.close(5)
    return dict(log)


def _read_confluent(bootstrap: str, topic: str, targets: dict[int, int]) -> dict[int, list]:
    """The same as _read_kafkawire, by confluent-kafka's consumer (an independent check)."""
    import confluent_kafka as ck

    consumer = ck.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"failover-check-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200,
    })
    log: dict[int, list] = defaultdict(list)
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + READ_TIMEOUT
        idle_until = None
        while True:
            reached = all(log[p] and log[p][-1][0] + 1 >= end for p, end in targets.items())
            if reached and idle_until is None:
                idle_until = time.monotonic() + 1.0
            if idle_until is not None and time.monotonic() >= idle_until:
                break
            assert time.monotonic() < deadline, (
                f"confluent-kafka's consumer did not reach {targets} within {READ_TIMEOUT}s"
            )
            for m in consumer.consume(1000, 0.5):
                if m.error():
                    continue  # partition EOF and transient errors: librdkafka retries
                log[m.partition()].append((m.offset(), m.value()))
    finally:
        consumer.close()
    return dict(log)


def _check(acked: dict[bytes, tuple[int, int]], log: dict[int, list], reader: str,
           excused_loss=None) -> int:
    """Assert nothing acknowledged is missing and each record sits at its acknowledged
    offset; returns the number of duplicated records (extra copies).

    ``excused_loss(lost)`` may end the test as an expected failure when the bucket proves
    a loss is the broker's (it is called only once everything else has been checked)."""
    at: dict[tuple[int, int], bytes] = {}
    copies: Counter[bytes] = Counter()
    for partition, records in log.items():
        offsets = [o for o, _ in records]
        assert offsets == sorted(set(offsets)), f"{reader}: partition {partition} offsets repeat or go back"
        for offset, value in records:
            at[(partition, offset)] = value
            copies[value] += 1
    # An idempotent producer's retry answered DUPLICATE_SEQUENCE_NUMBER is acknowledged
    # without an offset (-1), as in the Java client: only its presence can be checked.
    lost = [v for v in acked if copies[v] == 0]
    misplaced = {v: where for v, where in acked.items()
                 if v not in lost and where[1] >= 0 and at.get(where) != v}
    assert not misplaced, (
        f"{reader}: {len(misplaced)} records not at their acknowledged offsets, e.g. "
        f"{list(misplaced.items())[:5]}"
    )
    strays = [v for v in copies if v not in acked]
    assert not strays, f"{reader}: records no future acknowledged: {strays[:5]}"
    if lost and excused_loss is not None:
        excused_loss(lost)
    assert not lost, (
        f"{reader}: {len(lost)} acknowledged records lost, e.g. "
        f"{[(v, acked[v]) for v in lost[:5]]}"
    )
    return sum(n - 1 for n in copies.values())


def _tansu_sequence_loss(cluster, topic: str, acked: dict[bytes, tuple[int, int]],
                         log: dict[int, list]):
    """The excuse for Tansu 0.6's idempotent produce on shared storage: it takes the
    batch's sequence in meta.json, then reserves its offsets in watermark.json, then
    writes the batch object: three separate S3 writes (tansu-storage dynostore.rs,
    produce). A SIGKILL after the first loses the batch, and the producer's retry is
    answered DUPLICATE_SEQUENCE_NUMBER (acknowledged, with no offset). Only a loss the
    bucket shows to be exactly that is excused: every lost record acknowledged so, and
    meta.json holding at least as many sequences beyond the records stored."""
    import json

    def excuse(lost: list[bytes]) -> None:
        meta = json.loads(cluster.s3.get_object(
            cluster.bucket, f"clusters/{cluster.cluster_id}/meta.json"))
        taken: Counter[int] = Counter()  # per partition, records whose sequences Tansu took
        for producer in meta.get("producers", {}).values():
            for epoch in producer.get("sequences", {}).values():
                for partition, sequence in epoch.get(topic, {}).items():
                    taken[int(partition)] += sequence
        lost_in: Counter[int] = Counter(acked[v][0] for v in lost)
        unwritten = {p: taken[p] - len(log.get(p, ())) for p in lost_in}
        if any(acked[v][1] != -1 for v in lost) or any(unwritten[p] < n for p, n in lost_in.items()):
            return  # not (only) the sequence-before-data loss: the assertion fails
        pytest.xfail(
            f"Tansu 0.6 lost {len(lost)} acknowledged records of an idempotent producer: "
            f"meta.json took their sequences, the broker died before writing them "
            f"(partition: (lost, sequences taken but not stored)) "
            f"{ {p: (n, unwritten[p]) for p, n in sorted(lost_in.items())} }"
        )

    return excuse


def _producer(bootstrap: str, idempotence: bool) -> Producer:
    return Producer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotence, linger_ms=5,
        delivery_timeout_ms=120000, max_block_ms=30000, **CLIENT,
    )


# The idempotent producer is being added now: until Config accepts
# enable_idempotence=True, run this file with -k "not idempotent".
# Tansu's idempotent produce is not crash-safe on shared storage (_tansu_sequence_loss).
IDEMPOTENCE = [pytest.param(False, id="plain"), pytest.param(True, id="idempotent")]


def test_shared_storage_metadata(tansu_cluster_factory):
    """Each broker lists itself alone as node 111, leading every partition; a record
    produced through one is read through the other at the same offset."""
    cluster = tansu_cluster_factory(2)
    topic = _topic("failover-meta")
    _create_topic(cluster[0].bootstrap, topic)
    for broker in cluster.brokers:
        admin = Admin(bootstrap_servers=broker.bootstrap, **CLIENT)
        try:
            desc = admin.describe_cluster(timeout=30)
            parts = admin.describe_topics([topic], timeout=30)[topic].partitions
        finally:
            admin.close()
        assert {n: (b.host, b.port) for n, b in desc.brokers.items()} == {
            NODE_ID: (broker.host, broker.port)}
        assert desc.controller_id == NODE_ID
        assert sorted(parts) == list(range(PARTITIONS))
        assert {p.leader for p in parts.values()} == {NODE_ID}

    producer = _producer(cluster[0].bootstrap, idempotence=False)
    try:
        meta = producer.send(topic, b"through broker 0", partition=2).result(30)
    finally:
        producer.close(10)
    log = _read_kafkawire(cluster[1].bootstrap, topic, {2: meta.offset + 1})
    assert (meta.offset, b"through broker 0") in log[2]


@pytest.mark.parametrize("idempotence", IDEMPOTENCE)
@pytest.mark.parametrize("scenario", ["kill", "restart"])
def test_producer_survives_broker_kill(tansu_cluster_factory, scenario, idempotence, capsys):
    """acks=all over four partitions while the producer's broker is SIGKILLed (kill), or
    SIGKILLed and started again and then the other broker killed, so the records end up
    on the restarted one (restart). Nothing acknowledged is lost."""
    cluster = tansu_cluster_factory(2)
    topic = _topic(f"failover-{scenario}")
    run = uuid.uuid4().hex[:6]
    _create_topic(cluster.bootstrap, topic)
    producer = _producer(cluster.bootstrap, idempotence)
    sent = _Sent()
    try:
        _pump(producer, topic, sent, run, lambda: sent.acked >= BEFORE, "records before the kill")
        victim = _index_of(cluster, producer.cluster.brokers[NODE_ID])
        other = 1 - victim
        if scenario == "kill":
            cluster.kill(victim)
            reader = cluster[other]
        else:
            cluster.restart(victim)
            sent.mark()
            _pump(producer, topic, sent, run, lambda: sent.acked_since_mark >= AFTER,
                  "records after the restart")
            cluster.kill(other)  # what follows must go through the restarted broker
            reader = cluster[victim]
        sent.mark()
        _pump(producer, topic, sent, run, lambda: sent.acked_since_mark >= AFTER,
              f"records after broker {other if scenario == 'restart' else victim} died")
        producer.flush(timeout=PHASE_TIMEOUT)
        assert not sent.failures, f"sends failed: {sent.failures[:3]!r}"
    finally:
        producer.close(10)

    acked = _acknowledged(sent)
    assert len(acked) == len(sent.records)
    targets = _targets(acked)
    kafkawire_log = _read_kafkawire(reader.bootstrap, topic, targets)
    confluent_log = _read_confluent(reader.bootstrap, topic, targets)
    assert confluent_log == kafkawire_log, "kafkawire and confluent-kafka read different logs"
    read = [v for rs in kafkawire_log.values() for _, v in rs]
    duplicates = len(read) - len(set(read))
    lost = len(set(acked) - set(read))
    with capsys.disabled():
        print(f"\n[failover {scenario}, idempotence={idempotence}] {len(sent.records)} sent, "
              f"{len(acked)} acknowledged, {lost} lost, {duplicates} duplicated")
    if idempotence:
        assert duplicates == 0, f"the idempotent producer wrote {duplicates} duplicates"
    _check(acked, kafkawire_log, "kafkawire",
           _tansu_sequence_loss(cluster, topic, acked, kafkawire_log) if idempotence else None)


def test_consumer_reads_across_broker_kill(tansu_cluster_factory):
    """A consumer polling while its broker is SIGKILLed resumes from the survivor and ends
    with every record, each offset once, while the producer keeps writing (through the
    survivor too)."""
    cluster = tansu_cluster_factory(2)
    topic = _topic("failover-consume")
    run = uuid.uuid4().hex[:6]
    _create_topic(cluster.bootstrap, topic)
    producer = _producer(cluster.bootstrap, idempotence=False)
    sent = _Sent()
    consumer = Consumer(
        bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
        enable_auto_commit=False, fetch_max_wait_ms=200, max_poll_records=20,
        # Small fetches, so most of the log is fetched after the kill.
        max_partition_fetch_bytes=1024, fetch_max_bytes=4096, **CLIENT,
    )
    log: dict[int, list] = defaultdict(list)
    read_after_kill = 0
    try:
        _pump(producer, topic, sent, run, lambda: sent.acked >= 2000, "records before consuming")
        producer.flush(timeout=PHASE_TIMEOUT)
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + READ_TIMEOUT
        while sum(map(len, log.values())) < 200:
            assert time.monotonic() < deadline, "the consumer read too little before the kill"
            for r in consumer.poll(1.0):
                log[r.partition].append((r.offset, r.value))
        victim = _index_of(cluster, consumer.cluster.brokers[NODE_ID])
        cluster.kill(victim)
        sent.mark()
        _pump(producer, topic, sent, run, lambda: sent.acked_since_mark >= AFTER,
              "records produced after the kill")
        producer.flush(timeout=PHASE_TIMEOUT)
        acked = _acknowledged(sent)
        targets = _targets(acked)
        while not all(log[p] and log[p][-1][0] + 1 >= end for p, end in targets.items()):
            assert time.monotonic() < deadline, (
                f"the consumer did not resume after the kill: {read_after_kill} records read "
                f"since, positions { {p: rs[-1][0] + 1 for p, rs in log.items() if rs} }, "
                f"targets {targets}"
            )
            for r in consumer.poll(1.0):
                log[r.partition].append((r.offset, r.value))
                read_after_kill += 1
    finally:
        consumer.close(5)
        producer.close(10)

    assert read_after_kill > 0
    for partition, records in log.items():
        offsets = [o for o, _ in records]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), (
            f"partition {partition}: offsets skipped or repeated across the kill"
        )
        assert offsets[0] == 0
    _check(acked, dict(log), "kafkawire across the kill")
