"""pytest-benchmark suites for kafkawire's main codec paths.

Run explicitly (tests/ is the default test path, so the normal suite never collects these):

    .venv/bin/python -m pytest bench/ --benchmark-only [--benchmark-compare]

The peer comparison with aiokafka and kafka-python is bench/compare_codec.py.
"""

from __future__ import annotations

import random

import pytest

from kafkawire import codec

N_RECORDS = 10_000
FORMATS = [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (2, 3), (2, 4)]
IDS = [f"magic{m}-{['none', 'gzip', 'snappy', 'lz4', 'zstd'][c]}" for m, c in FORMATS]


@pytest.fixture(scope="module")
def records() -> list[tuple[bytes, bytes, int]]:
    rng = random.Random(1)
    return [
        (rng.randbytes(8).hex().encode(),
         (b'{"id":%d,"pad":"' % i + rng.randbytes(48).hex().encode())[:98] + b'"}',
         1_700_000_000_000 + i)
        for i in range(N_RECORDS)
    ]


def encode(records, magic: int, compression: int) -> bytes:
    if magic == 2:
        return codec.encode_record_batch(records, compression=compression)
    return codec.encode_message_set(records, magic=magic, compression=compression)


def test_implementation_is_the_extension() -> None:
    # Benchmarks of the pure-Python twin would be meaningless as codec numbers.
    assert codec.IMPLEMENTATION == "cython", "build the extension: make build"


@pytest.mark.parametrize("magic, compression", FORMATS, ids=IDS)
def test_encode(benchmark, records, magic, compression) -> None:
    data = benchmark(encode, records, magic, compression)
    assert len(codec.decode_records(data)) == N_RECORDS


@pytest.mark.parametrize("magic, compression", FORMATS, ids=IDS)
def test_decode_records_with_crc(benchmark, records, magic, compression) -> None:
    data = encode(records, magic, compression)
    out = benchmark(codec.decode_records, data, check_crcs=True)
    assert len(out) == N_RECORDS


@pytest.mark.parametrize("magic, compression", FORMATS, ids=IDS)
def test_decode_columnar(benchmark, records, magic, compression) -> None:
    data = encode(records, magic, compression)
    cols = benchmark(codec.decode_columnar, data, check_crcs=True)
    assert len(cols) == N_RECORDS


def test_decode_batches(benchmark, records) -> None:
    data = b"".join(
        codec.encode_record_batch(records[i : i + 500], base_offset=i)
        for i in range(0, N_RECORDS, 500)
    )
    batches = benchmark(codec.decode_batches, data)
    assert sum(len(b.records) for b in batches) == N_RECORDS


def test_encode_columnar(benchmark, records) -> None:
    cols = codec.Columns.from_records(records)
    data = benchmark(codec.encode_columnar, cols)
    assert data == codec.encode_record_batch(records)


def test_columns_to_arrow(benchmark, records) -> None:
    cols = codec.decode_columnar(codec.encode_record_batch(records))
    batch = benchmark(cols.to_arrow, topic="t", partition=0)
    assert batch.num_rows == N_RECORDS


@pytest.mark.parametrize("size", [4096, 1 << 20, 16 << 20], ids=["4KiB", "1MiB", "16MiB"])
@pytest.mark.parametrize("fn", ["crc32c", "crc32"])
def test_checksum(benchmark, fn, size) -> None:
    data = random.Random(size).randbytes(size)
    benchmark.extra_info["bytes"] = size
    assert benchmark(getattr(codec, fn), data) == getattr(codec, fn)(data)


def test_varint_primitives(benchmark) -> None:
    values = list(range(-5000, 5000, 7))

    def run():
        out = bytearray()
        for v in values:
            codec.write_varint(out, v)
        pos = 0
        for _ in values:
            _, pos = codec.read_varint(out, pos)
        return pos

    assert benchmark(run) > 0
