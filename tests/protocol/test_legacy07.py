"""kafkawire.protocol.legacy07: Kafka 0.7's framing, checked byte by byte against spec/004."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire import errors
from kafkawire.protocol import legacy07 as l7
from kafkawire.protocol.legacy07 import (
    FetchRequest,
    FetchResponse,
    Message,
    MultiFetchRequest,
    MultiFetchResponse,
    MultiProduceRequest,
    OffsetsRequest,
    OffsetsResponse,
    ProduceRequest,
    RequestType,
)

CRC_HI = bytes.fromhex("d8932aac")  # CRC32 of b"hi"
CRC_HELLO = bytes.fromhex("3610a686")  # CRC32 of b"hello"

# -- golden bytes, drawn from the spec's diagrams -----------------------------------------

MESSAGE_MAGIC1_HI = (
    b"\x00\x00\x00\x08"  # LENGTH = 1 magic + 1 compression + 4 checksum + 2 payload
    b"\x01"  # MAGIC 1: a COMPRESSION byte follows
    b"\x00"  # COMPRESSION 0 = none
    + CRC_HI  # CHECKSUM = CRC32(PAYLOAD)
    + b"hi"  # PAYLOAD
)

MESSAGE_MAGIC0_HELLO = (
    b"\x00\x00\x00\x0a"  # LENGTH = 1 magic + 4 checksum + 5 payload
    b"\x00"  # MAGIC 0: no COMPRESSION byte
    + CRC_HELLO  # CHECKSUM
    + b"hello"  # PAYLOAD
)

FETCH_REQUEST = (
    b"\x00\x00\x00\x18"  # REQUEST_LENGTH = 24 bytes after this field
    b"\x00\x01"  # REQUEST_TYPE 1 = FETCH
    b"\x00\x04"  # TOPIC_LENGTH
    b"test"  # TOPIC
    b"\x00\x00\x00\x02"  # PARTITION 2
    b"\x00\x00\x00\x00\x00\x00\x01\x00"  # OFFSET 256
    b"\x00\x10\x00\x00"  # MAX_SIZE 1 MiB
)

PRODUCE_REQUEST = (
    b"\x00\x00\x00\x1c"  # REQUEST_LENGTH = 2 type + 2 + 4 topic + 4 partition + 4 + 12 = 28
    b"\x00\x00"  # REQUEST_TYPE 0 = PRODUCE
    b"\x00\x04"  # TOPIC_LENGTH
    b"test"  # TOPIC
    b"\x00\x00\x00\x00"  # PARTITION 0
    b"\x00\x00\x00\x0c"  # MESSAGES_LENGTH = 12 (one 12-byte message)
    + MESSAGE_MAGIC1_HI  # MESSAGES
)

OFFSETS_REQUEST = (
    b"\x00\x00\x00\x18"  # REQUEST_LENGTH = 24
    b"\x00\x04"  # REQUEST_TYPE 4 = OFFSETS
    b"\x00\x04"  # TOPIC_LENGTH
    b"test"  # TOPIC
    b"\x00\x00\x00\x00"  # PARTITION 0
    b"\xff\xff\xff\xff\xff\xff\xff\xfe"  # TIME -2 = EARLIEST
    b"\x00\x00\x00\x01"  # MAX_NUMBER 1
)

MULTIFETCH_REQUEST = (
    b"\x00\x00\x00\x2a"  # REQUEST_LENGTH = 2 type + 2 count + 2 * 19 = 42
    b"\x00\x02"  # REQUEST_TYPE 2 = MULTIFETCH
    b"\x00\x02"  # TOPICPARTITION_COUNT 2
    b"\x00\x01a"  # TOPIC_LENGTH 1, TOPIC "a"
    b"\x00\x00\x00\x00"  # PARTITION 0
    b"\x00\x00\x00\x00\x00\x00\x00\x00"  # OFFSET 0
    b"\x00\x00\x04\x00"  # MAX_SIZE 1024
    b"\x00\x01b"  # TOPIC_LENGTH 1, TOPIC "b"
    b"\x00\x00\x00\x01"  # PARTITION 1
    b"\x00\x00\x00\x00\x00\x00\x00\x0c"  # OFFSET 12
    b"\x00\x00\x08\x00"  # MAX_SIZE 2048
)

MULTIPRODUCE_REQUEST = (
    b"\x00\x00\x00\x1d"  # REQUEST_LENGTH = 2 type + 2 count + (2 + 1 + 4 + 4 + 14) = 29
    b"\x00\x03"  # REQUEST_TYPE 3 = MULTIPRODUCE
    b"\x00\x01"  # TOPICPARTITION_COUNT 1
    b"\x00\x01a"  # TOPIC_LENGTH 1, TOPIC "a"
    b"\x00\x00\x00\x03"  # PARTITION 3
    b"\x00\x00\x00\x0e"  # MESSAGES_LENGTH 14
    + MESSAGE_MAGIC0_HELLO  # MESSAGES
)

FETCH_RESPONSE = (
    b"\x00\x00\x00\x0e"  # RESPONSE_LENGTH = 2 + 12
    b"\x00\x00"  # ERROR_CODE 0 = NoError
    + MESSAGE_MAGIC1_HI  # MESSAGES
)

OFFSETS_RESPONSE = (
    b"\x00\x00\x00\x16"  # RESPONSE_LENGTH = 2 + 4 + 2 * 8 = 22
    b"\x00\x00"  # ERROR_CODE 0
    b"\x00\x00\x00\x02"  # NUMBER_OFFSETS 2
    b"\x00\x00\x00\x00\x00\x00\x10\x00"  # OFFSETS[0] = 4096
    b"\x00\x00\x00\x00\x00\x00\x00\x00"  # OFFSETS[1] = 0
)

MULTIFETCH_RESPONSE = (
    b"\x00\x00\x00\x1a"  # RESPONSE_LENGTH = 2 + (4 + 14) + (4 + 2) = 26
    b"\x00\x00"  # ERROR_CODE 0 for the whole request
    b"\x00\x00\x00\x0e"  # first fetch: RESPONSE_LENGTH 14
    b"\x00\x00"  # its ERROR_CODE 0
    + MESSAGE_MAGIC1_HI  # its MESSAGES
    + b"\x00\x00\x00\x02"  # second fetch: RESPONSE_LENGTH 2
    b"\x00\x01"  # its ERROR_CODE 1 = OffsetOutOfRange, no messages
)


def test_golden_lengths_add_up() -> None:
    # each length prefix counts the bytes that follow it
    for frame in (
        FETCH_REQUEST,
        PRODUCE_REQUEST,
        OFFSETS_REQUEST,
        MULTIFETCH_REQUEST,
        MULTIPRODUCE_REQUEST,
        FETCH_RESPONSE,
        OFFSETS_RESPONSE,
        MULTIFETCH_RESPONSE,
    ):
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert len(MESSAGE_MAGIC1_HI) == 12 and len(MESSAGE_MAGIC0_HELLO) == 14


@pytest.mark.parametrize(
    "obj, golden",
    [
        (FetchRequest("test", 2, 256, 1 << 20), FETCH_REQUEST),
        (ProduceRequest("test", 0, MESSAGE_MAGIC1_HI), PRODUCE_REQUEST),
        (OffsetsRequest("test", 0, l7.EARLIEST, 1), OFFSETS_REQUEST),
        (
            MultiFetchRequest((FetchRequest("a", 0, 0, 1024), FetchRequest("b", 1, 12, 2048))),
            MULTIFETCH_REQUEST,
        ),
        (MultiProduceRequest((ProduceRequest("a", 3, MESSAGE_MAGIC0_HELLO),)), MULTIPRODUCE_REQUEST),
    ],
)
def test_requests_match_golden_bytes(obj, golden) -> None:
    assert l7.encode_request(obj) == golden
    assert l7.decode_request(golden) == obj


@pytest.mark.parametrize(
    "kind, obj, golden",
    [
        (RequestType.FETCH, FetchResponse(0, MESSAGE_MAGIC1_HI), FETCH_RESPONSE),
        (RequestType.OFFSETS, OffsetsResponse(0, (4096, 0)), OFFSETS_RESPONSE),
        (
            RequestType.MULTIFETCH,
            MultiFetchResponse(0, (FetchResponse(0, MESSAGE_MAGIC1_HI), FetchResponse(1, b""))),
            MULTIFETCH_RESPONSE,
        ),
    ],
)
def test_responses_match_golden_bytes(kind, obj, golden) -> None:
    assert l7.encode_response(obj) == golden
    assert l7.decode_response(kind, golden) == obj


def test_messages_match_golden_bytes() -> None:
    assert l7.encode_message(Message(b"hi")) == MESSAGE_MAGIC1_HI
    assert l7.encode_message(Message(b"hello", magic=0)) == MESSAGE_MAGIC0_HELLO
    assert l7.decode_message(MESSAGE_MAGIC1_HI) == (Message(b"hi"), 12)
    gzip_header = l7.encode_message(Message(b"hi", compression=l7.COMPRESSION_GZIP))
    assert gzip_header[4:6] == b"\x01\x01"  # MAGIC 1, COMPRESSION 1 = gzip


def test_message_set_offsets_are_byte_positions() -> None:
    data = MESSAGE_MAGIC1_HI + MESSAGE_MAGIC0_HELLO
    decoded = l7.decode_message_set(data, base_offset=100)
    assert [(m.message.payload, m.offset, m.next_offset) for m in decoded] == [
        (b"hi", 100, 112),
        (b"hello", 112, 126),
    ]


def test_partial_trailing_message_stops_the_set() -> None:
    data = MESSAGE_MAGIC1_HI + MESSAGE_MAGIC0_HELLO
    for cut in range(len(MESSAGE_MAGIC1_HI), len(data)):
        decoded = l7.decode_message_set(data[:cut])
        assert [m.message.payload for m in decoded] == [b"hi"]


def test_crc_mismatch_is_corrupt() -> None:
    bad = MESSAGE_MAGIC1_HI[:-1] + b"X"
    with pytest.raises(errors.CorruptRecordError, match="failed its CRC check") as info:
        l7.decode_message(bad)
    assert info.value.expected == 0xD8932AAC
    assert l7.decode_message(bad, check_crc=False)[0].payload == b"hX"


def test_bad_magic_and_compression() -> None:
    with pytest.raises(errors.UnsupportedMagicError, match="MAGIC 2"):
        l7.decode_message(MESSAGE_MAGIC1_HI[:4] + b"\x02" + MESSAGE_MAGIC1_HI[5:])
    with pytest.raises(errors.UnsupportedCodecError, match="COMPRESSION 3"):
        l7.decode_message(MESSAGE_MAGIC1_HI[:5] + b"\x03" + MESSAGE_MAGIC1_HI[6:])
    with pytest.raises(errors.EncodeError, match="needs magic 1"):
        l7.encode_message(Message(b"x", compression=1, magic=0))
    with pytest.raises(errors.EncodeError, match="not a 0.7 codec"):
        l7.encode_message(Message(b"x", compression=4))


def test_error_codes_and_meanings() -> None:
    assert {c.value for c in l7.ErrorCode} == set(l7.ERROR_MEANINGS) == {-1, 0, 1, 2, 3, 4}
    assert l7.ERROR_MEANINGS[3][0] == "WrongPartition"
    response = l7.decode_response(RequestType.FETCH, b"\x00\x00\x00\x02\x00\x01")
    assert response.error_code == l7.ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(l7.Legacy07BrokerError, match=r"OffsetOutOfRange \(1\): Offset requested"):
        response.raise_for_error()
    assert FetchResponse(0).error is None
    assert isinstance(FetchResponse(-1).error, errors.BrokerError)


# -- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "golden", [FETCH_REQUEST, PRODUCE_REQUEST, OFFSETS_REQUEST, MULTIFETCH_REQUEST, MULTIPRODUCE_REQUEST]
)
def test_truncated_requests(golden) -> None:
    for cut in range(len(golden)):
        with pytest.raises(errors.TruncatedDataError, match="truncated 0.7"):
            l7.decode_request(golden[:cut])


def test_truncated_inside_a_frame_names_the_field() -> None:
    # REQUEST_LENGTH claims 6 bytes: the type and TOPIC_LENGTH fit, the TOPIC does not
    frame = b"\x00\x00\x00\x06" b"\x00\x01" b"\x00\x04" b"te"
    with pytest.raises(errors.TruncatedDataError, match="FETCH request TOPIC at byte 8"):
        l7.decode_request(frame)


@pytest.mark.parametrize("kind", [RequestType.FETCH, RequestType.OFFSETS, RequestType.MULTIFETCH])
def test_truncated_responses(kind) -> None:
    golden = {RequestType.FETCH: FETCH_RESPONSE, RequestType.OFFSETS: OFFSETS_RESPONSE}.get(
        kind, MULTIFETCH_RESPONSE
    )
    for cut in range(len(golden)):
        with pytest.raises(errors.TruncatedDataError):
            l7.decode_response(kind, golden[:cut])


def test_offsets_count_is_checked_before_reading() -> None:
    huge = b"\x00\x00\x00\x06" b"\x00\x00" b"\x7f\xff\xff\xff"  # NUMBER_OFFSETS 2**31-1, no data
    with pytest.raises(errors.TruncatedDataError, match="OFFSETS"):
        l7.decode_response(RequestType.OFFSETS, huge)


def test_truncated_message() -> None:
    for cut in range(len(MESSAGE_MAGIC1_HI)):
        with pytest.raises(errors.TruncatedDataError, match="0.7 message"):
            l7.decode_message(MESSAGE_MAGIC1_HI[:cut])


def test_unknown_request_type() -> None:
    frame = b"\x00\x00\x00\x02" b"\x00\x05"  # REQUEST_TYPE 5
    with pytest.raises(l7.UnknownRequestTypeError, match="REQUEST_TYPE 5; 0.7 defines 0 PRODUCE"):
        l7.decode_request(frame)
    with pytest.raises(errors.CodecError, match="no response"):
        l7.decode_response(RequestType.PRODUCE, b"\x00\x00\x00\x02\x00\x00")
    with pytest.raises(l7.UnknownRequestTypeError):
        l7.decode_response(7, b"\x00\x00\x00\x02\x00\x00")
    with pytest.raises(errors.EncodeError, match="cannot encode"):
        l7.encode_request(FetchResponse())  # type: ignore[arg-type]


def test_trailing_bytes_and_bad_lengths() -> None:
    with pytest.raises(errors.CodecError, match="follow the 24-byte frame"):
        l7.decode_request(FETCH_REQUEST + b"\x00")
    assert l7.frame_length(FETCH_REQUEST + b"\x00") == len(FETCH_REQUEST)
    assert l7.frame_length(b"\x00\x00") is None
    # REQUEST_LENGTH one too large for the fields: a leftover byte inside the frame
    padded = b"\x00\x00\x00\x19" + FETCH_REQUEST[4:] + b"\x00"
    with pytest.raises(errors.CodecError, match="1 bytes left over"):
        l7.decode_request(padded)
    with pytest.raises(errors.CodecError, match="shorter than its 2-byte"):
        l7.decode_request(b"\x00\x00\x00\x01\x00")


def test_encode_rejects_out_of_range_values() -> None:
    with pytest.raises(errors.EncodeError, match="partition=2147483648 does not fit an int32"):
        l7.encode_request(FetchRequest("t", 1 << 31, 0, 1))
    with pytest.raises(errors.EncodeError, match="not ASCII"):
        l7.encode_request(FetchRequest("tópico", 0, 0, 1))
    with pytest.raises(errors.EncodeError, match="must be bytes"):
        l7.encode_request(ProduceRequest("t", 0, "text"))  # type: ignore[arg-type]


# -- round trips ------------------------------------------------------------------------

topics = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=20)
int32s = st.integers(-(1 << 31), (1 << 31) - 1)
int64s = st.integers(-(1 << 63), (1 << 63) - 1)
int16s = st.integers(-(1 << 15), (1 << 15) - 1)
messages = st.one_of(
    st.builds(Message, st.binary(max_size=40), st.sampled_from([0, 1, 2]), st.just(1)),
    st.builds(Message, st.binary(max_size=40), st.just(0), st.just(0)),
)
message_sets = st.lists(messages, max_size=4).map(l7.encode_message_set)
fetches = st.builds(FetchRequest, topics, int32s, int64s, int32s)
produces = st.builds(ProduceRequest, topics, int32s, message_sets)
requests = st.one_of(
    fetches,
    produces,
    st.builds(OffsetsRequest, topics, int32s, int64s, int32s),
    st.builds(MultiFetchRequest, st.lists(fetches, max_size=4).map(tuple)),
    st.builds(MultiProduceRequest, st.lists(produces, max_size=4).map(tuple)),
)
fetch_responses = st.builds(FetchResponse, int16s, message_sets)


@settings(max_examples=200, deadline=None)
@given(requests)
def test_request_round_trip(request) -> None:
    assert l7.decode_request(l7.encode_request(request)) == request


@settings(max_examples=100, deadline=None)
@given(st.lists(messages, max_size=6), st.integers(0, 1 << 40))
def test_message_set_round_trip(msgs, base) -> None:
    data = l7.encode_message_set(msgs)
    decoded = l7.decode_message_set(data, base)
    assert [d.message for d in decoded] == msgs
    assert decoded == [] or decoded[-1].next_offset == base + len(data)


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.tuples(st.just(RequestType.FETCH), fetch_responses),
        st.tuples(st.just(RequestType.OFFSETS), st.builds(OffsetsResponse, int16s, st.lists(int64s, max_size=5).map(tuple))),
        st.tuples(
            st.just(RequestType.MULTIFETCH),
            st.builds(MultiFetchResponse, int16s, st.lists(fetch_responses, max_size=4).map(tuple)),
        ),
    )
)
def test_response_round_trip(pair) -> None:
    kind, response = pair
    assert l7.decode_response(kind, l7.encode_response(response)) == response


def test_no_io_imports() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(l7))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert not imported & {"socket", "ssl", "selectors", "asyncio", "threading", "time"}
