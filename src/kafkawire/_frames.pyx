# cython: language_level=3, freethreading_compatible=False
# freethreading_compatible=False, as the other extensions: one build configuration.
"""Requests and answers on the per-record paths, framed and read in one call each: a
producer's lone Produce request (``produce_frame``) and its answer (``produce_answer``),
and a consumer's Fetch answer (``fetch_answer``; ``fetch_body`` when it came in parts).
A client sending or receiving one record at a time pays this on every record, with its
caches cold after waiting for the broker, so each is a few C steps instead of a dozen
Python calls (issue 23).

Each takes only the common shape and returns None for anything else, which
kafkawire.protocol.connection's general writer or reader then takes (and judges, with
its own error messages).  What they make is byte for byte, and object for object, what
the general path makes.  The pure-Python twin is kafkawire.protocol._frames_py, with the
same names and results (tests/protocol/test_produce_fastpath.py and
test_fetch_fastpath.py hold them to it).  No I/O.
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

include "_wire.pxi"

IMPLEMENTATION = "cython"


# -- the Produce request -------------------------------------------------------------------

def produce_frame(request, int version, int32_t correlation_id, bytes header_tail):
    """The framed Produce ``request`` at ``version`` (v3-v11) with ``correlation_id``,
    ``header_tail`` being the request header after the correlation id (client id, and
    tags from v9), as chunks to write in order: the bytes up to the records, the records
    object itself (not copied), and from v9 the three empty tag sections.  Only for one
    partition of one topic with records as non-empty bytes; None for anything else, which
    ``Connection.send_produce``'s general writer then takes (and judges).  Byte for byte
    what ``protocol.producer.encode_produce`` and the Connection's framing write."""
    if version < 3 or version > 11:
        return None
    topics = request.topic_data
    if type(topics) is not list or len(<list>topics) != 1:
        return None
    topic = (<list>topics)[0]
    parts = topic.partition_data
    if type(parts) is not list or len(<list>parts) != 1:
        return None
    part = (<list>parts)[0]
    return _frame_one(request.transactional_id, request.acks, request.timeout_ms, topic.name, part.index,
                      part.records, version, correlation_id, header_tail)


def produce_frame_one(transactional_id, acks, timeout_ms, topic, partition, records, int version,
                      int32_t correlation_id, bytes header_tail):
    """``produce_frame`` for the request with these fields and one partition of one topic,
    without a request object: a producer's lone batch (Accumulator.lone_request) goes
    from its fields to the wire in this one call.  None where produce_frame gives None."""
    if version < 3 or version > 11:
        return None
    return _frame_one(transactional_id, acks, timeout_ms, topic, partition, records, version,
                      correlation_id, header_tail)


cdef object _frame_one(tx, acks, timeout_ms, name, index, records, int version, int32_t correlation_id,
                       bytes header_tail):
    cdef bint flexible = version >= 9
    cdef Py_ssize_t tx_len = -1, name_len, rec_len, size, head_len
    cdef unsigned char* o
    cdef bytes head
    if (not PyBytes_CheckExact(records) or PyBytes_GET_SIZE(records) == 0 or type(name) is not str
            or (tx is not None and type(tx) is not str) or type(index) is not int
            or type(acks) is not int or type(timeout_ms) is not int
            or not -0x8000 <= acks <= 0x7FFF or not -0x80000000 <= timeout_ms <= 0x7FFFFFFF
            or not -0x80000000 <= index <= 0x7FFFFFFF):
        return None  # the general writer judges the values
    try:
        name_b = (<str>name).encode("utf-8")
        tx_b = None if tx is None else (<str>tx).encode("utf-8")
    except UnicodeEncodeError:
        return None
    name_len = PyBytes_GET_SIZE(name_b)
    if tx_b is not None:
        tx_len = PyBytes_GET_SIZE(tx_b)
    rec_len = PyBytes_GET_SIZE(records)
    if not flexible and (name_len > 0x7FFF or tx_len > 0x7FFF or rec_len > 0x7FFFFFFF):
        return None
    # header, then transactional_id, acks, timeout_ms, topic count, name, partition
    # count, index, the records' length
    head_len = 8 + PyBytes_GET_SIZE(header_tail) + 6 + 4
    if flexible:
        head_len += (_size_uvar(<uint64_t>(tx_len + 1)) + (tx_len if tx_len > 0 else 0) + 1
                     + _size_uvar(<uint64_t>(name_len + 1)) + name_len + 1
                     + _size_uvar(<uint64_t>(rec_len + 1)))
    else:
        head_len += 2 + (tx_len if tx_len > 0 else 0) + 4 + 2 + name_len + 4 + 4
    size = head_len + rec_len + (3 if flexible else 0)
    if size > 0x7FFFFFFF:
        return None  # the general writer refuses it, saying why
    head = PyBytes_FromStringAndSize(NULL, head_len + 4)
    o = <unsigned char*>PyBytes_AS_STRING(head)
    _put32(o, <uint32_t>(size))
    _put16(o + 4, 0)  # Produce
    _put16(o + 6, <uint16_t>version)
    _put32(o + 8, <uint32_t>correlation_id)
    o += 12
    memcpy(o, PyBytes_AS_STRING(header_tail), PyBytes_GET_SIZE(header_tail))
    o += PyBytes_GET_SIZE(header_tail)
    if flexible:
        o = _put_uvar(o, <uint64_t>(tx_len + 1))  # 0: null
    else:
        _put16(o, <uint16_t>tx_len)  # -1: null
        o += 2
    if tx_len > 0:
        memcpy(o, PyBytes_AS_STRING(tx_b), tx_len)
        o += tx_len
    _put16(o, <uint16_t>(<int>acks))
    _put32(o + 2, <uint32_t>(<int64_t>timeout_ms))
    o += 6
    if flexible:
        o[0] = 2  # one topic
        o = _put_uvar(o + 1, <uint64_t>(name_len + 1))
    else:
        _put32(o, 1)
        _put16(o + 4, <uint16_t>name_len)
        o += 6
    memcpy(o, PyBytes_AS_STRING(name_b), name_len)
    o += name_len
    if flexible:
        o[0] = 2  # one partition
        o += 1
    else:
        _put32(o, 1)
        o += 4
    _put32(o, <uint32_t>(<int64_t>index))
    o += 4
    if flexible:
        _put_uvar(o, <uint64_t>(rec_len + 1))
        return [head, records, b"\0\0\0"]  # the partition's, topic's and request's tags
    _put32(o, <uint32_t>rec_len)
    return [head, records]


# -- answers -------------------------------------------------------------------------------

cdef Py_ssize_t _body_at(data, int64_t correlation_id, bint flexible):
    """Where the body of ``data`` starts when it is one whole answer frame (bytes) to
    ``correlation_id`` (its header, from flexible versions on, without tagged fields);
    else -1."""
    cdef const unsigned char* d
    cdef Py_ssize_t n
    if not PyBytes_CheckExact(data):
        return -1
    d = <const unsigned char*>PyBytes_AS_STRING(data)
    n = PyBytes_GET_SIZE(data)
    if n < 8 or _be32(d) != <uint64_t>(n - 4) or <int32_t>_be32(d + 4) != correlation_id:
        return -1
    if not flexible:
        return 8
    return 9 if n >= 9 and d[8] == 0 else -1


# -- the Produce answer --------------------------------------------------------------------

cdef object _Response = None  # Produce's response structs, looked up on first use
cdef object _TopicResponse, _PartitionResponse, _LeaderIdAndEpoch


def produce_answer(data, int64_t correlation_id, int version):
    """A whole Produce answer frame (``data``: size prefix included, nothing after it) to
    the request with ``correlation_id`` at ``version``, decoded into the objects the schema
    decoder makes, when it is the common answer for one partition of one topic (v3-v11,
    no per-record errors, no error message, no tagged fields); None for anything else,
    which the general reader then takes.  ``protocol.producer._decode_one`` in C, with
    the frame and header checks around it: a lone record's answer in one call."""
    global _Response, _TopicResponse, _PartitionResponse, _LeaderIdAndEpoch
    cdef const unsigned char* d
    cdef Py_ssize_t n, pos, name_at, name_len, tail, q
    cdef bint flexible = version >= 9
    cdef int64_t log_start = -1
    pos = _body_at(data, correlation_id, flexible) if 3 <= version <= 11 else -1
    if pos < 0:
        return None
    d = <const unsigned char*>PyBytes_AS_STRING(data)
    n = PyBytes_GET_SIZE(data)
    if flexible:  # one topic, a name of 0-126 bytes, one partition
        if n < 11 or d[9] != 2 or not 1 <= d[10] <= 127:
            return None
        name_len = d[10] - 1
        name_at = 11
        pos = name_at + name_len
        if pos >= n or d[pos] != 2:
            return None
        pos += 1
    else:
        if n < 14 or _be32(d + 8) != 1:
            return None
        name_len = <int16_t>_be16(d + 12)
        if name_len < 0:
            return None
        name_at = 14
        pos = name_at + name_len
        if pos + 4 > n or _be32(d + pos) != 1:
            return None
        pos += 4
    # index, error_code, base_offset, log_append_time_ms[, log_start_offset (v5+)][, the
    # empty record_errors and null error_message (v8+; v9+ with the partition's and topic's
    # empty tags)], throttle_time_ms[, the response's empty tags (v9+)]
    tail = 22 + (8 if version >= 5 else 0) + (6 if version == 8 else 0) + (5 if flexible else 0) + 4
    if n - pos != tail:
        return None
    q = pos + 22
    if version >= 5:
        log_start = <int64_t>_be64(d + q)
        q += 8
    if version == 8:
        if _be32(d + q) != 0 or d[q + 4] != 0xFF or d[q + 5] != 0xFF:
            return None
        q += 6
    if flexible:
        if d[q] != 1 or d[q + 1] != 0 or d[q + 2] != 0 or d[q + 3] != 0 or d[n - 1] != 0:
            return None
        q += 4
    try:
        name = (<bytes>data)[name_at:name_at + name_len].decode("utf-8")
    except UnicodeDecodeError:
        return None  # the general reader says what is wrong
    if _Response is None:
        from kafkawire.protocol import producer as _p
        _TopicResponse, _PartitionResponse, _LeaderIdAndEpoch = (
            _p._TopicResponse, _p._PartitionResponse, _p._LeaderIdAndEpoch)
        _Response = _p._Response
    p = _PartitionResponse.__new__(_PartitionResponse)
    p.index = <int32_t>_be32(d + pos)
    p.error_code = <int16_t>_be16(d + pos + 4)
    p.base_offset = <int64_t>_be64(d + pos + 6)
    p.log_append_time_ms = <int64_t>_be64(d + pos + 14)
    p.log_start_offset = log_start
    p.record_errors = []
    p.error_message = None
    p.current_leader = leader = _LeaderIdAndEpoch.__new__(_LeaderIdAndEpoch)
    leader.leader_id = leader.leader_epoch = -1
    t = _TopicResponse.__new__(_TopicResponse)
    t.name = name
    t.partition_responses = [p]
    r = _Response.__new__(_Response)
    r.responses = [t]
    r.throttle_time_ms = <int32_t>_be32(d + q)
    r.node_endpoints = []
    return r


# -- the Fetch answer ----------------------------------------------------------------------

cdef object _FetchResponse = None  # Fetch's response structs, looked up on first use
cdef object _FetchTopic, _FetchPartition, _Aborted, _read_uuid


DEF BAD = -(1 << 40)  # _count: the bytes run out, or a compact length past 31 bits


cdef inline int64_t _count(const unsigned char* d, Py_ssize_t* pos, Py_ssize_t n, bint flexible) noexcept nogil:
    """An array's count or a byte string's length at ``pos[0]``, moving past it: an int32,
    or in a flexible version the compact length's count (-1: null); BAD if it runs past
    ``n`` or a compact length does not fit 31 bits."""
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef unsigned char b
    if not flexible:
        if n - pos[0] < 4:
            return BAD
        v = _be32(d + pos[0])
        pos[0] += 4
        return <int32_t>v
    while True:  # an unsigned varint: the count plus one
        if pos[0] >= n or shift > 28:
            return BAD
        b = d[pos[0]]
        pos[0] += 1
        v |= <uint64_t>(b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    if v > <uint64_t>0x80000000:
        return BAD
    return <int64_t>v - 1


def fetch_answer(data, int64_t correlation_id, int version):
    """A whole Fetch answer frame (``data``: size prefix included, nothing after it) to the
    request with ``correlation_id`` at ``version`` (v4-v17), read as :func:`fetch_body`
    reads its body, records as read-only views of ``data``; None for anything else,
    which the general reader then takes."""
    cdef Py_ssize_t pos = _body_at(data, correlation_id, version >= 12) if 4 <= version <= 17 else -1
    if pos < 0:
        return None
    return _fetch_decode(<const unsigned char*>PyBytes_AS_STRING(data), pos, PyBytes_GET_SIZE(data),
                         memoryview(data), version)


def fetch_body(body, int version):
    """A Fetch answer's ``body`` (a read-only memoryview after the response header) at
    ``version`` decoded into the objects the schema decoder makes, records as views of
    ``body``, when it has no tagged fields; None for anything else (the schema
    decoder's).  ``protocol.fetch_response.decode_fetch_response`` in C: the answer of a
    frame that came in several reads."""
    cdef Py_buffer b
    if not 4 <= version <= 17:
        return None
    PyObject_GetBuffer(body, &b, PyBUF_SIMPLE)
    try:
        return _fetch_decode(<const unsigned char*>b.buf, 0, b.len, body, version)
    finally:
        PyBuffer_Release(&b)


cdef object _fetch_decode(const unsigned char* d, Py_ssize_t pos, Py_ssize_t n, view, int version):
    """The Fetch answer body in ``d[pos:n]``, ``view`` being the object ``d`` is the buffer
    of (records are its slices); None where the general reader must read it."""
    global _FetchResponse, _FetchTopic, _FetchPartition, _Aborted, _read_uuid
    cdef Py_ssize_t i, j, k
    cdef int64_t topics, parts, aborted, size
    cdef bint flexible = version >= 12
    if _FetchResponse is None:
        from kafkawire.protocol import fetch_response as _f
        from kafkawire.protocol.schema import _read_uuid as read_uuid
        _FetchTopic, _FetchPartition, _Aborted = _f._Topic, _f._Partition, _f._Aborted
        _read_uuid = read_uuid
        _FetchResponse = _f._Response
    r = _FetchResponse.__new__(_FetchResponse)
    if version >= 7:  # throttle_time_ms, error_code, session_id
        if n - pos < 10:
            return None
        r.throttle_time_ms = <int32_t>_be32(d + pos)
        r.error_code = <int16_t>_be16(d + pos + 4)
        r.session_id = <int32_t>_be32(d + pos + 6)
        pos += 10
    else:
        if n - pos < 4:
            return None
        r.throttle_time_ms = <int32_t>_be32(d + pos)
        r.error_code = r.session_id = 0
        pos += 4
    topics = _count(d, &pos, n, flexible)
    if not 0 <= topics <= n - pos:
        return None
    r.responses = responses = []
    for i in range(topics):
        t = _FetchTopic.__new__(_FetchTopic)
        if version >= 13:  # named by id (KIP-516)
            if n - pos < 16:
                return None
            t.topic = ""
            t.topic_id = _read_uuid(view, pos, n)[0]
            pos += 16
        else:
            if flexible:
                size = _count(d, &pos, n, True)
            elif n - pos < 2:
                return None
            else:
                size = <int16_t>_be16(d + pos)
                pos += 2
            if not 0 <= size <= n - pos:
                return None
            try:
                t.topic = (<const char*>d)[pos:pos + size].decode("utf-8")
            except UnicodeDecodeError:
                return None  # the general reader says what is wrong
            t.topic_id = _FetchTopic._default_topic_id()
            pos += size
        parts = _count(d, &pos, n, flexible)
        if not 0 <= parts <= n - pos:
            return None
        t.partitions = partitions = []
        for j in range(parts):
            # partition_index, error_code, high_watermark, last_stable_offset[, log_start_offset]
            if n - pos < (30 if version >= 5 else 22):
                return None
            p = _FetchPartition.__new__(_FetchPartition)
            p.partition_index = <int32_t>_be32(d + pos)
            p.error_code = <int16_t>_be16(d + pos + 4)
            p.high_watermark = <int64_t>_be64(d + pos + 6)
            p.last_stable_offset = <int64_t>_be64(d + pos + 14)
            pos += 22
            if version >= 5:
                p.log_start_offset = <int64_t>_be64(d + pos)
                pos += 8
            else:
                p.log_start_offset = -1
            aborted = _count(d, &pos, n, flexible)
            if aborted == BAD:
                return None
            if aborted < 0:  # null (an int32 below -1 reads as null too, as in the general reader)
                p.aborted_transactions = None
            elif not 0 <= aborted <= n - pos:
                return None
            else:
                p.aborted_transactions = txns = []
                for k in range(aborted):
                    if n - pos < (17 if flexible else 16):
                        return None
                    a = _Aborted.__new__(_Aborted)
                    a.producer_id = <int64_t>_be64(d + pos)
                    a.first_offset = <int64_t>_be64(d + pos + 8)
                    pos += 16
                    if flexible:
                        if d[pos] != 0:
                            return None
                        pos += 1
                    txns.append(a)
            if version >= 11:
                if n - pos < 4:
                    return None
                p.preferred_read_replica = <int32_t>_be32(d + pos)
                pos += 4
            else:
                p.preferred_read_replica = -1
            size = _count(d, &pos, n, flexible)
            if size == BAD:
                return None
            if size < 0:
                p.records = None
            elif not 0 <= size <= n - pos:
                return None
            else:
                p.records = view[pos:pos + size]
                pos += size
            if flexible:
                if pos >= n or d[pos] != 0:
                    return None  # diverging_epoch, current_leader or snapshot_id: the general reader's
                pos += 1
            p.diverging_epoch = _FetchPartition._default_diverging_epoch()
            p.current_leader = _FetchPartition._default_current_leader()
            p.snapshot_id = _FetchPartition._default_snapshot_id()
            partitions.append(p)
        if flexible:
            if pos >= n or d[pos] != 0:
                return None
            pos += 1
        responses.append(t)
    if flexible:
        if pos >= n or d[pos] != 0:
            return None  # node_endpoints (v16+, KIP-951): the general reader's
        pos += 1
    if pos != n:
        return None
    r.node_endpoints = []
    return r
