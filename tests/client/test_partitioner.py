import pytest

import numpy as np

from kafkawire.client.partitioner import StickyPartitioner, murmur2, murmur2_many, partition_for_key

# Values from the Java client's own unit test of Utils.murmur2.
JAVA = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("data,expected", JAVA.items())
def test_murmur2_matches_java(data, expected):
    assert murmur2(data) == expected


def test_murmur2_every_tail_length_matches_kafka_python():
    from kafka.partitioner.default import murmur2 as reference  # unsigned 32-bit result

    for n in range(0, 13):
        data = bytes(range(200, 200 + n))
        assert murmur2(data) & 0xFFFFFFFF == reference(data)


@pytest.mark.parametrize("keys", [
    list(JAVA),                                       # mixed lengths: one group per length
    [bytes([i, 255 - i]) * 8 for i in range(50)],     # fixed length: the reshape path
    [b"", b"", b""],
    [bytes(range(200, 200 + n)) for n in range(13)],  # every tail length
])
def test_murmur2_many_equals_murmur2(keys):
    offsets = np.concatenate([[0], np.cumsum([len(k) for k in keys])])
    got = murmur2_many(b"".join(keys), offsets)
    assert got.dtype == np.int32 and got.tolist() == [murmur2(k) for k in keys]


def test_partition_for_key_is_positive_modulo():
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7
    with pytest.raises(ValueError, match="positive"):
        partition_for_key(b"x", 0)


def test_sticky_partition_moves_after_batch_done():
    s = StickyPartitioner()
    p = s.partition("t", 5)
    assert s.partition("t", 5) == p
    s.batch_done("t", p, 5)
    assert s.partition("t", 5) != p
    assert s.partition("t", 1) == 0
    s.batch_done("t", 0, 1)  # one partition: nowhere else to go
    assert s.partition("t", 1) == 0
