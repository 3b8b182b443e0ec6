# cython: language_level=3, freethreading_compatible=False
# freethreading_compatible=False: an append relies on the GIL to be atomic (see Appender),
# so on a free-threaded CPython importing this module turns the GIL back on.
"""The producer's per-record hot path, compiled: a batch that encodes each record as it is
appended, and the one call send() makes to append a record to its partition's open batch.

A record is framed (RecordBatch v2 varints: length, attributes, timestampDelta,
offsetDelta, key, value, headers) into its batch's buffer as it is appended, so sending
a batch costs only its 61-byte header, its CRC32C (and compression).  The bytes equal
``codec.encode_record_batch`` of the same records.  The decisions (which batch, when it
is full, memory, linger, producer id stamping) stay in kafkawire.protocol.accumulator;
its pure-Python twin is kafkawire.protocol._accumulate_py, with the same names and results.
No I/O: the wall clock for records without a timestamp is the ``clock_ns`` the shell
gives (``time.time_ns`` itself is read in C, the same clock without a Python call).
"""

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.dict cimport PyDict_GetItem
from cpython.long cimport PyLong_AsLongLong, PyLong_FromLongLong, PyLong_AsSsize_t
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libc.stdlib cimport realloc, free

from kafkawire import compression as _compression
from kafkawire import errors as _errors

cdef extern from "_crc.h" nogil:
    int kw_crc_init_from_env()
    uint32_t kw_crc32c(uint32_t crc, const unsigned char *p, size_t n)

cdef extern from "Python.h":
    object PyObject_CallNoArgs(object)
    # A tuple subclass's instance (RecordFuture) without building a tuple to copy from.
    object PyType_GenericAlloc(PyTypeObject* tp, Py_ssize_t n)
    void PyTuple_SET_ITEM_RAW "PyTuple_SET_ITEM" (PyObject* t, Py_ssize_t i, PyObject* o)

cdef extern from *:
    """
    #include <time.h>
    #include <stdint.h>
    /* The wall clock in ms, as time.time_ns() // 1000000 reads it (C11 timespec_get,
       CLOCK_REALTIME on POSIX). */
    static long long kw_wall_ms(void) {
        struct timespec t;
        timespec_get(&t, TIME_UTC);
        return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
    }
    /* a - b into *out; 1 if it does not fit an int64 (portable: no compiler builtin). */
    static int kw_sub_overflow(int64_t a, int64_t b, int64_t *out) {
        if ((b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b)) return 1;
        *out = a - b;
        return 0;
    }
    /* Without a GIL (free-threaded CPython) an append is not atomic by itself. */
    #ifdef Py_GIL_DISABLED
    #define KW_NEEDS_LOCK 1
    #else
    #define KW_NEEDS_LOCK 0
    #endif
    """
    long long kw_wall_ms() nogil
    bint kw_sub_overflow(int64_t a, int64_t b, int64_t* out) nogil
    int KW_NEEDS_LOCK

cdef int _CRC = kw_crc_init_from_env()  # KAFKAWIRE_CRC32C, as in _codec

IMPLEMENTATION = "cython"

# Bytes counted against batch_size and buffer_memory per record beyond key and value
# (accumulator.RECORD_OVERHEAD: the Java client's worst-case framing estimate).
DEF RECORD_OVERHEAD = 21
DEF HEADER = 61  # RecordBatch v2 header: baseOffset .. recordCount


include "_wire.pxi"


cdef inline unsigned char* _put_span(unsigned char* o, const unsigned char* p,
                                     Py_ssize_t n) noexcept nogil:
    """A record field: its length as a zigzag varint, then its bytes; null (-1) alone."""
    if n < 0:
        o[0] = 1  # zigzag(-1)
        return o + 1
    o = _put_uvar(o, <uint64_t>n << 1)
    memcpy(o, p, n)
    return o + n


cdef unsigned char* _put_object(unsigned char* o, object obj) except NULL:
    """_put_span of a header key or value: a bytes-like object, or None (null)."""
    cdef Py_buffer b
    if obj is None:
        return _put_span(o, NULL, -1)
    PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE)
    try:
        return _put_span(o, <const unsigned char*>b.buf, b.len)
    finally:
        PyBuffer_Release(&b)


cdef inline uint64_t _zz64(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef inline uint32_t _murmur2(const unsigned char* d, Py_ssize_t n) noexcept nogil:
    # Kafka's murmur2 (the Java client's Utils.murmur2, seed 0x9747b28c): blocks of four
    # bytes read little-endian, the tail folded in after them.
    cdef uint32_t m = 0x5BD1E995
    cdef uint32_t h = 0x9747B28CU ^ <uint32_t>n
    cdef uint32_t k
    cdef Py_ssize_t i = 0
    while i + 4 <= n:
        k = (<uint32_t>d[i] | (<uint32_t>d[i + 1] << 8) | (<uint32_t>d[i + 2] << 16)
             | (<uint32_t>d[i + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h = (h * m) ^ k
        i += 4
    if n - i == 3:
        h ^= <uint32_t>d[i + 2] << 16
    if n - i >= 2:
        h ^= <uint32_t>d[i + 1] << 8
    if n - i >= 1:
        h ^= <uint32_t>d[i]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h


def murmur2(data):
    """Kafka's murmur2 of ``data`` (bytes-like) as a signed 32-bit int: the compiled
    build's kafkawire.core.partitioner.murmur2."""
    cdef Py_buffer b
    cdef uint32_t h
    PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
    try:
        h = _murmur2(<const unsigned char*>b.buf, b.len)
    finally:
        PyBuffer_Release(&b)
    return <int32_t>h


cdef class Batch:
    """One partition's batch: the accumulator's bookkeeping (public attributes, as the
    pure-Python twin's slots) and, for records appended one by one, their encoding.

    ``records`` is None for such a batch; send_batch sets it to its record list (with
    ``encoded`` given) and ``columns`` to its Columns."""

    cdef public object topic, partition, records, columns, future, encoded
    cdef public object created, deadline, retry_at
    cdef public Py_ssize_t size, reserved
    cdef public long attempts
    cdef public bint full, in_flight, unknown
    cdef public int64_t default_ts, pid, sequence
    cdef public int epoch
    cdef unsigned char* buf
    cdef Py_ssize_t used, cap, n
    cdef int64_t base_ts, max_ts

    def __init__(self, topic, partition, now, deadline, future):
        self.topic = topic
        self.partition = partition
        self.records = None
        self.columns = None
        self.size = 61  # accumulator.BATCH_OVERHEAD
        self.created = now
        # Resolves to (base_offset, log_append_time_ms) for the whole batch.
        self.future = future
        self.attempts = 0
        self.deadline = deadline
        self.retry_at = 0.0
        # (magic, codec, bytes, (producer id, epoch, base sequence) in those bytes)
        self.encoded = None
        self.reserved = 0
        self.full = False
        self.in_flight = False
        self.default_ts = -1
        # The idempotent producer's stamp (protocol/idempotence.py); -1 until first sent.
        self.pid = -1
        self.epoch = -1
        self.sequence = -1
        self.unknown = False

    def __dealloc__(self):
        free(self.buf)

    def count(self):
        if self.columns is not None:
            return len(self.columns)
        if self.records is not None:
            return len(self.records)
        return self.n

    def allocate(self, Py_ssize_t capacity):
        """Room for ``capacity`` bytes of encoded records up front (the batch_size the
        accumulator reserved for it), so appending does not grow the buffer."""
        cdef unsigned char* grown
        if capacity > self.cap:
            grown = <unsigned char*>realloc(self.buf, capacity)
            if grown == NULL:
                raise MemoryError()
            self.buf = grown
            self.cap = capacity

    def trim(self):
        """No record is appended from now on: give back the room allocated beyond the
        records encoded so far."""
        cdef unsigned char* smaller
        if self.buf != NULL and self.cap > self.used:
            smaller = <unsigned char*>realloc(self.buf, self.used if self.used else 1)
            if smaller != NULL:  # else it keeps the larger buffer, which is still valid
                self.buf = smaller
                self.cap = self.used

    def free(self):
        """Let go of the encoded records (the batch is done: acknowledged or failed)."""
        free(self.buf)
        self.buf = NULL
        self.used = self.cap = 0

    @property
    def appended(self):
        """Records appended one by one (encoded in this batch)."""
        return self.n

    cdef Py_ssize_t _add(self, const unsigned char* k, Py_ssize_t kn, const unsigned char* v,
                         Py_ssize_t vn, int64_t ts, object headers) except -1:
        # kn/vn -1: null.  headers: None or a tuple of (bytes key, bytes-like value or None).
        cdef int64_t delta
        cdef Py_ssize_t body, need, i, nh = 0, hk, hv
        cdef unsigned char* o
        cdef unsigned char* grown
        if self.n == 0:
            delta = 0
        elif kw_sub_overflow(ts, self.base_ts, &delta):
            raise _errors.encode_error(
                f"record {self.n}: timestampDelta {ts - self.base_ts} out of range for varlong")
        body = 1 + _size_uvar(_zz64(delta)) + _size_uvar(<uint64_t>self.n << 1)
        body += 1 if kn < 0 else _size_uvar(<uint64_t>kn << 1) + kn
        body += 1 if vn < 0 else _size_uvar(<uint64_t>vn << 1) + vn
        if headers is not None:
            nh = len(headers)
            for h in headers:
                hk = len(h[0])
                body += _size_uvar(<uint64_t>hk << 1) + hk
                if h[1] is None:
                    body += 1
                else:
                    hv = len(h[1])
                    body += _size_uvar(<uint64_t>hv << 1) + hv
        body += _size_uvar(<uint64_t>nh << 1)
        if body > 2147483647:
            raise _errors.encode_error(f"record {self.n}: {body} bytes is larger than a record can be")
        need = self.used + body + 5
        if need > self.cap:
            need = max(need, self.cap * 2, 4096)
            grown = <unsigned char*>realloc(self.buf, need)
            if grown == NULL:
                raise MemoryError()
            self.buf = grown
            self.cap = need
        o = self.buf + self.used
        o = _put_uvar(o, <uint64_t>body << 1)
        o[0] = 0  # record attributes: unused, always 0
        o = _put_uvar(o + 1, _zz64(delta))
        o = _put_uvar(o, <uint64_t>self.n << 1)
        o = _put_span(o, k, kn)
        o = _put_span(o, v, vn)
        o = _put_uvar(o, <uint64_t>nh << 1)
        if nh:
            for h in headers:
                o = _put_object(o, h[0])
                o = _put_object(o, h[1])
        self.used = o - self.buf
        if self.n == 0:
            self.base_ts = self.max_ts = ts
        elif ts > self.max_ts:
            self.max_ts = ts
        self.n += 1
        return self.n - 1

    def add(self, key, value, timestamp, headers=None):
        """Encode one record (key and value bytes-like or None, ``timestamp`` an int64,
        ``headers`` None or (bytes key, bytes-like value or None) pairs) after the
        others; its offset delta in the batch."""
        cdef Py_buffer kb, vb
        cdef Py_ssize_t kn = -1, vn = -1
        cdef const unsigned char* k = NULL
        cdef const unsigned char* v = NULL
        cdef int64_t ts = timestamp
        if headers is not None:
            headers = tuple(headers)
        if key is not None:
            PyObject_GetBuffer(key, &kb, PyBUF_SIMPLE)
            k = <const unsigned char*>kb.buf
            kn = kb.len
        try:
            if value is not None:
                PyObject_GetBuffer(value, &vb, PyBUF_SIMPLE)
                v = <const unsigned char*>vb.buf
                vn = vb.len
            try:
                return self._add(k, kn, v, vn, ts, headers)
            finally:
                if value is not None:
                    PyBuffer_Release(&vb)
        finally:
            if key is not None:
                PyBuffer_Release(&kb)

    def encode_v2(self, int compression, level, int64_t producer_id, int producer_epoch,
                  int64_t base_sequence, bint transactional):
        """The records appended so far as one RecordBatch (magic 2), base offset 0,
        CreateTime: byte for byte ``codec.encode_record_batch`` of the same records."""
        cdef Py_ssize_t total
        cdef unsigned char* o
        cdef int attrs = compression
        if self.n == 0:
            raise _errors.encode_error("a RecordBatch needs at least one record")
        if self.buf == NULL:
            raise ValueError("this batch is done (acknowledged or failed): its records are gone")
        if compression:
            section = _compression.compress(compression, self._section(), level)
            if not PyBytes_CheckExact(section):
                section = bytes(section)
            total = HEADER + PyBytes_GET_SIZE(section)
            out = PyBytes_FromStringAndSize(NULL, total)
            o = <unsigned char*>PyBytes_AS_STRING(out)
            memcpy(o + HEADER, PyBytes_AS_STRING(section), total - HEADER)
        else:
            total = HEADER + self.used
            out = PyBytes_FromStringAndSize(NULL, total)
            o = <unsigned char*>PyBytes_AS_STRING(out)
            memcpy(o + HEADER, self.buf, self.used)
        if total - 12 > 2147483647:
            raise _errors.encode_error(
                f"a RecordBatch of {total - 12} bytes is larger than int32 allows")
        if transactional:
            attrs |= 0x10
        _put64(o, 0)
        _put32(o + 8, <uint32_t>(total - 12))
        _put32(o + 12, <uint32_t><int32_t>-1)  # partitionLeaderEpoch: the broker's to set
        o[16] = 2
        _put16(o + 21, <uint16_t>attrs)
        _put32(o + 23, <uint32_t>(self.n - 1))
        _put64(o + 27, <uint64_t>self.base_ts)
        _put64(o + 35, <uint64_t>self.max_ts)
        _put64(o + 43, <uint64_t>producer_id)
        _put16(o + 51, <uint16_t><int16_t>producer_epoch)
        _put32(o + 53, <uint32_t><int32_t>base_sequence)
        _put32(o + 57, <uint32_t>self.n)
        # KIP-98: CRC32C covers attributes..end
        _put32(o + 17, kw_crc32c(0, o + 21, total - 21))
        return out

    cdef bytes _section(self):
        return PyBytes_FromStringAndSize(<char*>self.buf, self.used)

    def __repr__(self):
        return f"<Batch {self.topic}[{self.partition}] {self.count()} record(s)>"


cdef class Appender:
    """send()'s one call: append a plain record (bytes value, bytes or None key, no
    headers, a partition given) to its partition's open batch if it has room without
    filling up; else None, and the caller takes the full path (new batch, full batch,
    memory, serializers, headers, ...).

    ``open``: the accumulator's {(topic, partition): open batch}, shared; ``lock``: the
    lock guarding the accumulator (None: one thread); ``future``: the record future type,
    a tuple subclass made from (batch, offset delta, timestamp); ``clock_ns``: the wall
    clock in nanoseconds for records without a timestamp.  :meth:`send` is a whole
    ``Producer.send``: ``full`` takes what the hot path does not (with ``pick(topic)``
    giving an unkeyed record's sticky partition, or None, and a bytes key's partition
    taken from ``counts``, the shell's {topic: partition count}, shared and kept up to
    date by metadata refreshes: murmur2 of the key, positive, modulo the count, the Java
    client's default; None: keyed records take the full path, whose partitioner is the
    user's); ``enabled`` switches the hot path on and off.  :meth:`offer` is send()'s hot
    path alone (the record's future, or None).

    Compiled, an append takes no lock: from its last check that the batch is still open
    (not ``full``) to the end of its update it allocates nothing and runs no Python code,
    so it never lets go of the GIL, which makes it atomic for every thread that looks at
    the batch under ``lock`` (the sender closes a batch, setting ``full``, before it
    encodes it).  Only a free-threaded build (no GIL) takes the lock.  ``time.time_ns`` as ``clock_ns`` is
    read in C (the same CLOCK_REALTIME), without a Python call."""

    cdef dict open, by_topic
    cdef public dict counts
    cdef Py_ssize_t batch_size
    cdef bint c_clock
    cdef public bint enabled
    cdef public object full, pick
    cdef object _lock, _acquire, _release, future, clock_ns, last_ms_obj
    cdef int64_t last_ms

    def __init__(self, dict open, batch_size, lock, future, clock_ns, full=None, pick=None,
                 dict counts=None):
        self.open = open
        self.counts = counts
        # {topic: [batch last found open for each partition]}: a lookup without making a
        # (topic, partition) key; a batch taken out of ``open`` is always closed first
        # (``full``), which sends the lookup back to ``open``.
        self.by_topic = {}
        self.batch_size = batch_size
        self.future = future
        self.clock_ns = clock_ns
        self.c_clock = (getattr(clock_ns, "__module__", None) == "time"
                        and getattr(clock_ns, "__name__", None) == "time_ns")
        self.lock = lock
        self.full = full
        self.pick = pick
        self.enabled = True

    @property
    def lock(self):
        return self._lock

    @lock.setter
    def lock(self, lock):
        self._lock = lock
        self._acquire = None if lock is None or not KW_NEEDS_LOCK else lock.acquire
        self._release = None if lock is None or not KW_NEEDS_LOCK else lock.release

    def append(self, topic, partition, key, value, timestamp, headers):
        return self._append(topic, partition, key, value, timestamp, headers)

    def send(self, topic, value=None, key=None, partition=None, timestamp=None, headers=None,
             callback=None):
        """Producer.send (this is a producer's own send): queue one record; its future."""
        if self.enabled:
            fut = self._append(topic, self._route(topic, key, partition), key, value, timestamp,
                               headers)
            if fut is not None:
                if callback is not None:
                    fut.add_callback(callback)
                return fut
        return self.full(topic, value, key, partition, timestamp, headers, callback)

    def offer(self, topic, value=None, key=None, partition=None, timestamp=None, headers=None):
        """send()'s hot path alone: the record's future, or None (the caller's full path)."""
        if not self.enabled:
            return None
        return self._append(topic, self._route(topic, key, partition), key, value, timestamp, headers)

    cdef object _route(self, topic, key, partition):
        # The partition of a record sent without one, when the hot path can choose it.
        cdef PyObject* found
        cdef Py_ssize_t n
        if partition is not None:
            return partition
        if key is None:
            return None if self.pick is None else self.pick(topic)
        if self.counts is None or type(key) is not bytes or type(topic) is not str:
            return None
        found = PyDict_GetItem(self.counts, topic)
        if found == NULL or type(<object>found) is not int:
            return None
        n = PyLong_AsSsize_t(<object>found)
        if n <= 0:
            return None
        return <Py_ssize_t>((_murmur2(<const unsigned char*>PyBytes_AS_STRING(key),
                                      PyBytes_GET_SIZE(key)) & 0x7FFFFFFF) % <uint32_t>n)

    cdef Batch _open_batch(self, topic, partition, Py_ssize_t p):
        # The open batch of (topic, partition) (a str and an int), or None.  Allocates
        # only on a miss: an allocation may run the garbage collector, and so Python code
        # and other threads, which is why the caller checks ``full`` again after this.
        cdef PyObject* found = PyDict_GetItem(self.by_topic, topic)
        cdef list slots
        cdef Batch b
        if found != NULL:
            slots = <list>found
            if p < len(slots):
                b = <Batch>slots[p]
                if b is not None and not b.full:
                    return b
        found = PyDict_GetItem(self.open, (topic, partition))
        if found == NULL:
            return None
        b = <Batch?>found
        if b.full:
            return None  # being closed: the full path decides
        if p > 65535:
            return b
        slots = self.by_topic.get(topic)
        if slots is None:
            slots = self.by_topic[topic] = []
        while len(slots) <= p:
            slots.append(None)
        slots[p] = b
        return b

    cdef object _append(self, topic, partition, key, value, timestamp, headers):
        cdef int64_t ts
        cdef Py_ssize_t size, index = -1, kn = -1, p
        cdef const unsigned char* k = NULL
        cdef Batch b
        cdef object idx
        if (headers is not None or type(value) is not bytes or type(partition) is not int
                or type(topic) is not str):
            return None
        if key is not None:
            if type(key) is not bytes:
                return None
            k = <const unsigned char*>PyBytes_AS_STRING(key)
            kn = PyBytes_GET_SIZE(key)
        if PyLong_AsSsize_t(partition) < 0:
            return None
        if timestamp is None:
            if self.c_clock:
                ts = kw_wall_ms()
            else:
                ts = PyLong_AsLongLong(PyObject_CallNoArgs(self.clock_ns)) // 1000000
            if ts != self.last_ms or self.last_ms_obj is None:
                # One int per millisecond, shared by its records' futures.
                self.last_ms_obj = PyLong_FromLongLong(ts)
                self.last_ms = ts
            timestamp = self.last_ms_obj
        elif type(timestamp) is int:
            try:
                ts = PyLong_AsLongLong(timestamp)
            except OverflowError:
                return None  # the full path says why
        else:
            return None
        size = RECORD_OVERHEAD + PyBytes_GET_SIZE(value) + (0 if kn < 0 else kn)
        p = PyLong_AsSsize_t(partition)
        if self._acquire is not None:
            PyObject_CallNoArgs(self._acquire)
        try:
            b = self._open_batch(topic, partition, p)
            # From this check to the end of the update: no allocation, no Python code, so
            # no other thread runs in between (see the class docstring).
            if b is not None and not b.full:
                if b.size + size < self.batch_size:
                    index = b._add(k, kn, <const unsigned char*>PyBytes_AS_STRING(value),
                                   PyBytes_GET_SIZE(value), ts, None)
                    b.size += size
        finally:
            if self._release is not None:
                PyObject_CallNoArgs(self._release)
        if index < 0:
            return None
        fut = PyType_GenericAlloc(<PyTypeObject*>self.future, 3)
        Py_INCREF(b)
        PyTuple_SET_ITEM_RAW(<PyObject*>fut, 0, <PyObject*>b)
        idx = index
        Py_INCREF(idx)
        PyTuple_SET_ITEM_RAW(<PyObject*>fut, 1, <PyObject*>idx)
        Py_INCREF(timestamp)
        PyTuple_SET_ITEM_RAW(<PyObject*>fut, 2, <PyObject*>timestamp)
        return fut
