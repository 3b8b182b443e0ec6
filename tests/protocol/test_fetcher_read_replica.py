"""Fetching from the closest replica (KIP-392) in the I/O-free fetcher, on a fake clock:
the rack goes out with each Fetch, a leader's preferred_read_replica moves the partition
to that broker until its lease (metadata_max_age_ms) ends, and an error from the replica,
its failure, or its absence from the metadata sends the partition back to the leader."""

from __future__ import annotations

from types import SimpleNamespace

from kafkawire.errors import ConnectionClosedError
from kafkawire.protocol import apis
from kafkawire.protocol.fetcher import Fetcher, TopicPartition
from kafkawire.protocol.metadata import ClusterMetadata, PartitionMetadata, TopicMetadata

FETCH = apis.get("Fetch")
_Topic = FETCH.Response.FetchableTopicResponse
_Part = _Topic.PartitionData
A, B = TopicPartition("t", 0), TopicPartition("t", 1)
LEASE_MS = 10000


def setup(rack: str = "rack-2") -> tuple[Fetcher, ClusterMetadata]:
    cfg = SimpleNamespace(isolation_level="read_uncommitted", key_deserializer=None, value_deserializer=None,
                          retry_backoff_ms=100, request_timeout_ms=30000, fetch_max_wait_ms=500, fetch_min_bytes=1,
                          fetch_max_bytes=1 << 20, max_partition_fetch_bytes=1 << 16, check_crcs=True,
                          client_rack=rack, metadata_max_age_ms=LEASE_MS)
    f = Fetcher(cfg)
    f.assign([A, B])
    f.seek(A, 5)
    f.seek(B, 0)
    meta = ClusterMetadata(300000, 100)
    meta.brokers = {1: ("h", 1), 2: ("h", 2), 3: ("h", 3)}
    meta.topics["t"] = TopicMetadata("t", 0, None, {
        0: PartitionMetadata(0, 1, 0, 0, [1, 2, 3], [1, 2, 3]),
        1: PartitionMetadata(1, 1, 0, 0, [1, 2, 3], [1, 2, 3]),
    })
    meta.need_refresh = False
    return f, meta


def answer(tp: TopicPartition, error: int = 0, replica: int = -1, records: bytes | None = None) -> object:
    return FETCH.Response(responses=[_Topic(topic=tp.topic, partitions=[_Part(
        partition_index=tp.partition, error_code=error, high_watermark=10, last_stable_offset=10,
        preferred_read_replica=replica, records=records)])])


def send(f: Fetcher, meta: ClusterMetadata, now: float, busy: dict | None = None) -> dict[int, tuple]:
    """Every fetch due now: node -> (request, positions)."""
    due, offsets, buffered = f.due(meta, now, busy or {})
    return {node: f.request(tps, offsets, buffered, meta.topics) for node, tps in due}


def moved_to_replica(f: Fetcher, meta: ClusterMetadata, now: float = 0.0) -> None:
    """The leader (1) names broker 2 as A's replica to read from."""
    sent = send(f, meta, now)
    assert list(sent) == [1]
    req, positions = sent[1]
    f.fetched(answer(A, replica=2), positions, meta, 1, now)
    assert f.read_replica(A) == 2 and f.read_replica(B) == -1


def test_the_rack_goes_out_with_every_fetch_and_only_v11_plus_carries_it():
    f, meta = setup()
    req, _positions = send(f, meta, 0.0)[1]
    assert req.rack_id == "rack-2"
    for version in (11, 17):
        assert FETCH.decode_request(FETCH.encode_request(req, version).getvalue(), version).rack_id == "rack-2"
    assert b"rack-2" not in FETCH.encode_request(req, 10).getvalue()  # RackId is a v11+ field


def where(sent: dict[int, tuple]) -> dict[int, list[TopicPartition]]:
    return {node: sorted(positions) for node, (_req, positions) in sent.items()}


def no_news(f: Fetcher, sent: dict[int, tuple]) -> None:
    """Every fetch of ``sent`` came back without records."""
    for _req, positions in sent.values():
        f.on_failure(positions)


def test_a_named_replica_serves_the_partition_until_its_lease_ends():
    f, meta = setup()
    moved_to_replica(f, meta, now=0.0)
    sent = send(f, meta, 1.0)
    assert where(sent) == {1: [B], 2: [A]}  # B stays with its leader
    assert sent[2][1] == {A: 5}
    no_news(f, sent)
    # The lease is metadata_max_age_ms from the leader's answer: then the leader again.
    sent = send(f, meta, LEASE_MS / 1000 - 0.001)
    assert where(sent) == {1: [B], 2: [A]}
    no_news(f, sent)
    assert where(send(f, meta, LEASE_MS / 1000)) == {1: [A, B]}
    assert f.read_replica(A) == -1


def test_the_leader_naming_it_again_renews_the_lease():
    f, meta = setup()
    moved_to_replica(f, meta, now=0.0)
    f.on_failure({B: 0})
    f.fetched(answer(A, replica=2), {A: 5}, meta, 1, 8.0)  # a late answer of the leader's, say
    assert f.preferred[A] == (2, 8.0 + LEASE_MS / 1000)
    assert 2 in send(f, meta, 12.0)


def test_an_error_from_the_replica_sends_the_partition_back_to_the_leader_without_a_reset():
    for code in (1, 6, 9, 56, 74, 75, 78):
        f, meta = setup()
        moved_to_replica(f, meta)
        f.on_failure({B: 0})
        _req, positions = send(f, meta, 1.0)[2]
        f.fetched(answer(A, error=code), positions, meta, 2, 1.0)
        f.raise_pending()  # nothing to raise: the leader is asked instead
        assert f.read_replica(A) == -1
        assert f.state(A).position == 5 and f.state(A).reset_to is None  # no offset reset
        sent = send(f, meta, 1.0)
        assert list(sent) == [1] and sent[1][1][A] == 5


def test_out_of_range_at_the_leader_still_resets():
    f, meta = setup()
    _req, positions = send(f, meta, 0.0)[1]
    f.fetched(answer(A, error=1), positions, meta, 1, 0.0)
    assert f.state(A).reset_to == -1


def test_a_replica_whose_connection_fails_is_given_up():
    f, meta = setup()
    moved_to_replica(f, meta)
    f.on_failure({B: 0})
    sent = send(f, meta, 1.0)
    f.fetch_failed(sent[2][1], ConnectionClosedError("broker 2 went away"), meta, 2, 1.0)
    assert f.read_replica(A) == -1
    f.on_failure(sent[1][1])
    sent = send(f, meta, 1.0)
    assert list(sent) == [1] and sent[1][1] == {A: 5, B: 0}  # the leader, at once (broker 2 backs off)


def test_a_replica_that_cannot_be_reached_is_given_up():
    # The sync shell's word when a connection to it is refused or backing off.
    f, meta = setup()
    moved_to_replica(f, meta)
    f.replica_failed(3)  # another broker: no change
    assert f.read_replica(A) == 2
    f.replica_failed(2)
    assert f.read_replica(A) == -1


def test_a_replica_gone_from_the_metadata_is_not_fetched_from():
    f, meta = setup()
    moved_to_replica(f, meta)
    f.on_failure({B: 0})
    # A refresh: broker 2 fenced (not among the brokers) and out of the replicas.
    M = apis.get("Metadata").Response
    T = M.MetadataResponseTopic
    meta.apply(M(brokers=[M.MetadataResponseBroker(node_id=n, host="h", port=n) for n in (1, 3)],
                 topics=[T(name="t", error_code=0, partitions=[
                     T.MetadataResponsePartition(partition_index=p, leader_id=1, leader_epoch=1, error_code=0,
                                                 replica_nodes=[1, 3], isr_nodes=[1, 3]) for p in (0, 1)])]), 2.0)
    sent = send(f, meta, 2.0)
    assert list(sent) == [1] and sent[1][1] == {A: 5, B: 0}
    assert f.read_replica(A) == -1 and meta.need_refresh


def test_records_are_counted_by_the_broker_that_served_them():
    f, meta = setup()
    moved_to_replica(f, meta)
    f.on_failure({B: 0})
    _req, positions = send(f, meta, 1.0)[2]
    f.fetched(answer(A, records=b"\0" * 40), positions, meta, 2, 1.0)
    m = f.metrics()
    assert m["fetched_bytes_by_node"] == {2: 40} and m["preferred_read_replicas"] == {A: 2}


def test_without_a_rack_the_request_says_none():
    f, meta = setup(rack="")
    req, _positions = send(f, meta, 0.0)[1]
    assert req.rack_id == ""
