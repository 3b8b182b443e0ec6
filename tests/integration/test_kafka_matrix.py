"""The broker matrix: the core client paths against two lines of Apache Kafka.

Every test runs against Apache Kafka 4.4 (the session's ``kafka_broker``) and Apache Kafka
3.9 (``kafka39_broker``, the last line before Kafka 4 removed the oldest API versions,
KIP-896), so the versions kafkawire negotiates meet both:

* the core round trip: every codec, both shells, keys, values, headers and timestamps read
  back exactly, and the batches stored with the codec the producer chose;
* a consumer group: two kafkawire members split a topic's partitions, commit, and a member
  of the restarted group finds the commits with committed() and goes on from them;
* transactions: commit and abort, and a read_committed consumer that skips the aborted
  records because the broker's Fetch answer lists the aborted transaction (KIP-98).

The oldest versions against a real broker, on 3.9 only: Produce v0-v1 (message format 0)
and v2 (format 1, KIP-32), which 3.9 converts to the topic's format 2 as it writes; Fetch
v2-v3 (3.9 converts its format 2 down to format 1 for such fetchers) and v0-v1 (format 0,
no timestamps).  On 4.4 those versions are gone (KIP-896): an override that forces one
fails at once with ApiVersionError naming the API and the versions the broker serves.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import pytest
from rawsocket import RawConnection
from shells import shell  # noqa: F401 - the fixture
from topics import create_topic

from kafkawire import codec
from kafkawire.protocol import apis
from kafkawire.protocol.api import ApiVersionError

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# The batch attribute codes of the codecs (KIP-98's RecordBatch, KIP-110 for zstd).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
FETCH = apis.get("Fetch")
SESSION_MS = 6000
HEARTBEAT_MS = 300


@pytest.fixture(scope="module", params=["kafka_broker", "kafka39_broker"], ids=["kafka4.4", "kafka3.9"])
def kafka(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _records(n: int, headers: bool = True) -> list[tuple[Any, Any, int, tuple]]:
    """(key, value, timestamp, headers): null keys and values, empty and null-valued headers,
    timestamps a minute in the past (within Kafka's accepted window, KIP-937)."""
    now = int(time.time() * 1000) - 60_000
    return [
        (
            None if i % 7 == 0 else b"key-%d" % i,
            None if i % 11 == 5 else b"value-%d-" % i * (i % 5 + 1),
            now + i,
            ((f"h{i}", b"v%d" % i), ("null", None)) if headers and i % 3 else (),
        )
        for i in range(n)
    ]


def _produce(producer_class: Any, bootstrap: str, topic: str, records: list, **config: Any) -> list[int]:
    """Send ``records`` to partition 0; their offsets."""
    with producer_class(bootstrap_servers=bootstrap, linger_ms=5, **config) as p:
        futures = [p.send(topic, v, key=k, partition=0, timestamp=ts, headers=list(h) or None)
                   for k, v, ts, h in records]
        p.flush(30)
        return [f.result(0).offset for f in futures]


def _consume(consumer: Any, n: int, deadline_s: float = 30.0) -> list[Any]:
    """Poll ``consumer`` (assigned already) until ``n`` records came."""
    got: list[Any] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < n:
        assert time.monotonic() < deadline, f"only {len(got)} of {n} records within {deadline_s}s"
        got += consumer.poll(0.5)
    return got


def _read(consumer_class: Any, bootstrap: str, topics: list[str], n: int, **config: Any) -> list[Any]:
    with consumer_class(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **config) as c:
        c.assign([(t, 0) for t in topics])
        return _consume(c, n)


def _raw_fetch(port: int, topic: str, version: int, isolation: int = 0) -> Any:
    """Partition 0 from offset 0, fetched raw at Fetch ``version`` (v0-v12 name the topic)."""
    R = FETCH.Request
    part = R.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 22)
    req = R(max_wait_ms=100, min_bytes=1, max_bytes=1 << 22, isolation_level=isolation,
            topics=[R.FetchTopic(topic=topic, partitions=[part])])
    with RawConnection(port, timeout=15.0) as rc:
        rc.negotiate()
        (pd,) = rc.request(FETCH, req, version).response.responses[0].partitions
    assert pd.error_code == 0, pd
    return pd


def _batches(port: int, topic: str, version: int = 12) -> list[Any]:
    return codec.decode_batches(bytes(_raw_fetch(port, topic, version).records or b""))


# ---------------------------------------------------------------------------------------
# The core round trip
# ---------------------------------------------------------------------------------------

def test_every_codec_round_trips_exactly(kafka: Any, shell: Any) -> None:
    records = _records(40)
    topics = {c: create_topic(kafka.bootstrap, f"matrix-{c}") for c in CODECS}
    for compression, topic in topics.items():
        offsets = _produce(shell.Producer, kafka.bootstrap, topic, records, compression_type=compression)
        assert offsets == list(range(len(records))), compression
    got = _read(shell.Consumer, kafka.bootstrap, list(topics.values()), len(records) * len(CODECS))
    expected = [(i, k, v, ts, 0, h) for i, (k, v, ts, h) in enumerate(records)]  # 0: CreateTime
    for compression, topic in topics.items():
        mine = [(r.offset, r.key, r.value, r.timestamp, r.timestamp_type, r.headers) for r in got if r.topic == topic]
        assert mine == expected, compression
        # Kafka keeps the producer's codec (compression.type=producer): the batches it
        # stored are compressed the way kafkawire wrote them.
        stored = _batches(kafka.port, topic)
        assert {(b.magic, b.compression) for b in stored} == {(2, CODEC_IDS[compression])}, stored


# ---------------------------------------------------------------------------------------
# A consumer group
# ---------------------------------------------------------------------------------------

def _member(kafka: Any, shell: Any, group: str) -> Any:
    return shell.Consumer(bootstrap_servers=kafka.bootstrap, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False, session_timeout_ms=SESSION_MS,
                          heartbeat_interval_ms=HEARTBEAT_MS, max_poll_records=20)


def _poll_until(members: list[Any], done: Callable[[], bool], timeout: float, sink: dict) -> None:
    """Poll every member in turn until ``done()``; ``sink[member index]`` gets its records."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not reached within {timeout}s: {[m.group_state() for m in members]}"
        for i, m in enumerate(members):
            sink.setdefault(i, []).extend(m.poll(0.05))


def _split(members: list[Any], partitions: int) -> bool:
    states = [m.group_state() for m in members]
    owned = [tp for s in states for tp in s["assignment"]]
    return (all(s["state"] == "stable" and not s["rejoin_needed"] for s in states)
            and len({s["generation"] for s in states}) == 1
            and sorted(len(s["assignment"]) for s in states) == [partitions // len(members)] * len(members)
            and len(set(owned)) == partitions)


def test_two_members_split_the_partitions_and_their_commits_survive_a_restart(kafka: Any, shell: Any) -> None:
    group, per_partition = f"matrix-g-{_uid()}", 15
    topic = create_topic(kafka.bootstrap, "matrix-group", 4)
    members = [_member(kafka, shell, group) for _ in range(2)]
    got: dict[int, list] = {}
    try:
        for m in members:
            m.subscribe([topic])
        _poll_until(members, lambda: _split(members, 4), 40, got)
        owners = {tp: i for i, m in enumerate(members) for tp in m.group_state()["assignment"]}
        assert not any(got.values())  # nothing was produced yet
        # Produced once the split is settled: each record goes to its partition's owner only.
        with shell.Producer(bootstrap_servers=kafka.bootstrap, linger_ms=5) as p:
            for i in range(4 * per_partition):
                p.send(topic, b"g-%d" % i, partition=i % 4)
            p.flush(30)
        _poll_until(members, lambda: sum(map(len, got.values())) >= 4 * per_partition, 30, got)
        for i, records in got.items():
            assert {owners[(r.topic, r.partition)] for r in records} == {i}
        read = sorted((r.partition, r.offset) for records in got.values() for r in records)
        assert read == sorted((p, o) for p in range(4) for o in range(per_partition))  # each once
        for m in members:
            m.commit()
        positions = {tp: per_partition for tp in owners}
        for i, m in enumerate(members):
            mine = [tp for tp, owner in owners.items() if owner == i]
            assert m.committed(mine) == {tp: per_partition for tp in mine}
    finally:
        for m in members:
            m.close(10)
    # The restarted group: the commits are there, and its member goes on from them.
    with shell.Producer(bootstrap_servers=kafka.bootstrap) as p:
        for part in range(4):
            p.send(topic, b"after-restart-%d" % part, partition=part)
        p.flush(30)
    again = _member(kafka, shell, group)
    try:
        assert again.committed(list(positions)) == positions
        again.subscribe([topic])
        later: dict[int, list] = {}
        _poll_until([again], lambda: len(later.get(0, [])) >= 4, 40, later)
        assert sorted((r.partition, r.offset, r.value) for r in later[0]) == \
            [(part, per_partition, b"after-restart-%d" % part) for part in range(4)]
    finally:
        again.close(10)


# ---------------------------------------------------------------------------------------
# Transactions
# ---------------------------------------------------------------------------------------

def test_read_committed_skips_what_the_broker_lists_as_aborted(kafka: Any, shell: Any) -> None:
    topic = create_topic(kafka.bootstrap, "matrix-txn")
    with shell.Producer(bootstrap_servers=kafka.bootstrap, transactional_id=f"matrix-{topic}") as p:
        p.init_transactions(30)
        p.begin_transaction()
        first = [p.send(topic, b"commit-%d" % i, partition=0) for i in range(3)]
        p.commit_transaction(30)
        p.begin_transaction()
        aborted = [p.send(topic, b"abort-%d" % i, partition=0) for i in range(2)]
        p.flush(30)
        p.abort_transaction(30)
        p.begin_transaction()
        last = [p.send(topic, b"commit-3", partition=0)]
        p.commit_transaction(30)
        pid = p.metrics()["producer_id"]
    # Each transaction's records, then its marker: COMMIT at 3, ABORT at 6, COMMIT at 8.
    assert [f.result(0).offset for f in first + aborted + last] == [0, 1, 2, 4, 5, 7]
    # The broker's own list (Fetch v4+ at read_committed): the aborted transaction from its
    # first offset.  Kafka writes the markers after answering EndTxn, so wait for the LSO.
    deadline = time.monotonic() + 15
    while (pd := _raw_fetch(kafka.port, topic, 12, isolation=1)).last_stable_offset < 9:
        assert time.monotonic() < deadline, f"the last stable offset stays at {pd.last_stable_offset}"
        time.sleep(0.1)
    assert [(a.producer_id, a.first_offset) for a in pd.aborted_transactions] == [(pid, 4)], pd
    committed = _read(shell.Consumer, kafka.bootstrap, [topic], 4, isolation_level="read_committed")
    assert [(r.offset, r.value) for r in committed] == \
        [(0, b"commit-0"), (1, b"commit-1"), (2, b"commit-2"), (7, b"commit-3")]
    everything = _read(shell.Consumer, kafka.bootstrap, [topic], 6, isolation_level="read_uncommitted")
    assert [r.value for r in everything] == [b"commit-0", b"commit-1", b"commit-2", b"abort-0", b"abort-1",
                                             b"commit-3"]


# ---------------------------------------------------------------------------------------
# The oldest versions: served by 3.9, gone from 4.4
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("produce_version", [0, 1, 2])
def test_produce_in_message_format_0_and_1_reads_back_on_3_9(kafka39_broker: Any, shell: Any,
                                                             produce_version: int) -> None:
    topic = create_topic(kafka39_broker.bootstrap, f"matrix-produce-v{produce_version}")
    records = _records(20, headers=False)  # message formats 0 and 1 carry no headers
    offsets = _produce(shell.Producer, kafka39_broker.bootstrap, topic, records, enable_idempotence=False,
                       api_version_overrides={"Produce": produce_version})
    assert offsets == list(range(len(records)))
    # 3.9 converted the message sets to the topic's format 2 as it wrote them.
    assert {b.magic for b in _batches(kafka39_broker.port, topic)} == {2}
    got = _read(shell.Consumer, kafka39_broker.bootstrap, [topic], len(records))
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == \
        [(i, k, v, ()) for i, (k, v, _ts, _h) in enumerate(records)]
    if produce_version == 2:  # format 1 carries the timestamps (KIP-32)
        assert [(r.timestamp, r.timestamp_type) for r in got] == [(ts, 0) for _k, _v, ts, _h in records]
    else:  # format 0 has none: converted, the records have no timestamp
        assert {r.timestamp for r in got} == {-1}


# Fetch v2-v3 get message format 1, v0-v1 format 0, converted down from the stored format 2.
FETCH_FORMATS = {3: 1, 2: 1, 1: 0, 0: 0}


@pytest.mark.parametrize("fetch_version", [3, 1, 0])
def test_fetch_of_message_formats_0_and_1_reads_the_same_records_on_3_9(kafka39_broker: Any, shell: Any,
                                                                      fetch_version: int) -> None:
    topic = create_topic(kafka39_broker.bootstrap, f"matrix-fetch-v{fetch_version}")
    records = _records(20, headers=False)
    assert _produce(shell.Producer, kafka39_broker.bootstrap, topic, records) == list(range(len(records)))
    magic = FETCH_FORMATS[fetch_version]
    # What such a fetcher is sent: 3.9 converted the stored batches down to its format.
    assert {b.magic for b in _batches(kafka39_broker.port, topic, fetch_version)} == {magic}
    got = _read(shell.Consumer, kafka39_broker.bootstrap, [topic], len(records),
                api_version_overrides={"Fetch": fetch_version})
    assert [(r.offset, r.key, r.value) for r in got] == [(i, k, v) for i, (k, v, _ts, _h) in enumerate(records)]
    if magic == 1:
        assert [(r.timestamp, r.timestamp_type) for r in got] == [(ts, 0) for _k, _v, ts, _h in records]
    else:  # format 0: no timestamp, no timestamp type
        assert {(r.timestamp, r.timestamp_type) for r in got} == {(-1, -1)}


@pytest.mark.parametrize("override", [{"Produce": 2}, {"Produce": 0}, {"Fetch": 3}, {"Fetch": 0}],
                         ids=["produce2", "produce0", "fetch3", "fetch0"])
def test_an_override_kafka_4_no_longer_serves_fails_at_once(kafka_broker: Any, shell: Any, override: dict) -> None:
    # Kafka 4 lists Produce v0-v2 (KAFKA-18659) but closes the connection on them, and lists
    # Fetch from v4 only: either way the override is refused before a request is sent.
    (api, version), = override.items()
    low = {"Produce": 3, "Fetch": 4}[api]
    topic = create_topic(kafka_broker.bootstrap, f"matrix-gone-{api.lower()}{version}")
    started = time.monotonic()
    with pytest.raises(ApiVersionError, match=rf"{api} v{version} \(set in version_overrides\) is not supported "
                                              rf"by the broker \(speaks v{low}-v\d+"):
        if api == "Produce":
            with shell.Producer(bootstrap_servers=kafka_broker.bootstrap, enable_idempotence=False,
                                api_version_overrides=override) as p:
                p.send(topic, b"never", partition=0).result(30)
        else:
            with shell.Consumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest",
                                api_version_overrides=override) as c:
                c.assign([(topic, 0)])
                c.poll(30)
    assert time.monotonic() - started < 10, "the refusal waited for a timeout"
