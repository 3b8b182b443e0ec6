"""Fault injection on librdkafka's mock cluster: leader moves, broker outages, injected
error codes and added latency, with the same invariant throughout: every future
resolves, no acknowledged record is lost, and every failure reaches the caller typed.

What "exactly once" means here: kafkawire's producer is not idempotent, so a batch whose
request reached the broker but whose response was lost (a dropped connection, a request
timeout) may be written twice when it is retried.  Where that can happen the tests
assert the weaker, guaranteed property: each acknowledged record is in the log at its
acknowledged offset, acknowledged offsets are distinct and follow send order per
partition.  The mock broker answers an injected error or NOT_LEADER_OR_FOLLOWER before
it appends anything, so where only those occur the log holds every record exactly
once, at contiguous offsets, and the tests assert that.

Every test that breaks the cluster takes a fresh one from ``mock_cluster_factory``.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

import pytest

from kafkawire import errors
from kafkawire.client.consumer import Consumer, TopicPartition
from kafkawire.errors import (
    DeliveryTimeoutError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
)
from kafkawire.client.producer import Producer

PRODUCE, FETCH = 0, 1

# Short everything, so a fault costs milliseconds rather than the Java defaults' seconds.
FAST = dict(
    retry_backoff_ms=20,
    retry_backoff_max_ms=200,
    reconnect_backoff_ms=20,
    reconnect_backoff_max_ms=200,
    # Only errors may trigger a metadata refresh within a test: following a leader
    # must come from NOT_LEADER_OR_FOLLOWER, not from the periodic refresh.
    metadata_max_age_ms=600_000,
)


class _Clock:
    def __enter__(self) -> _Clock:
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.monotonic() - self.start


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _make_topic(cluster, topic: str, leaders: dict[int, int]) -> None:
    """``topic`` with one partition per entry of ``leaders`` (partition -> broker id)."""
    cluster.create_topic(topic, len(leaders), cluster.num_brokers)
    for partition, broker in leaders.items():
        cluster.partition_set_leader(topic, partition, broker)


def _producer(cluster, **options) -> Producer:
    # The mock checks no sequences: it would write the batches in flight behind one it
    # answered with an error (a broker that checks refuses them), so one at a time here.
    config = dict(FAST, linger_ms=2, request_timeout_ms=2000, delivery_timeout_ms=15000,
                  max_block_ms=5000, max_in_flight_requests_per_connection=1)
    config.update(options)
    return Producer(bootstrap_servers=cluster.bootstrap, **config)


def _consumer(cluster, **options) -> Consumer:
    config = dict(FAST, auto_offset_reset="earliest", fetch_max_wait_ms=50,
                  request_timeout_ms=2000)
    config.update(options)
    return Consumer(bootstrap_servers=cluster.bootstrap, **config)


def _value(partition: int, seq: int) -> bytes:
    return f"p{partition}-{seq:06d}".encode()


class _Sent:
    """Records sent, in send order per partition, with their futures."""

    def __init__(self) -> None:
        self.by_partition: dict[int, list[tuple[bytes, object]]] = defaultdict(list)

    def send(self, producer: Producer, topic: str, partition: int) -> None:
        seq = len(self.by_partition[partition])
        value = _value(partition, seq)
        self.by_partition[partition].append((value, producer.send(topic, value, partition=partition)))

    def outcomes(self, timeout: float) -> dict[int, list[tuple[bytes, object, BaseException | None]]]:
        """partition -> [(value, RecordMetadata or None, exception or None)], send order.
        Every future must resolve within ``timeout`` seconds in all."""
        deadline = time.monotonic() + timeout
        out: dict[int, list] = {}
        for partition, sent in self.by_partition.items():
            rows = []
            for value, fut in sent:
                remaining = max(0.0, deadline - time.monotonic())
                try:
                    exc = fut.exception(remaining)
                except KafkaTimeoutError:
                    pytest.fail(f"a future of partition {partition} did not resolve within {timeout}s")
                rows.append((value, None if exc else fut.result(0), exc))
            out[partition] = rows
        return out


def _read_log(cluster, topic: str, ends: dict[int, int], timeout: float = 10.0
              ) -> dict[int, list[tuple[int, bytes]]]:
    """Everything in the log of each partition below ``ends[partition]``, as
    (offset, value) in the order the consumer returned it."""
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in ends}
    with _consumer(cluster) as c:
        c.assign([(topic, p) for p in ends])
        deadline = time.monotonic() + timeout
        while any(c.position((topic, p)) < end for p, end in ends.items()):
            assert time.monotonic() < deadline, (
                f"log not read back in {timeout}s: positions "
                f"{ {p: c.position((topic, p)) for p in ends} }, ends {ends}")
            for r in c.poll(0.5):
                got[r.partition].append((r.offset, r.value))
    return got


def _check_log_exactly_once(log: dict[int, list[tuple[int, bytes]]], ends: dict[int, int]) -> None:
    """Each partition's log was read once per offset, in order, from 0 to its end."""
    for p, rows in log.items():
        assert [o for o, _ in rows] == list(range(ends[p])), f"partition {p}: offsets read"


def _check_acknowledged_in_log(outcomes, log) -> None:
    """Every acknowledged record is in the log at its acknowledged offset; acknowledged
    offsets are distinct and increase in send order per partition."""
    for p, rows in outcomes.items():
        at = dict(log[p])
        acked = [(value, meta.offset) for value, meta, exc in rows if exc is None]
        offsets = [o for _, o in acked]
        assert offsets == sorted(set(offsets)), (
            f"partition {p}: acknowledged offsets out of send order or repeated")
        lost = [(v, o) for v, o in acked if at.get(o) != v]
        assert not lost, f"partition {p}: acknowledged but not in the log there: {lost[:5]}"


# -- 1. leader moves during production -----------------------------------------------------


def test_producer_follows_leader_moves_without_loss(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    topic = _topic("lead")
    _make_topic(cluster, topic, {0: 1, 1: 2, 2: 3})
    sent = _Sent()
    refreshes: list[float] = []
    with _producer(cluster) as producer:
        meta = producer.cluster
        apply = meta._apply_metadata
        meta._apply_metadata = lambda resp: (refreshes.append(time.monotonic()), apply(resp))[1]
        leaders = {}
        moves = []
        for phase in range(5):
            if phase:
                # Rotate every leader mid-stream: the last records of the previous phase
                # may still be lingering or in flight to the old leaders.
                leaders = {p: (p + phase) % 3 + 1 for p in range(3)}
                # Timed before the first move: a refresh may answer between the moves.
                moves.append(time.monotonic())
                for p, b in leaders.items():
                    cluster.partition_set_leader(topic, p, b)
            for i in range(300):
                sent.send(producer, topic, i % 3)
                if i % 60 == 59:
                    time.sleep(0.02)
            if phase:
                # The next move waits for this one's refresh: on a starved machine the
                # sender may not reach the old leaders before it otherwise.
                deadline = time.monotonic() + 10
                while not any(t > moves[-1] for t in refreshes) and time.monotonic() < deadline:
                    time.sleep(0.005)
        producer.flush(15)
        outcomes = sent.outcomes(1)
        followed = {p: meta.leader_for(topic, p) for p in range(3)}

    failures = [exc for rows in outcomes.values() for _, _, exc in rows if exc is not None]
    assert not failures, f"{len(failures)} records failed, first: {failures[0]!r}"
    # NOT_LEADER_OR_FOLLOWER comes before the mock appends: no retry can duplicate.
    for p, rows in outcomes.items():
        assert [m.offset for _, m, _ in rows] == list(range(500)), f"partition {p}"
    assert followed == leaders
    # The periodic refresh is 10 minutes away: the producer refreshed because the old
    # leaders answered NOT_LEADER_OR_FOLLOWER, once after every move.
    bounds = moves + [float("inf")]
    for i in range(len(moves)):
        assert any(bounds[i] < t < bounds[i + 1] for t in refreshes), (
            f"no metadata refresh between leader move {i + 1} and the next")
    assert len(refreshes) < 100, f"{len(refreshes)} metadata refreshes: a refresh storm"

    ends = {p: 500 for p in range(3)}
    log = _read_log(cluster, topic, ends)
    _check_log_exactly_once(log, ends)
    _check_acknowledged_in_log(outcomes, log)


# -- 2. a broker down, then up -------------------------------------------------------------


def _outage(cluster, topic: str, producer: Producer, down_for: float) -> tuple[_Sent, _Sent]:
    """Stream records to partitions 0-2 (leaders 1-3), with broker 2 down for
    ``down_for`` seconds in the middle.  Returns (records sent before broker 2 went
    down, records sent after)."""
    before, during = _Sent(), _Sent()
    for i in range(300):
        before.send(producer, topic, i % 3)
    time.sleep(0.05)
    cluster.broker_set_down(2)
    start = time.monotonic()
    for i in range(300):
        during.send(producer, topic, i % 3)
        if i % 30 == 29:
            time.sleep(0.02)
    # Broker 2's outage holds up only its own partition: the others are acknowledged
    # while it is still down.
    others = [f for p in (0, 2) for _, f in during.by_partition[p]]
    for f in others:
        f.result(max(0.01, start + down_for - 0.1 - time.monotonic()))
    remaining = start + down_for - time.monotonic()
    assert remaining > 0, "the test machine is too slow for this outage length"
    time.sleep(remaining)
    cluster.broker_set_up(2)
    return before, during


def test_broker_outage_shorter_than_delivery_timeout_delivers_everything(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    topic = _topic("down-up")
    _make_topic(cluster, topic, {0: 1, 1: 2, 2: 3})
    with _producer(cluster, request_timeout_ms=1000, delivery_timeout_ms=10000) as producer:
        before, during = _outage(cluster, topic, producer, down_for=1.5)
        producer.flush(8)
        outcomes = {p: before.outcomes(1)[p] + during.outcomes(1)[p] for p in range(3)}
    failures = [exc for rows in outcomes.values() for _, _, exc in rows if exc is not None]
    assert not failures, f"{len(failures)} records failed, first: {failures[0]!r}"
    ends = {p: rows[-1][1].offset + 1 for p, rows in outcomes.items()}
    # Partitions 0 and 2 never lost their leader: exactly once, in send order.
    for p in (0, 2):
        assert [m.offset for _, m, _ in outcomes[p]] == list(range(200))
    log = _read_log(cluster, topic, ends)
    _check_log_exactly_once(log, ends)
    _check_acknowledged_in_log(outcomes, log)


def test_broker_outage_longer_than_delivery_timeout_fails_typed(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    topic = _topic("down-long")
    _make_topic(cluster, topic, {0: 1, 1: 2, 2: 3})
    with _producer(cluster, request_timeout_ms=500, delivery_timeout_ms=1000) as producer:
        with _Clock() as clock:
            before, during = _outage(cluster, topic, producer, down_for=2.5)
            outcomes = {p: before.outcomes(1)[p] + during.outcomes(1)[p] for p in range(3)}
        # Every future resolved by the time the broker came back (2.5 s): each record of
        # partition 1 sent while it was down waited at most delivery_timeout_ms.
        assert clock.elapsed < 3.5
        stuck = [exc for _, _, exc in outcomes[1][100:]]
        assert all(isinstance(e, DeliveryTimeoutError) for e in stuck), {type(e) for e in stuck}
        assert all("delivery_timeout_ms=1000" in str(e) for e in stuck)
        for p in (0, 2):
            assert [exc for _, _, exc in outcomes[p] if exc is not None] == []
        # With broker 2 back, partition 1 takes records again.
        after = _Sent()
        for _ in range(20):
            after.send(producer, topic, 1)
        producer.flush(5)
        outcomes[1] += after.outcomes(1)[1]
    assert [exc for _, _, exc in outcomes[1][-20:]] == [None] * 20
    ends = {p: max(m.offset for _, m, e in rows if e is None) + 1 for p, rows in outcomes.items()}
    log = _read_log(cluster, topic, ends)
    _check_log_exactly_once(log, ends)
    _check_acknowledged_in_log(outcomes, log)


# -- 3. injected Produce errors --------------------------------------------------------------

RETRIABLE = [
    (errors.NotLeaderOrFollowerError, 6),
    (errors.RequestTimedOutError, 7),
    (errors.NotEnoughReplicasError, 19),
    (errors.LeaderNotAvailableError, 5),
]


@pytest.mark.parametrize("cls, code", RETRIABLE, ids=[c.name for c, _ in RETRIABLE])
def test_retriable_produce_error_is_typed_without_retries_and_retried_with_them(
        mock_cluster_factory, cls, code):
    cluster = mock_cluster_factory(1)
    topic = _topic("retriable")
    _make_topic(cluster, topic, {0: 1})
    # retries=0: the injected error itself reaches the caller, as its own class.
    with _producer(cluster, retries=0) as producer:
        cluster.push_request_errors(PRODUCE, [code])
        with pytest.raises(cls, match=cls.name):
            producer.send(topic, b"once", partition=0).result(5)
    # Default retries: the same error is retried and the record lands once, at offset 0
    # (nothing was appended by the failed attempt).
    with _producer(cluster) as producer:
        cluster.push_request_errors(PRODUCE, [code, code])
        assert producer.send(topic, b"retried", partition=0).result(5).offset == 0
        assert producer.send(topic, b"next", partition=0).result(5).offset == 1
    log = _read_log(cluster, topic, {0: 2})
    assert log[0] == [(0, b"retried"), (1, b"next")]


def test_retriable_produce_errors_under_load_deliver_every_record_once(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    topic = _topic("retry-load")
    _make_topic(cluster, topic, {0: 1, 1: 2, 2: 3})
    sent = _Sent()
    with _producer(cluster) as producer:
        producer.partitions_for(topic)
        # Two rounds of every retriable code, spread over whichever Produce requests of
        # the three brokers come next.
        cluster.push_request_errors(PRODUCE, [6, 7, 19, 5] * 2)
        for i in range(600):
            sent.send(producer, topic, i % 3)
            if i % 100 == 99:
                time.sleep(0.01)
        producer.flush(10)
        outcomes = sent.outcomes(1)
    failures = [exc for rows in outcomes.values() for _, _, exc in rows if exc is not None]
    assert not failures, f"{len(failures)} records failed, first: {failures[0]!r}"
    for p, rows in outcomes.items():
        assert [m.offset for _, m, _ in rows] == list(range(200)), f"partition {p}"
    # Every injected error was used up by the records above (and so retried): a
    # producer that may not retry now succeeds.
    with _producer(cluster, retries=0) as producer:
        assert producer.send(topic, b"last", partition=0).result(5).offset == 200
    ends = {0: 201, 1: 200, 2: 200}
    log = _read_log(cluster, topic, ends)
    _check_log_exactly_once(log, ends)
    _check_acknowledged_in_log(outcomes, log)


def test_pipelined_batches_through_retriable_errors_deliver_every_record_once(mock_cluster_factory):
    # Without idempotence (acks=1) each partition has up to 5 small batches in flight; a
    # retried one may land after the batch behind it, but no record is lost or doubled,
    # and each is acknowledged at the offset it has in the log.
    cluster = mock_cluster_factory(3)
    topic = _topic("retry-pipelined")
    _make_topic(cluster, topic, {0: 1, 1: 2, 2: 3})
    sent = _Sent()
    with _producer(cluster, acks=1, batch_size=200, max_in_flight_requests_per_connection=5) as producer:
        assert producer.metrics().get("producer_id") is None  # idempotence is off
        producer.partitions_for(topic)
        cluster.push_request_errors(PRODUCE, [6, 7, 19, 5] * 2)
        for i in range(600):
            sent.send(producer, topic, i % 3)
        producer.flush(10)
        outcomes = sent.outcomes(1)
    failures = [exc for rows in outcomes.values() for _, _, exc in rows if exc is not None]
    assert not failures, f"{len(failures)} records failed, first: {failures[0]!r}"
    ends = {0: 200, 1: 200, 2: 200}
    log = _read_log(cluster, topic, ends)
    _check_log_exactly_once(log, ends)
    for p, rows in outcomes.items():
        at = dict(log[p])
        assert {m.offset: v for v, m, _ in rows} == at, f"partition {p}: acknowledged offsets"


# (MESSAGE_TOO_LARGE is not here: a batch of several records refused with it is split and
# resent, tests/integration/test_kafka_batch_split.py.)
NON_RETRIABLE = [(errors.InvalidRecordError, 87), (errors.TopicAuthorizationFailedError, 29)]


@pytest.mark.parametrize("cls, code", NON_RETRIABLE, ids=[c.name for c, _ in NON_RETRIABLE])
def test_non_retriable_produce_error_fails_its_records_only(mock_cluster_factory, cls, code):
    cluster = mock_cluster_factory(3)
    topic = _topic("fatal")
    # Every partition on broker 1, so the failing request may carry several of them.
    _make_topic(cluster, topic, {0: 1, 1: 1, 2: 1})
    sent = _Sent()
    # Small batches: each partition has batches queued behind the one that fails.
    with _producer(cluster, batch_size=300) as producer:
        producer.partitions_for(topic)
        cluster.push_request_errors(PRODUCE, [code])
        with _Clock() as clock:
            for i in range(300):
                sent.send(producer, topic, i % 3)
            producer.flush(5)
        outcomes = sent.outcomes(1)
    assert clock.elapsed < 2, "a non-retriable error must not be retried until a timeout"
    failed = [exc for rows in outcomes.values() for _, _, exc in rows if exc is not None]
    assert failed, "the injected error reached no record"
    assert all(type(e) is cls and e.code == code for e in failed), {type(e) for e in failed}
    assert cls.name in str(failed[0]) and topic in str(failed[0])
    # The records behind the failed batch were not held up by it, and the failed batch
    # was not written: the acknowledged records fill each partition from offset 0.
    ends = {}
    for p, rows in outcomes.items():
        acked = [m.offset for _, m, e in rows if e is None]
        assert acked, f"partition {p}: nothing delivered after the failure"
        assert acked == list(range(len(acked))), f"partition {p}"
        ends[p] = len(acked)
    log = _read_log(cluster, topic, ends)
    _check_log_exactly_once(log, ends)
    _check_acknowledged_in_log(outcomes, log)


# -- 4. the consumer under faults ----------------------------------------------------------


def _fill(cluster, topic: str, partitions: int, per_partition: int) -> dict[int, list[bytes]]:
    sent = _Sent()
    with _producer(cluster) as producer:
        for i in range(partitions * per_partition):
            sent.send(producer, topic, i % partitions)
        producer.flush(10)
        outcomes = sent.outcomes(1)
    for p, rows in outcomes.items():
        assert [m.offset for _, m, _ in rows] == list(range(per_partition))
    return {p: [v for v, _, _ in rows] for p, rows in outcomes.items()}


def _consume_all(consumer: Consumer, topic: str, expected: dict[int, list[bytes]], timeout: float,
                 between_polls=None) -> dict[int, list[tuple[int, bytes]]]:
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in expected}
    deadline = time.monotonic() + timeout
    total = sum(len(v) for v in expected.values())
    while sum(len(v) for v in got.values()) < total:
        assert time.monotonic() < deadline, (
            f"consumed {sum(len(v) for v in got.values())} of {total} records in {timeout}s")
        for r in consumer.poll(0.5):
            got[r.partition].append((r.offset, r.value))
        if between_polls is not None:
            between_polls(got)
    return got


def test_consumer_reads_everything_once_through_fetch_errors_and_leader_moves(mock_cluster_factory):
    cluster = mock_cluster_factory(3)
    topic = _topic("consume")
    _make_topic(cluster, topic, {0: 1, 1: 2, 2: 3})
    expected = _fill(cluster, topic, 3, 200)
    moved = []

    def move_leaders_midway(got):
        if not moved and sum(len(v) for v in got.values()) >= 150:
            for p in range(3):
                cluster.partition_set_leader(topic, p, (p + 1) % 3 + 1)
            cluster.push_request_errors(FETCH, [6, 5, 7, 9])
            moved.append(True)

    with _consumer(cluster, max_poll_records=25) as consumer:
        consumer.assign([(topic, p) for p in range(3)])
        for p in range(3):
            assert consumer.position((topic, p)) == 0
        cluster.push_request_errors(FETCH, [6, 5, 7, 9])
        got = _consume_all(consumer, topic, expected, 15, move_leaders_midway)
        assert moved
        assert {p: consumer.cluster.leader_for(topic, p) for p in range(3)} == {0: 2, 1: 3, 2: 1}
        assert consumer.poll(0.2) == []
    for p, rows in got.items():
        assert rows == list(enumerate(expected[p])), f"partition {p}"


@pytest.mark.parametrize("fetch_version", [None, 4], ids=["fetch-latest", "fetch-v4"])
def test_consumer_reports_non_retriable_fetch_error_then_continues(mock_cluster_factory, fetch_version):
    cluster = mock_cluster_factory(1)
    topic = _topic("fetch-fatal")
    _make_topic(cluster, topic, {0: 1})
    expected = _fill(cluster, topic, 1, 50)
    overrides = {} if fetch_version is None else {"api_version_overrides": {"Fetch": fetch_version}}
    with _consumer(cluster, **overrides) as consumer:
        consumer.assign([(topic, 0)])
        assert consumer.position((topic, 0)) == 0
        # Retriable ones first: the fatal one is reached only if they were retried.
        cluster.push_request_errors(FETCH, [6, 7, 29])
        deadline = time.monotonic() + 1.5
        got = []
        with pytest.raises(errors.TopicAuthorizationFailedError, match="TOPIC_AUTHORIZATION_FAILED"):
            while time.monotonic() < deadline:
                got += consumer.poll(0.2)
        assert got == [], "records were returned before the injected errors ran out"
        # The error is reported once; consuming then goes on from the same position.
        got = _consume_all(consumer, topic, expected, 5)
    assert got[0] == list(enumerate(expected[0]))


@pytest.mark.parametrize("policy", ["earliest", "latest", "none"])
def test_offset_out_of_range_follows_auto_offset_reset(mock_cluster, policy):
    topic = _topic(f"oor-{policy}")
    _make_topic(mock_cluster, topic, {0: 1})
    expected = _fill(mock_cluster, topic, 1, 10)
    tp = TopicPartition(topic, 0)
    with _consumer(mock_cluster, auto_offset_reset=policy) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        if policy == "none":
            with _Clock() as clock, pytest.raises(OffsetOutOfRangeError, match="outside the log") as info:
                for _ in range(20):
                    consumer.poll(0.2)
            assert clock.elapsed < 2
            assert isinstance(info.value, errors.BrokerError) and info.value.code == 1
            assert info.value.partitions == {tp: 1000}
            # The caller decides where to go from here.
            consumer.seek(tp, 3)
            got = _consume_all(consumer, topic, {0: expected[0][3:]}, 5)
            assert got[0] == list(enumerate(expected[0]))[3:]
        elif policy == "earliest":
            got = _consume_all(consumer, topic, expected, 5)
            assert got[0] == list(enumerate(expected[0]))
        else:
            assert consumer.poll(0.5) == []
            assert consumer.position(tp) == 10
            with _producer(mock_cluster) as producer:
                for i in range(5):
                    producer.send(topic, b"new-%d" % i, partition=0)
                producer.flush(5)
            got = _consume_all(consumer, topic, {0: [b"new-%d" % i for i in range(5)]}, 5)
            assert got[0] == [(10 + i, b"new-%d" % i) for i in range(5)]


def test_offset_out_of_range_error_is_the_error_table_class(mock_cluster):
    topic = _topic("oor-class")
    _make_topic(mock_cluster, topic, {0: 1})
    _fill(mock_cluster, topic, 1, 1)
    with _consumer(mock_cluster, auto_offset_reset="none") as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek((topic, 0), 1000)
        with pytest.raises(errors.for_code(1)):
            for _ in range(20):
                consumer.poll(0.2)


# -- 5. deadlines under latency -------------------------------------------------------------


def test_deadlines_hold_under_broker_latency(mock_cluster_factory):
    cluster = mock_cluster_factory(1)
    topic = _topic("rtt")
    _make_topic(cluster, topic, {0: 1})
    producer = _producer(cluster, max_block_ms=400, request_timeout_ms=5000, delivery_timeout_ms=10000)
    consumer = _consumer(cluster, request_timeout_ms=5000, fetch_max_wait_ms=100)
    try:
        assert producer.send(topic, b"warm", partition=0).result(5).offset == 0
        consumer.assign([(topic, 0)])
        assert [r.value for r in consumer.poll(5)] == [b"warm"]

        cluster.broker_set_rtt(1, 2000)
        fut = producer.send(topic, b"slow", partition=0)
        with _Clock() as clock, pytest.raises(KafkaTimeoutError, match="flush"):
            producer.flush(0.3)
        assert clock.elapsed < 0.8
        with _Clock() as clock, pytest.raises(KafkaTimeoutError):
            fut.result(0.2)
        assert clock.elapsed < 0.7
        with _Clock() as clock, pytest.raises(KafkaTimeoutError, match="max_block_ms=400"):
            producer.send(_topic("rtt-new"), b"x")  # needs a Metadata answer first
        assert clock.elapsed < 1.2
        with _Clock() as clock:
            got = consumer.poll(0.3)
        assert clock.elapsed < 0.8
        with _Clock() as clock, pytest.raises(KafkaTimeoutError):
            consumer.end_offsets([(topic, 0)], timeout=0.3)
        assert clock.elapsed < 0.8
        # The slow answers still arrive: nothing was lost by giving up waiting.
        assert fut.result(5).offset == 1
        got += consumer.poll(5)
        assert [(r.offset, r.value) for r in got] == [(1, b"slow")]
    finally:
        cluster.broker_set_rtt(1, 0)
        with _Clock() as clock:
            producer.close(2)
            consumer.close()
        assert clock.elapsed < 3


# Connecting again to this broker takes two slow round trips (ApiVersions v3 is refused
# with error 35, then v0 answers): the callers below must not wait for them.


def test_delivery_timeout_holds_while_a_slow_broker_reconnects(mock_cluster_factory):
    cluster = mock_cluster_factory(1)
    topic = _topic("rtt-expire")
    _make_topic(cluster, topic, {0: 1})
    with _producer(cluster, request_timeout_ms=300, delivery_timeout_ms=1000) as producer:
        assert producer.send(topic, b"warm", partition=0).result(5).offset == 0
        # Slower than request_timeout_ms: the request times out, the connection is
        # closed, and the retry has to connect again to a broker this slow.
        cluster.broker_set_rtt(1, 1500)
        fut = producer.send(topic, b"late", partition=0)
        with _Clock() as clock, pytest.raises(DeliveryTimeoutError, match="delivery_timeout_ms=1000"):
            fut.result(10)
        cluster.broker_set_rtt(1, 0)
        # A slow broker is not a dead one: once it answers in time, records flow again.
        meta = producer.send(topic, b"fast", partition=0).result(10)
    # "late" may or may not have been written before the client gave up (a
    # non-idempotent producer cannot know); "fast" is where it was acknowledged.
    log = _read_log(cluster, topic, {0: meta.offset + 1})
    assert log[0][0] == (0, b"warm") and log[0][-1] == (meta.offset, b"fast")
    assert {v for _, v in log[0][1:-1]} <= {b"late"}
    # delivery_timeout_ms counts from send(); the sender notices within a poll tick.
    assert clock.elapsed < 1.5, f"DeliveryTimeoutError after {clock.elapsed:.1f}s, not 1s"


def test_consumer_poll_timeout_holds_while_a_slow_broker_reconnects(mock_cluster_factory):
    cluster = mock_cluster_factory(1)
    topic = _topic("rtt-poll")
    _make_topic(cluster, topic, {0: 1})
    expected = _fill(cluster, topic, 1, 3)
    with _consumer(cluster, request_timeout_ms=500, fetch_max_wait_ms=100) as consumer:
        consumer.assign([(topic, 0)])
        assert consumer.position((topic, 0)) == 0
        cluster.broker_set_rtt(1, 1200)
        # The first Fetch times out after 0.5 s, closing the connection; later polls
        # must not wait for the new connection longer than their own timeout.
        slowest = 0.0
        for _ in range(5):
            with _Clock() as clock:
                assert consumer.poll(0.3) == []
            slowest = max(slowest, clock.elapsed)
        cluster.broker_set_rtt(1, 0)
        got = _consume_all(consumer, topic, expected, 10)
    assert got[0] == list(enumerate(expected[0]))
    assert slowest < 0.8, f"poll(0.3) took {slowest:.1f}s"


# Its 35 ms bound is the point (linger, not the idle poll, wakes the sender): run alone,
# as a user's machine would; beside two busy workers a niced process waits for the CPU.
@pytest.mark.alone
def test_idle_producer_sends_within_linger_ms(mock_cluster):
    topic = _topic("linger")
    _make_topic(mock_cluster, topic, {0: 1})
    with _producer(mock_cluster, linger_ms=2) as producer:
        producer.send(topic, b"warm", partition=0).result(5)
        latencies = []
        for i in range(5):
            time.sleep(0.02)  # the sender is idle, inside its poll
            with _Clock() as clock:
                producer.send(topic, b"%d" % i, partition=0).result(5)
            latencies.append(clock.elapsed)
    # linger_ms plus a loopback round trip; generous for a loaded 2-core machine.
    assert sorted(latencies)[2] < 0.035, [f"{x * 1000:.0f} ms" for x in latencies]
