"""The Fetch request the Fetcher plans: a long poll when nothing is buffered, and a
prefetch that the broker answers (almost) at once while records are buffered."""

from __future__ import annotations

from kafkawire.client.config import Config
from kafkawire.protocol.fetcher import Fetcher, TopicPartition

TP = TopicPartition("t", 0)


def _request(buffered: bool, **options: object):
    f = Fetcher(Config.consumer(bootstrap_servers="127.0.0.1:9", **options))
    f.assign([TP])
    req, positions = f.request([TP], {TP: 42}, buffered, {})
    assert positions == {TP: 42} and f.in_flight(TP)
    return req


def test_nothing_buffered_is_a_long_poll() -> None:
    req = _request(False, fetch_max_wait_ms=321, fetch_min_bytes=7)
    assert (req.max_wait_ms, req.min_bytes) == (321, 7)


def test_a_prefetch_waits_one_millisecond() -> None:
    # Not 0: Tansu answers a Fetch with max_wait_ms=0 with no partitions at all, so the
    # prefetch would never bring records there (tests/integration/test_prefetch.py).
    req = _request(True, fetch_max_wait_ms=321)
    assert req.max_wait_ms == 1
    (topic,) = req.topics
    assert [(p.partition, p.fetch_offset) for p in topic.partitions] == [(0, 42)]


def test_the_fetches_poll_put_off_all_wait_one_millisecond_once() -> None:
    # ConsumerBase._fetch_round put the round's fetches off (prefetch_due): each broker's
    # goes out as a prefetch would have, and the round after is a long poll again.
    from kafkawire.protocol.metadata import ClusterMetadata, PartitionMetadata, TopicMetadata

    f = Fetcher(Config.consumer(bootstrap_servers="127.0.0.1:9", fetch_max_wait_ms=321))
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    f.assign(tps)
    for tp in tps:
        f.seek(tp, 0)
    meta = ClusterMetadata(300000, 100)
    meta.topics["t"] = TopicMetadata("t", 0, None, {p: PartitionMetadata(p, 1 + p, 0, 0, [], []) for p in (0, 1)})
    meta.need_refresh = False

    def waits() -> dict[int, int]:
        due, offsets, buffered = f.due(meta, 1.0, busy={})
        out = {node: f.request(tps_, offsets, buffered, meta.topics)[0].max_wait_ms for node, tps_ in due}
        for tp in tps:
            f.fetch_failed({tp: 0}, ConnectionError("dropped"), meta, 1 + tp.partition, 1.0)
        f.backoff.clear()
        return out

    f.prefetch_due = True
    assert waits() == {1: 1, 2: 1}
    assert not f.prefetch_due
    assert waits() == {1: 321, 2: 321}


def test_a_fetchs_answer_is_due_within_the_request_timeout_plus_its_wait() -> None:
    # Both shells send each Fetch with this deadline; the request timeout alone would
    # fail every long poll whose wait is longer than it.
    f = Fetcher(Config.consumer(bootstrap_servers="127.0.0.1:9", request_timeout_ms=2000, fetch_max_wait_ms=5000))
    assert f.answer_timeout == 7.0
