"""The Fetch answer read directly (protocol/fetch_response.py) is, object for object, what
the schema decoder makes; whatever it does not read (tagged fields, bad bytes) it leaves
to the schema decoder, which reads it or says what is wrong."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire import codec
from kafkawire.protocol import apis
from kafkawire.protocol.connection import Connection
from kafkawire.protocol.fetch_response import FIRST_VERSION, decode_fetch_response
from kafkawire.protocol.headers import encode_response_header
from kafkawire.protocol.schema import Writer

from strategies import plain, responses

FETCH = apis.get("Fetch")
_T = FETCH.Response.FetchableTopicResponse
_P = _T.PartitionData
_A = _P.AbortedTransaction
VERSIONS = range(FIRST_VERSION, FETCH.max_version + 1)
BATCH = codec.encode_record_batch([(b"k", b"v" * 100, 1_700_000_000_000)], base_offset=40)
BIG = codec.encode_record_batch([(None, b"w" * 5000, 1_700_000_000_000)])  # multi-byte lengths


def wire(resp, version: int) -> memoryview:
    w = Writer()
    FETCH.encode_response(resp, version, w)
    return memoryview(b"".join(bytes(c) for c in w.parts())).toreadonly()


def topic(name: str, tid: uuid.UUID, parts: list) -> object:
    return _T(topic=name, topic_id=tid, partitions=parts)


def answers(version: int):
    ids = version >= 13
    a, b = uuid.uuid4(), uuid.uuid4()
    yield FETCH.Response(responses=[])
    yield FETCH.Response(throttle_time_ms=3, session_id=99, responses=[topic("" if ids else "t", a, [
        _P(partition_index=0, high_watermark=41, last_stable_offset=41, log_start_offset=0, records=BATCH)])])
    yield FETCH.Response(responses=[
        topic("" if ids else "ü" * 70, a, [
            _P(partition_index=3, error_code=1, high_watermark=-1, records=None),
            _P(partition_index=4, high_watermark=9, last_stable_offset=2, records=b"",
               aborted_transactions=[_A(producer_id=7, first_offset=2), _A(producer_id=8, first_offset=5)]),
            _P(partition_index=5, high_watermark=10**12, records=BIG + BATCH, aborted_transactions=[],
               preferred_read_replica=2 if version >= 11 else -1),
        ]),
        topic("" if ids else "x" * 200, b, [_P(partition_index=0, records=BATCH)]),
    ])


@pytest.mark.parametrize("version", VERSIONS)
def test_answers_are_the_schemas_objects(version):
    for resp in answers(version):
        body = wire(resp, version)
        got = decode_fetch_response(body, version)
        assert got is not None
        assert plain(got) == plain(FETCH.decode_response(body, version))
        # records are views of the answer, never copies
        for t in got.responses:
            for p in t.partitions:
                if p.records is not None:
                    assert isinstance(p.records, memoryview) and p.records.obj is body.obj


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_any_answer_reads_as_the_schema_reads_it_or_is_left_to_it(data, version):
    resp = data.draw(responses(FETCH, version))
    body = wire(resp, version)
    got = decode_fetch_response(body, version)
    expected = FETCH.decode_response(body, version)
    if got is None:
        # Only tagged fields send it to the schema decoder.
        assert version >= 12 and (expected.node_endpoints or any(
            p.diverging_epoch != _P._default_diverging_epoch() or p.current_leader != _P._default_current_leader()
            or p.snapshot_id != _P._default_snapshot_id() for t in expected.responses for p in t.partitions))
    else:
        assert plain(got) == plain(expected)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 12])
def test_tagged_fields_are_left_to_the_schema(version):
    leader = _P(partition_index=0, records=BATCH, current_leader=_P.LeaderIdAndEpoch(leader_id=2, leader_epoch=5))
    resp = FETCH.Response(responses=[topic("t", uuid.uuid4(), [leader])])
    body = wire(resp, version)
    assert decode_fetch_response(body, version) is None
    # ... and a connection still reads it, the schema's way
    conn = Connection("kafkawire-test")
    conn.broker_versions = {1: (0, FETCH.max_version)}
    cid, _chunks = conn.send(FETCH, FETCH.Request(max_wait_ms=0, min_bytes=1, topics=[]), version)
    frame = encode_response_header(cid, FETCH.response_header_version(version)) + bytes(body)
    (event,) = conn.receive_data(len(frame).to_bytes(4, "big") + frame)
    assert event.response.responses[0].partitions[0].current_leader.leader_id == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_cut_or_damaged_answers_are_left_to_the_schema(version):
    resp = list(answers(version))[2]
    body = bytes(wire(resp, version))
    for cut in range(len(body)):
        assert decode_fetch_response(memoryview(body[:cut]), version) is None
    assert decode_fetch_response(memoryview(body + b"\0"), version) is None
    # A count beyond the bytes present
    assert decode_fetch_response(memoryview(body[:10] + b"\x7f\xff\xff\xff" + body[14:]), version) is None


def test_versions_before_4_are_left_to_the_schema():
    resp = FETCH.Response(responses=[topic("t", uuid.uuid4(), [_P(partition_index=0, records=BATCH)])])
    for version in range(FIRST_VERSION):
        assert decode_fetch_response(wire(resp, version), version) is None


# -- a whole answer frame read in one call (kafkawire._frames and its twin) ----------------

from frames_impls import IMPLS, _compiled, record_reads  # noqa: E402

from kafkawire.protocol import _frames_py  # noqa: E402


def frame(resp, version: int, cid: int) -> bytes:
    out = encode_response_header(cid, FETCH.response_header_version(version)) + bytes(wire(resp, version))
    return len(out).to_bytes(4, "big") + out


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", VERSIONS)
def test_a_whole_answer_frame_reads_in_one_call_as_the_schema_reads_it(impl, version):
    for resp in answers(version):
        data = frame(resp, version, 41)
        got = impl.fetch_answer(data, 41, version)
        assert got is not None
        assert plain(got) == plain(FETCH.decode_response(wire(resp, version), version))
        for t in got.responses:
            for p in t.partitions:
                if p.records is not None:  # views of the frame, never copies
                    assert isinstance(p.records, memoryview) and p.records.obj is data and p.records.readonly
        # not this request's, not whole, more than one frame, not bytes, an older version
        assert impl.fetch_answer(data, 42, version) is None
        assert impl.fetch_answer(data[:-1], 41, version) is None
        assert impl.fetch_answer(data + data, 41, version) is None
        assert impl.fetch_answer(bytearray(data), 41, version) is None
    assert impl.fetch_answer(frame(FETCH.Response(responses=[]), 3, 41), 41, 3) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_any_answer_frame_reads_alike_in_both_forms(data, version):
    resp = data.draw(responses(FETCH, version))
    whole = frame(resp, version, 7)
    got = [impl.fetch_answer(whole, 7, version) for impl in (_frames_py, _compiled) if impl is not None]
    got = [None if g is None else plain(g) for g in got]
    assert got[0] == got[-1]
    if got[0] is not None:
        assert got[0] == plain(FETCH.decode_response(wire(resp, version), version))


@pytest.mark.skipif(_compiled is None, reason="kafkawire._frames is not built")
@pytest.mark.parametrize("version", VERSIONS)
def test_the_compiled_reader_agrees_with_its_twin_on_damaged_frames(version):
    # Every truncation and single-byte change of a good frame: no crash, and the same
    # objects or the same refusal from both.
    import random

    rng = random.Random(version)
    good = frame(list(answers(version))[2], version, 5)
    damaged = [good[:n] for n in range(len(good))]
    for at in list(range(min(len(good), 120))) + rng.sample(range(len(good)), 60):
        for value in {0, 1, 2, 0x7F, 0x80, 0xFF, rng.randrange(256)}:
            damaged.append(good[:at] + bytes([value]) + good[at + 1:])
    for data in damaged:
        got = [impl.fetch_answer(data, 5, version) for impl in (_compiled, _frames_py)]
        assert [None if g is None else plain(g) for g in got] == [None if g is None else plain(g) for g in got[::-1]]


@pytest.mark.skipif(_compiled is None, reason="kafkawire._frames is not built")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_a_body_read_in_c_is_what_the_direct_reader_makes(data, version):
    # fetch_body: an answer that came in several reads (a broker writes the records apart).
    resp = data.draw(responses(FETCH, version))
    body = wire(resp, version)
    got, expected = _compiled.fetch_body(body, version), decode_fetch_response(body, version)
    assert (got is None) == (expected is None)
    if got is not None:
        assert plain(got) == plain(expected)
        assert all(p.records is None or p.records.obj is body.obj for t in got.responses for p in t.partitions)
    cut = bytes(body)[:data.draw(st.integers(0, len(body)))]
    got, expected = _compiled.fetch_body(memoryview(cut), version), decode_fetch_response(memoryview(cut), version)
    assert (None if got is None else plain(got)) == (None if expected is None else plain(expected))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_connection_reads_a_fetch_answer_in_one_call(version, monkeypatch):
    read = record_reads(monkeypatch, "fetch_answer")
    conn = Connection("kafkawire-test")
    conn.broker_versions = {1: (0, FETCH.max_version)}
    cid, _chunks = conn.send(FETCH, FETCH.Request(max_wait_ms=0, min_bytes=1, topics=[]), version)
    resp = list(answers(version))[1]
    (event,) = conn.receive_data(frame(resp, version, cid))
    assert len(read) == 1 and read[0] is not None
    assert event.correlation_id == cid and plain(event.response) == plain(FETCH.decode_response(wire(resp, version),
                                                                                                 version))
    # The same answer in two reads (a broker writes the records apart): the whole frame's reader.
    cid, _chunks = conn.send(FETCH, FETCH.Request(max_wait_ms=0, min_bytes=1, topics=[]), version)
    data = frame(resp, version, cid)
    assert conn.receive_data(data[:20]) == []
    (event,) = conn.receive_data(data[20:])
    assert len(read) == 2 and plain(event.response) == plain(FETCH.decode_response(wire(resp, version), version))
