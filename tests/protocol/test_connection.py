"""The sans-IO Connection: framing, correlation, pipelining, negotiation.

The broker's side of every exchange is built here with the same schema (response header +
``api.encode_response``) and read back with ``decode_request_header`` + ``decode_request``:
bytes in, objects out, no sockets.
"""

from __future__ import annotations

import struct

import pytest

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.api import Api, ApiVersionError
from kafkawire.protocol.connection import (
    DEFAULT_MAX_FRAME_SIZE,
    Connection,
    CorrelationIdError,
    FrameTooLargeError,
    ProtocolError,
    Response,
)
from kafkawire.protocol.headers import decode_request_header, encode_response_header
from kafkawire.protocol.schema import Field as F

API_VERSIONS = apis.get("ApiVersions")
METADATA = apis.get("Metadata")

# A test-only API with record data in both directions, so zero-copy is checked whatever
# data APIs are declared.
RECORDS_ECHO = Api(
    9000, "RecordsEcho", (0, 1), flexible_from=1,
    request=[F("name", "string"), F("records", "records", nullable_since=0)],
    response=[
        F("error_code", "int16"),
        F("first", "records", nullable_since=0),
        F("second", "records", nullable_since=0),
    ],
)


# -- the broker's side -------------------------------------------------------------------


def frame(correlation_id: int, api: Api, version: int, response: object, layout: int | None = None) -> bytes:
    """One response frame as a broker writes it (``layout`` overrides the body version)."""
    layout = version if layout is None else layout
    header = encode_response_header(correlation_id, api.response_header_version(version))
    body = api.encode_response(response, layout).getvalue()  # type: ignore[arg-type]
    return struct.pack(">i", len(header) + len(body)) + header + body


def parse_request(chunks: list) -> tuple[int, int, int, str | None, object]:
    """What a broker reads: (api_key, version, correlation_id, client_id, request)."""
    data = b"".join(bytes(c) for c in chunks)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4, "size prefix must count every byte after it"
    key, version, cid, client_id, _ = decode_request_header(data[4:], 1)
    api = apis.get(key) if key != RECORDS_ECHO.key else RECORDS_ECHO
    _, _, _, _, pos = decode_request_header(data[4:], api.request_header_version(version))
    return key, version, cid, client_id, api.decode_request(data[4 + pos :], version)


def metadata_response(version: int, topic: str = "t") -> object:
    R = METADATA.Response
    return R(
        brokers=[R.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092)],
        controller_id=1,
        topics=[R.MetadataResponseTopic(name=topic, partitions=[])],
    )


def api_versions_response(ranges: dict[int, tuple[int, int]], error_code: int = 0) -> object:
    R = API_VERSIONS.Response
    return R(
        error_code=error_code,
        api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in ranges.items()],
    )


def negotiated(ranges: dict[int, tuple[int, int]], **options: object) -> Connection:
    conn = Connection(**options)  # type: ignore[arg-type]
    cid, _ = conn.api_versions_request()
    conn.receive_data(frame(cid, API_VERSIONS, API_VERSIONS.max_version, api_versions_response(ranges)))
    assert conn.negotiated
    return conn


# -- framing -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 8, 9, 13])
def test_send_frames_header_and_body(version: int) -> None:
    conn = Connection(client_id="tester")
    request = METADATA.Request(topics=[METADATA.Request.MetadataRequestTopic(name="orders")])
    cid, chunks = conn.send(METADATA, request, version)
    assert len(chunks) == 1  # no record data: one write
    key, v, got_cid, client_id, decoded = parse_request(chunks)
    assert (key, v, got_cid, client_id) == (3, version, cid, "tester")
    assert decoded.topics[0].name == "orders"
    # Flexible versions use request header v2: an empty tagged-field count after client_id,
    # then the compact topics array (1 + 1); older ones go straight to an int32 count.
    data = bytes(chunks[0])
    after_client_id = 4 + 8 + 2 + len("tester")
    if version >= 9:
        assert data[after_client_id : after_client_id + 2] == b"\x00\x02"
    else:
        assert data[after_client_id : after_client_id + 4] == b"\x00\x00\x00\x01"
    assert conn.in_flight == 1


def test_null_client_id_and_api_by_name_or_key() -> None:
    conn = Connection(client_id=None)
    _, chunks = conn.send("Metadata", METADATA.Request(topics=None), 4)
    assert parse_request(chunks)[3] is None
    _, chunks = conn.send(3, METADATA.Request(topics=None), 4)
    assert parse_request(chunks)[:2] == (3, 4)


def test_send_rejects_wrong_request_type_and_version() -> None:
    conn = Connection()
    with pytest.raises(TypeError, match="Metadata.Request"):
        conn.send(METADATA, API_VERSIONS.Request(), 1)
    with pytest.raises(ApiVersionError, match="Metadata v99"):
        conn.send(METADATA, METADATA.Request(), 99)
    assert conn.in_flight == 0


def test_record_data_chunk_passes_through_uncopied() -> None:
    conn = Connection()
    batch = bytes(range(256)) * 40
    for version in (0, 1):
        cid, chunks = conn.send(RECORDS_ECHO, RECORDS_ECHO.Request(name="x", records=batch), version)
        assert any(c is batch for c in chunks), "the records chunk must be the caller's object"
        key, v, got, _cid, decoded = parse_request(chunks)
        assert (key, v, got) == (9000, version, cid)
        assert decoded.records == batch
    view = memoryview(bytearray(b"abc"))
    _, chunks = conn.send(RECORDS_ECHO, RECORDS_ECHO.Request(name="x", records=view), 0)
    assert chunks[-1] is view


def test_correlation_ids_increase_and_wrap() -> None:
    conn = Connection()
    ids = [conn.send(METADATA, METADATA.Request(), 1)[0] for _ in range(3)]
    assert ids == [0, 1, 2]
    conn._next_id = 2**31 - 1  # the largest int32: the next one wraps to 0
    assert conn.send(METADATA, METADATA.Request(), 1)[0] == 2**31 - 1
    assert conn.send(METADATA, METADATA.Request(), 1)[0] == 0


# -- receiving -------------------------------------------------------------------------------


def test_pipelined_responses_in_one_read() -> None:
    conn = Connection()
    sent = [(conn.send(METADATA, METADATA.Request(), v)[0], v) for v in (1, 9, 12)]
    assert conn.in_flight == 3
    data = b"".join(frame(cid, METADATA, v, metadata_response(v, f"t{v}")) for cid, v in sent)
    events = conn.receive_data(data)
    assert [(e.correlation_id, e.version) for e in events] == sent
    assert [e.response.topics[0].name for e in events] == ["t1", "t9", "t12"]
    assert all(isinstance(e, Response) and e.api is METADATA for e in events)
    assert conn.in_flight == 0


def test_partial_frames_byte_by_byte() -> None:
    conn = Connection()
    sent = [(conn.send(METADATA, METADATA.Request(), v)[0], v) for v in (0, 10)]
    data = b"".join(frame(cid, METADATA, v, metadata_response(v)) for cid, v in sent)
    events = []
    for i in range(len(data)):
        got = conn.receive_data(data[i : i + 1])
        # A response appears exactly when its last byte arrives.
        events.extend(got)
    assert [e.correlation_id for e in events] == [cid for cid, _ in sent]
    assert conn.in_flight == 0
    assert conn.receive_data(b"") == []


def test_any_split_of_the_stream() -> None:
    conn = Connection()
    sent = [(conn.send(METADATA, METADATA.Request(), 5)[0], 5) for _ in range(4)]
    data = b"".join(frame(cid, METADATA, v, metadata_response(v)) for cid, v in sent)
    cuts = [0, 3, 4, 5, 17, len(data) // 2, len(data) - 1, len(data)]
    events = []
    for a, b in zip(cuts, cuts[1:]):
        events.extend(conn.receive_data(bytearray(data[a:b])))
    assert [e.correlation_id for e in events] == [0, 1, 2, 3]


def test_records_are_readonly_views_of_one_frame() -> None:
    conn = Connection()
    cid, _ = conn.send(RECORDS_ECHO, RECORDS_ECHO.Request(name="x"), 1)
    payload = RECORDS_ECHO.Response(first=b"\x01" * 100, second=b"\x02" * 50)
    data = frame(cid, RECORDS_ECHO, 1, payload)
    # Fed in pieces: the frame is still reassembled into one buffer of its own.
    events = conn.receive_data(data[:30]) + conn.receive_data(data[30:])
    (event,) = events
    first, second = event.response.first, event.response.second
    assert isinstance(first, memoryview) and isinstance(second, memoryview)
    assert first.readonly and second.readonly
    assert first.obj is second.obj  # both slices of the same frame buffer
    assert len(first.obj) == len(data) - 4
    assert bytes(first) == b"\x01" * 100 and bytes(second) == b"\x02" * 50


def test_expects_response_false_is_not_tracked() -> None:
    conn = Connection()
    conn.send(METADATA, METADATA.Request(), 1, expects_response=False)
    assert conn.in_flight == 0
    cid, _ = conn.send(METADATA, METADATA.Request(), 1)
    (event,) = conn.receive_data(frame(cid, METADATA, 1, metadata_response(1)))
    assert event.correlation_id == cid == 1


def test_mismatched_correlation_id_poisons_the_connection() -> None:
    conn = Connection()
    first, _ = conn.send(METADATA, METADATA.Request(), 1)
    second, _ = conn.send(METADATA, METADATA.Request(), 1)
    data = frame(first, METADATA, 1, metadata_response(1)) + frame(second + 7, METADATA, 1, metadata_response(1))
    with pytest.raises(CorrelationIdError, match=rf"correlation id {second + 7}.*correlation id {second}") as info:
        conn.receive_data(data)
    # The response decoded before the problem is not lost.
    assert [e.correlation_id for e in info.value.events] == [first]
    assert isinstance(conn.poisoned, CorrelationIdError)
    with pytest.raises(CorrelationIdError, match="unusable"):
        conn.send(METADATA, METADATA.Request(), 1)
    with pytest.raises(CorrelationIdError, match="unusable"):
        conn.receive_data(b"\0")


def test_response_with_nothing_in_flight() -> None:
    conn = Connection()
    with pytest.raises(CorrelationIdError, match="no request in flight"):
        conn.receive_data(frame(0, METADATA, 1, metadata_response(1)))


def test_undecodable_body_is_a_protocol_error() -> None:
    conn = Connection()
    cid, _ = conn.send(METADATA, METADATA.Request(), 1)
    good = frame(cid, METADATA, 1, metadata_response(1))
    short = struct.pack(">i", 10) + good[4:14]  # the body cut after 6 bytes
    with pytest.raises(ProtocolError, match=r"Metadata v1 response \(correlation id 0") as info:
        conn.receive_data(short)
    assert isinstance(info.value.__cause__, errors.TruncatedDataError)
    assert conn.poisoned is not None


# -- frame size --------------------------------------------------------------------------


def test_default_max_frame_size() -> None:
    assert Connection().max_frame_size == DEFAULT_MAX_FRAME_SIZE == 100 * 1024 * 1024


def test_oversized_frame_is_refused_before_reading_it() -> None:
    conn = Connection(max_frame_size=1000)
    conn.send(METADATA, METADATA.Request(), 1)
    with pytest.raises(FrameTooLargeError, match=r"1001 bytes.*max_frame_size=1000.*TLS or SASL"):
        conn.receive_data(struct.pack(">i", 1001))
    assert isinstance(conn.poisoned, FrameTooLargeError)
    assert isinstance(conn.poisoned, errors.KafkaWireError)


def test_frame_at_the_limit_is_accepted() -> None:
    conn = Connection(max_frame_size=64)
    cid, _ = conn.send(METADATA, METADATA.Request(), 0)
    data = frame(cid, METADATA, 0, METADATA.Response())
    assert len(data) - 4 <= 64
    conn2 = Connection(max_frame_size=len(data) - 4)
    cid2, _ = conn2.send(METADATA, METADATA.Request(), 0)
    assert len(conn2.receive_data(frame(cid2, METADATA, 0, METADATA.Response()))) == 1


def test_tls_answer_to_plaintext_is_named() -> None:
    conn = Connection()
    conn.send(METADATA, METADATA.Request(), 1)
    # A TLS alert record: content type 21, version 3.3.
    with pytest.raises(FrameTooLargeError, match="look like a TLS record"):
        conn.receive_data(b"\x15\x03\x03\x00\x02\x02\x46")


@pytest.mark.parametrize("size", [-1, 0, 3])
def test_impossible_frame_sizes(size: int) -> None:
    conn = Connection()
    conn.send(METADATA, METADATA.Request(), 1)
    with pytest.raises(ProtocolError, match=f"frame of {size} bytes"):
        conn.receive_data(struct.pack(">i", size))


def test_max_frame_size_must_hold_a_header() -> None:
    with pytest.raises(ValueError, match="max_frame_size"):
        Connection(max_frame_size=3)


# -- Produce acks=0 ------------------------------------------------------------------------


def test_produce_acks_zero_must_not_expect_a_response() -> None:
    produce = apis.get("Produce")
    conn = Connection()
    version = max(produce.min_version, 3)
    with pytest.raises(ValueError, match="expects_response=False"):
        conn.send(produce, produce.Request(acks=0, timeout_ms=100), version)
    with pytest.raises(ValueError, match="gets a response"):
        conn.send(produce, produce.Request(acks=1, timeout_ms=100), version, expects_response=False)
    cid0, chunks = conn.send(produce, produce.Request(acks=0, timeout_ms=100), version, expects_response=False)
    assert conn.in_flight == 0
    assert parse_request(chunks)[:3] == (0, version, cid0)
    # The next request's response is matched without the acks=0 one in the way.
    cid1, _ = conn.send(METADATA, METADATA.Request(), 1)
    assert cid1 == cid0 + 1
    (event,) = conn.receive_data(frame(cid1, METADATA, 1, metadata_response(1)))
    assert event.correlation_id == cid1


def test_an_answer_to_acks_zero_is_dropped() -> None:
    # Kafka never answers acks=0, but some Kafka-protocol brokers do: stay in step.
    produce = apis.get("Produce")
    conn = Connection()
    cid0, _ = conn.send(produce, produce.Request(acks=0, timeout_ms=100), 3, expects_response=False)
    cid1, _ = conn.send(METADATA, METADATA.Request(), 1)
    answer = frame(cid0, produce, 3, produce.Response())
    events = conn.receive_data(answer + frame(cid1, METADATA, 1, metadata_response(1)))
    assert [e.correlation_id for e in events] == [cid1]
    assert conn.in_flight == 0


# -- negotiation -------------------------------------------------------------------------


def test_api_versions_request_at_highest_version() -> None:
    conn = Connection(software_name="kafkawire", software_version="9.9")
    cid, chunks = conn.api_versions_request()
    key, version, got, client_id, request = parse_request(chunks)
    assert (key, version, got) == (18, API_VERSIONS.max_version, cid)
    assert request.client_software_name == "kafkawire"
    assert request.client_software_version == "9.9"
    assert not conn.negotiated


def test_default_software_version_is_kafkawire_version() -> None:
    import kafkawire

    _, chunks = Connection().api_versions_request()
    assert parse_request(chunks)[4].client_software_version == kafkawire.__version__


def test_negotiated_versions_are_the_highest_in_common() -> None:
    conn = negotiated({3: (0, 7), 18: (0, 4), 9000: (0, 5)})
    assert conn.broker_versions == {3: (0, 7), 18: (0, 4), 9000: (0, 5)}
    assert conn.version_for(METADATA) == 7  # the broker's max is lower
    assert conn.version_for(RECORDS_ECHO) == 1  # kafkawire's max is lower
    assert conn.version_for("ApiVersions") == 4
    cid, chunks = conn.send(METADATA, METADATA.Request())
    assert parse_request(chunks)[1] == 7


def test_a_new_api_versions_answer_changes_the_versions_chosen() -> None:
    # version_for remembers its choices (a producer asks per request): for one answer only.
    conn = negotiated({3: (0, 7), 18: (0, 4)})
    assert conn.version_for(METADATA) == 7 and conn.version_for(METADATA) == 7
    conn.broker_versions = {3: (0, 5), 18: (0, 4)}
    assert conn.version_for(METADATA) == 5
    conn.broker_versions = None
    with pytest.raises(ApiVersionError, match="api_versions_request"):
        conn.version_for(METADATA)


def test_no_common_version_names_both_ranges() -> None:
    conn = negotiated({3: (14, 20), 18: (0, 4)})
    with pytest.raises(ApiVersionError, match=r"Metadata \(key 3\): kafkawire speaks v0-v13, the broker speaks v14-v20"):
        conn.version_for(METADATA)
    with pytest.raises(ApiVersionError, match="does not list it"):
        conn.send(RECORDS_ECHO, RECORDS_ECHO.Request())


def test_version_before_negotiation_is_a_clear_error() -> None:
    with pytest.raises(ApiVersionError, match="api_versions_request"):
        Connection().version_for(METADATA)


def test_error_35_with_the_brokers_range_retries_at_it() -> None:
    conn = Connection()
    cid, _ = conn.api_versions_request()
    # KIP-511: refused in the v0 layout, api_keys holding only the broker's ApiVersions range.
    refusal = api_versions_response({18: (0, 2)}, error_code=35)
    (event,) = conn.receive_data(frame(cid, API_VERSIONS, API_VERSIONS.max_version, refusal, layout=0))
    assert event.version == 0 and event.response.error_code == 35
    assert conn.retry_api_versions and not conn.negotiated
    cid2, chunks = conn.api_versions_request()
    assert parse_request(chunks)[1] == 2
    assert not conn.retry_api_versions
    conn.receive_data(frame(cid2, API_VERSIONS, 2, api_versions_response({3: (0, 9), 18: (0, 2)})))
    assert conn.negotiated and conn.version_for(METADATA) == 9


def test_error_35_short_form_falls_back_to_v0() -> None:
    conn = Connection()
    cid, _ = conn.api_versions_request()
    refusal = api_versions_response({}, error_code=35)
    conn.receive_data(frame(cid, API_VERSIONS, API_VERSIONS.max_version, refusal, layout=0))
    assert conn.retry_api_versions
    cid2, chunks = conn.api_versions_request()
    assert parse_request(chunks)[1] == 0
    conn.receive_data(frame(cid2, API_VERSIONS, 0, api_versions_response({3: (0, 5), 18: (0, 0)})))
    assert conn.version_for(METADATA) == 5


def test_error_35_in_the_requested_layout_is_read_too() -> None:
    conn = Connection()
    cid, _ = conn.api_versions_request()
    refusal = api_versions_response({18: (0, 3)}, error_code=35)
    (event,) = conn.receive_data(frame(cid, API_VERSIONS, 4, refusal))
    assert event.version == 4
    cid2, chunks = conn.api_versions_request()
    assert parse_request(chunks)[1] == 3


def test_error_35_listing_a_higher_range_still_steps_down() -> None:
    conn = Connection(version_overrides={"ApiVersions": 2})
    cid, chunks = conn.api_versions_request()
    assert parse_request(chunks)[1] == 2
    refusal = api_versions_response({18: (0, 4)}, error_code=35)
    conn.receive_data(frame(cid, API_VERSIONS, 2, refusal, layout=0))
    assert parse_request(conn.api_versions_request()[1])[1] == 1


def test_error_35_at_v0_gives_up_clearly() -> None:
    conn = Connection(version_overrides={18: 0})
    cid, _ = conn.api_versions_request()
    with pytest.raises(ApiVersionError, match="refused ApiVersions v0"):
        conn.receive_data(frame(cid, API_VERSIONS, 0, api_versions_response({}, error_code=35)))


def test_other_api_versions_errors_leave_it_unnegotiated() -> None:
    conn = Connection()
    cid, _ = conn.api_versions_request()
    (event,) = conn.receive_data(frame(cid, API_VERSIONS, 4, api_versions_response({}, error_code=58)))
    assert event.response.error_code == 58
    assert not conn.negotiated and not conn.retry_api_versions
    with pytest.raises(ApiVersionError, match="error 58"):
        conn.version_for(METADATA)


# -- overrides ---------------------------------------------------------------------------


def test_override_without_ranges_is_used_as_is() -> None:
    conn = Connection(version_overrides={"Metadata": 5})
    assert conn.version_for(METADATA) == 5
    _, chunks = conn.send(METADATA, METADATA.Request())
    assert parse_request(chunks)[1] == 5


def test_override_is_checked_against_the_brokers_range() -> None:
    conn = negotiated({3: (0, 4), 18: (0, 4)}, version_overrides={3: 5})
    with pytest.raises(ApiVersionError, match=r"Metadata v5 \(set in version_overrides\).*speaks v0-v4"):
        conn.version_for(METADATA)
    conn = negotiated({3: (0, 12), 18: (0, 4)}, version_overrides={3: 5})
    assert conn.version_for(METADATA) == 5


PRODUCE = apis.get("Produce")


def test_kafka4_listed_produce_v0_v2_are_not_served() -> None:
    # Kafka 4 lists Produce v0-v13 with Fetch v4-v18 (KAFKA-18659) and closes the connection
    # on Produce v0-v2 (KIP-896): an override of them is refused before anything is sent.
    kafka4 = {0: (0, 13), 1: (4, 18), 18: (0, 4)}
    conn = negotiated(kafka4, version_overrides={"Produce": 2})
    with pytest.raises(ApiVersionError, match=r"Produce v2 \(set in version_overrides\).*speaks v3-v13; "
                       r"it lists v0-v13 in ApiVersions .*closes the connection on v0-v2: KIP-896"):
        conn.version_for(PRODUCE)
    assert negotiated(kafka4, version_overrides={"Produce": 3}).version_for(PRODUCE) == 3
    # A broker that still fetches v0-v3 (Kafka 3.9) serves the Produce versions it lists.
    assert negotiated({0: (0, 11), 1: (0, 17), 18: (0, 4)}, version_overrides={"Produce": 0}).version_for(PRODUCE) == 0


def test_override_outside_kafkawire_range_fails_at_construction() -> None:
    with pytest.raises(ApiVersionError, match="Metadata v42"):
        Connection(version_overrides={"Metadata": 42})
    with pytest.raises(KeyError, match="NoSuchApi"):
        Connection(version_overrides={"NoSuchApi": 1})


def test_explicit_version_wins_over_negotiation() -> None:
    conn = negotiated({3: (0, 12), 18: (0, 4)})
    _, chunks = conn.send(METADATA, METADATA.Request(), 2)
    assert parse_request(chunks)[1] == 2
