"""Leader failover on Apache Kafka: three KRaft nodes (combined broker and controller),
replication factor 3, min.insync.replicas=2, and kafkawire's default producer (acks=all,
idempotent), in both shells.

* The leader of a partition is SIGKILLed while both shells' producers write and both
  shells' consumers read, then started again, round after round.  Every acknowledged
  record is read back exactly once, at its acknowledged offset and in send order per
  partition, by kafkawire and by confluent-kafka; the live consumers read on across the
  leader moves with no gap and no duplicate.
* Two of the three nodes down.  With combined nodes that also loses the KRaft quorum:
  nobody can shrink an ISR or elect a leader, so the survivor's partition holds acks=all
  requests for a dead follower (REQUEST_TIMED_OUT, never NOT_ENOUGH_REPLICAS) and the
  others have no reachable leader; every record still fails by its delivery_timeout_ms,
  typed, and records flow again once a node (and with it the quorum) is back.
* NOT_ENOUGH_REPLICAS: retried until delivery_timeout_ms, then the record fails with that
  typed error, unwritten; records flow again once a replica is back in sync.  On the three
  nodes with a topic that wants three replicas in sync and one down; with two nodes down
  it needs a quorum left, so five nodes (marker five_nodes, not part of `make test`).

The nodes fence a dead peer after broker.session.timeout.ms, set to 3 s here instead of
9 s so that each failover costs a third of the time; the failover figures printed are for
that setting.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict

import pytest

from kafkawire import errors
from kafkawire.aio import AsyncConsumer, AsyncProducer
from kafkawire.client.admin import Admin, NewTopic
from kafkawire.client.consumer import Consumer, TopicPartition
from kafkawire.errors import KafkaTimeoutError
from kafkawire.client.producer import Producer
from kafkawire.protocol import apis
from kafkawire.testing import KafkaCluster
from topics import unique_name

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.broker, pytest.mark.failover, pytest.mark.kafka]

PARTITIONS = 3
ROUNDS = 3
# Records every producer must get acknowledged on every partition after a kill (through
# the new leaders) before the dead node is started again.
AFTER_KILL = 30
FAST_FENCING = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}
# The machine is small and shared: waits are generous, and every one is bounded.
PHASE = 90.0
# The producers of the "down" tests: each record fails by this.
DELIVERY_TIMEOUT_MS = 6000
CLIENT = dict(request_timeout_ms=10000, retry_backoff_ms=100, retry_backoff_max_ms=1000,
              reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)


@pytest.fixture(scope="module")
def cluster():
    with KafkaCluster(3, min_insync_replicas=2, broker_config=FAST_FENCING) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster):
    with Admin(bootstrap_servers=cluster.bootstrap, **CLIENT) as a:
        yield a


def _create(admin: Admin, prefix: str, partitions: int = PARTITIONS, **configs: str) -> str:
    topic = unique_name(prefix)
    admin.create_topics([NewTopic(topic, partitions, 3, configs)], timeout=PHASE)
    _wait_healthy(admin, [topic])
    return topic


def _wait_healthy(admin: Admin, topics: list[str], replicas: int = 3) -> None:
    """Until every partition of ``topics`` has a leader and ``replicas`` in-sync replicas
    (a restarted node has caught up)."""
    deadline = time.monotonic() + PHASE
    while True:
        try:
            described = admin.describe_topics(topics, timeout=10)
            parts = [p for t in described.values() for p in t.partitions.values()]
            if parts and all(p.leader >= 0 and len(p.isr) == replicas for p in parts):
                return
            why = {(t, p.partition): (p.leader, p.isr) for t, d in described.items()
                   for p in d.partitions.values()}
        except errors.KafkaWireError as exc:  # the cluster is still settling
            why = repr(exc)
        assert time.monotonic() < deadline, f"not every replica back in sync within {PHASE}s: {why}"
        time.sleep(0.2)


def _heal(cluster: KafkaCluster, admin: Admin, topics: list[str]) -> None:
    for i in range(cluster.size):
        if i not in cluster.running():
            cluster.restart(i)
    _wait_healthy(admin, topics)


def _leader(admin: Admin, topic: str, partition: int) -> int:
    return admin.describe_topics([topic], timeout=PHASE)[topic].partitions[partition].leader


# -- what was sent and what came back ----------------------------------------------------------


class _Ledger:
    """One producer's records: value -> partition, and what each future ended with;
    per partition, when the last acknowledgement came (for the failover time)."""

    def __init__(self, name: str):
        self.name = name
        self.lock = threading.Lock()
        self.sent: list[tuple[bytes, int]] = []
        self.acked: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset)
        self.failures: list[BaseException] = []
        self.count: dict[int, int] = defaultdict(int)  # acknowledged, per partition
        self.last_ack: dict[int, float] = {}
        self.metrics: dict = {}  # the producer's, when it is done (idempotence, epoch bumps)

    def done(self, value: bytes, partition: int, meta, exc) -> None:
        with self.lock:
            if exc is not None:
                self.failures.append(exc)
                return
            self.acked[value] = (meta.partition, meta.offset)
            self.count[partition] += 1
            self.last_ack[partition] = time.monotonic()

    def snapshot(self) -> dict[int, int]:
        with self.lock:
            return dict(self.count)


def _sync_pump(producer: Producer, topic: str, ledger: _Ledger, stop: threading.Event,
               go: threading.Event) -> None:
    i = 0
    while not stop.is_set():
        if not go.wait(0.1):
            continue
        value = f"{ledger.name}-{i}".encode()
        partition = i % PARTITIONS
        ledger.sent.append((value, partition))
        fut = producer.send(topic, value, partition=partition)
        fut.add_callback(lambda meta, exc, v=value, p=partition: ledger.done(v, p, meta, exc))
        i += 1
        time.sleep(0.002)


class _AsyncSide:
    """The asyncio shell's producer and consumer on one loop of their own thread, as an
    application would run them side by side."""

    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap, self.topic = bootstrap, topic
        self.ledger = _Ledger("aio")
        self.log: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.stop_producing = threading.Event()
        self.go = threading.Event()
        self.stop_consuming = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="aio-side", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _main(self) -> None:
        try:
            asyncio.run(self._both())
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            self.error = exc

    async def _both(self) -> None:
        await asyncio.gather(self._produce(), self._consume())

    async def _produce(self) -> None:
        producer = AsyncProducer(bootstrap_servers=self.bootstrap, linger_ms=5,
                                 delivery_timeout_ms=120000, **CLIENT)
        await producer.start()
        try:
            i = 0
            while not self.stop_producing.is_set():
                if not self.go.is_set():
                    await asyncio.sleep(0.05)
                    continue
                value = f"aio-{i}".encode()
                partition = i % PARTITIONS
                self.ledger.sent.append((value, partition))
                fut = await producer.send(self.topic, value, partition=partition)
                fut.add_callback(lambda meta, exc, v=value, p=partition: self.ledger.done(v, p, meta, exc))
                i += 1
                await asyncio.sleep(0.002)
            await producer.flush(PHASE)
        finally:
            self.ledger.metrics = producer.metrics()
            await producer.close(10)

    async def _consume(self) -> None:
        consumer = AsyncConsumer(bootstrap_servers=self.bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, fetch_max_wait_ms=100, **CLIENT)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(self.topic, p) for p in range(PARTITIONS)])
            while not self.stop_consuming.is_set():
                for r in await consumer.poll(0.2):
                    self.log[r.partition].append((r.offset, r.value))
        finally:
            await consumer.close(5)


def _sync_consume(bootstrap: str, topic: str, log: dict, stop: threading.Event, errs: list) -> None:
    try:
        with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                      fetch_max_wait_ms=100, **CLIENT) as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            while not stop.is_set():
                for r in consumer.poll(0.2):
                    log[r.partition].append((r.offset, r.value))
    except BaseException as exc:  # noqa: BLE001 - reported by the test thread
        errs.append(exc)


def _targets(acked: dict[bytes, tuple[int, int]]) -> dict[int, int]:
    ends: dict[int, int] = defaultdict(int)
    for partition, offset in acked.values():
        ends[partition] = max(ends[partition], offset + 1)
    return dict(ends)


def _reached(log: dict[int, list], targets: dict[int, int]) -> bool:
    return all(log.get(p) and log[p][-1][0] + 1 >= end for p, end in targets.items())


def _read_back_kafkawire(bootstrap: str, topic: str, targets: dict[int, int]) -> dict[int, list]:
    log: dict[int, list] = defaultdict(list)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                  fetch_max_wait_ms=100, **CLIENT) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in sorted(targets)])
        deadline = time.monotonic() + PHASE
        while not _reached(log, targets):
            assert time.monotonic() < deadline, f"kafkawire read back too little of {topic}"
            for r in consumer.poll(0.5):
                log[r.partition].append((r.offset, r.value))
        for r in consumer.poll(0.3):  # anything past the last acknowledged record
            log[r.partition].append((r.offset, r.value))
    return dict(log)


def _read_back_confluent(bootstrap: str, topic: str, targets: dict[int, int]) -> dict[int, list]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("ck-check"),
                            "enable.auto.commit": False, "fetch.wait.max.ms": 100, "log_level": 0})
    log: dict[int, list] = defaultdict(list)
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in sorted(targets)])
        deadline = time.monotonic() + PHASE
        quiet_until = None
        while quiet_until is None or time.monotonic() < quiet_until:
            if quiet_until is None and _reached(log, targets):
                quiet_until = time.monotonic() + 0.5
            assert time.monotonic() < deadline, f"confluent-kafka read back too little of {topic}"
            for m in consumer.consume(1000, 0.2):
                if not m.error():
                    log[m.partition()].append((m.offset(), m.value()))
    finally:
        consumer.close()
    return dict(log)


def _check_exactly_once(ledger: _Ledger, log: dict[int, list], reader: str) -> None:
    """Every acknowledged record once, at its acknowledged offset; per partition the
    offsets are consecutive from 0 and follow the order the records were sent in; and
    nothing that no future acknowledged (no send failed here)."""
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in log.items():
        offsets = [o for o, _ in records]
        assert offsets == list(range(len(offsets))), (
            f"{reader}: {ledger.name} partition {partition}: offsets not 0, 1, 2, ...: "
            f"gaps or repeats near {[o for a, o in zip(range(len(offsets)), offsets) if a != o][:5]}")
        for offset, value in records:
            where[value].append((partition, offset))
    twice = {v: w for v, w in where.items() if len(w) > 1}
    assert not twice, f"{reader}: {len(twice)} records of {ledger.name} written twice, e.g. {list(twice.items())[:3]}"
    lost = [v for v in ledger.acked if v not in where]
    assert not lost, f"{reader}: {len(lost)} acknowledged records of {ledger.name} lost, e.g. {lost[:5]}"
    moved = {v: (ack, where[v][0]) for v, ack in ledger.acked.items() if where[v][0] != ack}
    assert not moved, f"{reader}: records not where acknowledged (ack, found): {list(moved.items())[:5]}"
    strays = [v for v in where if v not in ledger.acked]
    assert not strays, f"{reader}: records no future acknowledged: {strays[:5]}"
    order = {p: [] for p in range(PARTITIONS)}
    for value, partition in ledger.sent:
        if value in ledger.acked:
            order[partition].append(ledger.acked[value][1])
    for p, offsets in order.items():
        back = [i for i in range(1, len(offsets)) if offsets[i] < offsets[i - 1]]
        # (Once seen at the start, on the topic just created: a partition's refused first
        # batch written after the one pipelined behind it; see ProducerIdentity.written.)
        assert not back, (
            f"{reader}: {ledger.name} partition {p}: records written out of send order: the "
            f"offsets go back after send #{back[:5]} (around: {[offsets[max(0, i - 2):i + 2] for i in back[:3]]}, "
            f"first {offsets[:5]}); the producer's state at the end: {ledger.metrics}")


class _Loop:
    """An event loop on a thread of its own, for the asyncio shell's producer: it runs
    while the test thread waits on the sync one, as in an application."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="aio-loop", daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = PHASE):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class _Outcomes:
    """When each record's future ended, and how: {(shell, partition): (seconds, meta, exc)}."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ended: dict[tuple[str, int], tuple[float, object, BaseException | None]] = {}
        self.started = time.monotonic()

    def callback(self, shell: str, partition: int):
        def done(meta, exc) -> None:
            with self.lock:
                self.ended[(shell, partition)] = (time.monotonic() - self.started, meta, exc)
        return done

    def wait(self, n: int, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while len(self.ended) < n:
            assert time.monotonic() < deadline, f"only {len(self.ended)} of {n} futures ended: {self.ended}"
            time.sleep(0.02)
        return dict(self.ended)


def _send_everywhere(producer: Producer, aio_producer: AsyncProducer, loop: _Loop, topic: str,
                     value: bytes, partitions: int) -> _Outcomes:
    """One record to each partition from each shell at the same moment."""
    out = _Outcomes()

    async def aio_send() -> None:
        for p in range(partitions):
            fut = await aio_producer.send(topic, value, partition=p)
            fut.add_callback(out.callback("asyncio", p))

    for p in range(partitions):
        producer.send(topic, value, partition=p).add_callback(out.callback("sync", p))
    loop.run(aio_send())
    return out


def _down_producers(bootstrap: str, loop: _Loop) -> tuple[Producer, AsyncProducer]:
    opts = dict(bootstrap_servers=bootstrap, linger_ms=0, delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
                request_timeout_ms=3000, retry_backoff_ms=100, retry_backoff_max_ms=1000,
                reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
    aio_producer = AsyncProducer(**opts)
    loop.run(aio_producer.start())
    return Producer(**opts), aio_producer


def _check_failed_by_deadline(ended: dict, expected_type, why: str) -> None:
    """Every future failed with ``expected_type`` at delivery_timeout_ms (having waited it
    out, not before), and not much after."""
    limit = DELIVERY_TIMEOUT_MS / 1000
    for (shell, p), (at, meta, exc) in sorted(ended.items()):
        assert exc is not None, f"{shell} {p}: acknowledged ({meta}) with {why}"
        assert isinstance(exc, expected_type), f"{shell} partition {p}: {type(exc).__name__}: {exc}"
        assert "delivery_timeout_ms=6000" in str(exc), str(exc)
        assert limit - 0.5 <= at <= limit + 1.0, f"{shell} partition {p} failed after {at:.2f}s, not {limit}s: {exc}"


def _isr_seen_by(admin: Admin, node: int, topic: str) -> int:
    """How many in-sync replicas ``node``'s own metadata lists for ``topic``'s partition 0."""
    metadata = apis.get("Metadata")
    try:
        conn = admin.cluster.connection(node, time.monotonic() + 10)
    except errors.KafkaConnectionError:
        # Admin's last metadata may predate ``node``'s return from an earlier test's
        # restart; fresh metadata lists it, and the caller asks again.
        admin.cluster.refresh(10)
        return -1
    request = metadata.Request(topics=[metadata.Request.MetadataRequestTopic(name=topic)],
                               allow_auto_topic_creation=False)
    answer = conn.send(metadata, request, conn.version_for(metadata)).result(10)
    return len(answer.topics[0].partitions[0].isr_nodes)


def _not_enough_replicas(cluster: KafkaCluster, admin: Admin, topic: str, down: int) -> dict:
    """Kill ``down`` followers of ``topic``'s one (three-replica) partition and wait until
    the ISR has shrunk to the others, below min.insync.replicas: the leader refuses
    acks=all appends with NOT_ENOUGH_REPLICAS.  The producer retries that until its
    deadline, then the record fails with the broker's typed error; it was never written
    (the check comes before the append).  One replica back in sync, and a new record gets
    through.  Returns how each shell's record ended."""
    info = admin.describe_topics([topic])[topic].partitions[0]
    followers = [n for n in info.replicas if n != info.leader][:down]
    loop = _Loop()
    producer, aio_producer = _down_producers(cluster.bootstrap, loop)
    try:
        warm = _send_everywhere(producer, aio_producer, loop, topic, b"warm", 1).wait(2, PHASE)
        assert all(exc is None for _, _, exc in warm.values()), warm
        for n in followers:
            cluster.kill(n - 1)
        deadline = time.monotonic() + PHASE
        # Asked of the leader itself: another broker can apply the controller's ISR change
        # first, and a leader still counting the dead follower appends the record and then
        # waits for it (the "refused" record would be written after all).
        while _isr_seen_by(admin, info.leader, topic) != 3 - down:
            assert time.monotonic() < deadline, f"the ISR did not shrink to {3 - down} replicas"
            time.sleep(0.1)
        _until_refused(cluster.bootstrap, topic, deadline)
        ended = _send_everywhere(producer, aio_producer, loop, topic, b"refused", 1).wait(2, PHASE)
        _check_failed_by_deadline(ended, errors.NotEnoughReplicasError, "too few replicas in sync")
        for (shell, _), (_, _, exc) in ended.items():
            assert exc.code == 19 and exc.retriable and "Retried until the deadline" in str(exc)
            attempts = int(str(exc).split(" attempt(s)")[0].rsplit(" ", 1)[1])
            assert attempts >= 3, f"{shell}: only {attempts} attempt(s) in 6 s: {exc}"
        cluster.restart(followers[0] - 1)
        while len(admin.describe_topics([topic])[topic].partitions[0].isr) != 4 - down:
            assert time.monotonic() < deadline, "the restarted replica did not rejoin the ISR"
            time.sleep(0.1)
        back = _send_everywhere(producer, aio_producer, loop, topic, b"back", 1).wait(2, PHASE)
        assert all(exc is None for _, _, exc in back.values()), back
        end = max(meta.offset for _, meta, _ in back.values()) + 1
    finally:
        producer.close(10)
        loop.run(aio_producer.close(10))
        loop.close()
    log = _read_back_confluent(cluster.bootstrap, topic, {0: end})
    assert [v for _, v in log[0] if v != PROBE] == [b"warm", b"warm", b"back", b"back"]
    return ended


PROBE = b"probe"


def _until_refused(bootstrap: str, topic: str, deadline: float) -> None:
    """Send throwaway acks=all records until partition 0's leader refuses one with
    NOT_ENOUGH_REPLICAS: the ISR its appends check can trail the one its Metadata lists,
    and a record appended in between would be written (and then wait for the dead one)."""
    with Producer(bootstrap_servers=bootstrap, acks="all", retries=0, enable_idempotence=False,
                  linger_ms=0, delivery_timeout_ms=DELIVERY_TIMEOUT_MS, request_timeout_ms=3000) as probe:
        while True:
            try:
                probe.send(topic, value=PROBE, partition=0).result(DELIVERY_TIMEOUT_MS / 1000 + 5)
            except errors.NotEnoughReplicasError:
                return
            except errors.KafkaWireError:
                pass  # appended and timed out waiting for the dead follower, or the like
            assert time.monotonic() < deadline, "the leader still appends acks=all records"
            time.sleep(0.1)


def _print_refusals(capsys, what: str, ended: dict) -> None:
    with capsys.disabled():
        print(f"\n[kafka NOT_ENOUGH_REPLICAS, {what}] "
              + ", ".join(f"{s} failed after {t:.2f}s" for (s, _), (t, _, _) in sorted(ended.items())))


# -- the tests ---------------------------------------------------------------------------------


def test_three_nodes_described_alike_by_kafkawire_and_confluent(cluster, admin):
    d = admin.describe_cluster()
    assert d.cluster_id == cluster.cluster_id
    assert {n: (b.host, b.port) for n, b in d.brokers.items()} == {
        n.node_id: ("127.0.0.1", n.ports["PLAINTEXT"]) for n in cluster.nodes}
    assert d.controller_id in (1, 2, 3)
    ck_client = ck_admin.AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 3})
    theirs = ck_client.describe_cluster(request_timeout=30).result(30)
    assert theirs.cluster_id == d.cluster_id and {n.id for n in theirs.nodes} == {1, 2, 3}
    topic = _create(admin, "fo-desc")
    parts = admin.describe_topics([topic])[topic].partitions
    assert sorted(parts) == list(range(PARTITIONS))
    for p in parts.values():
        assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isr) == [1, 2, 3] and p.leader in p.replicas
    # Kafka spreads the leaders: each node leads one of the three partitions.
    assert sorted(p.leader for p in parts.values()) == [1, 2, 3]


def test_leader_killed_mid_produce_repeatedly(cluster, admin, capsys):
    """Both shells produce (one topic each) and consume (reading the topic as it grows)
    while a partition's leader is SIGKILLed, ROUNDS times, each time another partition's."""
    sync_topic, aio_topic = _create(admin, "fo-sync"), _create(admin, "fo-aio")
    sync_ledger = _Ledger("sync")
    sync_log: dict[int, list] = defaultdict(list)
    stop_producing, stop_consuming, go = threading.Event(), threading.Event(), threading.Event()
    consumer_errors: list[BaseException] = []
    aio = _AsyncSide(cluster.bootstrap, aio_topic)
    producer = Producer(bootstrap_servers=cluster.bootstrap, linger_ms=5, delivery_timeout_ms=120000, **CLIENT)
    threads = [threading.Thread(target=_sync_pump, args=(producer, sync_topic, sync_ledger, stop_producing, go)),
               threading.Thread(target=_sync_consume, args=(cluster.bootstrap, sync_topic, sync_log,
                                                            stop_consuming, consumer_errors))]
    failovers: list[float] = []
    consumer_failovers: list[float] = []
    try:
        for t in threads:
            t.start()
        aio.start()
        ledgers = (sync_ledger, aio.ledger)

        def progress_everywhere(since: list[dict[int, int]], n: int) -> bool:
            now = [x.snapshot() for x in ledgers]
            return all(now[i].get(p, 0) - since[i].get(p, 0) >= n
                       for i in range(len(ledgers)) for p in range(PARTITIONS))

        def wait_for(cond, what: str) -> None:
            deadline = time.monotonic() + PHASE
            while not cond():
                for x in ledgers:
                    assert not x.failures, f"{what}: a {x.name} send failed: {x.failures[:3]!r}"
                assert aio.error is None and not consumer_errors, (aio.error, consumer_errors)
                assert time.monotonic() < deadline, f"{what}: not within {PHASE}s: {[x.snapshot() for x in ledgers]}"
                time.sleep(0.02)

        def produce(on: bool) -> None:
            for event in (go, aio.go):
                event.set() if on else event.clear()

        produce(True)
        start = [x.snapshot() for x in ledgers]
        wait_for(lambda: progress_everywhere(start, AFTER_KILL), "records before the first kill")
        for rnd in range(ROUNDS):
            partition = rnd % PARTITIONS
            victim = _leader(admin, sync_topic, partition)
            before = [x.snapshot() for x in ledgers]
            killed_at = time.monotonic()
            cluster.kill(victim - 1)
            # The failover, as the producer sees it: the first acknowledgement on the
            # partition of the dead leader, through its new one.
            wait_for(lambda: sync_ledger.last_ack.get(partition, 0) > killed_at, f"round {rnd}: failover")
            failovers.append(sync_ledger.last_ack[partition] - killed_at)
            wait_for(lambda: progress_everywhere(before, AFTER_KILL), f"round {rnd}: records after node {victim} died")
            # The live consumers, which were fetching from the dead leader, read on from
            # the new one: past every record of the partition acknowledged before the kill.
            wait_for(lambda: len(sync_log[partition]) > before[0].get(partition, 0)
                     and len(aio.log[partition]) > before[1].get(partition, 0),
                     f"round {rnd}: the live consumers reading on after node {victim} died")
            consumer_failovers.append(time.monotonic() - killed_at)
            moved = admin.describe_topics([sync_topic])[sync_topic].partitions[partition]
            assert moved.leader not in (victim, -1) and victim not in moved.isr and len(moved.isr) == 2
            # Paused while the node starts again: on this small machine the producers'
            # traffic would slow the JVM's start, and a restarted node leads nothing
            # until a preferred-leader election (every 5 minutes), so clients never see it.
            produce(False)
            cluster.restart(victim - 1)
            _wait_healthy(admin, [sync_topic, aio_topic])
            produce(True)
        stop_producing.set()
        aio.stop_producing.set()
        threads[0].join(PHASE)
        producer.flush(PHASE)
        # The asyncio side flushes once told to stop producing; its callbacks fill its ledger.
        wait_for(lambda: len(aio.ledger.acked) + len(aio.ledger.failures) == len(aio.ledger.sent),
                 "the asyncio producer's flush")
        for x in ledgers:
            assert not x.failures, f"{x.name}: {len(x.failures)} sends failed: {x.failures[:3]!r}"
            assert len(x.acked) == len(x.sent)
        # The consumers that read through the kills reach the end, then stop.
        targets = {sync_topic: _targets(sync_ledger.acked), aio_topic: _targets(aio.ledger.acked)}
        deadline = time.monotonic() + PHASE
        while not (_reached(sync_log, targets[sync_topic]) and _reached(aio.log, targets[aio_topic])):
            assert time.monotonic() < deadline, "the live consumers did not reach the end"
            assert aio.error is None and not consumer_errors, (aio.error, consumer_errors)
            time.sleep(0.05)
    finally:
        stop_producing.set()
        aio.stop_producing.set()
        stop_consuming.set()
        aio.stop_consuming.set()
        for t in threads:
            t.join(PHASE)
        aio.thread.join(PHASE)
        sync_ledger.metrics = producer.metrics()
        producer.close(10)
        _heal(cluster, admin, [sync_topic, aio_topic])
    assert aio.error is None and not consumer_errors, (aio.error, consumer_errors)

    _check_exactly_once(sync_ledger, dict(sync_log), "kafkawire's live sync consumer")
    _check_exactly_once(aio.ledger, dict(aio.log), "kafkawire's live asyncio consumer")
    for topic, ledger in ((sync_topic, sync_ledger), (aio_topic, aio.ledger)):
        ours = _read_back_kafkawire(cluster.bootstrap, topic, targets[topic])
        theirs = _read_back_confluent(cluster.bootstrap, topic, targets[topic])
        assert ours == theirs, f"{topic}: kafkawire and confluent-kafka read different logs"
        _check_exactly_once(ledger, ours, "kafkawire and confluent-kafka")
    with capsys.disabled():
        print(f"\n[kafka failover] {ROUNDS} leader kills; sync {len(sync_ledger.acked)} and asyncio "
              f"{len(aio.ledger.acked)} records acknowledged, all read back once; producer failover "
              f"(kill to first acknowledgement through the new leader, session timeout 3 s): "
              + ", ".join(f"{s:.1f}s" for s in failovers)
              + "; both live consumers past the kill-time end by: "
              + ", ".join(f"{s:.1f}s" for s in consumer_failovers))


def test_two_of_three_nodes_down_fail_by_the_deadline_and_recover(cluster, admin, capsys):
    """Two of three combined nodes down: the KRaft quorum is gone with them, so the ISRs
    stay as they were.  The survivor's own partition takes the append and holds the
    acks=all request for a dead follower (Kafka answers REQUEST_TIMED_OUT, not
    NOT_ENOUGH_REPLICAS); the dead nodes' partitions have no reachable leader.  Each
    record fails by its delivery_timeout_ms, typed; a node back brings the quorum back."""
    topic = _create(admin, "fo-two")
    leaders = {p: i.leader for p, i in admin.describe_topics([topic])[topic].partitions.items()}
    loop = _Loop()
    producer, aio_producer = _down_producers(cluster.bootstrap, loop)
    try:
        warm = _send_everywhere(producer, aio_producer, loop, topic, b"warm", PARTITIONS).wait(2 * PARTITIONS, PHASE)
        assert all(exc is None for _, _, exc in warm.values()), warm
        survivor = leaders[0]
        dead = [n for n in (1, 2, 3) if n != survivor]
        for n in dead:
            cluster.kill(n - 1)
        pending = _send_everywhere(producer, aio_producer, loop, topic, b"down", PARTITIONS)
        # While the records wait: an admin call that needs the controller (there is none)
        # ends by its own deadline, naming what is pending.
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="create_topics did not finish within 2s"):
            admin.create_topics([unique_name("fo-noquorum")], timeout=2)
        assert time.monotonic() - start < 3.0
        # The survivor still answers Metadata (with no quorum nobody is fenced, so all
        # three are listed), also when the CreateTopics above went to it and it holds it
        # still: the abandoned request does not hold up the next call.
        assert set(admin.describe_cluster(timeout=5).brokers) == {1, 2, 3}
        ended = pending.wait(2 * PARTITIONS, PHASE)
        _check_failed_by_deadline({k: v for k, v in ended.items() if leaders[k[1]] == survivor},
                                  errors.RequestTimedOutError, "no follower alive")
        _check_failed_by_deadline({k: v for k, v in ended.items() if leaders[k[1]] != survivor},
                                  errors.DeliveryTimeoutError, "its leader dead")
        # One node back: a quorum again, the other dead node fenced, the ISRs shrunk to
        # two, a leader for every partition: new records get through in both shells.
        cluster.restart(dead[0] - 1)
        got = _send_everywhere(producer, aio_producer, loop, topic, b"back", PARTITIONS).wait(2 * PARTITIONS, PHASE)
        assert all(exc is None for _, _, exc in got.values()), got
        recovery = max(t for t, _, _ in got.values())
    finally:
        producer.close(10)
        loop.run(aio_producer.close(10))
        loop.close()
        _heal(cluster, admin, [topic])
    with capsys.disabled():
        print(f"\n[kafka two of three down] every record failed by delivery_timeout_ms=6000 "
              f"({', '.join(f'{s} p{p} {type(e).__name__} {t:.2f}s' for (s, p), (t, _, e) in sorted(ended.items()))}); "
              f"records sent once a node was back acknowledged within {recovery:.1f}s")


def test_not_enough_replicas_fails_typed_by_the_deadline_and_recovers(cluster, admin, capsys):
    """NOT_ENOUGH_REPLICAS on the three nodes: the topic asks for three replicas in sync
    (min.insync.replicas=3) and one follower is down.  (Two down would take the quorum
    with them, see above; five nodes keep one: the next test.)"""
    topic = _create(admin, "fo-ner", 1, **{"min.insync.replicas": "3"})
    try:
        ended = _not_enough_replicas(cluster, admin, topic, 1)
    finally:
        _heal(cluster, admin, [topic])
    _print_refusals(capsys, "3 nodes, min.insync.replicas=3, one follower down", ended)


# Five more Kafka nodes cost a minute or more on a 2-core machine: `make test` leaves this
# out (-m "not five_nodes"); run it with `pytest -m five_nodes tests/integration`.
@pytest.mark.five_nodes
def test_two_replicas_down_with_a_quorum_is_not_enough_replicas(kafka_cluster_factory, capsys):
    """Five nodes, so that two down leave a quorum: the controller shrinks the ISR of a
    three-replica partition to its leader alone, below min.insync.replicas=2."""
    big = kafka_cluster_factory(5, replication_factor=3, min_insync_replicas=2, broker_config=FAST_FENCING)
    with Admin(bootstrap_servers=big.bootstrap, **CLIENT) as admin5:
        ended = _not_enough_replicas(big, admin5, _create(admin5, "fo-ner5", 1), 2)
    _print_refusals(capsys, "5 nodes, two of the three replicas down", ended)
