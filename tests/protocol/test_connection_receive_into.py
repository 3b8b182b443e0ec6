"""Connection.receive_buffer / received_into: reading straight into the frame's buffer.

The same byte streams as test_connection.py's, fed through the two receive ways in any
mix and any split: the responses must come out exactly as receive_data alone gives them.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_connection import METADATA, RECORDS_ECHO, frame, metadata_response

from kafkawire.protocol import connection as connection_module
from kafkawire.protocol.connection import (
    Connection,
    CorrelationIdError,
    FrameTooLargeError,
    ProtocolError,
)


def _stream() -> tuple[Connection, bytes, list[int]]:
    """A connection with four requests in flight and the broker's answers to them: two
    small Metadata frames and two RecordsEcho frames with record data (one of 70 KB)."""
    conn = Connection()
    parts = []
    cid, _ = conn.send(METADATA, METADATA.Request(), 9)
    parts.append(frame(cid, METADATA, 9, metadata_response(9, "first")))
    cid, _ = conn.send(RECORDS_ECHO, RECORDS_ECHO.Request(name="x"), 1)
    big = bytes(range(251)) * 280
    parts.append(frame(cid, RECORDS_ECHO, 1, RECORDS_ECHO.Response(first=big, second=b"\x07" * 33)))
    cid, _ = conn.send(METADATA, METADATA.Request(), 1)
    parts.append(frame(cid, METADATA, 1, metadata_response(1, "third")))
    cid, _ = conn.send(RECORDS_ECHO, RECORDS_ECHO.Request(name="y"), 0)
    parts.append(frame(cid, RECORDS_ECHO, 0, RECORDS_ECHO.Response(first=b"", second=None)))
    return conn, b"".join(parts), [0, 1, 2, 3]


def _reference() -> list:
    conn, data, _ = _stream()
    return conn.receive_data(data)


def _same(got: list, want: list) -> None:
    assert [(e.correlation_id, e.api, e.version) for e in got] == [
        (e.correlation_id, e.api, e.version) for e in want]
    assert [e.response for e in got] == [e.response for e in want]


def _feed(conn: Connection, data: bytes, steps: list[tuple[bool, int]]) -> list:
    """Feed ``data`` in steps of (read into the frame?, up to how many bytes); what is
    left after the steps goes in with receive_data."""
    events: list = []
    pos = 0
    for into, size in steps:
        if pos == len(data):
            break
        view = conn.receive_buffer() if into else None
        if view is not None:
            n = min(size, len(view), len(data) - pos)
            view[:n] = data[pos : pos + n]
            events += conn.received_into(n)
        else:
            n = min(size, len(data) - pos)
            events += conn.receive_data(data[pos : pos + n])
        pos += n
    events += conn.receive_data(data[pos:])
    return events


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 80_000)), max_size=60))
def test_any_mix_and_split_gives_the_same_responses(steps: list[tuple[bool, int]]) -> None:
    conn, data, _ = _stream()
    _same(_feed(conn, data, steps), _reference())
    assert conn.in_flight == 0 and conn.receive_buffer() is None


def test_one_byte_at_a_time_into_the_frame() -> None:
    conn, data, cids = _stream()
    events = []
    into = 0
    for i in range(len(data)):
        view = conn.receive_buffer()
        if view is None:
            # Between frames: the size prefix goes in through receive_data.
            got = conn.receive_data(data[i : i + 1])
        else:
            view[0] = data[i]
            got = conn.received_into(1)
            into += 1
        # A response appears exactly when the last byte of its frame arrives.
        assert len(got) <= 1
        events += got
    assert [e.correlation_id for e in events] == cids
    assert into == len(data) - 4 * len(cids)  # every byte but the size prefixes
    _same(events, _reference())


def test_the_view_is_the_unfilled_rest_of_the_frame() -> None:
    conn, data, _ = _stream()
    assert conn.receive_buffer() is None  # nothing received yet
    conn.receive_data(data[:3])
    assert conn.receive_buffer() is None  # the size prefix is not complete
    size = struct.unpack_from(">i", data)[0]
    conn.receive_data(data[3:10])
    view = conn.receive_buffer()
    assert view is not None and not view.readonly and len(view) == size - 6
    assert conn.received_into(0) == []  # nothing written: nothing changes
    view = conn.receive_buffer()
    assert view is not None and len(view) == size - 6
    view[:] = data[10 : 4 + size]
    (event,) = conn.received_into(len(view))
    assert event.correlation_id == 0
    assert conn.receive_buffer() is None  # between frames again


def test_records_read_into_the_frame_are_views_of_it() -> None:
    conn = Connection()
    cid, _ = conn.send(RECORDS_ECHO, RECORDS_ECHO.Request(name="x"), 1)
    first, second = b"\x01" * 100_000, b"\x02" * 50
    data = frame(cid, RECORDS_ECHO, 1, RECORDS_ECHO.Response(first=first, second=second))
    assert conn.receive_data(data[:4]) == []
    view = conn.receive_buffer()
    assert view is not None and len(view) == len(data) - 4
    view[:] = data[4:]
    (event,) = conn.received_into(len(view))
    got1, got2 = event.response.first, event.response.second
    assert got1.readonly and got2.readonly and got1.obj is got2.obj is view.obj
    assert bytes(got1) == first and bytes(got2) == second


def test_the_frame_is_allocated_after_the_size_check(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real = connection_module.alloc_buffer

    def counting(size: int) -> bytearray:
        sizes.append(size)
        return real(size)

    monkeypatch.setattr(connection_module, "alloc_buffer", counting)
    conn = Connection(max_frame_size=1000)
    conn.send(METADATA, METADATA.Request(), 1)
    with pytest.raises(FrameTooLargeError, match="1001 bytes"):
        conn.receive_data(struct.pack(">i", 1001))
    assert sizes == []  # refused before anything was allocated for it
    with pytest.raises(FrameTooLargeError, match="unusable"):
        conn.receive_buffer()
    with pytest.raises(FrameTooLargeError, match="unusable"):
        conn.received_into(0)

    conn = Connection(max_frame_size=1000)
    cid, _ = conn.send(METADATA, METADATA.Request(), 1)
    data = frame(cid, METADATA, 1, metadata_response(1))
    conn.receive_data(data[:4])
    assert sizes == [len(data) - 4]  # one buffer, exactly the frame's size


def test_received_into_needs_the_view_just_given() -> None:
    conn, data, _ = _stream()
    with pytest.raises(ValueError, match="receive_buffer"):
        conn.received_into(1)  # no view given
    conn.receive_data(data[:8])
    view = conn.receive_buffer()
    assert view is not None
    with pytest.raises(ValueError, match=rf"received_into\({len(view) + 1}\).*0 to {len(view)}"):
        conn.received_into(len(view) + 1)
    with pytest.raises(ValueError, match=r"received_into\(-1\)"):
        conn.received_into(-1)
    conn.receive_data(data[8:9])  # the stream moved on: the view is outdated
    with pytest.raises(ValueError, match="no receive call in between"):
        conn.received_into(1)
    view = conn.receive_buffer()
    assert view is not None
    view[:1] = data[9:10]
    assert conn.received_into(1) == []
    with pytest.raises(ValueError, match="receive_buffer"):
        conn.received_into(1)  # the view was used up
    # None of these put the connection out of step.
    assert conn.poisoned is None
    _same(conn.receive_data(data[10:]), _reference())


def test_a_wrong_correlation_id_completed_in_the_frame_poisons() -> None:
    conn = Connection()
    cid, _ = conn.send(METADATA, METADATA.Request(), 1)
    data = frame(cid + 5, METADATA, 1, metadata_response(1))
    conn.receive_data(data[:4])
    view = conn.receive_buffer()
    assert view is not None
    view[:] = data[4:]
    with pytest.raises(CorrelationIdError, match=rf"correlation id {cid + 5}") as info:
        conn.received_into(len(view))
    assert info.value.events == []
    assert isinstance(conn.poisoned, CorrelationIdError)
    for call in (conn.receive_buffer, lambda: conn.received_into(0), lambda: conn.receive_data(b"\0")):
        with pytest.raises(CorrelationIdError, match="unusable"):
            call()


def test_an_undecodable_body_completed_in_the_frame_is_a_protocol_error() -> None:
    conn = Connection()
    cid, _ = conn.send(METADATA, METADATA.Request(), 1)
    good = frame(cid, METADATA, 1, metadata_response(1))
    short = struct.pack(">i", 10) + good[4:14]
    conn.receive_data(short[:4])
    view = conn.receive_buffer()
    assert view is not None
    view[:] = short[4:]
    with pytest.raises(ProtocolError, match=r"Metadata v1 response \(correlation id 0"):
        conn.received_into(len(view))
    assert conn.poisoned is not None


def test_an_answer_to_acks_zero_completed_in_the_frame_is_dropped() -> None:
    conn = Connection()
    dropped, _ = conn.send(METADATA, METADATA.Request(), 1, expects_response=False)
    cid, _ = conn.send(METADATA, METADATA.Request(), 1)
    events = []
    for c in (dropped, cid):
        data = frame(c, METADATA, 1, metadata_response(1))
        events += conn.receive_data(data[:4])
        view = conn.receive_buffer()
        assert view is not None
        view[:] = data[4:]
        events += conn.received_into(len(view))
    assert [e.correlation_id for e in events] == [cid]
