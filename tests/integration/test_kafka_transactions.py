"""Transactions, read_committed and the idempotent producer on Apache Kafka itself.

Two single-node clusters: the session's ``kafka_broker``, which Kafka 4 formats with
transaction version 2 (KIP-890 part 2: the coordinator bumps the producer's epoch at every
EndTxn v5 and returns it), and one formatted with ``transaction_version=0`` (no KIP-890
part 2: the epoch stays, EndTxn stops at v4).  Every transaction test runs on both.

What Kafka does that Tansu and librdkafka's mock do not (see test_transactions.py and
test_read_committed_brokers.py for them):
- its Fetch answers list the aborted transactions, so read_committed really drops the
  aborted records here (on Tansu and the mock they come back);
- it answers a fenced producer's EndTxn with PRODUCER_FENCED (Tansu closes the connection),
  its Produce with INVALID_PRODUCER_EPOCH, and EndTxn v0-v1 with INVALID_PRODUCER_EPOCH;
- it answers a resent batch it already wrote with the batch's first offset (Tansu: -1);
- its coordinators answer UNKNOWN_TOPIC_OR_PARTITION until the topic exists, and it
  offers EndTxn v5 even at transaction version 0, where it refuses it.

The cluster at version 0 is reached through a relay (bytes passed unchanged) that counts
the Produce requests in flight on a connection and can lose one answer, for the
idempotent producer's tests.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any, Iterator

import confluent_kafka
import pytest

from kafkawire import Consumer, Producer, codec
from kafkawire.client.admin import Admin, NewTopic
from kafkawire.client.cluster import Cluster
from kafkawire.client.config import Config
from kafkawire.errors import InvalidProducerEpochError, KafkaTimeoutError, ProducerFencedError
from kafkawire.protocol import apis, fetcher
from kafkawire.protocol.transactions import TransactionAbortedError, TransactionStateError
from kafkawire.testing import KafkaCluster
from kafkawire.testing.proxy import FaultProxy
from shells import shell  # noqa: F401 - the fixture
from test_read_committed_brokers import leader_aborted_list as leader_aborted_list_of

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

FETCH = apis.get("Fetch")
PRODUCE = 0
ABORT, COMMIT = "ABORT", "COMMIT"


def _uid() -> str:
    return uuid.uuid4().hex[:8]


class Broker:
    """One Kafka cluster under test and its transaction version."""

    def __init__(self, cluster: KafkaCluster, transaction_version: int, relay: FaultProxy | None = None):
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap
        self.tv = transaction_version
        self.relay = relay

    @property
    def bumps(self) -> int:
        """How much the epoch grows at each EndTxn: 1 with KIP-890 part 2, else 0."""
        return 1 if self.tv >= 2 else 0

    def topic(self, prefix: str, partitions: int = 1) -> str:
        name = f"{prefix}-tv{self.tv}-{_uid()}"
        with Admin(bootstrap_servers=self.bootstrap) as admin:
            admin.create_topics([NewTopic(name, partitions, 1)], timeout=30)
        return name


@pytest.fixture(scope="module")
def relay():
    with FaultProxy() as proxy:
        yield proxy


@pytest.fixture(scope="module")
def tv0_broker(relay: FaultProxy):
    # The node advertises the relay's port, so every connection after the bootstrap passes it.
    with KafkaCluster(1, transaction_version=0,
                      broker_config={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{relay.port}"}) as cluster:
        relay.start(cluster[0].ports["PLAINTEXT"])
        yield Broker(cluster, 0, relay)


@pytest.fixture(scope="module", params=["tv2", "tv0"])
def broker(request: pytest.FixtureRequest) -> Broker:
    if request.param == "tv2":
        return Broker(request.getfixturevalue("kafka_broker"), 2)
    return request.getfixturevalue("tv0_broker")


def finalized_features(bootstrap: str) -> dict[str, int]:
    with Cluster(Config.consumer(bootstrap_servers=bootstrap)) as cluster:
        conn = cluster.any_connection(time.monotonic() + 15)
        return dict(conn.protocol.finalized_features)


def test_the_clusters_run_the_transaction_version_they_were_formatted_with(broker: Broker) -> None:
    features = finalized_features(broker.bootstrap)
    assert features.get("transaction.version", 0) == broker.tv, features


# ---------------------------------------------------------------------------------------
# The partition as Kafka stores it, fetched raw.
# ---------------------------------------------------------------------------------------

def fetch_raw(bootstrap: str, topic: str, partition: int, isolation: int = 0, offset: int = 0) -> Any:
    """One Fetch v4 (the oldest Kafka 4 answers; names topics by name) of ``partition``."""
    P = FETCH.Request.FetchTopic.FetchPartition
    req = FETCH.Request(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 22, isolation_level=isolation,
                        topics=[FETCH.Request.FetchTopic(topic=topic, partitions=[
                            P(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 22)])])
    with Cluster(Config.consumer(bootstrap_servers=bootstrap)) as cluster:
        cluster.bootstrap(15)
        leader = None
        deadline = time.monotonic() + 15
        while leader is None:
            cluster.refresh(10, [topic])
            leader = cluster.leader_for(topic, partition)
            assert leader is not None or time.monotonic() < deadline, f"no leader for {topic}[{partition}]"
        resp = cluster.request(leader, FETCH, req, 15, version=4)
    (pd,) = resp.responses[0].partitions
    assert pd.error_code == 0, pd
    return pd


def fetch_settled(bootstrap: str, topic: str, partition: int) -> Any:
    """:func:`fetch_raw` once every transaction in the partition has its marker: Kafka
    writes the markers after it answers EndTxn, so right after commit_transaction() the
    last may still be due (the last stable offset then trails the high watermark)."""
    deadline = time.monotonic() + 15
    pd = fetch_raw(bootstrap, topic, partition)
    while pd.last_stable_offset < pd.high_watermark and time.monotonic() < deadline:
        time.sleep(0.05)
        pd = fetch_raw(bootstrap, topic, partition)
    return pd


def log_of(bootstrap: str, topic: str, partition: int) -> list[tuple]:
    """(base offset, producer id, epoch, transactional, marker type or values) of every
    batch, once every transaction in the partition has its marker (:func:`fetch_settled`)."""
    out = []
    for b in codec.decode_batches(fetch_settled(bootstrap, topic, partition).records):
        # A control record's key is version (int16) and type (int16): 0 ABORT, 1 COMMIT.
        what = ({0: ABORT, 1: COMMIT}[int.from_bytes(b.records[0].key[2:4], "big")] if b.is_control
                else [r.value for r in b.records])
        out.append((b.base_offset, b.producer_id, b.producer_epoch, b.is_transactional, what))
    return out


def runs_of(log: list[tuple]) -> list[tuple]:
    """``log`` (base offset, then what describes the batch, then its values or marker
    last) with neighbouring data batches alike in all but offset merged: how records were
    split into batches is the producer's business (and its timing's), not what a test checks."""
    out: list[tuple] = []
    for entry in log:
        prev = out[-1] if out else None
        if prev and isinstance(entry[-1], list) and isinstance(prev[-1], list) and prev[1:-1] == entry[1:-1]:
            out[-1] = (*prev[:-1], prev[-1] + entry[-1])
        else:
            out.append(entry)
    return out


# ---------------------------------------------------------------------------------------
# The transactional producer: commit, abort, fencing, offsets.
# ---------------------------------------------------------------------------------------

def test_commit_and_abort_write_the_markers_kafka_keeps(broker: Broker, shell) -> None:
    topic = broker.topic("txn", partitions=3)
    with shell.Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"t-{topic}") as p:
        p.init_transactions(30)
        pid, e0 = p.metrics()["producer_id"], p.metrics()["producer_epoch"]
        p.begin_transaction()
        committed = [p.send(topic, b"c%d" % i, partition=i % 2) for i in range(4)]
        p.commit_transaction(30)
        assert [(f.result(0).partition, f.result(0).offset) for f in committed] == [(0, 0), (1, 0), (0, 1), (1, 1)]
        e1 = p.metrics()["producer_epoch"]
        # KIP-890 part 2: EndTxn v5 bumped the epoch and kafkawire took it from the answer.
        assert e1 == e0 + broker.bumps
        p.begin_transaction()
        aborted = [p.send(topic, b"a%d" % i, partition=0) for i in range(2)]
        p.flush(20)
        p.abort_transaction(30)
        assert [f.result(0).offset for f in aborted] == [3, 4]  # written, then aborted
        e2 = p.metrics()["producer_epoch"]
        assert e2 == e1 + broker.bumps
        p.begin_transaction()
        never = p.send(topic, b"never sent", partition=2)
        p.abort_transaction(30)
        with pytest.raises(TransactionAbortedError):
            never.result(5)
        e3 = p.metrics()["producer_epoch"]
        p.begin_transaction()  # an empty transaction ends without a coordinator round trip
        p.commit_transaction(30)
        assert p.metrics()["producer_epoch"] == e3
        p.begin_transaction()
        last = p.send(topic, b"c-last", partition=1)
        p.commit_transaction(30)
        assert last.result(0).offset == 3
        assert p.metrics()["producer_id"] == pid
    # The record was dropped unsent; whether partition 2 joined the transaction first
    # (AddPartitionsToTxn goes out at send()) decides whether the abort marked it.
    p2 = log_of(broker.bootstrap, topic, 2)
    assert p2 in ([], [(0, pid, e2 + broker.bumps, True, ABORT)])
    assert e3 == (e2 + broker.bumps if p2 else e2)
    # The markers carry the epoch the coordinator ended the transaction with: under
    # KIP-890 part 2 the bumped one, one above the records'.
    assert runs_of(log_of(broker.bootstrap, topic, 0)) == [
        (0, pid, e0, True, [b"c0", b"c2"]), (2, pid, e1, True, COMMIT),
        (3, pid, e1, True, [b"a0", b"a1"]), (5, pid, e2, True, ABORT),
    ]
    assert runs_of(log_of(broker.bootstrap, topic, 1)) == [
        (0, pid, e0, True, [b"c1", b"c3"]), (2, pid, e1, True, COMMIT),
        (3, pid, e3, True, [b"c-last"]), (4, pid, e3 + broker.bumps, True, COMMIT),
    ]


def test_a_transaction_may_write_to_a_topic_kafka_creates_on_first_use(broker: Broker, shell) -> None:
    # The coordinator answers AddPartitionsToTxn with UNKNOWN_TOPIC_OR_PARTITION until a
    # Metadata request has auto-created the topic; the held batch asks for no metadata
    # of its own, so the producer must, and retry.
    topic = f"auto-tv{broker.tv}-{_uid()}"
    with shell.Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"auto-{topic}") as p:
        p.init_transactions(30)
        p.begin_transaction()
        first = p.send(topic, b"first", partition=0)
        p.commit_transaction(30)
        assert first.result(0).offset == 0
    assert [w for *_x, w in log_of(broker.bootstrap, topic, 0)] == [[b"first"], COMMIT]


@contextlib.contextmanager
def fenced(shell: Any, broker: Broker, topic: str) -> Iterator[tuple[Any, Any]]:
    """(zombie, successor): a producer that wrote a record to partition 0 in its open
    transaction, and a second one with its transactional id, initialized after that."""
    tid = f"f-{topic}"
    with shell.Producer(bootstrap_servers=broker.bootstrap, transactional_id=tid) as zombie, \
            shell.Producer(bootstrap_servers=broker.bootstrap, transactional_id=tid) as new:
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0).result(20)
        new.init_transactions(30)  # fences the zombie and aborts its open transaction
        yield zombie, new


def test_a_second_producer_with_the_same_id_fences_the_first(broker: Broker, shell) -> None:
    topic = broker.topic("fence", partitions=3)
    with fenced(shell, broker, topic) as (zombie, new):
        assert new.metrics()["producer_epoch"] > zombie.metrics()["producer_epoch"]
        assert new.metrics()["producer_id"] == zombie.metrics()["producer_id"]
        # Its records to a partition of the transaction: Kafka's leader answers
        # INVALID_PRODUCER_EPOCH, abortable as in the Java client since KIP-588 (a
        # transaction the coordinator timed out is answered the same way).
        late = zombie.send(topic, b"late", partition=0)
        with pytest.raises(InvalidProducerEpochError):
            late.result(20)
        with pytest.raises(TransactionStateError, match="abort_transaction"):
            zombie.commit_transaction(20)
        # The abort's EndTxn says what happened: PRODUCER_FENCED, for good.
        with pytest.raises(ProducerFencedError, match="PRODUCER_FENCED"):
            zombie.abort_transaction(20)
        for call in (zombie.begin_transaction, lambda: zombie.send(topic, b"x", partition=1),
                     lambda: zombie.commit_transaction(5), lambda: zombie.abort_transaction(5)):
            with pytest.raises(TransactionStateError, match="close it") as info:
                call()
            assert isinstance(info.value.__cause__, ProducerFencedError)
        new.begin_transaction()
        new.send(topic, b"fresh", partition=0)
        new.commit_transaction(30)
        pid, epoch = new.metrics()["producer_id"], new.metrics()["producer_epoch"]
    log = log_of(broker.bootstrap, topic, 0)
    assert [(o, p, t, w) for o, p, _e, t, w in log] == [
        (0, pid, True, [b"zombie"]), (1, pid, True, ABORT), (2, pid, True, [b"fresh"]), (3, pid, True, COMMIT)]
    assert log[-1][2] == epoch  # the COMMIT marker carries the epoch the producer has now


def test_a_fenced_producer_adding_a_partition_fails_at_once(broker: Broker, shell) -> None:
    topic = broker.topic("fence-add", partitions=2)
    with fenced(shell, broker, topic) as (zombie, _new):
        # A partition new to the transaction: AddPartitionsToTxn, answered PRODUCER_FENCED.
        started = time.monotonic()
        late = zombie.send(topic, b"late", partition=1)
        with pytest.raises(ProducerFencedError, match="AddPartitionsToTxn"):
            late.result(20)
        assert time.monotonic() - started < 5  # a permanent error ends the wait at once
        with pytest.raises(TransactionStateError, match="close it"):
            zombie.commit_transaction(5)


def test_an_old_endtxn_version_is_fenced_with_the_same_typed_error(broker: Broker) -> None:
    # Before KIP-588 (EndTxn v0-v1) Kafka answers a fenced producer INVALID_PRODUCER_EPOCH.
    topic = broker.topic("fence-v1")
    tid = f"fv-{topic}"
    with Producer(bootstrap_servers=broker.bootstrap, transactional_id=tid,
                  api_version_overrides={"EndTxn": 1}) as zombie, \
            Producer(bootstrap_servers=broker.bootstrap, transactional_id=tid) as new:
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0).result(20)
        new.init_transactions(30)
        with pytest.raises(ProducerFencedError, match="answered INVALID_PRODUCER_EPOCH"):
            zombie.commit_transaction(20)
        with pytest.raises(TransactionStateError, match="close it"):
            zombie.begin_transaction()


def committed_by_confluent(bootstrap: str, group: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
                                  "enable.auto.commit": False})
    try:
        got = c.committed([confluent_kafka.TopicPartition(t, p) for t, p in tps], timeout=15)
    finally:
        c.close()
    return {(x.topic, x.partition): x.offset for x in got}


def test_offsets_sent_to_a_transaction_commit_only_with_it(broker: Broker, shell) -> None:
    topic = broker.topic("txn-offsets", partitions=2)
    group = f"g-{topic}"
    tps = [(topic, 0), (topic, 1)]
    none = confluent_kafka.OFFSET_INVALID
    with shell.Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"o-{topic}") as p, \
            Admin(bootstrap_servers=broker.bootstrap) as admin:
        p.init_transactions(30)
        p.begin_transaction()
        p.send(topic, b"out", partition=0)
        p.send_offsets_to_transaction({(topic, 0): 42, (topic, 1): 7}, group, timeout=20)
        # Pending in the open transaction: not the group's offsets yet.
        assert admin.list_group_offsets(group, tps, timeout=15) == {(topic, 0): None, (topic, 1): None}
        p.abort_transaction(30)
        assert admin.list_group_offsets(group, tps, timeout=15) == {(topic, 0): None, (topic, 1): None}
        assert committed_by_confluent(broker.bootstrap, group, tps) == {tp: none for tp in tps}

        p.begin_transaction()
        p.send(topic, b"out", partition=1)
        p.send_offsets_to_transaction({(topic, 0): 43}, group, timeout=20)
        p.commit_transaction(30)
        # The coordinator writes the offsets' COMMIT marker after EndTxn answers: readers
        # that ask with require_stable (KIP-447: kafkawire's and confluent-kafka's
        # consumers) wait for it; the admin call (no require_stable) sees it after them.
        with Consumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False) as c:
            assert c.committed(tps) == {(topic, 0): 43, (topic, 1): None}
        assert committed_by_confluent(broker.bootstrap, group, tps) == {(topic, 0): 43, (topic, 1): none}
        got = admin.list_group_offsets(group, tps, timeout=15)
        assert got[(topic, 0)].offset == 43 and got[(topic, 1)] is None

        # Offsets alone (no records) make a transaction too.
        p.begin_transaction()
        p.send_offsets_to_transaction({(topic, 1): 9}, group, timeout=20)
        p.commit_transaction(30)
        with Consumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False) as c:
            assert c.committed(tps) == {(topic, 0): 43, (topic, 1): 9}
        assert committed_by_confluent(broker.bootstrap, group, tps) == {(topic, 0): 43, (topic, 1): 9}
        assert {tp: x.offset for tp, x in admin.list_group_offsets(group, tps, timeout=15).items()} == {
            (topic, 0): 43, (topic, 1): 9}


def test_send_offsets_for_a_topic_kafka_does_not_know_waits_and_can_be_aborted(broker: Broker) -> None:
    # Kafka's group coordinator answers TxnOffsetCommit for an unknown topic with
    # UNKNOWN_TOPIC_OR_PARTITION (retriable): asked again until the caller's timeout, and
    # an abort then ends the transaction without the offsets.
    topic = broker.topic("txn-offsets-unknown")
    group = f"g-{topic}"
    with Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"u-{topic}") as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send(topic, b"out", partition=0).result(20)
        with pytest.raises(KafkaTimeoutError, match="not done in time"):
            p.send_offsets_to_transaction({(f"no-such-topic-{_uid()}", 0): 5}, group, timeout=1)
        with pytest.raises(TransactionStateError, match="abort_transaction"):
            p.commit_transaction(10)
        p.abort_transaction(20)
        p.begin_transaction()
        p.send(topic, b"next", partition=0)
        p.commit_transaction(30)
    assert [w for *_x, w in log_of(broker.bootstrap, topic, 0)] == [[b"out"], ABORT, [b"next"], COMMIT]


# ---------------------------------------------------------------------------------------
# read_committed on a log of interleaved transactions, with Kafka's aborted list.
# ---------------------------------------------------------------------------------------

PARTITIONS = 3


def write_interleaved(bootstrap: str, topic: str) -> dict[int, list[tuple[bytes, bool]]]:
    """kafkawire's transactional producers A (lz4) and B (gzip), confluent-kafka's C (zstd)
    and a plain idempotent producer write interleaved committed and aborted transactions
    over three partitions.  Returns, per partition, (value, kept under read_committed) in
    log order (every step is flushed before the next)."""
    a = Producer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-a", compression_type="lz4", linger_ms=2)
    b = Producer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-b", compression_type="gzip", linger_ms=2)
    c = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-c",
                                  "compression.type": "zstd", "linger.ms": 2, "log_level": 3})
    plain = Producer(bootstrap_servers=bootstrap, linger_ms=2)
    log: dict[int, list[tuple[bytes, bool]]] = {p: [] for p in range(PARTITIONS)}
    try:
        a.init_transactions(30)
        b.init_transactions(30)
        c.init_transactions(30)

        def send(p: Any, name: str, keep: bool, parts: list[int], n: int = 2) -> None:
            for part in parts:
                for i in range(n):
                    # Padded so that compression has something to do.
                    value = b"%s-%s-p%d-%d-%d." % (name.encode(), b"keep" if keep else b"drop", part,
                                                   len(log[part]), i) + b"x" * 60
                    if p is c:
                        c.produce(topic, value, partition=part)
                    else:
                        p.send(topic, value, partition=part)
                    log[part].append((value, keep))
            if p is c:
                assert c.flush(20) == 0
            else:
                p.flush(20)

        a.begin_transaction()
        send(a, "a", True, [0, 1])
        b.begin_transaction()
        send(b, "b", False, [0, 2])
        send(plain, "plain", True, [0, 1, 2], 1)
        send(a, "a", True, [2])
        a.commit_transaction(30)
        c.begin_transaction()
        send(c, "c", False, [0, 1])
        send(b, "b", False, [1])
        b.abort_transaction(30)
        a.begin_transaction()
        send(a, "a", False, [0, 2], 3)
        b.begin_transaction()
        send(b, "b", True, [0, 1])
        send(c, "c", False, [2])
        c.abort_transaction(30)
        a.abort_transaction(30)
        send(plain, "plain", True, [0, 2], 1)
        b.commit_transaction(30)
        c.begin_transaction()
        send(c, "c", True, [0, 1, 2])
        c.commit_transaction(30)
        a.begin_transaction()
        send(a, "a-big", True, [0, 1, 2], 60)  # spans several small fetches
        a.commit_transaction(30)
        b.begin_transaction()
        send(b, "b", False, [0], 40)
        b.abort_transaction(30)
        send(plain, "plain-last", True, [0, 1, 2], 1)
    finally:
        a.close(5)
        b.close(5)
        plain.close(5)
    return log


def leader_aborted_list(log: bytes) -> list[tuple[int, int]]:
    """(producer_id, first_offset) of every aborted transaction in ``log``, by the rule a
    Kafka partition leader keeps them, in log order."""
    return sorted(leader_aborted_list_of(log, True), key=lambda x: x[1])


@pytest.fixture(scope="module")
def interleaved(broker: Broker) -> dict[str, Any]:
    topic = broker.topic("rc", partitions=PARTITIONS)
    log = write_interleaved(broker.bootstrap, topic)
    ends = {}
    for part in range(PARTITIONS):
        pd = fetch_raw(broker.bootstrap, topic, part)
        assert pd.last_stable_offset == pd.high_watermark  # every transaction ended
        ends[part] = pd.high_watermark
    return {"topic": topic, "log": log, "ends": ends, "confluent": {}}


def kafkawire_read(shell: Any, bootstrap: str, topic: str, isolation: str, how: str, ends: dict[int, int],
                   deadline_s: float = 30.0) -> tuple[dict[int, list[tuple[int, bytes]]], dict[int, int]]:
    """(offset, value) by partition of what kafkawire's consumer returns from offset 0 until
    its positions reach ``ends``, and the positions."""
    options: dict[str, Any] = {}
    if how == "small-fetches":  # an aborted transaction spans several Fetch answers
        options = {"max_partition_fetch_bytes": 600, "fetch_max_bytes": 1200}
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in ends}
    with shell.Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
                        fetch_max_wait_ms=100, **options) as c:
        c.assign([(topic, p) for p in ends])
        deadline = time.monotonic() + deadline_s
        while True:
            if how == "poll_batch":
                for fb in c.poll_batch(0.3):
                    got[fb.partition] += [(r.offset, r.value) for r in fb.columns.to_records()]
            else:
                for r in c.poll(0.3, max_records=7):
                    got[r.partition].append((r.offset, r.value))
            positions = {p: c.position((topic, p)) for p in ends}
            if all(positions[p] >= ends[p] for p in ends) or time.monotonic() > deadline:
                return got, positions


def confluent_read(bootstrap: str, topic: str, isolation: str, ends: dict[int, int],
                   deadline_s: float = 30.0) -> dict[int, list[tuple[int, bytes]]]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"ck-{_uid()}",
                                  "isolation.level": isolation, "enable.auto.commit": False, "log_level": 3})
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in ends}
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got[m.partition()].append((m.offset(), m.value()))
            positions = c.position([confluent_kafka.TopicPartition(topic, p) for p in ends])
            if all(x.offset >= ends[x.partition] for x in positions):
                break
    finally:
        c.close()
    return got


@pytest.mark.parametrize("how", ["poll", "poll_batch", "small-fetches"])
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_kafkawire_and_confluent_read_the_same_records(broker: Broker, interleaved, shell, isolation: str,
                                                       how: str, monkeypatch) -> None:
    topic, ends, log = interleaved["topic"], interleaved["ends"], interleaved["log"]
    # What the Fetch answers' aborted lists told kafkawire's fetcher (both shells use it).
    seen: list[tuple[int, int]] = []
    real = fetcher._AbortedTxns

    def recording(aborted: Any) -> Any:
        seen.extend((a.producer_id, a.first_offset) for a in aborted)
        return real(aborted)

    monkeypatch.setattr(fetcher, "_AbortedTxns", recording)
    got, positions = kafkawire_read(shell, broker.bootstrap, topic, isolation, how, ends)
    if isolation not in interleaved["confluent"]:
        interleaved["confluent"][isolation] = confluent_read(broker.bootstrap, topic, isolation, ends)
    theirs = interleaved["confluent"][isolation]
    for part in range(PARTITIONS):
        expected = [v for v, keep in log[part] if keep or isolation == "read_uncommitted"]
        assert [v for _o, v in got[part]] == expected, part
        assert got[part] == theirs[part], part
    assert positions == ends  # past the last marker
    if isolation == "read_committed":
        assert seen, "Kafka listed no aborted transaction"
        # Each one kafkawire was told of is in the leader's list, and none other.
        listed = {(pid, first) for part in range(PARTITIONS)
                  for pid, first in leader_aborted_list(fetch_raw(broker.bootstrap, topic, part).records)}
        assert set(seen) <= listed
    else:
        assert not seen  # Kafka lists aborted transactions to read_committed fetches only


def test_kafka_lists_every_aborted_transaction_of_the_log(broker: Broker, interleaved) -> None:
    topic, log = interleaved["topic"], interleaved["log"]
    for part in range(PARTITIONS):
        pd = fetch_raw(broker.bootstrap, topic, part, isolation=1)
        listed = sorted(((a.producer_id, a.first_offset) for a in pd.aborted_transactions), key=lambda x: x[1])
        assert listed == leader_aborted_list(pd.records), part
        assert listed  # every partition has an aborted transaction
        assert fetch_raw(broker.bootstrap, topic, part, isolation=0).aborted_transactions in (None, [])
        # The drops by kafkawire's read_committed rule on Kafka's bytes and list are the
        # expected ones.
        assert sum(1 for _v, keep in log[part] if not keep) > 0


def test_read_committed_stops_at_the_last_stable_offset(broker: Broker, shell) -> None:
    topic = broker.topic("rc-open", partitions=2)
    plain = Producer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    txn = Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"open-{topic}")
    try:
        plain.send(topic, b"plain-0", partition=0).result(20)
        txn.init_transactions(30)
        txn.begin_transaction()
        txn.send(topic, b"open-1", partition=0).result(20)
        plain.send(topic, b"plain-2", partition=0).result(20)
        plain.send(topic, b"other", partition=1).result(20)  # another partition is not held
        pd = fetch_raw(broker.bootstrap, topic, 0, isolation=1)
        assert (pd.high_watermark, pd.last_stable_offset) == (3, 1)

        with shell.Consumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                            auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            c.assign([(topic, 0), (topic, 1)])
            got: list[bytes] = []
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:  # a fixed window: nothing past the LSO may come
                got += [r.value for r in c.poll(0.2)]
            assert sorted(got) == [b"other", b"plain-0"]
            assert c.position((topic, 0)) == 1
            if hasattr(c, "high_watermarks"):  # the sync Consumer's: the LSO under read_committed
                assert c.high_watermarks([(topic, 0)], timeout=10) == {(topic, 0): 1}
            # Kafka's ListOffsets latest at read_committed is the LSO (Tansu answers 0).
            assert c.end_offsets([(topic, 0)], timeout=10) == {(topic, 0): 1}
            with shell.Consumer(bootstrap_servers=broker.bootstrap) as other:
                assert other.end_offsets([(topic, 0)], timeout=10) == {(topic, 0): 3}

            txn.commit_transaction(30)
            got = []
            deadline = time.monotonic() + 15
            while len(got) < 2 and time.monotonic() < deadline:
                got += [r.value for r in c.poll(0.2)]
            assert got == [b"open-1", b"plain-2"]
            deadline = time.monotonic() + 15
            while c.position((topic, 0)) < 4 and time.monotonic() < deadline:
                assert c.poll(0.2) == []  # the COMMIT marker at 3 is never returned
            assert c.position((topic, 0)) == 4
    finally:
        plain.close(5)
        txn.close(5)


# ---------------------------------------------------------------------------------------
# The idempotent producer against Kafka's sequence checks (through the relay).
# ---------------------------------------------------------------------------------------

def read_values(bootstrap: str, topic: str, count: int, timeout: float = 20.0) -> list[bytes]:
    """Partition 0's values as confluent-kafka (an independent client) reads them."""
    end = {0: count}
    got = confluent_read(bootstrap, topic, "read_committed", end, timeout)
    return [v for _o, v in got[0]]


@pytest.mark.parametrize("transactional", [False, True], ids=["idempotent", "transactional"])
def test_batches_pipelined_five_deep_are_acknowledged_in_order_and_written_once(tv0_broker: Broker, shell,
                                                                                 transactional: bool) -> None:
    broker, relay = tv0_broker, tv0_broker.relay
    topic = broker.topic("pipe")
    n = 400
    options = {"transactional_id": f"tx-{topic}"} if transactional else {}
    with shell.Producer(bootstrap_servers=broker.bootstrap, linger_ms=0, batch_size=150,
                        max_in_flight_requests_per_connection=5, **options) as p:
        if transactional:
            p.init_transactions(30)
            p.begin_transaction()
        p.send(topic, b"warm", partition=0).result(20)
        relay.peak.clear()
        with relay.holding_answers(PRODUCE):  # a slow broker: the batches pile up at any load
            futs = [p.send(topic, b"%05d" % i, partition=0) for i in range(n)]
            relay.await_in_flight(PRODUCE, 5, 10)
            time.sleep(0.2)  # room for a request beyond the limit to show
        if transactional:
            p.commit_transaction(30)
        p.flush(30)
        assert [f.result(0).offset for f in futs] == list(range(1, n + 1))
        pid = p.metrics()["producer_id"]
    assert relay.peak[PRODUCE] == 5, relay.peak
    batches = codec.decode_batches(fetch_settled(broker.bootstrap, topic, 0).records)
    if transactional:
        assert batches[-1].is_control and not any(b.is_control for b in batches[:-1])
        batches = batches[:-1]
    assert len(batches) > 10
    seq = 0
    for b in batches:  # the sequences Kafka checked: consecutive from 0, one epoch
        assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == (pid, 0, seq, transactional)
        seq += len(b.records)
    assert read_values(broker.bootstrap, topic, n + 1 + transactional) == [b"warm"] + [b"%05d" % i for i in range(n)]


def test_a_lost_answer_is_resent_and_kafka_names_the_first_offset(tv0_broker: Broker, shell) -> None:
    broker, relay = tv0_broker, tv0_broker.relay
    topic = broker.topic("lost")
    with shell.Producer(bootstrap_servers=broker.bootstrap, linger_ms=0, retry_backoff_ms=20) as p:
        p.send(topic, b"first", partition=0).result(20)
        lost_before = relay.lost
        relay.lose_answer(PRODUCE)
        lost = p.send(topic, b"answer lost", partition=0)
        after = [p.send(topic, b"after-%d" % i, partition=0) for i in range(3)]
        # Kafka answers the resent batch as a duplicate with the offset it was written at
        # (Tansu answers -1).
        assert lost.result(20).offset == 1
        assert [f.result(20).offset for f in after] == [2, 3, 4]
        assert relay.lost == lost_before + 1
        assert p.metrics()["epoch_bumps"] == 0
    assert read_values(broker.bootstrap, topic, 5) == [b"first", b"answer lost", b"after-0", b"after-1", b"after-2"]
