"""The producer's latency paths keep every record, in order (issue 23).

While the sync producer's sender thread is parked (nothing in flight, nothing queued), a
caller writes its Produce request itself (a lone record's before its batch is booked)
and, waiting on the record, reads the answer itself; a callback, a second caller or a
full connection hands the work back to the sender.  The asyncio producer writes a due batch from send() and takes the answer
through a callback, with no task per request.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from shells import shell  # noqa: F401 - the fixture
from topics import create_topic

from kafkawire.aio import AsyncProducer
from kafkawire.client.conn import BrokerConnection
from kafkawire.client.consumer import Consumer
from kafkawire.client.producer import Producer


def _offsets(bootstrap, topic, n, partitions=(0,)):
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in partitions])
        out = []
        for _ in range(100):
            out += [(r.partition, r.offset, r.value) for r in c.poll(1.0)]
            if len(out) >= n:
                break
        return out


def _count_calls(obj, name):
    """Replace obj.name with a wrapper that counts its calls; return the one-item counter."""
    count = [0]
    inner = getattr(obj, name)

    def counted(*args, **kwargs):
        count[0] += 1
        return inner(*args, **kwargs)

    setattr(obj, name, counted)
    return count


@pytest.mark.broker
def test_one_record_at_a_time_goes_without_the_sender_thread(modern_broker):
    topic = create_topic(modern_broker.bootstrap, "serial")
    n = 200
    with Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=0) as p:
        p.send(topic, b"warm", partition=0).result(30)
        passes = _count_calls(p, "_run_once")
        collects = _count_calls(p._acc, "collect")
        lone = _count_calls(p._acc, "lone_request")
        metas = [p.send(topic, b"v%d" % i, partition=0).result(10) for i in range(n)]
        # The sender looks in on its park timer only (0.1 s), not once per record; and
        # the caller sends its lone batch without a look at every partition (lone_request).
        assert passes[0] < n / 2, passes[0]
        assert collects[0] < n / 2, collects[0]
        assert lone[0] > n / 2, lone[0]
        assert p.metrics()["incomplete_batches"] == 0
    assert [m.offset for m in metas] == list(range(1, n + 1))
    got = _offsets(modern_broker.bootstrap, topic, n + 1)
    assert [v for _p, _o, v in got] == [b"warm"] + [b"v%d" % i for i in range(n)]


@pytest.mark.broker
def test_a_lone_record_is_written_before_its_batch_is_booked(modern_broker, monkeypatch):
    # The default producer (acks=all, idempotent).  A second thread's send() comes
    # between the lone record's write and its booking: its batch, queued meanwhile but
    # sent after, must stand behind the lone one in the partition's queue.
    topic = create_topic(modern_broker.bootstrap, "lone")
    steps: list = []
    others: list = []
    queue: list = []
    with Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=0) as p:
        p.send(topic, b"warm", partition=0).result(30)
        acc = p._acc
        write = BrokerConnection.write_produce
        lone_request, book_lone = acc.lone_request, acc.book_lone

        def on_write(conn, fields, version):
            written = write(conn, fields, version)
            steps.append("write")
            if not others:
                t = threading.Thread(target=lambda: others.append(p.send(topic, b"other", partition=0)))
                t.start()
                t.join(10)
            return written

        def on_request(*args):
            steps.append("request")
            return lone_request(*args)

        def on_book(b):
            steps.append("book")
            book_lone(b)
            queue.append((b, list(acc.batches[(topic, 0)])))

        monkeypatch.setattr(BrokerConnection, "write_produce", on_write)
        monkeypatch.setattr(acc, "lone_request", on_request)
        monkeypatch.setattr(acc, "book_lone", on_book)
        lone = p.send(topic, b"lone", partition=0)
        assert steps == ["request", "write", "book"]
        assert len(others) == 1
        b, queued = queue[0]
        assert len(queued) == 2 and queued[0] is b  # the other thread's batch behind it
        assert lone.result(30).offset == 1 and others[0].result(30).offset == 2
        assert p.metrics()["producer_id"] >= 0
    got = _offsets(modern_broker.bootstrap, topic, 3)
    assert [v for _p, _o, v in got] == [b"warm", b"lone", b"other"]


@pytest.mark.broker
def test_unkeyed_records_one_at_a_time_move_on_to_the_next_partition(modern_broker, shell):
    # KIP-480: an unkeyed record sticks to a partition until its batch goes; sent alone,
    # every record is a batch of its own, so the records spread over the partitions.
    topic = create_topic(modern_broker.bootstrap, "lone-sticky", partitions=3)
    with shell.Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=0) as p:
        parts = [p.send(topic, b"s%d" % i).result(20).partition for i in range(30)]
    assert set(parts) == {0, 1, 2}
    assert all(a != b for a, b in zip(parts, parts[1:]))  # a new partition after every batch


@pytest.mark.broker
def test_acks_zero_one_record_at_a_time(kafka_broker):
    # No answer comes: each record resolves once its request is written.  (Kafka only:
    # Tansu 0.6 drops the acks=0 requests it has not handled when the connection closes.)
    topic = create_topic(kafka_broker.bootstrap, "acks0-serial")
    with Producer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=0, acks=0) as p:
        metas = [p.send(topic, b"z%d" % i, partition=0).result(5) for i in range(20)]
    assert [m.offset for m in metas] == [-1] * 20
    got = _offsets(kafka_broker.bootstrap, topic, 20)
    assert [v for _p, _o, v in got] == [b"z%d" % i for i in range(20)]


@pytest.mark.broker
def test_callers_waiting_and_callbacks_share_one_producer(modern_broker):
    topic = create_topic(modern_broker.bootstrap, "mixed", partitions=2)
    per_thread = 60
    acked: list = []
    errors: list = []
    with Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=0) as p:
        p.send(topic, b"warm", partition=0).result(30)

        def waiter(t):
            for i in range(per_thread):
                p.send(topic, b"w%d-%d" % (t, i), partition=t % 2).result(30)

        def on_done(meta, exc):
            (errors if exc is not None else acked).append(exc or meta)

        def caller_with_callbacks():
            for i in range(per_thread):
                p.send(topic, b"c-%d" % i, partition=i % 2, callback=on_done)

        threads = [threading.Thread(target=waiter, args=(t,)) for t in range(3)]
        threads.append(threading.Thread(target=caller_with_callbacks))
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive()
        p.flush(30)
    assert not errors and len(acked) == per_thread
    total = 1 + 4 * per_thread
    got = _offsets(modern_broker.bootstrap, topic, total, partitions=(0, 1))
    assert len(got) == total
    for part in (0, 1):
        offsets = [o for q, o, _v in got if q == part]
        assert offsets == list(range(len(offsets)))  # each acknowledged once, none lost
        # each caller's records stay in their order within a partition
        for t in range(3):
            mine = [v for q, _o, v in got if q == part and v.startswith(b"w%d-" % t)]
            assert mine == sorted(mine, key=lambda v: int(v.split(b"-")[1]))


@pytest.mark.broker
def test_sends_beyond_max_in_flight_are_left_to_the_sender(modern_broker):
    topic = create_topic(modern_broker.bootstrap, "inflight")
    n = 60
    with Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=0, acks=1,
                  max_in_flight_requests_per_connection=2, enable_idempotence=False) as p:
        p.send(topic, b"warm", partition=0).result(30)
        futures = [p.send(topic, b"f%d" % i, partition=0) for i in range(n)]
        p.flush(30)
        metas = [f.result(0) for f in futures]
    offsets = [m.offset for m in metas]
    assert sorted(offsets) == list(range(1, n + 1))


@pytest.mark.broker
def test_an_idempotent_producer_one_record_at_a_time(modern_broker):
    topic = create_topic(modern_broker.bootstrap, "idem-serial")
    with Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=0, acks="all",
                  enable_idempotence=True) as p:
        metas = [p.send(topic, b"i%d" % i, partition=0).result(30) for i in range(50)]
        assert p.metrics()["producer_id"] >= 0
    assert [m.offset for m in metas] == list(range(50))
    got = _offsets(modern_broker.bootstrap, topic, 50)
    assert [v for _p, _o, v in got] == [b"i%d" % i for i in range(50)]


@pytest.mark.broker
def test_asyncio_one_record_at_a_time_and_with_callbacks(modern_broker):
    topic = create_topic(modern_broker.bootstrap, "aio-serial")
    seen: list = []

    async def run():
        async with AsyncProducer(bootstrap_servers=modern_broker.bootstrap, linger_ms=0) as p:
            await (await p.send(topic, b"warm", partition=0))
            collects = _count_calls(p._acc, "collect")
            lone = _count_calls(p._acc, "lone_request")
            metas = [await (await p.send(topic, b"a%d" % i, partition=0)) for i in range(100)]
            # A lone record goes without a look at every partition (lone_request), as in
            # the sync producer; the sender task's own passes still collect.
            assert collects[0] < 50, collects[0]
            assert lone[0] > 50, lone[0]
            for i in range(30):
                (await p.send(topic, b"b%d" % i, partition=0)).add_callback(
                    lambda meta, exc: seen.append(exc or meta.offset))
            await p.flush(30)
            return metas

    metas = asyncio.run(run())
    assert [m.offset for m in metas] == list(range(1, 101))
    assert sorted(seen) == list(range(101, 131))
