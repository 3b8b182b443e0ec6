"""Declarations of the data-path, admin and SASL APIs (apis/data.py, admin.py, sasl.py).

- Golden frames for the v0 requests and responses drawn in spec/000_* and spec/003_*
  (Produce, Fetch, and the "Offset API", which Kafka later named ListOffsets), spelled out
  field by field with their request/response header, plus a few flexible-version frames
  (compact types, tagged fields) spelled out the same way.
- Round trips of every declared API x version, over instances drawn from the declarations.
- A cross-check against an independent implementation (kafka-python 3's codec, generated
  from Kafka's own message definitions): its decoder re-encodes kafkawire's bytes exactly.
- Zero-copy: Fetch records are views of the buffer passed in; Produce records are sent as
  the very object the caller gave.
"""

from __future__ import annotations

import struct
import uuid
import warnings
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import plain, requests, responses
from wirebytes import cs as cstring
from wirebytes import i8, i16, i32, i64, uvarint
from wirebytes import s as string

from kafkawire.protocol import apis
from kafkawire.protocol.api import ApiVersionError
from kafkawire.protocol.apis.admin import (
    ALTER_CONFIGS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID,
)
from kafkawire.protocol.apis.groups import OFFSET_DELETE
from kafkawire.protocol.apis.data import FETCH, LIST_OFFSETS, PRODUCE
from kafkawire.protocol.apis.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kafkawire.protocol.headers import (
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from kafkawire.protocol.schema import Struct

# name -> (key, (min, max), first flexible version)
EXPECTED = {
    "Produce": (0, (0, 11), 9),
    "Fetch": (1, (0, 17), 12),
    "ListOffsets": (2, (0, 9), 6),
    "SaslHandshake": (17, (0, 1), None),
    "CreateTopics": (19, (0, 7), 5),
    "DeleteTopics": (20, (0, 6), 4),
    "DeleteRecords": (21, (0, 2), 2),
    "InitProducerId": (22, (0, 5), 2),
    "DescribeConfigs": (32, (0, 4), 4),
    "AlterConfigs": (33, (0, 2), 2),
    "SaslAuthenticate": (36, (0, 2), 2),
    "CreatePartitions": (37, (0, 3), 2),
    "IncrementalAlterConfigs": (44, (0, 1), 1),
    "OffsetDelete": (47, (0, 0), None),
}
ALL = [PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS,
       INIT_PRODUCER_ID, SASL_HANDSHAKE, SASL_AUTHENTICATE, DELETE_RECORDS, ALTER_CONFIGS,
       CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE]
API_VERSIONS = [(api, v) for api in ALL for v in range(api.min_version, api.max_version + 1)]


def _id(p: object) -> str:
    return p.name if hasattr(p, "name") else str(p)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# Frames written field by field (primitives in wirebytes.py); no code shared with kafkawire.
# ---------------------------------------------------------------------------------------

def message_set_v0(offset: int, key: bytes | None, value: bytes) -> bytes:
    """One magic-0 message in a MessageSet (spec/000: Offset MessageSize Message)."""
    body = i8(0) + i8(0)  # MagicByte, Attributes
    body += i32(-1) if key is None else i32(len(key)) + key
    body += i32(len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return i64(offset) + i32(len(message)) + message


MESSAGE_SET = message_set_v0(0, None, b"hello")
TOPIC_ID = uuid.UUID(bytes=bytes(range(1, 17)))


def request_frame(api, req: Struct, version: int, correlation_id: int, client_id: str | None) -> bytes:
    hdr = encode_request_header(api.key, version, correlation_id, client_id, api.request_header_version(version))
    return hdr + api.encode_request(req, version).getvalue()


def response_frame(api, resp: Struct, version: int, correlation_id: int) -> bytes:
    hdr = encode_response_header(correlation_id, api.response_header_version(version))
    return hdr + api.encode_response(resp, version).getvalue()


# ---------------------------------------------------------------------------------------
# Registry, versions and headers.
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_registered_with_key_versions_and_flexible_version(name: str) -> None:
    key, versions, flexible_from = EXPECTED[name]
    api = apis.get(name)
    assert apis.get(key) is api
    assert (api.key, (api.min_version, api.max_version), api.flexible_from) == (key, versions, flexible_from)


@pytest.mark.parametrize("api,version", API_VERSIONS, ids=[f"{a.name}-v{v}" for a, v in API_VERSIONS])
def test_header_versions(api, version: int) -> None:
    flexible_from = EXPECTED[api.name][2]
    flexible = flexible_from is not None and version >= flexible_from
    assert api.request_header_version(version) == (2 if flexible else 1)
    assert api.response_header_version(version) == (1 if flexible else 0)
    # Request header v2 ends in an empty tag buffer after the (non-compact) client id.
    hdr = encode_request_header(api.key, version, 9, "kw", api.request_header_version(version))
    assert hdr == i16(api.key) + i16(version) + i32(9) + string("kw") + (b"\x00" if flexible else b"")
    assert encode_response_header(9, api.response_header_version(version)) == i32(9) + (b"\x00" if flexible else b"")


@pytest.mark.parametrize("api", ALL, ids=_id)
def test_versions_outside_the_range_are_refused(api) -> None:
    with pytest.raises(ApiVersionError, match=api.name):
        api.encode_request(api.Request(), api.max_version + 1)
    with pytest.raises(ApiVersionError, match=api.name):
        api.decode_response(b"", api.max_version + 1)


# ---------------------------------------------------------------------------------------
# Golden v0 frames from the spec documents.
# ---------------------------------------------------------------------------------------

def test_message_set_helper_matches_the_spec_layout() -> None:
    # Offset 8 + MessageSize 4 + Crc 4 + MagicByte 1 + Attributes 1 + Key 4 (null) + Value 4+5
    assert len(MESSAGE_SET) == 8 + 4 + 4 + 1 + 1 + 4 + 4 + 5
    assert MESSAGE_SET[8:12] == i32(19)


def test_produce_v0_request_golden() -> None:
    # ProduceRequest => RequiredAcks Timeout [TopicName [Partition MessageSetSize MessageSet]]
    golden = (
        i16(0) + i16(0) + i32(7) + string("kw")  # ApiKey Produce, ApiVersion, CorrelationId, ClientId
        + i16(1)  # RequiredAcks: the leader's own write
        + i32(1500)  # Timeout (ms)
        + i32(1) + string("events")  # [TopicName]
        + i32(1) + i32(3)  # [Partition]
        + i32(len(MESSAGE_SET)) + MESSAGE_SET  # MessageSetSize MessageSet
    )
    P = PRODUCE.Request
    req = P(acks=1, timeout_ms=1500, topic_data=[
        P.TopicProduceData(name="events", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=3, records=MESSAGE_SET)]),
    ])
    assert request_frame(PRODUCE, req, 0, 7, "kw") == golden

    key, version, corr, client_id, pos = decode_request_header(golden, PRODUCE.request_header_version(0))
    assert (key, version, corr, client_id, pos) == (0, 0, 7, "kw", 12)
    back = PRODUCE.decode_request(memoryview(golden)[pos:], 0)
    assert plain(back) == plain(req)
    assert back.transactional_id is None  # v3+ only


def test_produce_v0_response_golden() -> None:
    # ProduceResponse => [TopicName [Partition ErrorCode Offset]]
    golden = (
        i32(7)  # CorrelationId
        + i32(1) + string("events")
        + i32(2) + i32(3) + i16(0) + i64(1234) + i32(4) + i16(6) + i64(-1)  # 6: NotLeaderForPartition
    )
    resp = PRODUCE.decode_response(golden[4:], 0)
    assert decode_response_header(golden, PRODUCE.response_header_version(0)) == (7, 4)
    topic = resp.responses[0]
    assert topic.name == "events"
    assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [(3, 0, 1234), (4, 6, -1)]
    # Fields of later versions keep their defaults.
    assert resp.throttle_time_ms == 0 and topic.partition_responses[0].log_append_time_ms == -1
    assert response_frame(PRODUCE, resp, 0, 7) == golden


def test_fetch_v0_request_golden() -> None:
    # FetchRequest => ReplicaId MaxWaitTime MinBytes [TopicName [Partition FetchOffset MaxBytes]]
    golden = (
        i16(1) + i16(0) + i32(8) + string("kw")
        + i32(-1)  # ReplicaId: -1 for a consumer
        + i32(100)  # MaxWaitTime
        + i32(1)  # MinBytes
        + i32(1) + string("events")
        + i32(1) + i32(3) + i64(42) + i32(1 << 20)  # Partition FetchOffset MaxBytes
    )
    F = FETCH.Request
    req = F(max_wait_ms=100, min_bytes=1, topics=[
        F.FetchTopic(topic="events", partitions=[
            F.FetchTopic.FetchPartition(partition=3, fetch_offset=42, partition_max_bytes=1 << 20)]),
    ])
    assert req.replica_id == -1
    assert request_frame(FETCH, req, 0, 8, "kw") == golden
    *_, pos = decode_request_header(golden, 1)
    assert FETCH.decode_request(golden[pos:], 0) == req


def test_fetch_v0_response_golden() -> None:
    # FetchResponse => [TopicName [Partition ErrorCode HighwaterMarkOffset MessageSetSize MessageSet]]
    # (spec/000 also names a "FetchedOffset" it never defines; spec/003 and the wire have none.)
    golden = (
        i32(8)
        + i32(1) + string("events")
        + i32(1) + i32(3) + i16(0) + i64(1) + i32(len(MESSAGE_SET)) + MESSAGE_SET
    )
    resp = FETCH.decode_response(memoryview(golden)[4:], 0)
    part = resp.responses[0].partitions[0]
    assert resp.responses[0].topic == "events"
    assert (part.partition_index, part.error_code, part.high_watermark) == (3, 0, 1)
    assert isinstance(part.records, memoryview) and bytes(part.records) == MESSAGE_SET
    assert part.aborted_transactions == [] and part.last_stable_offset == -1
    assert response_frame(FETCH, resp, 0, 8) == golden


def test_fetch_response_with_a_partial_trailing_message_keeps_every_byte() -> None:
    # MessageSetSize counts a last message cut short by MaxBytes; the layer passes it through.
    cut = MESSAGE_SET + MESSAGE_SET[:10]
    body = i32(1) + string("t") + i32(1) + i32(0) + i16(0) + i64(2) + i32(len(cut)) + cut
    part = FETCH.decode_response(body, 0).responses[0].partitions[0]
    assert bytes(part.records) == cut


def test_list_offsets_v0_request_golden() -> None:
    # OffsetRequest => ReplicaId [TopicName [Partition Time MaxNumberOfOffsets]]
    # (spec/003 and the wire carry ReplicaId; spec/000's drawing leaves it out.)
    golden = (
        i16(2) + i16(0) + i32(9) + string("kw")
        + i32(-1)
        + i32(1) + string("events")
        + i32(1) + i32(3) + i64(-2) + i32(1)  # Time -2: earliest; MaxNumberOfOffsets 1
    )
    L = LIST_OFFSETS.Request
    # A client is replica -1; Kafka's definition defaults replica_id to 0, a broker's id.
    req = L(replica_id=-1, topics=[L.ListOffsetsTopic(name="events", partitions=[
        L.ListOffsetsTopic.ListOffsetsPartition(partition_index=3, timestamp=-2)])])
    assert request_frame(LIST_OFFSETS, req, 0, 9, "kw") == golden
    assert LIST_OFFSETS.decode_request(golden[12:], 0) == req
    # v1 drops MaxNumberOfOffsets (KIP-79).
    assert LIST_OFFSETS.encode_request(req, 1).getvalue() == golden[12:-4]


def test_list_offsets_v0_response_golden() -> None:
    # OffsetResponse => [TopicName [PartitionOffsets]]; PartitionOffsets => Partition ErrorCode [Offset]
    golden = (
        i32(9)
        + i32(1) + string("events")
        + i32(1) + i32(3) + i16(0) + i32(2) + i64(57) + i64(0)
    )
    resp = LIST_OFFSETS.decode_response(golden[4:], 0)
    part = resp.topics[0].partitions[0]
    assert (part.partition_index, part.error_code, part.old_style_offsets) == (3, 0, [57, 0])
    assert (part.timestamp, part.offset) == (-1, -1)  # v1+ fields keep their defaults
    assert response_frame(LIST_OFFSETS, resp, 0, 9) == golden


# ---------------------------------------------------------------------------------------
# Golden flexible frames (compact types, tagged fields), spelled out from the guide.
# ---------------------------------------------------------------------------------------

def test_fetch_v13_request_golden_uses_topic_ids() -> None:
    F = FETCH.Request
    req = F(max_wait_ms=500, min_bytes=1, max_bytes=0x03200000, isolation_level=1, topics=[
        F.FetchTopic(topic="ignored from v13", topic_id=TOPIC_ID, partitions=[
            F.FetchTopic.FetchPartition(partition=0, current_leader_epoch=5, fetch_offset=42,
                                        partition_max_bytes=1 << 20)]),
    ])
    golden = (
        i16(1) + i16(13) + i32(10) + string("kw") + b"\x00"  # header v2: empty tag buffer
        + i32(-1) + i32(500) + i32(1) + i32(0x03200000) + i8(1)  # replica_id .. isolation_level
        + i32(0) + i32(-1)  # session_id, session_epoch
        + uvarint(2) + TOPIC_ID.bytes  # one topic, by id only
        + uvarint(2) + i32(0) + i32(5) + i64(42) + i32(-1) + i64(-1) + i32(1 << 20) + b"\x00"
        + b"\x00"  # topic tags
        + uvarint(1)  # forgotten_topics_data: empty
        + cstring("")  # rack_id
        + b"\x00"  # no tagged fields (cluster_id is null, replica_state default)
    )
    assert request_frame(FETCH, req, 13, 10, "kw") == golden
    back = FETCH.decode_request(golden[13:], 13)
    assert back.topics[0].topic == "" and back.topics[0].topic_id == TOPIC_ID


def test_fetch_v15_request_tagged_replica_state_and_cluster_id() -> None:
    F = FETCH.Request
    req = F(cluster_id="c1", replica_state=F.ReplicaState(replica_id=3, replica_epoch=9))
    body = FETCH.encode_request(req, 15).getvalue()
    tags = (
        uvarint(2)
        + uvarint(0) + uvarint(3) + cstring("c1")  # tag 0: cluster_id
        + uvarint(1) + uvarint(13) + i32(3) + i64(9) + b"\x00"  # tag 1: replica_state, own tag buffer
    )
    # v15 has no plain replica_id: the body starts at max_wait_ms.
    assert body == i32(0) * 2 + i32(0x7FFFFFFF) + i8(0) + i32(0) + i32(-1) + b"\x01\x01" + cstring("") + tags
    assert FETCH.decode_request(body, 15) == req
    # Tagged fields are left out of non-flexible versions.
    assert FETCH.encode_request(req, 11).getvalue()[:4] == i32(-1)


def test_fetch_v16_response_golden_with_leader_hint_and_node_endpoints() -> None:
    R = FETCH.Response
    PD = R.FetchableTopicResponse.PartitionData
    resp = R(
        responses=[R.FetchableTopicResponse(topic_id=TOPIC_ID, partitions=[
            PD(partition_index=0, error_code=6, high_watermark=-1, aborted_transactions=None,
               current_leader=PD.LeaderIdAndEpoch(leader_id=2, leader_epoch=7), records=None)])],
        node_endpoints=[R.NodeEndpoint(node_id=2, host="b2", port=9092)],
    )
    endpoints = uvarint(2) + i32(2) + cstring("b2") + i32(9092) + cstring(None) + b"\x00"
    golden = (
        i32(11) + b"\x00"  # response header v1
        + i32(0) + i16(0) + i32(0)  # throttle_time_ms, error_code, session_id
        + uvarint(2) + TOPIC_ID.bytes
        + uvarint(2) + i32(0) + i16(6) + i64(-1) + i64(-1) + i64(-1)
        + b"\x00"  # aborted_transactions: null
        + i32(-1)  # preferred_read_replica
        + b"\x00"  # records: null
        # tag 1: current_leader, a struct with its own (empty) tag buffer
        + uvarint(1) + uvarint(1) + uvarint(9) + i32(2) + i32(7) + b"\x00"
        + b"\x00"  # topic tags
        + uvarint(1) + uvarint(0) + uvarint(len(endpoints)) + endpoints  # tag 0: node_endpoints
    )
    assert response_frame(FETCH, resp, 16, 11) == golden
    assert FETCH.decode_response(golden[5:], 16) == resp


def test_produce_v9_request_golden() -> None:
    P = PRODUCE.Request
    req = P(transactional_id="tx", acks=-1, timeout_ms=30000, topic_data=[
        P.TopicProduceData(name="t", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=1, records=b"BATCH")])])
    golden = (
        cstring("tx") + i16(-1) + i32(30000)
        + uvarint(2) + cstring("t") + uvarint(2) + i32(1) + uvarint(6) + b"BATCH" + b"\x00" + b"\x00"
        + b"\x00"
    )
    assert PRODUCE.encode_request(req, 9).getvalue() == golden
    # v3-v8 use the classic nullable string and int32 sizes.
    assert PRODUCE.encode_request(req, 3).getvalue()[:4] == string("tx")


def test_delete_topics_v6_request_names_or_ids() -> None:
    D = DELETE_TOPICS.Request
    req = D(topics=[D.DeleteTopicState(name="old"), D.DeleteTopicState(topic_id=TOPIC_ID)],
            topic_names=["ignored from v6"], timeout_ms=5000)
    golden = (
        uvarint(3)
        + cstring("old") + bytes(16) + b"\x00"
        + cstring(None) + TOPIC_ID.bytes + b"\x00"
        + i32(5000) + b"\x00"
    )
    assert DELETE_TOPICS.encode_request(req, 6).getvalue() == golden
    # v0-v5 send topic_names instead.
    assert DELETE_TOPICS.encode_request(req, 0).getvalue() == i32(1) + string("ignored from v6") + i32(5000)


def test_sasl_frames() -> None:
    assert SASL_HANDSHAKE.encode_request(SASL_HANDSHAKE.Request(mechanism="PLAIN"), 1).getvalue() == string("PLAIN")
    body = i16(33) + i32(2) + string("SCRAM-SHA-256") + string("SCRAM-SHA-512")
    resp = SASL_HANDSHAKE.decode_response(body, 0)
    assert (resp.error_code, resp.mechanisms) == (33, ["SCRAM-SHA-256", "SCRAM-SHA-512"])

    token = b"\x00user\x00secret"
    assert SASL_AUTHENTICATE.encode_request(SASL_AUTHENTICATE.Request(auth_bytes=token), 0).getvalue() == (
        i32(len(token)) + token)
    assert SASL_AUTHENTICATE.encode_request(SASL_AUTHENTICATE.Request(auth_bytes=token), 2).getvalue() == (
        uvarint(len(token) + 1) + token + b"\x00")
    body = i16(0) + cstring(None) + uvarint(1) + i64(3_600_000) + b"\x00"
    resp = SASL_AUTHENTICATE.decode_response(body, 2)
    assert (resp.error_code, resp.error_message, resp.auth_bytes, resp.session_lifetime_ms) == (0, None, b"", 3_600_000)


def test_create_topics_v5_response_tagged_config_error_and_null_configs() -> None:
    R = CREATE_TOPICS.Response
    body = (
        i32(0) + uvarint(2)
        + cstring("t") + i16(0) + cstring(None) + i32(3) + i16(1)
        + b"\x00"  # configs: null
        + uvarint(1) + uvarint(0) + uvarint(2) + i16(29)  # tag 0: topic_config_error_code
        + b"\x00"
    )
    resp = CREATE_TOPICS.decode_response(body, 5)
    topic = resp.topics[0]
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("t", 3, 1)
    assert topic.configs is None and topic.topic_config_error_code == 29
    assert topic.topic_id == uuid.UUID(int=0)  # v7+
    assert CREATE_TOPICS.encode_response(resp, 5).getvalue() == body
    assert isinstance(topic, R.CreatableTopicResult)


def test_describe_configs_v0_is_default_becomes_config_source_in_v1() -> None:
    R = DESCRIBE_CONFIGS.Response
    C = R.DescribeConfigsResult.DescribeConfigsResourceResult
    resp = R(results=[R.DescribeConfigsResult(resource_type=2, resource_name="t", configs=[
        C(name="retention.ms", value=None, read_only=False, is_default=True, config_source=5)])])
    common = i32(0) + i32(1) + i16(0) + i16(-1) + i8(2) + string("t") + i32(1) + string("retention.ms") + i16(-1)
    assert DESCRIBE_CONFIGS.encode_response(resp, 0).getvalue() == common + b"\x00\x01\x00"
    assert DESCRIBE_CONFIGS.encode_response(resp, 1).getvalue() == common + b"\x00\x05\x00" + i32(0)


def test_init_producer_id_v3_bumps_an_existing_producer() -> None:
    req = INIT_PRODUCER_ID.Request(transactional_id=None, transaction_timeout_ms=60000,
                                   producer_id=1000, producer_epoch=4)
    assert INIT_PRODUCER_ID.encode_request(req, 2).getvalue() == b"\x00" + i32(60000) + b"\x00"
    assert INIT_PRODUCER_ID.encode_request(req, 3).getvalue() == b"\x00" + i32(60000) + i64(1000) + i16(4) + b"\x00"
    assert INIT_PRODUCER_ID.encode_request(req, 1).getvalue() == i16(-1) + i32(60000)


# ---------------------------------------------------------------------------------------
# Round trips over instances drawn from the declarations.
# ---------------------------------------------------------------------------------------

def _records_fields(obj: Struct):
    """Every (field name, value) of type records in ``obj``, recursively."""
    for f in obj._fields:
        value = getattr(obj, f.name)
        if f.type == "records":
            yield f.name, value
        elif f.type == "struct" and value is not None:
            for item in value if f.array else [value]:
                yield from _records_fields(item)


ROUND_TRIP = settings(max_examples=15, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("api,version", API_VERSIONS, ids=[f"{a.name}-v{v}" for a, v in API_VERSIONS])
@ROUND_TRIP
@given(data=st.data())
def test_request_round_trip(api, version: int, data: st.DataObject) -> None:
    req = data.draw(requests(api, version))
    frame = request_frame(api, req, version, 123, "kafkawire")
    key, got_version, corr, client_id, pos = decode_request_header(frame, api.request_header_version(version))
    assert (key, got_version, corr, client_id) == (api.key, version, 123, "kafkawire")
    back = api.decode_request(memoryview(frame)[pos:], version)
    assert plain(back) == plain(req)
    for _name, value in _records_fields(back):
        assert value is None or isinstance(value, memoryview)
    # Decoding then encoding again gives the same bytes.
    assert api.encode_request(back, version).getvalue() == frame[pos:]


@pytest.mark.parametrize("api,version", API_VERSIONS, ids=[f"{a.name}-v{v}" for a, v in API_VERSIONS])
@ROUND_TRIP
@given(data=st.data())
def test_response_round_trip(api, version: int, data: st.DataObject) -> None:
    resp = data.draw(responses(api, version))
    frame = response_frame(api, resp, version, -5)
    corr, pos = decode_response_header(frame, api.response_header_version(version))
    assert corr == -5
    back = api.decode_response(memoryview(frame)[pos:], version)
    assert plain(back) == plain(resp)
    for _name, value in _records_fields(back):
        assert value is None or isinstance(value, memoryview)
    assert api.encode_response(back, version).getvalue() == frame[pos:]


def test_strategies_respect_versions_and_nullability() -> None:
    # The builder must leave out fields a version does not have, and tagged fields in
    # non-flexible versions: otherwise the round trips above could not be equal.
    @settings(max_examples=30, deadline=None, derandomize=True)
    @given(requests(FETCH, 11), requests(FETCH, 13), responses(FETCH, 3))
    def check(v11, v13, v3) -> None:
        assert v11.cluster_id is None and v11.replica_state == FETCH.Request.ReplicaState()
        assert all(t.topic_id == uuid.UUID(int=0) for t in v11.topics)
        assert all(t.topic == "" for t in v13.topics)
        assert v3.error_code == 0 and v3.session_id == 0
        for t in v3.responses:
            for p in t.partitions:
                assert p.aborted_transactions == []  # not nullable (nor present) before v4

    check()


# ---------------------------------------------------------------------------------------
# Cross-check with an independent implementation of the same message definitions.
# ---------------------------------------------------------------------------------------

try:  # kafka-python >= 3 generates its codec from Kafka's message definitions.
    with warnings.catch_warnings():  # its loader uses importlib.resources APIs deprecated in 3.11
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.admin.configs import DescribeConfigsRequest, DescribeConfigsResponse
        from kafka.protocol.admin.topics import (
            CreateTopicsRequest,
            CreateTopicsResponse,
            DeleteTopicsRequest,
            DeleteTopicsResponse,
        )
        from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
        from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
        from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
        from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
        from kafka.protocol.sasl import (
            SaslAuthenticateRequest,
            SaslAuthenticateResponse,
            SaslHandshakeRequest,
            SaslHandshakeResponse,
        )

    PEER = {
        "Produce": (ProduceRequest, ProduceResponse),
        "Fetch": (FetchRequest, FetchResponse),
        "ListOffsets": (ListOffsetsRequest, ListOffsetsResponse),
        "CreateTopics": (CreateTopicsRequest, CreateTopicsResponse),
        "DeleteTopics": (DeleteTopicsRequest, DeleteTopicsResponse),
        "DescribeConfigs": (DescribeConfigsRequest, DescribeConfigsResponse),
        "InitProducerId": (InitProducerIdRequest, InitProducerIdResponse),
        "SaslHandshake": (SaslHandshakeRequest, SaslHandshakeResponse),
        "SaslAuthenticate": (SaslAuthenticateRequest, SaslAuthenticateResponse),
    }
except ImportError:  # kafka-python 2.x has no such codec
    PEER = {}

# kafka-python only declares the versions today's brokers accept (e.g. Produce v3+).
PEER_CASES = [
    (api, v, side)
    for api in ALL if api.name in PEER
    for side in (0, 1)
    for v in range(max(api.min_version, PEER[api.name][side].min_version),
                   min(api.max_version, PEER[api.name][side].max_version) + 1)
]


@pytest.mark.skipif(not PEER, reason="needs kafka-python >= 3 (its codec generated from Kafka's definitions)")
@pytest.mark.parametrize("api,version,side", PEER_CASES,
                         ids=[f"{a.name}-v{v}-{'req' if s == 0 else 'resp'}" for a, v, s in PEER_CASES])
@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_kafka_python_reencodes_our_bytes_exactly(api, version: int, side: int, data: st.DataObject) -> None:
    peer = PEER[api.name][side]
    if side == 0:
        frame = request_frame(api, data.draw(requests(api, version)), version, 77, "kw")
        again = peer.decode(frame, version=version, header=True).encode(version=version, header=True)
    else:
        hdr = encode_response_header(77, api.response_header_version(version))
        body = api.encode_response(data.draw(responses(api, version)), version).getvalue()
        frame = hdr + body
        obj = peer.decode(body, version=version)
        obj._header = None  # decoded without a header; encode() looks for one
        again = hdr + bytes(obj.encode(version=version))
    assert bytes(again) == frame


# ---------------------------------------------------------------------------------------
# Zero-copy.
# ---------------------------------------------------------------------------------------

def _fetch_response_body(version: int, records: bytes) -> bytes:
    R = FETCH.Response
    resp = R(responses=[R.FetchableTopicResponse(topic="t", topic_id=TOPIC_ID, partitions=[
        R.FetchableTopicResponse.PartitionData(partition_index=0, high_watermark=1, records=records)])])
    return FETCH.encode_response(resp, version).getvalue()


@pytest.mark.parametrize("version", [0, 4, 11, 12, 13, 16, 17])
def test_fetch_records_are_views_of_the_buffer_passed_in(version: int) -> None:
    body = _fetch_response_body(version, MESSAGE_SET)
    # A plain bytes body: the view's underlying object is that bytes object.
    records = FETCH.decode_response(body, version).responses[0].partitions[0].records
    assert isinstance(records, memoryview) and records.obj is body and bytes(records) == MESSAGE_SET

    # A whole frame in a bytearray, decoded from a memoryview past the header: the view
    # still points into the same bytearray, so a change to the buffer shows through it.
    frame = bytearray(encode_response_header(1, FETCH.response_header_version(version)) + body)
    pos = len(frame) - len(body)
    records = FETCH.decode_response(memoryview(frame)[pos:], version).responses[0].partitions[0].records
    assert records.obj is frame
    at = bytes(frame).index(MESSAGE_SET)
    frame[at] ^= 0xFF
    assert records[0] == frame[at]
    records.release()


@pytest.mark.parametrize("version", [0, 2, 3, 8, 9, 11])
def test_produce_records_travel_as_the_callers_object(version: int) -> None:
    P = PRODUCE.Request
    first, second = bytearray(MESSAGE_SET), memoryview(MESSAGE_SET * 2)
    req = P(acks=-1, timeout_ms=1000, topic_data=[
        P.TopicProduceData(name="t", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=first),
            P.TopicProduceData.PartitionProduceData(index=1, records=None),
            P.TopicProduceData.PartitionProduceData(index=2, records=second)])])
    parts = PRODUCE.encode_request(req, version).parts()
    assert sum(1 for p in parts if p is first) == 1
    assert sum(1 for p in parts if p is second) == 1
    # Everything else is the framing around them, in order.
    body = b"".join(bytes(p) for p in parts)
    assert plain(PRODUCE.decode_request(body, version)) == plain(req)


def test_tagged_fields_are_written_in_ascending_tag_order() -> None:
    # KIP-482 requires ascending tags on the wire, whatever order a declaration uses.
    from kafkawire.protocol.schema import Field, build_struct, encode

    cls = build_struct("Tags", [Field("b", "int8", tag=1), Field("a", "int8", tag=0)], flexible_from=0)
    assert encode(cls(a=5, b=6), 0).getvalue() == uvarint(2) + b"\x00\x01\x05" + b"\x01\x01\x06"
