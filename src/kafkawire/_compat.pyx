# cython: language_level=3
"""Record factories for the drop-in codec (kafkawire.compat): the host client's own
ConsumerRecord objects for every record of one decoded batch, built in one call.

The host clients (kafka-python, aiokafka) turn each decoded record into their
ConsumerRecord in a Python loop; that loop, not decoding, is what their consumers spend
most of their time on once kafkawire's codec decodes the batches.  kafka_python_records
takes the records of one codec Batch and returns kafka-python's records with the very
fields it fills in; aiokafka's are made by the codec itself (decode_records_with, see
kafkawire.compat.aiokafka), and ``deserialize`` applies its deserializers to them.
Pure-Python twin: kafkawire.compat._factory_py (same names, same results,
tests/compat/test_factory.py holds them to it).
"""

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.list cimport PyList_GET_SIZE, PyList_GET_ITEM
from cpython.bytes cimport PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython cimport array
from libc.stdint cimport int64_t, uint64_t

import array as _array

cdef extern from "Python.h":
    # A tuple subclass's instance (kafka-python's ConsumerRecord namedtuple) filled in place.
    object PyType_GenericAlloc(PyTypeObject* tp, Py_ssize_t n)
    void PyTuple_SET_ITEM_RAW "PyTuple_SET_ITEM" (PyObject* t, Py_ssize_t i, PyObject* o)
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL

cdef array.array _SIZES = _array.array("q")


cdef inline void _put(object t, Py_ssize_t i, object o):
    # fills slot i of a new tuple (it takes a reference)
    Py_INCREF(o)
    PyTuple_SET_ITEM_RAW(<PyObject*>t, i, <PyObject*>o)


cdef inline int _size_of_varint(int64_t value) noexcept:
    # zigzag varint size (KIP-98 record fields), as codec.size_of_varint
    cdef uint64_t v = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline Py_ssize_t _len_or_minus1(object b) except -2:
    if b is None:
        return -1
    if PyBytes_CheckExact(b):
        return PyBytes_GET_SIZE(b)
    return len(b)


cdef int64_t _headers_wire_size(object headers, int64_t *names_and_values) except -1:
    """Encoded size of magic-2 record headers; their keys' UTF-8 plus values' bytes (the
    header size kafka-python reports) into names_and_values."""
    cdef Py_ssize_t n = len(headers), klen, vlen
    cdef int64_t size = _size_of_varint(n), plain = 0
    for pair in headers:
        h_key, h_value = pair
        PyUnicode_AsUTF8AndSize(h_key, &klen)
        size += _size_of_varint(klen) + klen
        plain += klen
        if h_value is None:
            size += 1
        else:
            vlen = len(h_value)
            size += _size_of_varint(vlen) + vlen
            plain += vlen
    names_and_values[0] = plain
    return size


def kafka_python_records(cr_type, str topic, partition, leader_epoch, list records,
                         int64_t base_offset, int64_t base_timestamp, raw_timestamps,
                         deserialize=None, key_deserializer=None, value_deserializer=None):
    """(ConsumerRecords, sizes, error): kafka-python's ConsumerRecords for the codec
    ``records`` of one magic-2 batch; the running total of their sizes (an ``array('q')``
    whose entry k is the sum of the first k records' ``size_in_bytes``, what kafka-python
    adds to its fetch metrics per record); and the exception a deserializer raised (the
    records are then those before it, as kafka-python hands them out before raising), or
    None.

    ``raw_timestamps``: the records' timestamps as stored, when the batch uses
    LogAppendTime (the decoded ones are then the batch's); None otherwise.  With
    ``deserialize`` (the fetcher's own ``_deserialize``) keys and values go through it
    with each deserializer, key first, as kafka-python does per record.
    """
    cdef Py_ssize_t n = PyList_GET_SIZE(records), i
    cdef list out = []
    cdef array.array sizes = array.clone(_SIZES, n + 1, zero=False)
    cdef long long *cum = sizes.data.as_longlongs
    cdef PyTypeObject *tp = <PyTypeObject*>cr_type
    cdef int64_t offset, ts, total = 0, size, hplain = 0
    cdef Py_ssize_t klen, vlen
    cdef bint custom = deserialize is not None and (
        key_deserializer is not None or value_deserializer is not None)
    cdef object r, h, key, value, headers, rec, o_offset, o_ts, ksize, vsize, hsize
    cum[0] = 0
    for i in range(n):
        r = <object>PyList_GET_ITEM(records, i)
        o_offset = r.offset
        o_ts = r.timestamp
        key = r.key
        value = r.value
        h = r.headers
        offset = o_offset
        ts = o_ts if raw_timestamps is None else raw_timestamps[i]
        klen = _len_or_minus1(key)
        vlen = _len_or_minus1(value)
        # attributes, offset delta, timestamp delta, key, value, headers (KIP-98)
        size = (1 + _size_of_varint(offset - base_offset) + _size_of_varint(ts - base_timestamp)
                + (1 if klen < 0 else _size_of_varint(klen) + klen)
                + (1 if vlen < 0 else _size_of_varint(vlen) + vlen))
        if len(h):
            headers = list(h)
            size += _headers_wire_size(headers, &hplain)
        else:
            headers = []
            size += 1
        total += size
        cum[i + 1] = total
        if custom:
            try:
                key = deserialize(key_deserializer, topic, headers, key)
                value = deserialize(value_deserializer, topic, headers, value)
            except Exception as exc:
                return out, sizes, exc
            if headers:  # a deserializer may have changed them: measured afterwards
                _headers_wire_size(headers, &hplain)
        hsize = hplain if headers else -1
        ksize = klen
        vsize = vlen
        rec = PyType_GenericAlloc(tp, 13)
        _put(rec, 0, topic)
        _put(rec, 1, partition)
        _put(rec, 2, leader_epoch)
        _put(rec, 3, o_offset)
        _put(rec, 4, o_ts)
        _put(rec, 5, r.timestamp_type)
        _put(rec, 6, key)
        _put(rec, 7, value)
        _put(rec, 8, headers)
        _put(rec, 9, None)
        _put(rec, 10, ksize)
        _put(rec, 11, vsize)
        _put(rec, 12, hsize)
        out.append(rec)
    return out, sizes, None


def deserialize(list records, key_deserializer, value_deserializer):
    """Each record's ``key`` and ``value`` put through the deserializers (either may be
    None), in record order, key first, as aiokafka's fetcher calls them per record.
    Returns the exception one raised, the list then cut to the records before that
    record; else None."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(records)
    cdef object r
    for i in range(n):
        r = <object>PyList_GET_ITEM(records, i)
        try:
            if key_deserializer is not None:
                r.key = key_deserializer(r.key)
            if value_deserializer is not None:
                r.value = value_deserializer(r.value)
        except Exception as exc:
            del records[i:]
            return exc
    return None


# ---- aiokafka's magic-2 batch builder: the per-record append --------------------------

import time as _time_module

from kafkawire.compat import _hostbytes

cdef object _now = _time_module.time
cdef object _headers_size = _hostbytes.headers_size
cdef long long _TS_LIMIT = _hostbytes.TIMESTAMP_LIMIT
# the batch header and the most a record's own fields (length, attributes, deltas) take
cdef Py_ssize_t _V2_HEADER_AND_OVERHEAD = 61 + 21

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1


cdef class DefaultRecordMetadata:
    """What aiokafka's DefaultRecordBatchBuilder.append returns: offset, size, timestamp
    (crc None: magic 2 has no per-record CRC)."""

    # C fields only: out of the cyclic GC, as aiokafka's own (one is made per record)
    cdef readonly int64_t offset, timestamp
    cdef readonly Py_ssize_t size

    def __init__(self, int64_t offset, Py_ssize_t size, int64_t timestamp):
        self.offset = offset
        self.size = size
        self.timestamp = timestamp

    @property
    def crc(self):
        return None

    def __repr__(self):
        return (f"DefaultRecordMetadata(offset={self.offset!r}, size={self.size!r}, "
                f"timestamp={self.timestamp!r})")


cdef inline Py_ssize_t _field_size(object data) except -2:
    # encoded size of a key or value; -1: not bytes-like the fast path takes
    cdef Py_ssize_t n
    if data is None:
        return 1
    if type(data) is bytes or type(data) is bytearray or type(data) is memoryview:
        n = len(data)
        return _size_of_varint(n) + n
    return -1


cdef class AiokafkaAppender:
    """The per-record part of kafkawire's DefaultRecordBatchBuilder for aiokafka
    (kafkawire.compat.aiokafka), which subclasses it: ``append`` keeps the record and
    returns its metadata, the sizes aiokafka's own builder reports; what it does not take
    (other types, offsets out of order, extreme timestamps, unusual headers) goes to the
    subclass's ``_to_fallback()``, aiokafka's own builder."""

    # key, value, timestamp of each record one after the other (no object per record:
    # one per record would be a GC allocation, and the collector would run every 700),
    # and record index -> headers for those with headers
    cdef public list _records
    cdef public dict _headers
    cdef public object _first_timestamp
    cdef public Py_ssize_t _size, _batch_size
    cdef public object _fallback

    @classmethod
    def estimate_size_in_bytes(cls, key, value, headers):
        """A record's size at most, with the batch header: aiokafka's producer asks it
        for every record it sends.  Anything but an empty headers list and bytes-like or
        None keys and values goes to the host's own (``cls._host_estimate``), which
        raises as it does."""
        cdef Py_ssize_t k = _field_size(key), v = _field_size(value)
        if k < 0 or v < 0 or headers or type(headers) is not list:
            return cls._host_estimate(key, value, headers)
        return _V2_HEADER_AND_OVERHEAD + k + v + 1

    def append(self, offset, timestamp, key, value, headers):
        cdef Py_ssize_t size, n
        cdef long long ts, off, first_ts
        cdef int overflow = 0
        cdef DefaultRecordMetadata meta
        if self._fallback is not None:
            return self._fallback.append(offset, timestamp, key, value, headers)
        if timestamp is None:
            timestamp = int(_now() * 1000)
        records = self._records
        if type(offset) is not int or type(timestamp) is not int:
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        off = PyLong_AsLongLongAndOverflow(offset, &overflow)
        if not overflow:
            ts = PyLong_AsLongLongAndOverflow(timestamp, &overflow)
        if overflow or off != len(records) // 3 or not -_TS_LIMIT <= ts < _TS_LIMIT:
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        size = _field_size(key)
        n = _field_size(value)
        if size < 0 or n < 0:
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        size += n
        if not headers and type(headers) is list:
            size += 1
        else:
            h = _headers_size(headers)
            if h is None:
                return self._to_fallback().append(offset, timestamp, key, value, headers)
            size += <Py_ssize_t>h
        first = self._first_timestamp
        if first is None:
            size += 2 + _size_of_varint(off)  # attributes, timestamp delta 0
        else:
            first_ts = first
            size += 1 + _size_of_varint(ts - first_ts) + _size_of_varint(off)
        size += _size_of_varint(size)
        if first is not None and self._size + size > self._batch_size:
            return None
        if first is None:
            self._first_timestamp = timestamp
        self._size += size
        records.append(key)
        records.append(value)
        records.append(timestamp)
        if headers:
            self._headers[off] = headers
        meta = DefaultRecordMetadata.__new__(DefaultRecordMetadata)
        meta.offset = off
        meta.size = size
        meta.timestamp = ts
        return meta


# ---- aiokafka's producer: a batch's record futures resolved ---------------------------

def resolve_aiokafka_futures(list msg_futures, md_type, topic, partition, tp, base_offset,
                             timestamp, timestamp_type, log_start_offset):
    """Each not yet done future of ``msg_futures`` ((future, metadata) pairs, a
    MessageBatch's) resolved with aiokafka's RecordMetadata (``md_type``, a 7-field
    namedtuple, filled in place) as MessageBatch.done resolves them, in order: offset
    base_offset + the record's, and the timestamp the broker returned, or where it
    returned -1, the first resolved record's own (aiokafka reuses it for the rest)."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msg_futures)
    cdef PyTypeObject *t = <PyTypeObject*>md_type
    cdef object pair, future, metadata, md
    for i in range(n):
        pair = <object>PyList_GET_ITEM(msg_futures, i)
        future, metadata = pair
        if future.done():
            continue
        if timestamp == -1:
            timestamp = metadata.timestamp
        md = PyType_GenericAlloc(t, 7)
        _put(md, 0, topic)
        _put(md, 1, partition)
        _put(md, 2, tp)
        _put(md, 3, base_offset + metadata.offset)
        _put(md, 4, timestamp)
        _put(md, 5, timestamp_type)
        _put(md, 6, log_start_offset)
        future.set_result(md)
