"""Producer -> broker -> Consumer round trips for every codec and message format."""

import uuid

import pytest
from shells import shell  # noqa: F401 - the fixture
from topics import create_topic

from kafkawire import errors
from kafkawire.client.consumer import Consumer
from kafkawire.client.producer import Producer
from kafkawire.testing import TansuBroker

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _records(n, headers=True):
    return [
        (
            None if i % 7 == 0 else f"key-{i}".encode(),
            None if i % 11 == 5 else (f"value-{i}-".encode() * (i % 5 + 1)),
            1_700_000_000_000 + i,
            ((f"h{i}", f"v{i}".encode()), ("null", None)) if headers else None,
        )
        for i in range(n)
    ]


def _produce(bootstrap, topic, records, shell=None, **config):
    producer = shell.Producer if shell else Producer
    with producer(bootstrap_servers=bootstrap, linger_ms=1, batch_size=2000, **config) as p:
        futures = [p.send(topic, v, key=k, partition=0, timestamp=ts, headers=h) for k, v, ts, h in records]
        p.flush(20)
        return [f.result(0) for f in futures]


def _consume(bootstrap, topic, n, shell=None, **config):
    out = []
    consumer = shell.Consumer if shell else Consumer
    with consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **config) as c:
        c.assign([(topic, 0)])
        for _ in range(50):
            out += c.poll(1.0)
            if len(out) >= n:
                break
    return out


@pytest.mark.broker
@pytest.mark.parametrize("compression", CODECS)
def test_magic2_roundtrip_tansu(modern_broker, compression, shell):
    topic = f"rt-{compression}-{uuid.uuid4().hex[:6]}"
    records = _records(60)
    metas = _produce(modern_broker.bootstrap, topic, records, shell, compression_type=compression)
    assert [m.offset for m in metas] == list(range(60))
    got = _consume(modern_broker.bootstrap, topic, 60, shell)
    assert [(r.key, r.value, r.timestamp, r.headers) for r in got] == [
        (k, v, ts, h) for k, v, ts, h in records
    ]
    assert {(r.topic, r.partition) for r in got} == {(topic, 0)}
    assert [r.offset for r in got] == list(range(60))


@pytest.mark.broker
@pytest.mark.parametrize("compression", CODECS)
def test_magic2_roundtrip_mock(mock_cluster, compression, shell):
    topic = f"rt2-{compression}-{uuid.uuid4().hex[:6]}"
    mock_cluster.create_topic(topic, 1, 1)
    records = _records(40)
    _produce(mock_cluster.bootstrap, topic, records, shell, compression_type=compression)
    got = _consume(mock_cluster.bootstrap, topic, 40, shell)
    assert [(r.key, r.value, r.timestamp, r.headers) for r in got] == [(k, v, ts, h) for k, v, ts, h in records]


@pytest.mark.broker
@pytest.mark.parametrize("produce_version,magic", [(1, 0), (2, 1)])
def test_legacy_message_sets_on_mock_cluster(mock_cluster, produce_version, magic, shell):
    # Tansu refuses magic 0/1 produce; the mock cluster stores uncompressed ones as sent.
    compression = "none"
    topic = f"legacy-{magic}-{compression}-{uuid.uuid4().hex[:6]}"
    mock_cluster.create_topic(topic, 1, 1)
    records = _records(30, headers=False)
    metas = _produce(mock_cluster.bootstrap, topic, records, shell, compression_type=compression,
                     api_version_overrides={"Produce": produce_version},
                     request_timeout_ms=5000, delivery_timeout_ms=15000)
    assert [m.offset for m in metas] == list(range(30))
    got = _consume(mock_cluster.bootstrap, topic, 30, shell)
    assert [(r.key, r.value) for r in got] == [(k, v) for k, v, _, _ in records]
    if magic == 0:
        assert {(r.timestamp, r.timestamp_type) for r in got} == {(-1, -1)}
    else:
        assert [r.timestamp for r in got] == [ts for _, _, ts, _ in records]


@pytest.mark.broker
@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4"])
def test_compressed_legacy_refusal_reaches_the_caller(mock_cluster, compression):
    # The mock broker answers UNSUPPORTED_VERSION (35) to compressed magic 0/1 sets (a mock
    # quirk: kafka-python decodes the same bytes, see tests/codec); the failure must reach
    # the record's future as the broker's typed error, not hang or vanish.
    topic = f"legacy-c-{compression}"
    mock_cluster.create_topic(topic, 1, 1)
    with Producer(bootstrap_servers=mock_cluster.bootstrap, compression_type=compression,
                  api_version_overrides={"Produce": 2}) as p:
        fut = p.send(topic, b"v", partition=0)
        with pytest.raises(errors.BrokerError, match="UNSUPPORTED_VERSION") as info:
            fut.result(10)
        assert info.value.code == 35


@pytest.mark.broker
def test_zstd_needs_magic2(mock_cluster):
    topic = "legacy-zstd"
    mock_cluster.create_topic(topic, 1, 1)
    with Producer(bootstrap_servers=mock_cluster.bootstrap, compression_type="zstd",
                  api_version_overrides={"Produce": 2}) as p:
        with pytest.raises(Exception, match="KIP-110"):
            p.send(topic, b"v", partition=0).result(10)


@pytest.mark.broker
def test_columnar_send_and_poll_batch(modern_broker, shell):
    topic = f"cols-{uuid.uuid4().hex[:6]}"
    values = [f"row-{i}".encode() for i in range(5000)]
    with Producer(bootstrap_servers=modern_broker.bootstrap, max_request_size=20000) as p:
        metas = p.send_batch(topic, 0, values).result(20)
    assert len(metas) > 1 and sum(m.count for m in metas) == 5000  # split by max_request_size
    assert metas[0].base_offset == 0
    got = []
    with shell.Consumer(bootstrap_servers=modern_broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        while len(got) < 5000:
            batches = c.poll_batch(2.0)
            assert batches, "no data within 2s"
            for b in batches:
                assert (b.topic, b.partition) == (topic, 0)
                got += [b.columns.value(i) for i in range(len(b.columns))]
    assert got == values


@pytest.mark.broker
def test_seek_positions_and_offsets_for_times(modern_broker, shell):
    topic = f"seek-{uuid.uuid4().hex[:6]}"
    records = _records(20, headers=False)
    _produce(modern_broker.bootstrap, topic, records)
    with shell.Consumer(bootstrap_servers=modern_broker.bootstrap, auto_offset_reset="latest") as c:
        tp = (topic, 0)
        c.assign([tp])
        c.seek(tp, 15)
        got = c.poll(5.0)
        assert [r.offset for r in got] == [15, 16, 17, 18, 19] and c.position(tp) == 20
        c.seek_to_beginning()
        assert c.position(tp) == 0
        assert [r.offset for r in c.poll(5.0, max_records=3)] == [0, 1, 2]


@pytest.mark.broker
def test_acks_zero_and_one(modern_broker):
    topic = f"acks-{uuid.uuid4().hex[:6]}"
    with Producer(bootstrap_servers=modern_broker.bootstrap, acks=0) as p:
        assert p.send(topic, b"a", partition=0).result(10).offset == -1
    with Producer(bootstrap_servers=modern_broker.bootstrap, acks=1) as p:
        assert p.send(topic, b"b", partition=0).result(10).offset == 1
    assert [r.value for r in _consume(modern_broker.bootstrap, topic, 2)] == [b"a", b"b"]


@pytest.mark.broker
def test_offsets_for_times_without_a_match_is_none(mock_cluster, shell):
    # Neither test broker looks offsets up by timestamp (Tansu answers offset 0, the mock
    # answers -1), so only the "no such record" answer is checked here.
    topic = f"times-{uuid.uuid4().hex[:6]}"
    mock_cluster.create_topic(topic, 1, 1)
    _produce(mock_cluster.bootstrap, topic, _records(5, headers=False))
    with shell.Consumer(bootstrap_servers=mock_cluster.bootstrap) as c:
        c.assign([(topic, 0)])
        assert c.offsets_for_times({(topic, 0): 1_700_000_000_002}) == {(topic, 0): None}
        assert c.end_offsets([(topic, 0)]) == {(topic, 0): 5}
        with pytest.raises(ValueError, match="timestamp"):
            c.offsets_for_times({(topic, 0): -5})


@pytest.mark.broker
def test_no_record_lost_when_batches_wait_for_room_in_a_request(modern_broker):
    # A request smaller than the ready batches leaves some for the next request; records
    # sent meanwhile must start new batches, not join an already-encoded one.
    topic = create_topic(modern_broker.bootstrap, "many", partitions=4)
    n = 20000
    with Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=5, batch_size=64 * 1024,
                  max_request_size=100 * 1024) as p:
        futures = [p.send(topic, b"%08d" % i, partition=i % 4) for i in range(n)]
        p.flush(30)
        offsets = [f.result(0).offset for f in futures]
    for part in range(4):
        assert offsets[part::4] == list(range(n // 4))
    with Consumer(bootstrap_servers=modern_broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 2)])
        got = []
        while len(got) < n // 4:
            batch = c.poll(2.0)
            assert batch, "records missing"
            got += batch
    assert [int(r.value) for r in got] == list(range(2, n, 4))


@pytest.mark.broker
def test_high_watermarks_end_where_the_records_end(modern_broker, mock_cluster):
    # Tansu answers ListOffsets latest with the last batch's base offset + 1 (10 records in
    # one batch: 1); the Fetch watermark is 10 on every broker, and Kafka's ListOffsets too.
    mock_topic = f"hw-{uuid.uuid4().hex[:8]}"
    mock_cluster.create_topic(mock_topic, 2, 1)
    tansu = isinstance(modern_broker, TansuBroker)
    for bootstrap, topic in ((modern_broker.bootstrap, create_topic(modern_broker.bootstrap, "hw", 2)),
                             (mock_cluster.bootstrap, mock_topic)):
        with Producer(bootstrap_servers=bootstrap) as p:
            p.send_batch(topic, 0, [(None, b"v%d" % i) for i in range(10)]).result(20)
        with Consumer(bootstrap_servers=bootstrap) as c:
            c.cluster.partitions_for(topic, 10)
            tps = [(topic, 0), (topic, 1)]
            assert c.high_watermarks(tps, timeout=10) == {tps[0]: 10, tps[1]: 0}
            assert c.end_offsets(tps)[tps[0]] == (1 if tansu and bootstrap == modern_broker.bootstrap else 10)


@pytest.mark.broker
def test_a_partition_that_does_not_exist_is_refused_by_send(kafka_broker):
    # Refused before it is queued, as the Java client does (issue 25), not at its expiry.
    topic = create_topic(kafka_broker.bootstrap, "nopart", partitions=2)
    with Producer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=0) as p:
        with pytest.raises(errors.UnknownPartitionError, match=r"has 2 partitions \(0-1\), so partition 5 does not"):
            p.send(topic, b"lost", partition=5)
        assert p.send(topic, b"kept", partition=1).result(10).offset == 0
