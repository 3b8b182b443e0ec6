"""The producer's and consumer's fast paths keep every record, in order, with its metadata.

send() appends to the open batch of a partition without per-record accounting;
send_batch() encodes a sequence once, split under max_request_size; the consumer
prefetches while it hands out buffered records and wraps decoded records thinly.
"""

import uuid

import pytest
from shells import shell  # noqa: F401 - the fixture
from topics import create_topic

from kafkawire import errors
from kafkawire.client.consumer import Consumer, ConsumerRecord
from kafkawire.client.producer import Producer


def _topic(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _read_all(bootstrap, topic, n, partitions=(0,), columnar=False, max_records=None, **config):
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **config) as c:
        c.assign([(topic, p) for p in partitions])
        out = []
        for _ in range(200):
            if columnar:
                for b in c.poll_batch(1.0):
                    cols = b.columns
                    out += [(b.partition, int(cols.offsets[i]), cols.key(i), cols.value(i))
                            for i in range(len(cols))]
            else:
                out += [(r.partition, r.offset, r.key, r.value) for r in c.poll(1.0, max_records)]
            if len(out) >= n:
                break
        return out


@pytest.mark.broker
def test_send_fast_and_slow_paths_interleave_in_order(modern_broker):
    topic = _topic("fast")
    n = 3000
    # A small batch_size: many records open or fill a batch (the slow path), the rest
    # take the fast path; headers and a serializer-free str error go through _send().
    with Producer(bootstrap_servers=modern_broker.bootstrap, batch_size=4096, linger_ms=2) as p:
        futures = []
        for i in range(n):
            headers = [("h", b"%d" % i)] if i % 100 == 0 else None
            futures.append(p.send(topic, b"value-%06d" % i, key=b"k%d" % (i % 7), partition=0,
                                  headers=headers, timestamp=1_700_000_000_000 + i))
        with pytest.raises(TypeError, match="value must be bytes or None, got str"):
            p.send(topic, "text", partition=0)
        p.flush(30)
        metas = [f.result(0) for f in futures]
        m = p.metrics()
        assert (m["buffered_bytes"], m["incomplete_batches"]) == (0, 0)
    assert [m.offset for m in metas] == list(range(n))
    assert [m.timestamp for m in metas] == [1_700_000_000_000 + i for i in range(n)]
    assert {(m.topic, m.partition) for m in metas} == {(topic, 0)}
    got = _read_all(modern_broker.bootstrap, topic, n, max_records=700)
    assert got == [(0, i, b"k%d" % (i % 7), b"value-%06d" % i) for i in range(n)]


@pytest.mark.broker
def test_send_callback_and_future_of_the_hot_path(modern_broker):
    topic = _topic("cb")
    seen = []
    with Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=50) as p:
        first = p.send(topic, b"a", partition=0)  # opens the batch (slow path)
        second = p.send(topic, b"b", partition=0, callback=lambda m, e: seen.append((m.offset, e)))
        assert not second.done()
        p.flush(10)
        assert second.done() and second.exception(0) is None
        assert (first.result(0).offset, second.result(0).offset) == (0, 1)
    assert seen == [(1, None)]


@pytest.mark.broker
def test_send_batch_sequence_split_under_max_request_size(modern_broker):
    topic = _topic("bulk")
    n = 5000
    records = [(b"key-%d" % i, b"v" * 90 + b"%08d" % i) for i in range(n)]
    with Producer(bootstrap_servers=modern_broker.bootstrap, max_request_size=64 * 1024) as p:
        metas = p.send_batch(topic, 0, records).result(30)
        # Plain values (no tuple), mixed with tuples: each becomes (None, value).
        mixed = p.send_batch(topic, 0, [(b"k", b"first"), b"second", None]).result(30)
    assert len(metas) > 5  # 5000 * ~130 bytes cannot fit one 64 KiB request
    assert sum(m.count for m in metas) == n
    assert [m.base_offset for m in metas] == [sum(x.count for x in metas[:i]) for i in range(len(metas))]
    assert [(m.base_offset, m.count) for m in mixed] == [(n, 3)]
    got = _read_all(modern_broker.bootstrap, topic, n + 3)
    assert got == [(0, i, k, v) for i, (k, v) in enumerate(records)] + [
        (0, n, b"k", b"first"), (0, n + 1, None, b"second"), (0, n + 2, None, None)]


@pytest.mark.broker
def test_send_batch_bad_record_fails_before_anything_is_sent(modern_broker):
    topic = _topic("bulkbad")
    with Producer(bootstrap_servers=modern_broker.bootstrap) as p:
        with pytest.raises(errors.EncodeError, match="record 2"):
            p.send_batch(topic, 0, [(None, b"a"), (None, b"b"), (None, 12345)])
        p.send(topic, b"after", partition=0).result(10)
    assert _read_all(modern_broker.bootstrap, topic, 1) == [(0, 0, None, b"after")]


@pytest.mark.broker
def test_consumer_prefetch_keeps_order_across_partitions_and_small_polls(modern_broker):
    topic = create_topic(modern_broker.bootstrap, "prefetch", partitions=3)
    per = 4000
    with Producer(bootstrap_servers=modern_broker.bootstrap) as p:
        for part in range(3):
            p.send_batch(topic, part, [(None, b"p%d-%06d" % (part, i)) for i in range(per)]).result(30)
    # Small fetches and polls: many responses buffered and prefetched per partition.
    got = _read_all(modern_broker.bootstrap, topic, 3 * per, partitions=(0, 1, 2), max_records=333,
                    max_partition_fetch_bytes=16 * 1024)
    for part in range(3):
        mine = [(o, v) for p_, o, _k, v in got if p_ == part]
        assert mine == [(i, b"p%d-%06d" % (part, i)) for i in range(per)]
    assert len(got) == 3 * per


@pytest.mark.broker
def test_poll_then_poll_batch_then_seek(modern_broker):
    topic = _topic("switch")
    n = 2000
    with Producer(bootstrap_servers=modern_broker.bootstrap) as p:
        p.send_batch(topic, 0, [(None, b"%05d" % i) for i in range(n)]).result(30)
    with Consumer(bootstrap_servers=modern_broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        first = []
        while not first:
            first = c.poll(1.0, max_records=10)  # leaves decoded records buffered
        assert [r.offset for r in first] == list(range(10))
        assert isinstance(first[0], ConsumerRecord) and first[0].topic == topic
        offsets = []
        for _ in range(50):
            for b in c.poll_batch(1.0):
                offsets += [int(x) for x in b.columns.offsets]
            if len(offsets) >= n - 10:
                break
        assert offsets == list(range(10, n))  # nothing lost or repeated by the switch
        c.seek((topic, 0), 1500)
        again = []
        while len(again) < 500:
            again += c.poll(1.0)
        assert [r.offset for r in again] == list(range(1500, n))
        assert again[0].value == b"01500" and again[0].headers == ()


def test_consumer_record_constructor():
    a = ConsumerRecord("t", 1, 5, 1000, 0, b"k", b"v", [("h", b"x")])
    assert (a.topic, a.partition, a.offset, a.timestamp, a.timestamp_type, a.key, a.value,
            a.headers) == ("t", 1, 5, 1000, 0, b"k", b"v", (("h", b"x"),))
    assert "offset=5" in repr(a)


@pytest.mark.broker
def test_unkeyed_sends_stick_to_a_partition_until_its_batch_fills(modern_broker):
    topic = create_topic(modern_broker.bootstrap, "sticky", partitions=3)
    with Producer(bootstrap_servers=modern_broker.bootstrap, batch_size=2000, linger_ms=1000) as p:
        p.partitions_for(topic)
        futures = [p.send(topic, b"%04d" % i) for i in range(400)]
        p.flush(30)
        metas = [f.result(0) for f in futures]
    runs = []  # (partition, length) of consecutive records on one partition
    for m in metas:
        if runs and runs[-1][0] == m.partition:
            runs[-1][1] += 1
        else:
            runs.append([m.partition, 1])
    # Each 2000-byte batch holds about 80 of these records: long runs, several partitions.
    assert len(runs) >= 3 and all(n >= 40 for _, n in runs[:-1])
    offsets = {}
    for m in metas:  # offsets within each partition are consecutive from 0
        assert m.offset == offsets.get(m.partition, 0)
        offsets[m.partition] = m.offset + 1
    got = _read_all(modern_broker.bootstrap, topic, 400, partitions=sorted(offsets))
    assert sorted(v for *_, v in got) == [b"%04d" % i for i in range(400)]


@pytest.mark.broker
def test_failing_deserializer_fails_every_poll_without_skipping(modern_broker):
    topic = _topic("deser")
    with Producer(bootstrap_servers=modern_broker.bootstrap) as p:
        p.send_batch(topic, 0, [(None, b"ok-%d" % i) for i in range(5)]).result(10)
        p.send_batch(topic, 0, [(None, b"bad")]).result(10)  # a batch of its own

    def deser(v):
        if v == b"bad":
            raise ValueError("cannot deserialize bad")
        return v.decode()

    with Consumer(bootstrap_servers=modern_broker.bootstrap, auto_offset_reset="earliest",
                  value_deserializer=deser) as c:
        c.assign([(topic, 0)])
        for _ in range(2):
            with pytest.raises(ValueError, match="cannot deserialize bad"):
                for _ in range(20):
                    c.poll(1.0)
        # Nothing was skipped: from offset 2, the three good records still come back
        # (only the batches a poll hands out are decoded), then the bad one fails again.
        c.seek((topic, 0), 2)
        assert [r.value for r in c.poll(5.0, max_records=3)] == ["ok-2", "ok-3", "ok-4"]
        assert c.position((topic, 0)) == 5
        with pytest.raises(ValueError, match="cannot deserialize bad"):
            for _ in range(20):
                c.poll(1.0)
        assert c.position((topic, 0)) == 5


@pytest.mark.broker
def test_failing_deserializer_in_a_partly_decoded_answer_is_not_skipped(modern_broker):
    # poll(max_records=2) decodes only the first batch of the answer; when that batch
    # fails, the undecoded rest must not be handed out past it.
    topic = _topic("deser2")
    with Producer(bootstrap_servers=modern_broker.bootstrap) as p:
        p.send_batch(topic, 0, [(None, b"ok-0"), (None, b"bad")]).result(10)
        p.send_batch(topic, 0, [(None, b"ok-%d" % i) for i in range(2, 6)]).result(10)

    def deser(v):
        if v == b"bad":
            raise ValueError("cannot deserialize bad")
        return v.decode()

    with Consumer(bootstrap_servers=modern_broker.bootstrap, auto_offset_reset="earliest",
                  value_deserializer=deser) as c:
        c.assign([(topic, 0)])
        for _ in range(3):
            with pytest.raises(ValueError, match="cannot deserialize bad"):
                for _ in range(20):
                    c.poll(1.0, max_records=2)
        assert c.position((topic, 0)) == 0


def _count_full_path(p):
    """The topics of the sends that leave the hot path (Appender) for the full one."""
    calls = []
    if isinstance(p, Producer):
        app = p._appender
        full = app.full

        def counted(*args):
            calls.append(args[0])
            return full(*args)

        app.full = counted
    else:  # the asyncio shell: its AsyncProducer's send() goes on past a None from its offer
        client = p._client
        offer = client._offer

        def counted_offer(*args):
            fut = offer(*args)
            if fut is None:
                calls.append(args[0])
            return fut

        client._offer = counted_offer
    return calls


@pytest.mark.broker
def test_keyed_sends_take_the_hot_path_and_land_where_java_puts_them(modern_broker, shell):
    # The default partitioner (murmur2 of the key, positive, modulo the partition count:
    # Java's, librdkafka's murmur2_random, kafka-python's) runs in the Appender once the
    # count is known; confluent-kafka on the same broker and kafka-python's murmur2 agree.
    confluent_kafka = pytest.importorskip("confluent_kafka")
    kafka_python_murmur2 = pytest.importorskip("kafka.partitioner.default").murmur2
    boot = modern_broker.bootstrap
    topic = create_topic(boot, "keyed-hot", 7)
    keys = [f"user-{i}".encode() for i in range(50)] + [b"", b"a", b"ab", b"abc", b"\xff" * 13]
    theirs = {}
    cp = confluent_kafka.Producer({"bootstrap.servers": boot, "partitioner": "murmur2_random",
                                   "log_level": 3})
    for key in keys:
        cp.produce(topic, b"ref", key=key,
                   on_delivery=lambda err, msg: theirs.__setitem__(msg.key(), (err, msg.partition())))
    assert cp.flush(30) == 0
    assert {k: err for k, (err, _p) in theirs.items()} == {k: None for k in keys}
    expected = {k: part for k, (_e, part) in theirs.items()}
    assert expected == {k: (kafka_python_murmur2(k) & 0x7FFFFFFF) % 7 for k in keys}
    n = 1100
    with shell.Producer(bootstrap_servers=boot, linger_ms=500) as p:
        calls = _count_full_path(p)
        futures = [p.send(topic, b"%d" % i, key=keys[i % len(keys)]) for i in range(n)]
        p.flush(30)
        metas = [f.result(30) for f in futures]
    # Each partition's first record opens its batch (the full path); the rest append.
    assert 7 <= len(calls) <= 30, len(calls)
    assert [m.partition for m in metas] == [expected[keys[i % len(keys)]] for i in range(n)]
    got = _read_all(boot, topic, n + len(keys), partitions=range(7))
    mine = [(part, k, v) for part, _off, k, v in got if v != b"ref"]
    assert sorted(int(v) for _p, _k, v in mine) == list(range(n))
    for part, k, v in mine:
        assert part == expected[k] and k == keys[int(v) % len(keys)]
    for part in range(7):
        values = [int(v) for q, _k, v in mine if q == part]
        assert values == sorted(values)  # send order within each partition
