"""The records Fetcher.drain (poll()) hands out: the codec's ConsumerRecords, made straight
from the fetched batches, driven with no I/O (read_uncommitted; read_committed is in
test_read_committed.py)."""

from __future__ import annotations

import gc
import pickle

import pytest
from test_read_committed import TP, answer, fetcher

from kafkawire import codec
from kafkawire.protocol.fetcher import ConsumerRecord


def log() -> bytes:
    return b"".join([
        codec.encode_record_batch([(b"k0", b"0"), (None, b"1", 5, [("h", b"x"), ("n", None)])],
                                  base_offset=0, timestamp=1000),
        codec.encode_record_batch([(b"\x00\x00\x00\x01", b"\x00" * 6)], base_offset=2,
                                  is_control=True, is_transactional=True, producer_id=1,
                                  producer_epoch=0),
        codec.encode_message_set([(b"k3", b"3")], magic=1, base_offset=3, timestamp=2000),
        codec.encode_record_batch([(b"k4", b"4"), (b"k5", b"5")], base_offset=4, timestamp=3000,
                                  log_append_time=True, compression=1),
    ])


def test_records_are_the_codecs_consumer_records() -> None:
    f = fetcher("read_uncommitted")
    f.seek(TP, 0)
    answer(f, log(), None)
    out = f.drain(100, False)
    assert ConsumerRecord is codec._ConsumerRecord
    assert all(type(r) is ConsumerRecord for r in out)
    assert [(r.topic, r.partition, r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)
            for r in out] == [
        ("t", 0, 0, 1000, 0, b"k0", b"0", ()),
        ("t", 0, 1, 5, 0, None, b"1", (("h", b"x"), ("n", None))),
        ("t", 0, 3, 2000, 0, b"k3", b"3", ()),
        ("t", 0, 4, out[3].timestamp, 1, b"k4", b"4", ()),
        ("t", 0, 5, out[3].timestamp, 1, b"k5", b"5", ()),
    ]
    assert f.assigned[TP].position == 6
    # One topic string for every record of a partition, not a copy each.
    assert all(r.topic is out[0].topic for r in out)
    if codec.IMPLEMENTATION == "cython":
        assert not any(gc.is_tracked(r) for r in out)
    again = pickle.loads(pickle.dumps(out[1]))
    assert (again.offset, again.headers, repr(again)) == (1, out[1].headers, repr(out[1]))


def test_max_records_cuts_and_the_rest_follows_in_order() -> None:
    f = fetcher("read_uncommitted")
    f.seek(TP, 0)
    answer(f, log(), None)
    got = []
    for _ in range(10):
        out = f.drain(2, False)
        assert len(out) <= 2
        got += [r.offset for r in out]
        if not f.assigned[TP].buffered():
            break
    assert got == [0, 1, 3, 4, 5] and f.assigned[TP].position == 6


def test_deserializers_make_the_records_keys_and_values() -> None:
    f = fetcher("read_uncommitted", key_deserializer=lambda k: k and k.decode(),
                value_deserializer=lambda v: {"v": int(v)})
    f.seek(TP, 0)
    answer(f, log(), None)
    out = f.drain(100, False)
    assert [(r.key, r.value) for r in out] == [
        ("k0", {"v": 0}), (None, {"v": 1}), ("k3", {"v": 3}), ("k4", {"v": 4}), ("k5", {"v": 5})]
    if codec.IMPLEMENTATION == "cython":
        assert all(gc.is_tracked(r) for r in out)  # their values may hold anything


def test_a_failing_deserializer_fails_the_poll_and_keeps_the_position() -> None:
    f = fetcher("read_uncommitted", value_deserializer=lambda v: int(v) if v != b"3" else int("x"))
    f.seek(TP, 0)
    answer(f, log(), None)
    with pytest.raises(ValueError, match="invalid literal"):
        f.drain(100, False)
    assert f.assigned[TP].position == 0 and not f.assigned[TP].buffered()


def test_consumer_record_is_read_only_and_constructible() -> None:
    r = ConsumerRecord("t", 1, 5, 1000, 0, b"k", b"v", [("h", b"x")])
    assert (r.offset, r.headers) == (5, (("h", b"x"),))
    with pytest.raises(AttributeError):
        r.value = b"w"
