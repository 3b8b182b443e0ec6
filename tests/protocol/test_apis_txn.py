"""Declarations of the transaction APIs (apis/txn.py): AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26) and TxnOffsetCommit (28).

- Golden frames spelled out field by field (wirebytes.py shares no code with kafkawire),
  for the first version, the first flexible version and each version that changes a layout.
- Round trips of every version, over instances drawn from the declarations.
- A cross-check against kafka-python 3's codec (generated from Kafka's own message
  definitions): it decodes kafkawire's bytes and encodes them again identically.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import plain, requests, responses
from wirebytes import NO_TAGS, arr, carr, cs, i8, i16, i32, i64, s

from kafkawire.protocol import apis
from kafkawire.protocol.api import ApiVersionError
from kafkawire.protocol.apis.txn import ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT
from kafkawire.protocol.headers import (
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)

# name -> (key, (min, max), first flexible version)
EXPECTED = {
    "AddPartitionsToTxn": (24, (0, 5), 3),
    "AddOffsetsToTxn": (25, (0, 4), 3),
    "EndTxn": (26, (0, 5), 3),
    "TxnOffsetCommit": (28, (0, 5), 3),
}
ALL = [ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT]
API_VERSIONS = [(api, v) for api in ALL for v in range(api.min_version, api.max_version + 1)]
IDS = [f"{a.name}-v{v}" for a, v in API_VERSIONS]

APT = ADD_PARTITIONS_TO_TXN
TOC = TXN_OFFSET_COMMIT


def body(api, obj, version: int, response: bool = False) -> bytes:
    return (api.encode_response if response else api.encode_request)(obj, version).getvalue()


# ---------------------------------------------------------------------------------------
# Registry, versions and headers.
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_registered_with_key_versions_and_flexible_version(name: str) -> None:
    key, versions, flexible_from = EXPECTED[name]
    api = apis.get(name)
    assert apis.get(key) is api
    assert (api.key, (api.min_version, api.max_version), api.flexible_from) == (key, versions, flexible_from)


@pytest.mark.parametrize("api,version", API_VERSIONS, ids=IDS)
def test_header_versions(api, version: int) -> None:
    flexible = version >= 3
    assert api.request_header_version(version) == (2 if flexible else 1)
    assert api.response_header_version(version) == (1 if flexible else 0)


@pytest.mark.parametrize("api", ALL, ids=lambda a: a.name)
def test_versions_outside_the_range_are_refused(api) -> None:
    with pytest.raises(ApiVersionError, match=api.name):
        api.encode_request(api.Request(), api.max_version + 1)
    with pytest.raises(ApiVersionError, match=api.name):
        api.decode_response(b"", api.max_version + 1)


# ---------------------------------------------------------------------------------------
# Golden frames.
# ---------------------------------------------------------------------------------------

def _apt_request():
    T = APT.Request.AddPartitionsToTxnTopic
    return APT.Request(v3_and_below_transactional_id="tx", v3_and_below_producer_id=7,
                       v3_and_below_producer_epoch=2, v3_and_below_topics=[T(name="t", partitions=[0, 3])])


def test_add_partitions_to_txn_v0_to_v3_request_golden() -> None:
    req = _apt_request()
    classic = s("tx") + i64(7) + i16(2) + arr([s("t") + arr([i32(0), i32(3)])])
    for v in (0, 1, 2):  # v1 and v2 only allow new error codes
        assert body(APT, req, v) == classic
    assert body(APT, req, 3) == cs("tx") + i64(7) + i16(2) + carr([cs("t") + carr([i32(0), i32(3)]) + NO_TAGS]) + NO_TAGS
    # The batched fields do not exist below v4, and are left out.
    assert APT.decode_request(classic, 0).transactions == []


def test_add_partitions_to_txn_v4_is_the_brokers_batched_form() -> None:
    Tx = APT.Request.AddPartitionsToTxnTransaction
    T = Tx.AddPartitionsToTxnTopic
    req = APT.Request(transactions=[
        Tx(transactional_id="a", producer_id=1, producer_epoch=0, verify_only=True, topics=[T(name="t", partitions=[2])]),
        Tx(transactional_id="b", producer_id=2, producer_epoch=5, verify_only=False, topics=[]),
    ])
    want = carr([
        cs("a") + i64(1) + i16(0) + i8(1) + carr([cs("t") + carr([i32(2)]) + NO_TAGS]) + NO_TAGS,
        cs("b") + i64(2) + i16(5) + i8(0) + carr([]) + NO_TAGS,
    ]) + NO_TAGS
    assert body(APT, req, 4) == want == body(APT, req, 5)
    # Nothing of the v3-and-below fields travels in v4.
    assert body(APT, _apt_request(), 4) == carr([]) + NO_TAGS


def test_add_partitions_to_txn_responses_golden() -> None:
    R = APT.Response.AddPartitionsToTxnTopicResult
    P = R.AddPartitionsToTxnPartitionResult
    results = [R(name="t", results_by_partition=[P(partition_index=0, partition_error_code=0),
                                                  P(partition_index=3, partition_error_code=48)])]
    resp = APT.Response(throttle_time_ms=5, results_by_topic_v3_and_below=results)
    partitions = [i32(0) + i16(0), i32(3) + i16(48)]
    assert body(APT, resp, 0, True) == i32(5) + arr([s("t") + arr(partitions)])
    assert body(APT, resp, 3, True) == i32(5) + carr([cs("t") + carr([p + NO_TAGS for p in partitions]) + NO_TAGS]) + NO_TAGS
    Tx = APT.Response.AddPartitionsToTxnResult
    v4 = APT.Response(throttle_time_ms=0, error_code=0,
                      results_by_transaction=[Tx(transactional_id="a", topic_results=results)])
    assert body(APT, v4, 4, True) == i32(0) + i16(0) + carr([
        cs("a") + carr([cs("t") + carr([p + NO_TAGS for p in partitions]) + NO_TAGS]) + NO_TAGS]) + NO_TAGS


def test_add_offsets_to_txn_golden() -> None:
    req = ADD_OFFSETS_TO_TXN.Request(transactional_id="tx", producer_id=7, producer_epoch=2, group_id="g")
    assert body(ADD_OFFSETS_TO_TXN, req, 0) == s("tx") + i64(7) + i16(2) + s("g")
    assert body(ADD_OFFSETS_TO_TXN, req, 3) == cs("tx") + i64(7) + i16(2) + cs("g") + NO_TAGS
    resp = ADD_OFFSETS_TO_TXN.Response(throttle_time_ms=1, error_code=47)
    assert body(ADD_OFFSETS_TO_TXN, resp, 0, True) == i32(1) + i16(47)
    assert body(ADD_OFFSETS_TO_TXN, resp, 4, True) == i32(1) + i16(47) + NO_TAGS


def test_end_txn_golden_and_v5_returns_the_next_producer_epoch() -> None:
    req = END_TXN.Request(transactional_id="tx", producer_id=7, producer_epoch=2, committed=False)
    assert body(END_TXN, req, 0) == s("tx") + i64(7) + i16(2) + i8(0)
    assert body(END_TXN, req, 5) == cs("tx") + i64(7) + i16(2) + i8(0) + NO_TAGS
    resp = END_TXN.Response(throttle_time_ms=0, error_code=0, producer_id=7, producer_epoch=3)
    assert body(END_TXN, resp, 4, True) == i32(0) + i16(0) + NO_TAGS
    assert body(END_TXN, resp, 5, True) == i32(0) + i16(0) + i64(7) + i16(3) + NO_TAGS
    old = END_TXN.decode_response(i32(0) + i16(0), 1)
    assert (old.producer_id, old.producer_epoch) == (-1, -1)


def test_txn_offset_commit_golden_across_versions() -> None:
    T = TOC.Request.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    req = TOC.Request(transactional_id="tx", group_id="g", producer_id=7, producer_epoch=2,
                      generation_id_or_member_epoch=4, member_id="m", group_instance_id=None,
                      topics=[T(name="t", partitions=[P(partition_index=1, committed_offset=100,
                                                        committed_leader_epoch=9, committed_metadata=None)])])
    head = s("tx") + s("g") + i64(7) + i16(2)
    part = i32(1) + i64(100)
    assert body(TOC, req, 0) == head + arr([s("t") + arr([part + i16(-1)])])
    assert body(TOC, req, 1) == body(TOC, req, 0)
    assert body(TOC, req, 2) == head + arr([s("t") + arr([part + i32(9) + i16(-1)])])  # KIP-320
    v3 = (cs("tx") + cs("g") + i64(7) + i16(2) + i32(4) + cs("m") + cs(None)
          + carr([cs("t") + carr([part + i32(9) + cs(None) + NO_TAGS]) + NO_TAGS]) + NO_TAGS)
    assert body(TOC, req, 3) == v3 == body(TOC, req, 4) == body(TOC, req, 5)
    RT = TOC.Response.TxnOffsetCommitResponseTopic
    resp = TOC.Response(throttle_time_ms=0, topics=[RT(name="t", partitions=[
        RT.TxnOffsetCommitResponsePartition(partition_index=1, error_code=0)])])
    assert body(TOC, resp, 0, True) == i32(0) + arr([s("t") + arr([i32(1) + i16(0)])])
    assert body(TOC, resp, 3, True) == i32(0) + carr([cs("t") + carr([i32(1) + i16(0) + NO_TAGS]) + NO_TAGS]) + NO_TAGS


# ---------------------------------------------------------------------------------------
# Round trips over instances drawn from the declarations.
# ---------------------------------------------------------------------------------------

ROUND_TRIP = settings(max_examples=15, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("api,version", API_VERSIONS, ids=IDS)
@ROUND_TRIP
@given(data=st.data())
def test_request_round_trip(api, version: int, data: st.DataObject) -> None:
    req = data.draw(requests(api, version))
    frame = encode_request_header(api.key, version, 321, "kafkawire", api.request_header_version(version))
    frame += api.encode_request(req, version).getvalue()
    key, got_version, corr, client_id, pos = decode_request_header(frame, api.request_header_version(version))
    assert (key, got_version, corr, client_id) == (api.key, version, 321, "kafkawire")
    back = api.decode_request(memoryview(frame)[pos:], version)
    assert plain(back) == plain(req)
    assert api.encode_request(back, version).getvalue() == frame[pos:]


@pytest.mark.parametrize("api,version", API_VERSIONS, ids=IDS)
@ROUND_TRIP
@given(data=st.data())
def test_response_round_trip(api, version: int, data: st.DataObject) -> None:
    resp = data.draw(responses(api, version))
    frame = encode_response_header(-9, api.response_header_version(version)) + api.encode_response(resp, version).getvalue()
    corr, pos = decode_response_header(frame, api.response_header_version(version))
    assert corr == -9
    back = api.decode_response(memoryview(frame)[pos:], version)
    assert plain(back) == plain(resp)
    assert api.encode_response(back, version).getvalue() == frame[pos:]


# ---------------------------------------------------------------------------------------
# Cross-check with kafka-python 3's codec, generated from Kafka's message definitions.
# ---------------------------------------------------------------------------------------

try:
    with warnings.catch_warnings():  # its loader uses importlib.resources APIs deprecated in 3.11
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.producer import transaction as _kp

    PEER = {
        "AddPartitionsToTxn": (_kp.AddPartitionsToTxnRequest, _kp.AddPartitionsToTxnResponse),
        "AddOffsetsToTxn": (_kp.AddOffsetsToTxnRequest, _kp.AddOffsetsToTxnResponse),
        "EndTxn": (_kp.EndTxnRequest, _kp.EndTxnResponse),
        "TxnOffsetCommit": (_kp.TxnOffsetCommitRequest, _kp.TxnOffsetCommitResponse),
    }
except ImportError:  # kafka-python 2.x has no such codec
    PEER = {}

PEER_CASES = [
    (api, v, side)
    for api in ALL if api.name in PEER
    for side in (0, 1)
    for v in range(max(api.min_version, PEER[api.name][side].min_version),
                   min(api.max_version, PEER[api.name][side].max_version) + 1)
]


def test_the_peer_declares_the_same_versions() -> None:
    if not PEER:
        pytest.fail("kafka-python >= 3 is installed in this project's venv; its codec is the cross-check")
    for api in ALL:
        for cls in PEER[api.name]:
            assert (cls.min_version, cls.max_version) == (api.min_version, api.max_version), cls


@pytest.mark.parametrize("api,version,side", PEER_CASES,
                         ids=[f"{a.name}-v{v}-{'req' if s_ == 0 else 'resp'}" for a, v, s_ in PEER_CASES])
@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_kafka_python_reencodes_our_bytes_exactly(api, version: int, side: int, data: st.DataObject) -> None:
    peer = PEER[api.name][side]
    if side == 0:
        frame = encode_request_header(api.key, version, 77, "kw", api.request_header_version(version))
        frame += api.encode_request(data.draw(requests(api, version)), version).getvalue()
        again = peer.decode(frame, version=version, header=True).encode(version=version, header=True)
    else:
        hdr = encode_response_header(77, api.response_header_version(version))
        payload = api.encode_response(data.draw(responses(api, version)), version).getvalue()
        frame = hdr + payload
        obj = peer.decode(payload, version=version)
        obj._header = None  # decoded without a header; encode() looks for one
        again = hdr + bytes(obj.encode(version=version))
    assert bytes(again) == frame
