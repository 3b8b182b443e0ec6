"""Shared by the Spark tests: fresh topics, records, and rows as confluent-kafka and Spark see them."""

from __future__ import annotations

import time
import uuid

import confluent_kafka

from kafkawire import Consumer, Producer
from kafkawire.protocol import apis

CREATE = apis.get("CreateTopics")
# Record timestamps start a day ago, on the hour: Apache Kafka deletes segments older than
# its 7-day retention.ms at once, so a fixed date in 2023 would read back as an empty log.
TS = (int(time.time()) // 3600 - 24) * 3600 * 1000


def new_topic(bootstrap: str, partitions: int = 2, prefix: str = "sp") -> str:
    """A fresh topic with ``partitions`` partitions, made with CreateTopics (Apache Kafka
    auto-creates topics with one partition, Tansu with four: a test says how many it needs)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    # A Consumer's cluster, not a Producer's: the producer's sender thread owns its connections.
    with Consumer(bootstrap_servers=bootstrap) as c:
        req = CREATE.Request(topics=[CREATE.Request.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10000)
        assert c.cluster.request(None, CREATE, req, 10).topics[0].error_code == 0
        assert c.cluster.partitions_for(name, 10) == list(range(partitions))
    return name


def records(partition: int, n: int, headers: bool = True) -> list[tuple]:
    return [(b"k%d" % (i % 7) if i % 5 else None, b"p%d-v%d" % (partition, i) if i % 11 else None,
             TS + i * 10, [("h", b"%d" % i), ("n", None)] if headers and i % 3 == 0 else [])
            for i in range(n)]


def produce(bootstrap: str, topic: str, parts: dict[int, list[tuple]], **config) -> None:
    with Producer(bootstrap_servers=bootstrap, **config) as p:
        for partition, recs in parts.items():
            for i in range(0, len(recs), 100):  # several batches per partition
                p.send_batch(topic, partition, recs[i:i + 100]).result(20)


def read_back(bootstrap: str, topic: str, expected: int) -> list:
    """Every record of ``topic`` with kafkawire's Consumer, waiting up to a minute for ``expected``."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        tps = [(topic, p) for p in c.cluster.partitions_for(topic, 30)]
        c.assign(tps)
        c.seek_to_beginning(tps)
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            got += c.poll(1.0)
    return got


def confluent_rows(bootstrap: str, topic: str, partitions: int, count: int) -> list[tuple]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "enable.auto.commit": False,
                                  "log_level": 3})
    got = []
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                hs = m.headers()
                kind, ts = m.timestamp()
                # librdkafka says 0 for "no timestamp" (magic 0); Kafka's Java API, -1.
                got.append((m.key(), m.value(), m.topic(), m.partition(), m.offset(), ts if kind else -1,
                            kind - 1, [tuple(h) for h in hs] if hs else None))
    finally:
        c.close()
    return sorted(got, key=lambda r: (r[3], r[4]))


def spark_rows(df) -> list[tuple]:
    out = []
    for r in df.orderBy("partition", "offset").collect():
        ts = r.timestamp
        ms = None if ts is None else round(ts.timestamp() * 1000)
        headers = r.asDict().get("headers")
        hs = None if headers is None else [(h.key, h.value) for h in headers]
        out.append((r.key, r.value, r.topic, r.partition, r.offset, ms, r.timestampType, hs))
    return out


def load(spark, bootstrap: str, **options):
    reader = spark.read.format("kafkawire").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()
