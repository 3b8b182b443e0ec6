"""kafkawire end to end against confluent-kafka, aiokafka and kafka-python, on one Tansu broker.

One process, one broker on loopback (started here), interleaved: every round runs every
(client, case) once, the client order rotating from round to round, so drift of a shared
machine hits every client alike; the tables show medians over the rounds.  Run with:

    .venv/bin/python bench/compare_e2e.py [--quick] [--records N] [--rounds R]
        [--clients kafkawire,confluent,aiokafka,kafka-python] [--compression none,lz4]
        [--cases send,produce] [--markdown PATH]

``--cases`` keeps only the named cases (e.g. ``--cases send,produce``: kafkawire's
per-record send against confluent-kafka's produce, the topics read back untimed).  A
consume case named alone (``--cases poll,consume``) still has its client's producer
case fill its topic first, left out of the tables.

Workload: N records (default 1,000,000) of 16-byte keys and 100-byte values, produced to
a fresh 4-partition topic per client, case and round, record i to partition i % 4
(explicit, so no client pays for a partitioner), then read back from offset 0 and counted
per partition with the value bytes summed.  A case whose count or bytes are off is
reported as LOST/ERROR in the table, never dropped.  The keyed cases (kafkawire's
``send_keyed``, confluent-kafka's ``produce_keyed``) send the same records with the key
and no partition, so each client's default partitioner places them: murmur2 of the key
(confluent-kafka with ``partitioner=murmur2_random``, the Java-compatible one); their
topics are read back untimed and every partition must hold the records murmur2 puts there.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import random
import statistics
import sys
import time
import uuid
from typing import Any, Callable

from report import finish

from kafkawire import codec
from kafkawire.client.cluster import Cluster
from kafkawire.client.config import Config
from kafkawire.client.consumer import Consumer as KwConsumer
from kafkawire.client.producer import Producer as KwProducer
from kafkawire.core.partitioner import partition_for_key
from kafkawire.protocol import apis
from kafkawire.testing import TansuBroker

KEY_SIZE = 16
VALUE_SIZE = 100
PARTITIONS = 4
POOL = 4096  # distinct keys/values, cycled: every client gets the very same objects
# Producer settings shared by every client (acks=1; Java/aiokafka/kafka-python batch
# size; librdkafka's batch.size is in bytes too).  --idempotent: acks=all and every
# producer idempotent (kafkawire's default).
ACKS: int | str = 1
IDEMPOTENT = False
LINGER_MS = 5
BATCH_BYTES = 256 * 1024
BULK_BATCH_BYTES = 1_000_000  # the bulk paths: one batch per Produce request, up to 1 MB
MAX_REQUEST = 1024 * 1024
# Consumer settings shared by every client (the Java defaults).
FETCH_MAX_BYTES = 50 * 1024 * 1024
PARTITION_FETCH_BYTES = 1024 * 1024
MAX_RECORDS = 10_000  # records per poll()/consume()/getmany() call
IDLE_TIMEOUT = 15.0  # a consumer that gets nothing for this long gives up (and is reported)

TARGET_SEND = 2.0  # kafkawire per-record send >= 2x confluent-kafka produce
TARGET_SEND_BATCH = 5.0  # send_batch >= 5x confluent-kafka produce
TARGET_POLL = 3.0  # poll() record objects >= 3x the best peer consumer
TARGET_POLL_BATCH = 10.0  # poll_batch() columnar >= 10x the best peer consumer

ALL_CLIENTS = ("kafkawire", "confluent", "aiokafka", "kafka-python")
PEERS = ("confluent", "aiokafka", "kafka-python")
CODEC_NAMES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def make_pool(seed: int = 1) -> tuple[list[bytes], list[bytes]]:
    rng = random.Random(seed)
    keys, values = [], []
    for i in range(POOL):
        keys.append(rng.randbytes(KEY_SIZE // 2).hex().encode())
        head = b'{"id":%d,"user":"u%05d","event":"%s","pad":"' % (
            i, rng.randrange(50_000), rng.choice([b"view", b"click", b"buy"]))
        pad = rng.randbytes(VALUE_SIZE).hex().encode()[: VALUE_SIZE - len(head) - 2]
        values.append(head + pad + b'"}')
        assert len(keys[-1]) == KEY_SIZE and len(values[-1]) == VALUE_SIZE
    return keys, values


class Outcome:
    """One timed case: seconds, records delivered/read, and what went wrong if anything."""

    __slots__ = ("seconds", "count", "nbytes", "problem", "broker_cpu")

    def __init__(self, seconds: float, count: int, nbytes: int = -1, problem: str | None = None):
        self.seconds = seconds
        self.count = count
        self.nbytes = nbytes
        self.problem = problem
        self.broker_cpu: float | None = None  # CPU seconds the broker spent on the case


def process_cpu(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc), else None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return None


# ---------------------------------------------------------------------------------------
# Topics (kafkawire's own protocol layer: CreateTopics / DeleteTopics)
# ---------------------------------------------------------------------------------------

CREATE = apis.get("CreateTopics")
DELETE = apis.get("DeleteTopics")


class Admin:
    def __init__(self, bootstrap: str):
        self.cluster = Cluster(Config.client(bootstrap_servers=bootstrap))
        self.cluster.bootstrap(15)

    def create(self, topic: str) -> None:
        req = CREATE.Request(topics=[CREATE.Request.CreatableTopic(
            name=topic, num_partitions=PARTITIONS, replication_factor=1, assignments=[],
            configs=[])], timeout_ms=15000)
        resp = self.cluster.request(None, CREATE, req, 15)
        code = resp.topics[0].error_code
        if code not in (0, 36):  # 36 TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"CreateTopics {topic}: error code {code}")
        if self.cluster.partitions_for(topic, 15) != list(range(PARTITIONS)):
            raise RuntimeError(f"{topic} does not have {PARTITIONS} partitions")

    def delete(self, topics: list[str]) -> None:
        if not topics:
            return
        try:
            req = DELETE.Request(topic_names=list(topics), timeout_ms=15000, topics=[
                DELETE.Request.DeleteTopicState(name=t, topic_id=uuid.UUID(int=0)) for t in topics])
            self.cluster.request(None, DELETE, req, 15)
        except Exception as exc:  # noqa: BLE001 - freeing broker memory is best effort
            print(f"  (DeleteTopics failed: {exc})", file=sys.stderr)

    def close(self) -> None:
        self.cluster.close()


# ---------------------------------------------------------------------------------------
# The clients.  Each producer case returns an Outcome for sending everything and waiting
# until the broker acknowledged it; each consumer case reads a topic from offset 0 until
# it has n records (or IDLE_TIMEOUT passes without any).
# ---------------------------------------------------------------------------------------


class Workload:
    def __init__(self, n: int, compression: str):
        self.n = n
        self.compression = compression
        self.keys, self.values = make_pool()
        # For the bulk paths: the records of each partition, prepared before timing.
        self.per_partition = [
            [(self.keys[i % POOL], self.values[i % POOL]) for i in range(p, n, PARTITIONS)]
            for p in range(PARTITIONS)
        ]
        # Records per partition when the key's murmur2 places them (the keyed cases):
        # record i has pool key i % POOL, so hashing the pool once is enough.
        self.keyed_counts = [0] * PARTITIONS
        for j, key in enumerate(self.keys):
            self.keyed_counts[partition_for_key(key, PARTITIONS)] += len(range(j, n, POOL))


def _check_consumed(n: int, counts: list[int], nbytes: int,
                    expect: list[int] | None = None) -> str | None:
    got = sum(counts)
    expect = expect or [len(range(p, n, PARTITIONS)) for p in range(PARTITIONS)]
    if got < n:
        return f"LOST {n - got:,} of {n:,}"
    if counts != expect:
        return f"per-partition counts {counts} != {expect}"
    if nbytes != n * VALUE_SIZE:
        return f"value bytes {nbytes:,} != {n * VALUE_SIZE:,}"
    return None


# -- kafkawire ------------------------------------------------------------------------------


def kw_producer(bootstrap: str, w: Workload, bulk: bool) -> KwProducer:
    return KwProducer(bootstrap_servers=bootstrap, acks=ACKS, enable_idempotence=IDEMPOTENT,
                      linger_ms=LINGER_MS,
                      batch_size=BULK_BATCH_BYTES if bulk else BATCH_BYTES,
                      max_request_size=MAX_REQUEST, compression_type=w.compression,
                      send_buffer_bytes=-1, receive_buffer_bytes=-1)  # OS defaults, as the peers


def kw_send(bootstrap: str, topic: str, w: Workload, keyed: bool = False) -> Outcome:
    """Per-record send; ``keyed``: no partition given, the default partitioner (murmur2 of
    the key) chooses it."""
    p = kw_producer(bootstrap, w, False)
    try:
        keys, values, n = w.keys, w.values, w.n
        send = p.send
        p.partitions_for(topic)  # metadata up before timing
        futures = []
        start = time.perf_counter()
        if keyed:
            for i in range(n):
                f = send(topic, values[i % POOL], key=keys[i % POOL])
                if i >= n - PARTITIONS:
                    futures.append(f)
        else:
            for i in range(n):
                f = send(topic, values[i % POOL], key=keys[i % POOL], partition=i % PARTITIONS)
                if i >= n - PARTITIONS:
                    futures.append(f)
        p.flush(300)
        elapsed = time.perf_counter() - start
        # The last records (with explicit partitions: of every partition) must have been
        # acknowledged.
        for f in futures:
            f.result(0)
        return Outcome(elapsed, n)
    finally:
        p.close(30)


def kw_send_batch(bootstrap: str, topic: str, w: Workload) -> Outcome:
    p = kw_producer(bootstrap, w, True)
    try:
        p.partitions_for(topic)
        start = time.perf_counter()
        futures = [p.send_batch(topic, part, recs) for part, recs in enumerate(w.per_partition)]
        p.flush(300)
        elapsed = time.perf_counter() - start
        count = sum(m.count for f in futures for m in f.result(0))
        return Outcome(elapsed, count, problem=None if count == w.n else f"acknowledged {count:,}")
    finally:
        p.close(30)


def kw_consumer(bootstrap: str, topic: str) -> KwConsumer:
    # receive_buffer_bytes=-1: the OS default, as every peer has.  kafkawire's default is
    # the Java client's fixed 64 KiB, which on Linux switches receive-buffer autotuning
    # off and costs the columnar path about a third of its speed on loopback.
    c = KwConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                   fetch_max_bytes=FETCH_MAX_BYTES, max_partition_fetch_bytes=PARTITION_FETCH_BYTES,
                   send_buffer_bytes=-1, receive_buffer_bytes=-1)
    c.assign([(topic, p) for p in range(PARTITIONS)])
    for p in range(PARTITIONS):
        c.seek((topic, p), 0)
    return c


def kw_poll(bootstrap: str, topic: str, w: Workload) -> Outcome:
    c = kw_consumer(bootstrap, topic)
    try:
        n = w.n
        counts = [0] * PARTITIONS
        nbytes = got = 0
        poll = c.poll
        start = last = time.perf_counter()
        while got < n:
            records = poll(1.0, MAX_RECORDS)
            now = time.perf_counter()
            if not records:
                if now - last > IDLE_TIMEOUT:
                    break
                continue
            last = now
            for r in records:
                nbytes += len(r.value)
                counts[r.partition] += 1
            got += len(records)
        elapsed = last - start
        return Outcome(elapsed, got, nbytes, _check_consumed(n, counts, nbytes))
    finally:
        c.close()


def kw_poll_batch(bootstrap: str, topic: str, w: Workload,
                  expect: list[int] | None = None) -> Outcome:
    """``expect``: records per partition (default: record i in partition i % PARTITIONS)."""
    c = kw_consumer(bootstrap, topic)
    try:
        n = w.n
        counts = [0] * PARTITIONS
        nbytes = got = 0
        poll_batch = c.poll_batch
        start = last = time.perf_counter()
        while got < n:
            batches = poll_batch(1.0)
            now = time.perf_counter()
            if not batches:
                if now - last > IDLE_TIMEOUT:
                    break
                continue
            last = now
            for b in batches:
                k = len(b)
                counts[b.partition] += k
                nbytes += int(b.columns.value_lengths.sum())
                got += k
        elapsed = last - start
        return Outcome(elapsed, got, nbytes, _check_consumed(n, counts, nbytes, expect))
    finally:
        c.close()


# -- confluent-kafka --------------------------------------------------------------------


def kw_send_keyed(bootstrap: str, topic: str, w: Workload) -> Outcome:
    return kw_send(bootstrap, topic, w, keyed=True)


def ck_send(bootstrap: str, topic: str, w: Workload, keyed: bool = False) -> Outcome:
    """produce() per record; ``keyed``: no partition given, librdkafka's Java-compatible
    murmur2 partitioner chooses it (its default, consistent_random, hashes differently)."""
    import confluent_kafka

    errors: list[Any] = []
    extra = {"partitioner": "murmur2_random"} if keyed else {}
    p = confluent_kafka.Producer({**extra,
        "bootstrap.servers": bootstrap, "acks": ACKS, "enable.idempotence": IDEMPOTENT,
        "linger.ms": LINGER_MS,
        "batch.size": BATCH_BYTES, "message.max.bytes": MAX_REQUEST,
        "compression.type": w.compression,
        # The local queue: librdkafka's defaults (100k messages, 1 GiB); produce() raising
        # BufferError when it is full is answered by poll() and a retry, as documented.
        "queue.buffering.max.messages": 100_000, "queue.buffering.max.kbytes": 1_048_576,
        # Delivery reports only for failures: no Python call per acknowledged record.
        "delivery.report.only.error": True,
        "on_delivery": lambda err, msg: errors.append(err),
        "log_level": 3,
    })
    p.list_topics(topic, timeout=15)  # metadata and connection up before timing
    keys, values, n = w.keys, w.values, w.n
    produce, poll = p.produce, p.poll

    def produce_when_room(value: bytes, key: bytes, *part: int) -> None:
        while True:
            poll(0.005)
            try:
                produce(topic, value, key, *part)
                return
            except BufferError:
                pass

    # Two loops, so neither pays a per-record test of ``keyed``.
    start = time.perf_counter()
    if keyed:
        for i in range(n):
            try:
                produce(topic, values[i % POOL], keys[i % POOL])
            except BufferError:
                produce_when_room(values[i % POOL], keys[i % POOL])
            if i % 10_000 == 0:
                poll(0)
    else:
        for i in range(n):
            try:
                produce(topic, values[i % POOL], keys[i % POOL], i % PARTITIONS)
            except BufferError:
                produce_when_room(values[i % POOL], keys[i % POOL], i % PARTITIONS)
            if i % 10_000 == 0:
                poll(0)
    left = p.flush(300)
    elapsed = time.perf_counter() - start
    problem = None
    if left or errors:
        problem = f"{left} unflushed, {len(errors)} failed ({errors[:1]})"
    return Outcome(elapsed, n - len(errors) - left, problem=problem)


def ck_send_keyed(bootstrap: str, topic: str, w: Workload) -> Outcome:
    return ck_send(bootstrap, topic, w, keyed=True)


def ck_consume(bootstrap: str, topic: str, w: Workload) -> Outcome:
    import confluent_kafka

    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.max.bytes": FETCH_MAX_BYTES, "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
        # Pre-fetch queue: librdkafka's defaults (100k messages / 64 MiB per partition).
        "queued.min.messages": 100_000, "queued.max.messages.kbytes": 65_536,
        # Tansu answers a fetch with far more than max.partition.fetch.bytes, which
        # overshoots those thresholds; librdkafka then pauses the partition for
        # fetch.queue.backoff.ms (1000 by default), consuming ~6x slower here.  10 ms
        # takes the broker quirk out of the comparison.
        "fetch.queue.backoff.ms": 10,
        "enable.partition.eof": False, "log_level": 3,
    })
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        n = w.n
        counts = [0] * PARTITIONS
        nbytes = got = 0
        consume = c.consume
        problem = None
        start = last = time.perf_counter()
        while got < n:
            msgs = consume(MAX_RECORDS, 1.0)
            now = time.perf_counter()
            if not msgs:
                if now - last > IDLE_TIMEOUT:
                    break
                continue
            last = now
            for m in msgs:
                if m.error():
                    problem = f"error {m.error()}"
                    continue
                nbytes += len(m.value())
                counts[m.partition()] += 1
                got += 1
        elapsed = last - start
        return Outcome(elapsed, got, nbytes, problem or _check_consumed(n, counts, nbytes))
    finally:
        c.close()


# -- aiokafka -------------------------------------------------------------------------------


def aio_send(bootstrap: str, topic: str, w: Workload) -> Outcome:
    from aiokafka import AIOKafkaProducer

    async def run() -> Outcome:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=ACKS, enable_idempotence=IDEMPOTENT,
                             linger_ms=LINGER_MS,
                             max_batch_size=BATCH_BYTES, max_request_size=MAX_REQUEST,
                             compression_type=None if w.compression == "none" else w.compression)
        await p.start()
        try:
            await p.partitions_for(topic)
            keys, values, n = w.keys, w.values, w.n
            send = p.send
            futures = []
            start = time.perf_counter()
            for i in range(n):
                f = await send(topic, values[i % POOL], key=keys[i % POOL], partition=i % PARTITIONS)
                if i >= n - PARTITIONS:
                    futures.append(f)
            await p.flush()
            elapsed = time.perf_counter() - start
            for f in futures:
                await f
            return Outcome(elapsed, n)
        finally:
            await p.stop()

    return asyncio.run(run())


def aio_send_batch(bootstrap: str, topic: str, w: Workload) -> Outcome:
    from aiokafka import AIOKafkaProducer

    async def run() -> Outcome:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=ACKS, enable_idempotence=IDEMPOTENT,
                             linger_ms=LINGER_MS,
                             max_batch_size=BULK_BATCH_BYTES, max_request_size=MAX_REQUEST,
                             compression_type=None if w.compression == "none" else w.compression)
        await p.start()
        try:
            await p.partitions_for(topic)
            futures = []
            counts = []
            start = time.perf_counter()
            for part, recs in enumerate(w.per_partition):
                batch = p.create_batch()
                k = 0
                for key, value in recs:
                    if batch.append(key=key, value=value, timestamp=None) is None:
                        futures.append(await p.send_batch(batch, topic, partition=part))
                        counts.append(k)
                        batch = p.create_batch()
                        batch.append(key=key, value=value, timestamp=None)
                        k = 0
                    k += 1
                futures.append(await p.send_batch(batch, topic, partition=part))
                counts.append(k)
            await asyncio.gather(*futures)
            elapsed = time.perf_counter() - start
            return Outcome(elapsed, sum(counts))
        finally:
            await p.stop()

    return asyncio.run(run())


def aio_consume(bootstrap: str, topic: str, w: Workload) -> Outcome:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> Outcome:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_bytes=FETCH_MAX_BYTES,
                             max_partition_fetch_bytes=PARTITION_FETCH_BYTES)
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, 0)
            n = w.n
            counts = [0] * PARTITIONS
            nbytes = got = 0
            start = last = time.perf_counter()
            while got < n:
                data = await c.getmany(timeout_ms=1000, max_records=MAX_RECORDS)
                now = time.perf_counter()
                if not data:
                    if now - last > IDLE_TIMEOUT:
                        break
                    continue
                last = now
                for tp, msgs in data.items():
                    for m in msgs:
                        nbytes += len(m.value)
                    counts[tp.partition] += len(msgs)
                    got += len(msgs)
            elapsed = last - start
            return Outcome(elapsed, got, nbytes, _check_consumed(n, counts, nbytes))
        finally:
            await c.stop()

    return asyncio.run(run())


# -- kafka-python ---------------------------------------------------------------------------


def kp_send(bootstrap: str, topic: str, w: Workload, keyed: bool = False) -> Outcome:
    """send() per record + flush; ``keyed``: no partition given, kafka-python's
    DefaultPartitioner places each record by its key (checked on the last POOL records)."""
    import kafka

    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=ACKS, enable_idempotence=IDEMPOTENT,
                            linger_ms=LINGER_MS,
                            batch_size=BATCH_BYTES, max_request_size=MAX_REQUEST,
                            compression_type=None if w.compression == "none" else w.compression)
    try:
        p.partitions_for(topic)
        keys, values, n = w.keys, w.values, w.n
        send = p.send
        futures = []
        start = time.perf_counter()
        # Two loops, so neither pays a per-record test of ``keyed``.
        if keyed:
            last = max(n - POOL, 0)  # the futures of the last records (every key once) are kept
            for i in range(n):
                f = send(topic, values[i % POOL], key=keys[i % POOL])
                if i >= last:
                    futures.append((keys[i % POOL], f))
        else:
            for i in range(n):
                f = send(topic, values[i % POOL], key=keys[i % POOL], partition=i % PARTITIONS)
                if i >= n - PARTITIONS:
                    futures.append((None, f))
        p.flush(300)
        elapsed = time.perf_counter() - start
        placed = [(key, f.get(0).partition) for key, f in futures]  # get() raises a failure
        wrong = sum(key is not None and partition != partition_for_key(key, PARTITIONS)
                    for key, partition in placed)
        return Outcome(elapsed, n, problem=f"{wrong} records off their key's partition" if wrong else None)
    finally:
        p.close(30)


def kp_consume(bootstrap: str, topic: str, w: Workload) -> Outcome:
    import kafka

    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                            auto_offset_reset="earliest", fetch_max_bytes=FETCH_MAX_BYTES,
                            max_partition_fetch_bytes=PARTITION_FETCH_BYTES)
    try:
        tps = [kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        n = w.n
        counts = [0] * PARTITIONS
        nbytes = got = 0
        start = last = time.perf_counter()
        while got < n:
            data = c.poll(timeout_ms=1000, max_records=MAX_RECORDS)
            now = time.perf_counter()
            if not data:
                if now - last > IDLE_TIMEOUT:
                    break
                continue
            last = now
            for tp, msgs in data.items():
                for m in msgs:
                    nbytes += len(m.value)
                counts[tp.partition] += len(msgs)
                got += len(msgs)
        elapsed = last - start
        return Outcome(elapsed, got, nbytes, _check_consumed(n, counts, nbytes))
    finally:
        c.close()


# ---------------------------------------------------------------------------------------
# Cases: (client, case name, label, produce fn, consume fns reading the topic it wrote)
# ---------------------------------------------------------------------------------------

Fn = Callable[[str, str, Workload], Outcome]

CASES: dict[str, list[tuple[str, str, Fn, list[tuple[str, str, Fn]]]]] = {
    "kafkawire": [
        ("send", "Producer.send per record + flush", kw_send,
         [("poll", "Consumer.poll (record objects)", kw_poll),
          ("poll_batch", "Consumer.poll_batch (columnar)", kw_poll_batch)]),
        ("send_batch", "Producer.send_batch (one list per partition)", kw_send_batch, []),
        ("send_keyed", "Producer.send per record, keyed, partition=None (murmur2) + flush",
         kw_send_keyed, []),
    ],
    "confluent": [
        ("produce", "Producer.produce per record + poll/flush", ck_send,
         [("consume", "Consumer.consume(10000) batches", ck_consume)]),
        ("produce_keyed", "Producer.produce per record, keyed, no partition "
         "(partitioner=murmur2_random) + poll/flush", ck_send_keyed, []),
    ],
    "aiokafka": [
        ("send", "await send() per record + flush", aio_send,
         [("getmany", "getmany(max_records=10000)", aio_consume)]),
        ("send_batch", "create_batch/append + send_batch", aio_send_batch, []),
    ],
    "kafka-python": [
        ("send", "KafkaProducer.send per record + flush", kp_send,
         [("poll", "KafkaConsumer.poll(max_records=10000)", kp_consume)]),
    ],
}
CONSUME_KINDS = {"poll", "poll_batch", "consume", "getmany"}
KEYED_CASES = {"send_keyed", "produce_keyed"}  # the default partitioner placed the records


def verify_topic(bootstrap: str, topic: str, w: Workload, keyed: bool = False) -> str | None:
    """Read back (untimed) a topic no timed consumer read in full: every record must be
    there, keyed ones in the partition murmur2 of their key gives."""
    out = kw_poll_batch(bootstrap, topic, w, w.keyed_counts if keyed else None)
    return out.problem


def run(args: argparse.Namespace) -> dict[tuple[str, str, str], list[Outcome]]:
    results: dict[tuple[str, str, str], list[Outcome]] = {}
    clients = [c for c in ALL_CLIENTS if c in args.clients]
    with TansuBroker() as broker:
        bootstrap = broker.bootstrap
        print(f"Tansu broker pid {broker.pid} on {bootstrap}", file=sys.stderr)
        admin = Admin(bootstrap)
        try:
            for compression in args.compression:
                w = Workload(args.records, compression)
                for r in range(args.rounds):
                    order = clients[r % len(clients):] + clients[: r % len(clients)]
                    print(f"[{compression}] round {r + 1}/{args.rounds}: {', '.join(order)}",
                          file=sys.stderr, flush=True)
                    topics: list[str] = []
                    for client in order:
                        for case, _label, produce, consumers in CASES[client]:
                            consumers = [c for c in consumers if not args.cases or c[0] in args.cases]
                            # A consume case reads what its producer case wrote: asked for
                            # alone, the producer runs (untimed in the table) to fill it.
                            wanted = not args.cases or case in args.cases
                            if not wanted and not consumers:
                                continue
                            topic = f"e2e-{client}-{case}-{uuid.uuid4().hex[:8]}"
                            admin.create(topic)
                            topics.append(topic)
                            out = timed(produce, bootstrap, topic, w, broker.pid)
                            if wanted:
                                results.setdefault((compression, client, case), []).append(out)
                            show(client, case, out)
                            read_back = False  # a clean consumer read every record
                            for ccase, _clabel, consume in consumers:
                                cout = timed(consume, bootstrap, topic, w, broker.pid)
                                results.setdefault((compression, client, ccase), []).append(cout)
                                show(client, ccase, cout)
                                read_back = read_back or cout.problem is None
                            if not read_back and out.problem is None:
                                problem = verify_topic(bootstrap, topic, w, case in KEYED_CASES)
                                if problem:
                                    out.problem = f"read back: {problem}"
                                    print(f"  {client} {case}: read back: {problem}", file=sys.stderr)
                    admin.delete(topics)
        finally:
            admin.close()
    return results


def timed(fn: Fn, bootstrap: str, topic: str, w: Workload, broker_pid: int | None) -> Outcome:
    gc.collect()
    before = process_cpu(broker_pid)
    try:
        out = fn(bootstrap, topic, w)
    except Exception as exc:  # noqa: BLE001 - a failing client is reported, not fatal
        out = Outcome(float("nan"), 0, problem=f"ERROR {type(exc).__name__}: {exc}"[:200])
    after = process_cpu(broker_pid)
    if before is not None and after is not None:
        # Includes the client's connect and close, a few ms: an upper bound.
        out.broker_cpu = after - before
    return out


def show(client: str, case: str, out: Outcome) -> None:
    rate = out.count / out.seconds if out.seconds == out.seconds and out.seconds > 0 else 0
    note = f"  <-- {out.problem}" if out.problem else ""
    cpu = "" if out.broker_cpu is None else f"  broker cpu {out.broker_cpu:5.2f}s"
    print(f"  {client:>12} {case:<10} {out.seconds:7.2f}s {rate:>12,.0f} rec/s{cpu}{note}",
          file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def median_rate(outs: list[Outcome] | None, n: int) -> tuple[float | None, str | None]:
    """Median records/s over the rounds (a round with a problem counts as 0), and the
    problems seen."""
    if not outs:
        return None, None
    rates = [0.0 if o.problem or not o.seconds > 0 else o.count / o.seconds for o in outs]
    problems = sorted({o.problem for o in outs if o.problem})
    return statistics.median(rates), ("; ".join(problems) if problems else None)


def report(results: dict, args: argparse.Namespace) -> list[str]:
    n = args.records
    out = [
        "# kafkawire end-to-end benchmark",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs; one Tansu broker on loopback (in-memory storage); kafkawire codec "
        f"{codec.IMPLEMENTATION}; median of {args.rounds} interleaved rounds; {n:,} records of "
        f"{KEY_SIZE}-byte keys and {VALUE_SIZE}-byte values per case, record i to partition "
        f"i % {PARTITIONS} of a fresh {PARTITIONS}-partition topic.",
        "",
        f"Settings shared by every client: acks={ACKS}"
        f"{', idempotent producers' if IDEMPOTENT else ''}, linger 5 ms, batch size 256 KiB for per-record "
        "sends (1 MB for the bulk paths), max request 1 MiB; consumers read from offset 0 with "
        "fetch max 50 MiB, 1 MiB per partition, up to 10,000 records per call, and sum the value "
        "lengths of every record. Socket buffers: the OS defaults for every client (kafkawire is "
        "given send/receive_buffer_bytes=-1 for that). confluent-kafka: queue.buffering.max.messages=100000, "
        "queue.buffering.max.kbytes=1048576 (librdkafka defaults; BufferError -> poll + retry, "
        "poll(0) every 10,000), delivery reports for errors only; consumer queued.min.messages="
        "100000, queued.max.messages.kbytes=65536, fetch.queue.backoff.ms=10 (the default 1000 "
        "stalls it on Tansu's oversized fetch answers). Produce time: first send to flush done; "
        "consume time: first poll to the last record. Each consumer reads the topic its own "
        "client's per-record producer wrote; bulk-produced topics are read back untimed. Broker "
        "ceiling = records / CPU seconds the Tansu process used during the case (median): the "
        "rate if the broker were the only limit, on this 2-core machine shared with the client.",
        "",
    ]
    for compression in args.compression:
        rate = {}
        problems = {}
        ceiling = {}
        for client, cases in CASES.items():
            for case, _l, _f, consumers in cases:
                for name in [case] + [c[0] for c in consumers]:
                    outs = results.get((compression, client, name))
                    r, p = median_rate(outs, n)
                    rate[client, name] = r
                    problems[client, name] = p
                    cpus = [o.broker_cpu for o in outs or () if o.broker_cpu]
                    ceiling[client, name] = n / statistics.median(cpus) if cpus else None
        out += [f"## compression {compression}", "",
                "| client | API | records/s | MB/s (values) | broker ceiling | note |",
                "|---|---|---|---|---|---|"]
        for client, cases in CASES.items():
            if client not in args.clients:
                continue
            for case, label, _f, consumers in cases:
                for name, lab in [(case, label)] + [(c[0], c[1]) for c in consumers]:
                    r = rate[client, name]
                    kind = "consume" if name in CONSUME_KINDS else "produce"
                    rtext = "n/a" if r is None else f"{r:,.0f}"
                    mb = "" if not r else f"{r * VALUE_SIZE / 1e6:.1f}"
                    cap = ceiling[client, name]
                    ctext = "" if cap is None else f"{cap:,.0f}"
                    out.append(f"| {client} | {kind}: `{lab}` | {rtext} | {mb} | {ctext} | "
                               f"{problems[client, name] or ''} |")
        ck = rate.get(("confluent", "produce"))
        peers = {k: v for k, v in rate.items() if k[0] in PEERS and k[0] in args.clients
                 and k[1] in CONSUME_KINDS and v}
        best_key = max(peers, key=peers.get) if peers else None
        best = peers.get(best_key) if best_key else None
        best_name = f"{best_key[0]} {best_key[1]}" if best_key else "best peer"

        def row(what: str, mine: float | None, ref: float | None, ref_name: str, target: float) -> str:
            if not mine or not ref:
                return f"| {what} | n/a | n/a | n/a | >= {target:g}x {ref_name} | n/a |"
            ratio = mine / ref
            return (f"| {what} | {mine:,.0f}/s | {ref:,.0f}/s ({ref_name}) | {ratio:.2f}x | "
                    f">= {target:g}x | {'PASS' if ratio >= target else 'MISS'} |")

        out += ["", "| target | kafkawire | reference | ratio | target | |", "|---|---|---|---|---|---|",
                row("produce, per-record `send`", rate.get(("kafkawire", "send")), ck,
                    "confluent-kafka produce", TARGET_SEND),
                row("produce, `send_batch`", rate.get(("kafkawire", "send_batch")), ck,
                    "confluent-kafka produce", TARGET_SEND_BATCH),
                row("consume, `poll` record objects", rate.get(("kafkawire", "poll")), best,
                    best_name, TARGET_POLL),
                row("consume, `poll_batch` columnar", rate.get(("kafkawire", "poll_batch")), best,
                    best_name, TARGET_POLL_BATCH),
                row("produce, per-record `send`, keyed (murmur2)", rate.get(("kafkawire", "send_keyed")),
                    rate.get(("confluent", "produce_keyed")), "confluent-kafka keyed produce",
                    TARGET_SEND),
                ""]
        for mine, ref in SEND_PAIRS:
            per_round = round_ratios(results.get((compression, "kafkawire", mine)),
                                     results.get((compression, "confluent", ref)))
            if per_round:
                out += [f"kafkawire `{mine}` / confluent-kafka `{ref}` per round: "
                        + ", ".join(per_round), ""]
    return out


SEND_PAIRS = (("send", "produce"), ("send_keyed", "produce_keyed"))


def round_ratios(mine: list[Outcome] | None, ref: list[Outcome] | None) -> list[str]:
    """Round i's kafkawire records/s over the reference's round i, as text."""
    def rate(o: Outcome) -> float:
        return 0.0 if o.problem or not o.seconds > 0 else o.count / o.seconds

    return [f"{rate(a) / rate(b):.2f}x ({rate(a):,.0f}/{rate(b):,.0f})" if rate(b) else "n/a"
            for a, b in zip(mine or (), ref or ())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=None, help="records per case (1,000,000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (3)")
    parser.add_argument("--quick", action="store_true", help="200,000 records (3 rounds unless --rounds)")
    parser.add_argument("--clients", default=",".join(ALL_CLIENTS),
                        help=f"comma-separated subset of {','.join(ALL_CLIENTS)}")
    parser.add_argument("--compression", default="none", help="comma-separated: none,lz4,...")
    parser.add_argument("--cases", default="",
                        help="comma-separated case names to run (e.g. send,produce); default all")
    parser.add_argument("--idempotent", action="store_true",
                        help="acks=all and idempotent producers (kafkawire's default) for every client")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables to PATH")
    parser.add_argument("--json", metavar="PATH",
                        help="also write {case: ratio} (kafkawire rate / peer rate) to PATH")
    args = parser.parse_args()
    if args.idempotent:
        global ACKS, IDEMPOTENT
        ACKS, IDEMPOTENT = "all", True
    args.records = args.records or (200_000 if args.quick else 1_000_000)
    args.rounds = args.rounds or 3
    args.clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    bad = [c for c in args.clients if c not in ALL_CLIENTS]
    if bad:
        parser.error(f"unknown client(s) {bad}; choose from {', '.join(ALL_CLIENTS)}")
    args.cases = {c.strip() for c in args.cases.split(",") if c.strip()}
    known = {case for cases in CASES.values() for case, _l, _f, cons in cases} | CONSUME_KINDS
    bad = sorted(args.cases - known)
    if bad:
        parser.error(f"unknown case(s) {bad}; choose from {', '.join(sorted(known))}")
    args.compression = [c.strip() for c in args.compression.split(",") if c.strip()]
    bad = [c for c in args.compression if c not in CODEC_NAMES]
    if bad:
        parser.error(f"unknown compression {bad}; choose from {', '.join(CODEC_NAMES)}")
    if args.records < PARTITIONS:
        parser.error(f"--records must be at least {PARTITIONS}")
    started = time.monotonic()
    results = run(args)
    text = "\n".join(report(results, args)) + "\n"
    finish(text, started, args.markdown, args.json, ratios(results, args) if args.json else None)


def ratios(results: dict, args: argparse.Namespace) -> dict[str, float]:
    """The target table's ratios, machine-readable (bench/check.py reads them): kafkawire's
    median records/s over the reference's, so higher is better for kafkawire.  A kafkawire
    case with a problem in a round counts that round as 0 records/s, as the table does."""
    out: dict[str, float] = {}
    for compression in args.compression:
        rate = {key[1:]: median_rate(outs, args.records)[0]
                for key, outs in results.items() if key[0] == compression}
        ck = rate.get(("confluent", "produce"))
        consumers = {k: v for k, v in rate.items()
                     if k[0] in PEERS and k[1] in CONSUME_KINDS and v}
        best = max(consumers.values()) if consumers else None
        for name, mine, ref in (
                ("send/vs-confluent-produce", rate.get(("kafkawire", "send")), ck),
                ("send_batch/vs-confluent-produce", rate.get(("kafkawire", "send_batch")), ck),
                ("send_keyed/vs-confluent-produce_keyed", rate.get(("kafkawire", "send_keyed")),
                 rate.get(("confluent", "produce_keyed"))),
                ("poll/vs-best-peer-consumer", rate.get(("kafkawire", "poll")), best),
                ("poll_batch/vs-best-peer-consumer", rate.get(("kafkawire", "poll_batch")), best)):
            if mine is not None and ref:
                out[f"{compression}/{name}"] = mine / ref
    return out


if __name__ == "__main__":
    main()
