"""The idempotent producer against real brokers: a lost answer, a refused batch with
more in flight behind it, injected sequence errors and leader moves write every record
exactly once, in order.

Tansu checks sequences (DUPLICATE_SEQUENCE_NUMBER, OUT_OF_ORDER_SEQUENCE_NUMBER), so the
lost-answer and pipelining tests run there, through a relay that drops one Produce
answer after Tansu wrote the batch, or answers one Produce request with an error itself
(the batches behind it still reach Tansu).  librdkafka's mock hands out producer ids but checks no sequences (it
writes a resent batch twice, and writes the batches in flight behind a refused one, which
a broker that checks refuses); it is used for the errors it can inject, which it answers
without writing anything, with one batch of a partition in flight at a time.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer as ConfluentConsumer

from kafkawire import Producer
from kafkawire.testing import TansuBroker
from kafkawire.testing.proxy import FaultProxy
from shells import shell  # noqa: F401 - the fixture

pytestmark = pytest.mark.broker

PRODUCE = 0


class _RelayedTansu(TansuBroker):
    """A Tansu broker that advertises the relay's address, so every connection passes it."""

    def __init__(self, relay_port: int, **options):
        super().__init__(**options)
        self.relay_port = relay_port

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--advertised-listener-url") + 1] = f"tcp://{self.host}:{self.relay_port}"
        return cmd


@pytest.fixture
def relayed_tansu():
    proxy = FaultProxy()
    broker = _RelayedTansu(proxy.port)
    with broker:
        with proxy.start(broker.port):
            yield broker, proxy


def read_values(bootstrap: str, topic: str, partitions: list[int], count: int, timeout: float = 20.0) -> dict[int, list[bytes]]:
    """Every value in ``topic`` by partition, read by confluent-kafka (an independent
    client), until ``count`` values arrived and nothing more came for a second."""
    c = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        from confluent_kafka import TopicPartition
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        got: dict[int, list[bytes]] = {p: [] for p in partitions}
        deadline = time.monotonic() + timeout
        quiet_since = None
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                n = sum(map(len, got.values()))
                if n >= count:
                    quiet_since = quiet_since or time.monotonic()
                    if time.monotonic() - quiet_since > 1.0:
                        break
                continue
            quiet_since = None
            if msg.error():
                continue
            got[msg.partition()].append(msg.value())
        return got
    finally:
        c.close()


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
def test_a_lost_produce_answer_is_retried_without_writing_twice(relayed_tansu, idempotent, shell):
    broker, proxy = relayed_tansu
    topic = f"lost-{uuid.uuid4().hex[:8]}"
    bootstrap = f"127.0.0.1:{proxy.port}"
    with shell.Producer(bootstrap_servers=bootstrap, enable_idempotence=idempotent, linger_ms=0,
                        retry_backoff_ms=20) as p:
        p.send(topic, b"first", partition=0).result(20)
        proxy.lose_answer(PRODUCE)
        lost = p.send(topic, b"answer lost", partition=0)
        after = [p.send(topic, b"after-%d" % i, partition=0) for i in range(3)]
        meta = lost.result(20)
        for f in after:
            f.result(20)  # acknowledged (raises otherwise); offset -1 if answered as a duplicate
        assert proxy.lost == 1  # the broker wrote it; the producer never heard
    values = read_values(bootstrap, topic, [0], 5)[0]
    if idempotent:
        # Sequence numbers let Tansu recognise the resent batch (DUPLICATE_SEQUENCE_NUMBER).
        assert values == [b"first", b"answer lost", b"after-0", b"after-1", b"after-2"]
        assert meta.offset in (1, -1)  # -1: the broker said "duplicate" without the offset
    else:
        # What idempotence prevents: the retry wrote the lost batch (the record, and any
        # sent with it) a second time.
        assert values.count(b"answer lost") == 2
        assert list(dict.fromkeys(values)) == [b"first", b"answer lost", b"after-0", b"after-1", b"after-2"]


def fetch_batches(bootstrap: str, topic: str, partition: int) -> list:
    """The record batches of one partition as the broker stores them (producer ids and
    sequences included), with one Fetch v4."""
    from kafkawire import codec
    from kafkawire.client.cluster import Cluster
    from kafkawire.client.config import Config
    from kafkawire.protocol import apis

    fetch = apis.get("Fetch")
    req = fetch.Request(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        topics=[fetch.Request.FetchTopic(topic=topic, partitions=[
                            fetch.Request.FetchTopic.FetchPartition(partition=partition, fetch_offset=0,
                                                                    partition_max_bytes=1 << 20)])])
    with Cluster(Config.consumer(bootstrap_servers=bootstrap)) as cluster:
        cluster.bootstrap(10)
        resp = cluster.request(None, fetch, req, 10, version=4)
    return codec.decode_batches(resp.responses[0].partitions[0].records)


def test_idempotent_batches_carry_the_producer_id_and_consecutive_sequences(tansu_broker):
    topic = f"seq-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=tansu_broker.bootstrap, linger_ms=0) as p:
        for i in range(4):
            p.send(topic, b"v%d" % i, partition=1).result(20)
        pid = p.metrics()["producer_id"]
    batches = fetch_batches(tansu_broker.bootstrap, topic, 1)
    assert pid >= 0
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in batches] == [
        (pid, 0, i) for i in range(4)]


@pytest.mark.parametrize("in_flight, transactional", [(5, False), (1, False), (5, True)],
                         ids=["5", "1", "5-transactional"])
def test_idempotent_batches_in_flight_together_land_in_sequence_order(relayed_tansu, in_flight,
                                                                      transactional, shell):
    # Small batches sent without waiting: as many of a partition as allowed are in flight
    # on one connection (the relay counts them, holding the answers so they pile up at any
    # load), and Tansu, which checks every sequence, writes them all, in order, once.
    broker, proxy = relayed_tansu
    topic = f"pipe-{uuid.uuid4().hex[:8]}"
    bootstrap = f"127.0.0.1:{proxy.port}"
    n = 400
    options = {"transactional_id": f"tx-{topic}"} if transactional else {}
    with shell.Producer(bootstrap_servers=bootstrap, linger_ms=0, batch_size=150,
                        max_in_flight_requests_per_connection=in_flight, **options) as p:
        if transactional:
            p.init_transactions(20)
            p.begin_transaction()
        p.send(topic, b"warm", partition=0).result(20)
        with proxy.holding_answers(PRODUCE):
            futs = [p.send(topic, b"%05d" % i, partition=0) for i in range(n)]
            proxy.await_in_flight(PRODUCE, in_flight, 10)
            time.sleep(0.2)  # room for a request beyond the limit to show
        if transactional:
            p.commit_transaction(30)
        p.flush(30)
        assert all(f.exception() is None for f in futs)
        pid = p.metrics()["producer_id"]
    assert proxy.peak[PRODUCE] == in_flight, proxy.peak
    batches = fetch_batches(bootstrap, topic, 0)
    if transactional:
        assert batches[-1].is_control and not any(b.is_control for b in batches[:-1])
        batches = batches[:-1]
    assert len(batches) > 10
    seq = 0
    for b in batches:
        assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == (
            pid, 0, seq, transactional)
        seq += len(b.records)
    assert read_values(bootstrap, topic, [0], n + 1)[0] == [b"warm"] + [b"%05d" % i for i in range(n)]


@pytest.mark.parametrize("code", [6, 7], ids=["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"])
def test_batches_in_flight_behind_a_refused_one_are_resent_after_it(relayed_tansu, code, shell):
    # The relay answers one Produce request with a retriable error without passing it on,
    # once two more are in flight behind it; those reach Tansu, which refuses them (their
    # sequences do not follow), and the producer resends them after the refused one:
    # every record once, in order, with no epoch bump.
    broker, proxy = relayed_tansu
    topic = f"refuse-{uuid.uuid4().hex[:8]}"
    bootstrap = f"127.0.0.1:{proxy.port}"
    n = 400
    with shell.Producer(bootstrap_servers=bootstrap, linger_ms=0, batch_size=150,
                        retry_backoff_ms=20) as p:
        p.send(topic, b"warm", partition=0).result(20)
        futs = [p.send(topic, b"%05d" % i, partition=0) for i in range(n // 2)]
        proxy.refuse(code, hold=2)  # answered once two more batches are on their way
        futs += [p.send(topic, b"%05d" % i, partition=0) for i in range(n // 2, n)]
        p.flush(30)
        assert all(f.exception() is None for f in futs)
        m = p.metrics()
    assert proxy.refused == 1
    assert proxy.produce_errors[45] >= 2  # OUT_OF_ORDER_SEQUENCE_NUMBER for those behind it
    assert m["epoch_bumps"] == 0
    batches = fetch_batches(bootstrap, topic, 0)
    seq = 0
    for b in batches:
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (m["producer_id"], 0, seq)
        seq += len(b.records)
    assert read_values(bootstrap, topic, [0], n + 1)[0] == [b"warm"] + [b"%05d" % i for i in range(n)]


@pytest.mark.parametrize("codes", [
    [45],              # OUT_OF_ORDER_SEQUENCE_NUMBER: the epoch is bumped, the batch resent
    [59, 6, 7],        # UNKNOWN_PRODUCER_ID, then NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT
])
def test_injected_sequence_errors_deliver_every_record_once_in_order(mock_cluster_factory, codes):
    cluster = mock_cluster_factory(3)
    topic = f"inj-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 3)
    per = 200
    with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=2, batch_size=2000,
                  retry_backoff_ms=10, retry_backoff_max_ms=50,
                  max_in_flight_requests_per_connection=1) as p:  # the mock checks no sequences
        p.send(topic, b"warm", partition=0).result(20)
        for _ in range(3):
            cluster.push_request_errors(PRODUCE, codes)
        futs = [p.send(topic, b"%d-%05d" % (i % 3, i // 3), partition=i % 3) for i in range(3 * per)]
        p.flush(30)
        assert all(f.exception() is None for f in futs)
        m = p.metrics()
    if 45 in codes or 59 in codes:
        assert m["epoch_bumps"] >= 1
    got = read_values(cluster.bootstrap, topic, [0, 1, 2], 3 * per + 1)
    got[0] = got[0][1:]  # the warm-up record
    for part in range(3):
        assert got[part] == [b"%d-%05d" % (part, i) for i in range(per)]


def test_leader_moves_and_an_outage_mid_produce_lose_nothing_and_reorder_nothing(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    topic = f"move-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2)
    sent = {0: 0, 1: 0}
    with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=1, retry_backoff_ms=10,
                  retry_backoff_max_ms=100, metadata_max_age_ms=500,
                  max_in_flight_requests_per_connection=1) as p:  # the mock checks no sequences
        futs = []
        for round_ in range(6):
            for _ in range(100):
                for part in (0, 1):
                    futs.append(p.send(topic, b"%d-%05d" % (part, sent[part]), partition=part))
                    sent[part] += 1
            if round_ % 2 == 0:
                cluster.partition_set_leader(topic, round_ % 2, 1 + (round_ // 2) % 3)
            else:
                cluster.broker_set_down(2)
                time.sleep(0.3)
                cluster.broker_set_up(2)
            time.sleep(0.05)
        p.flush(60)
        assert all(f.exception() is None for f in futs), [f.exception() for f in futs if f.exception()][:3]
    got = read_values(cluster.bootstrap, topic, [0, 1], sum(sent.values()))
    for part in (0, 1):
        # The mock checks no sequences, so a duplicate here would be the producer's own.
        assert got[part] == [b"%d-%05d" % (part, i) for i in range(sent[part])]
