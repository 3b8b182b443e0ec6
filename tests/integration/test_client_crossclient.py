"""What kafkawire writes, other clients read back identically, and the other way round."""

import time
import uuid

import pytest
from shells import shell  # noqa: F401 - the fixture

from kafkawire.client.consumer import Consumer
from kafkawire.client.partitioner import partition_for_key
from kafkawire.client.producer import Producer

confluent_kafka = pytest.importorskip("confluent_kafka")

RECORDS = [(f"k{i}".encode() if i % 3 else None, f"value {i}".encode() * (1 + i % 4),
            1_700_000_000_000 + i, [("h", f"{i}".encode())]) for i in range(50)]


def _topic(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _kafkawire_produce(bootstrap, topic, compression="none"):
    with Producer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=2) as p:
        for k, v, ts, h in RECORDS:
            p.send(topic, v, key=k, partition=0, timestamp=ts, headers=h)
        p.flush(20)


def _confluent_read(bootstrap, topic, n):
    """The first ``n`` messages of ``topic`` partition 0 as confluent-kafka reads them;
    fails, with the errors it reported, if they do not all come within 20 s."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "x",
                                  "enable.auto.commit": False, "log_level": 3})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got, errors = [], []
        deadline = time.monotonic() + 20
        while len(got) < n:
            assert time.monotonic() < deadline, (
                f"confluent-kafka read {len(got)} of {n} records of {topic} in 20 s; its errors: {errors[:3]}")
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error())
            else:
                got.append(m)
        return got
    finally:
        c.close()


@pytest.mark.broker
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_reads_kafkawire(modern_broker, compression):
    topic = _topic(f"to-ck-{compression}")
    _kafkawire_produce(modern_broker.bootstrap, topic, compression)
    got = [(m.key(), m.value(), m.timestamp()[1], m.headers())
           for m in _confluent_read(modern_broker.bootstrap, topic, len(RECORDS))]
    assert got == [(k, v, ts, [(hk, hv) for hk, hv in h]) for k, v, ts, h in RECORDS]


@pytest.mark.broker
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_reads_kafkawire_sent_one_record_at_a_time(modern_broker, shell, compression):
    # linger_ms=0 and each record waited for: every one goes out alone, written before its
    # batch is booked (the default producer: acks=all, idempotent).
    topic = _topic(f"lone-{compression}")
    with shell.Producer(bootstrap_servers=modern_broker.bootstrap, compression_type=compression,
                        linger_ms=0) as p:
        offsets = [p.send(topic, v, key=k, partition=0, timestamp=ts, headers=h).result(20).offset
                   for k, v, ts, h in RECORDS]
    assert offsets == list(range(len(RECORDS)))
    got = [(m.key(), m.value(), m.timestamp()[1], m.headers())
           for m in _confluent_read(modern_broker.bootstrap, topic, len(RECORDS))]
    assert got == [(k, v, ts, [(hk, hv) for hk, hv in h]) for k, v, ts, h in RECORDS]


@pytest.mark.broker
def test_confluent_reads_a_pipelined_partition_in_send_order(modern_broker, shell):
    # Without idempotence several batches of a partition are in flight at once (one per
    # request, up to max_in_flight_requests_per_connection); none is retried here, so
    # they must land in the order they were sent.
    topic = _topic("pipelined")
    n = 3000
    with shell.Producer(bootstrap_servers=modern_broker.bootstrap, acks=1, linger_ms=0,
                        batch_size=512, max_in_flight_requests_per_connection=5) as p:
        futures = [p.send(topic, b"%06d" % i, partition=0) for i in range(n)]
        p.flush(30)
        offsets = [f.result(10).offset for f in futures]
    assert offsets == list(range(n))
    assert [m.value() for m in _confluent_read(modern_broker.bootstrap, topic, n)] == [
        b"%06d" % i for i in range(n)]


@pytest.mark.broker
def test_kafka_python_reads_kafkawire(modern_broker):
    kafka = pytest.importorskip("kafka")
    topic = _topic("to-kp")
    _kafkawire_produce(modern_broker.bootstrap, topic, "gzip")
    c = kafka.KafkaConsumer(bootstrap_servers=modern_broker.bootstrap, enable_auto_commit=False,
                            consumer_timeout_ms=5000)
    try:
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got = []
        for m in c:
            got.append((m.key, m.value, m.timestamp, [(hk, hv) for hk, hv in m.headers]))
            if len(got) == len(RECORDS):
                break
    finally:
        c.close()
    assert got == [(k, v, ts, h) for k, v, ts, h in RECORDS]


@pytest.mark.broker
@pytest.mark.parametrize("compression", ["none", "snappy", "lz4"])
def test_kafkawire_reads_confluent(modern_broker, compression):
    topic = _topic(f"from-ck-{compression}")
    p = confluent_kafka.Producer({"bootstrap.servers": modern_broker.bootstrap,
                                  "compression.type": compression, "log_level": 3})
    for k, v, ts, h in RECORDS:
        p.produce(topic, v, key=k, partition=0, timestamp=ts, headers=h)
    assert p.flush(20) == 0
    with Consumer(bootstrap_servers=modern_broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        got = []
        for _ in range(20):
            got += c.poll(1.0)
            if len(got) >= len(RECORDS):
                break
    assert [(r.key, r.value, r.timestamp, list(r.headers)) for r in got] == [
        (k, v, ts, h) for k, v, ts, h in RECORDS
    ]


@pytest.mark.broker
def test_keyed_records_land_where_confluent_murmur2_puts_them(mock_cluster):
    topic = "keyed-partitions"
    mock_cluster.create_topic(topic, 7, 1)
    keys = [f"user-{i}".encode() for i in range(60)] + [b"", b"a", b"\xff" * 13]
    theirs = {}
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap,
                                  "partitioner": "murmur2_random", "log_level": 3})
    for key in keys:
        p.produce(topic, b"v", key=key,
                  on_delivery=lambda err, msg: theirs.__setitem__(msg.key(), msg.partition()))
    assert p.flush(20) == 0
    with Producer(bootstrap_servers=mock_cluster.bootstrap) as kw:
        ours = {key: kw.send(topic, b"v", key=key).result(20).partition for key in keys}
    assert ours == theirs
    assert all(ours[k] == partition_for_key(k, 7) for k in keys)
