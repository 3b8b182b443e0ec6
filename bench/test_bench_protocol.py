"""pytest-benchmark suites for kafkawire's protocol-layer paths.

Run explicitly (tests/ is the default test path, so the normal suite never collects these):

    .venv/bin/python -m pytest bench/test_bench_protocol.py --benchmark-only

The workloads are compare_protocol.py's (4 partitions x 10,000 records, Metadata with 50
topics); the peer comparison with aiokafka and kafka-python is that script.
"""

from __future__ import annotations

import pytest

import compare_protocol as wl
from kafkawire import codec
from kafkawire.protocol.headers import decode_request_header

FETCH_CASES = [(v, c) for c in wl.CODECS for v in wl.FETCH_VERSIONS]
FETCH_IDS = [f"v{v}-{wl.CODECS[c]}" for v, c in FETCH_CASES]
TOTAL = wl.PARTITIONS * wl.N_RECORDS


@pytest.fixture(scope="module")
def records() -> list[tuple[bytes, bytes, int]]:
    return wl.make_records()


@pytest.fixture(scope="module")
def record_data(records) -> dict[int, list[bytes]]:
    return {c: wl.fetch_record_data(records, c) for c in wl.CODECS}


@pytest.fixture(scope="module")
def batches(records) -> list[bytes]:
    return wl.produce_batches(records)


def test_implementation_is_the_extension() -> None:
    assert codec.IMPLEMENTATION == "cython", "build the extension: make build"


@pytest.mark.parametrize("version, compression", FETCH_CASES, ids=FETCH_IDS)
def test_fetch_decode_protocol_only(benchmark, record_data, version, compression) -> None:
    data = record_data[compression]
    frame = wl.fetch_frame(version, data)
    resp = benchmark(wl.kw_fetch_protocol(frame, version))
    views = [p.records for t in resp.responses for p in t.partitions]
    # The records are views of the frame itself: nothing was copied on the way.
    assert all(v.obj is frame for v in views)
    assert [bytes(v) for v in views] == data


@pytest.mark.parametrize("version, compression", FETCH_CASES, ids=FETCH_IDS)
def test_fetch_decode_records(benchmark, record_data, version, compression) -> None:
    frame = wl.fetch_frame(version, record_data[compression])
    parts = benchmark(wl.kw_fetch_full(frame, version, columnar=False))
    assert [len(p) for p in parts] == [wl.N_RECORDS] * wl.PARTITIONS
    assert parts[1][0].offset == 0 and parts[1][-1].offset == wl.N_RECORDS - 1


@pytest.mark.parametrize("version, compression", FETCH_CASES, ids=FETCH_IDS)
def test_fetch_decode_columnar(benchmark, record_data, version, compression) -> None:
    frame = wl.fetch_frame(version, record_data[compression])
    parts = benchmark(wl.kw_fetch_full(frame, version, columnar=True))
    assert sum(len(c) for c in parts) == TOTAL


@pytest.mark.parametrize("version, compression", FETCH_CASES[:2], ids=FETCH_IDS[:2])
def test_fetch_codec_only(benchmark, record_data, version, compression) -> None:
    # The codec share of test_fetch_decode_records, on the same record views.
    frame = wl.fetch_frame(version, record_data[compression])
    resp = wl.kw_fetch_protocol(frame, version)()
    views = [p.records for t in resp.responses for p in t.partitions]
    parts = benchmark(wl.kw_codec_only(views, columnar=False))
    assert sum(len(p) for p in parts) == TOTAL


@pytest.mark.parametrize("version", wl.PRODUCE_VERSIONS, ids=lambda v: f"v{v}")
def test_produce_request_encode(benchmark, batches, version) -> None:
    chunks = benchmark(wl.kw_produce_request(batches, version))
    # Each batch goes out as its own chunk, the caller's object itself.
    assert [c for c in chunks if any(c is b for b in batches)] == batches
    req = _decode_produce(chunks, version)
    assert [bytes(p.records) for p in req.topic_data[0].partition_data] == batches


@pytest.mark.parametrize("version", wl.PRODUCE_VERSIONS, ids=lambda v: f"v{v}")
def test_produce_end_to_end(benchmark, records, version) -> None:
    chunks = benchmark(wl.kw_produce_e2e(records, version))
    req = _decode_produce(chunks, version)
    parts = [codec.decode_records(p.records) for p in req.topic_data[0].partition_data]
    assert [len(p) for p in parts] == [wl.N_RECORDS] * wl.PARTITIONS
    assert parts[0][5].key == records[5][0]


def test_metadata_request_encode(benchmark) -> None:
    chunks = benchmark(wl.kw_metadata_request(wl.METADATA_VERSION))
    assert len(chunks) == 1
    assert int.from_bytes(chunks[0][:4], "big") == len(chunks[0]) - 4


def test_metadata_response_decode(benchmark) -> None:
    frame = wl.metadata_response_frame(wl.METADATA_VERSION)
    resp = benchmark(wl.kw_metadata_response(frame, wl.METADATA_VERSION))
    assert len(resp.topics) == wl.META_TOPICS
    assert all(len(t.partitions) == wl.META_PARTITIONS for t in resp.topics)
    assert wl.count_fields(resp, wl.METADATA_VERSION) > 3000


def _decode_produce(chunks: list, version: int):
    """Read a framed Produce request back, as a broker would."""
    wire = b"".join(bytes(c) for c in chunks)
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4
    key, ver, _cid, client_id, pos = decode_request_header(
        wire[4:], wl.PRODUCE.request_header_version(version))
    assert (key, ver, client_id) == (0, version, wl.CLIENT_ID)
    return wl.PRODUCE.decode_request(wire[4 + pos:], version)
