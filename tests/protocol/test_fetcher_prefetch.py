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
