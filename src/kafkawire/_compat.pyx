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
    int PyGC_Enable()
    int PyGC_Disable()


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
    """The per-record part of kafkawire's magic-2 DefaultRecordBatchBuilder for aiokafka
    and for kafka-python (kafkawire.compat.aiokafka, .kafka_python), which subclass it:
    ``append`` keeps the record and returns its metadata, the sizes the host's own builder
    reports (both hosts count alike); what it does not take (other types, offsets out of
    order, extreme timestamps, unusual headers) goes to the subclass's ``_to_fallback()``,
    the host's own builder."""

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
        cdef Py_ssize_t size
        cdef DefaultRecordMetadata meta
        if self._fallback is not None:
            return self._fallback.append(offset, timestamp, key, value, headers)
        if timestamp is None:
            timestamp = int(_now() * 1000)
        size = self._add(offset, timestamp, key, value, headers)
        if size < 0:
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        if size == 0:
            return None
        meta = DefaultRecordMetadata.__new__(DefaultRecordMetadata)
        meta.offset = offset
        meta.size = size
        meta.timestamp = timestamp
        return meta

    cdef Py_ssize_t _add(self, object offset, object timestamp, object key, object value,
                         object headers) except -2:
        """The record appended: its size; 0: the batch is full; -1: not one this takes
        (nothing changed, the caller hands it to the fallback)."""
        cdef Py_ssize_t size, n
        cdef long long ts, off, first_ts
        cdef int overflow = 0
        records = self._records
        if type(offset) is not int or type(timestamp) is not int:
            return -1
        off = PyLong_AsLongLongAndOverflow(offset, &overflow)
        if not overflow:
            ts = PyLong_AsLongLongAndOverflow(timestamp, &overflow)
        if overflow or off != len(records) // 3 or not -_TS_LIMIT <= ts < _TS_LIMIT:
            return -1
        size = _field_size(key)
        n = _field_size(value)
        if size < 0 or n < 0:
            return -1
        size += n
        if not headers and type(headers) is list:
            size += 1
        else:
            h = _headers_size(headers)
            if h is None:
                return -1
            size += <Py_ssize_t>h
        first = self._first_timestamp
        if first is None:
            size += 2 + _size_of_varint(off)  # attributes, timestamp delta 0
        else:
            first_ts = first
            size += 1 + _size_of_varint(ts - first_ts) + _size_of_varint(off)
        size += _size_of_varint(size)
        if first is not None and self._size + size > self._batch_size:
            return 0
        if first is None:
            self._first_timestamp = timestamp
        self._size += size
        records.append(key)
        records.append(value)
        records.append(timestamp)
        if headers:
            self._headers[off] = headers
        return size


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
    # The collector paused, as the record factories do: the RecordMetadata made here die
    # with the batch's futures, right after, so a collection now would only walk (and
    # promote) the batch's futures and tuples.
    cdef bint gc_was_enabled = PyGC_Disable()
    try:
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
    finally:
        if gc_was_enabled:
            PyGC_Enable()


# ---- aiokafka's producer: send() for a record that goes into its partition's open batch --
#
# AIOKafkaProducer.send as one compiled coroutine for the common case, with the same
# objects as aiokafka's own steps (see "the producer's per-record path" in
# kafkawire.compat.aiokafka; the twin is kafkawire.compat._factory_py.aiokafka_send): what
# is not that case goes to aiokafka's own send (before a serializer or the partitioner
# ran) or to its accumulator's add_message.  configure_aiokafka_send hands over
# aiokafka's classes, so this module imports without aiokafka.

cimport cython
from cpython.dict cimport PyDict_GetItemWithError

cdef extern from "Python.h":
    unsigned long PyThread_get_thread_ident()
    object PyObject_Vectorcall(object callable, PyObject** args, size_t nargsf, object kwnames)

cdef object _aio_original_send = None    # aiokafka's own AIOKafkaProducer.send
cdef object _aio_message_batch = None    # MessageBatch, BatchBuilder: a producer's own
cdef object _aio_batch_builder = None
cdef object _aio_topic_partition = None
cdef object _aio_illegal_operation = None
cdef object _aio_log = None              # aiokafka.producer.producer's logger
cdef dict _aio_producer_ns = None        # that module's namespace (its record builder)
cdef object _aio_estimators = frozenset()  # builders whose estimate is computed here
cdef object _aio_future = None           # asyncio's Future; what BaseEventLoop.create_future
cdef object _aio_base_create_future = None  # makes
cdef object _aio_base_loop = None        # asyncio.BaseEventLoop
cdef object _aio_get_running_loop = None
cdef object _aio_loop_type = None        # last loop type found to be a plain BaseEventLoop
cdef tuple _LOOP_KWNAMES = ("loop",)
cdef object _defaultdict = None
cdef object _logger_type = None          # logging.Logger


def configure_aiokafka_send(original_send, message_batch, batch_builder, topic_partition,
                            illegal_operation, log, dict producer_namespace, estimators):
    """aiokafka's own objects for aiokafka_send: its AIOKafkaProducer.send (what takes
    every other case), MessageBatch and BatchBuilder classes, TopicPartition,
    IllegalOperation, the producer module's logger and namespace, and the record builder
    classes whose ``estimate_size_in_bytes`` is, for bytes keys and values without
    headers, 82 bytes plus each field's length and its varint (aiokafka's and
    kafkawire's)."""
    global _aio_original_send, _aio_message_batch, _aio_batch_builder, _aio_topic_partition
    global _aio_illegal_operation, _aio_log, _aio_producer_ns, _aio_estimators
    global _aio_future, _aio_base_create_future, _aio_base_loop, _aio_get_running_loop
    global _defaultdict, _logger_type
    import asyncio
    import collections
    import logging
    _aio_original_send = original_send
    _aio_message_batch = message_batch
    _aio_batch_builder = batch_builder
    _aio_topic_partition = topic_partition
    _aio_illegal_operation = illegal_operation
    _aio_log = log
    _aio_producer_ns = producer_namespace
    _aio_estimators = frozenset(estimators)
    _aio_future = asyncio.Future
    _aio_base_loop = asyncio.BaseEventLoop
    _aio_base_create_future = asyncio.BaseEventLoop.create_future
    _aio_get_running_loop = asyncio.get_running_loop
    _defaultdict = collections.defaultdict
    _logger_type = logging.Logger


cdef inline Py_ssize_t _estimate_field(object data) noexcept:
    # a bytes key or value's part of the estimate (None: 1); -1: not that simple case
    cdef Py_ssize_t n
    if data is None:
        return 1
    if PyBytes_CheckExact(data):
        n = PyBytes_GET_SIZE(data)
        return _size_of_varint(n) + n
    return -1


cdef object _running_loop(object producer_loop):
    """asyncio.get_running_loop(), without its getpid() system call where the producer's
    loop is a BaseEventLoop running in this thread (one loop runs per thread: it is the
    running one)."""
    global _aio_loop_type
    cdef object tid
    cdef type kind = type(producer_loop)
    if kind is not _aio_loop_type:
        if not (isinstance(producer_loop, _aio_base_loop)
                and kind.create_future is _aio_base_create_future):
            return _aio_get_running_loop()
        _aio_loop_type = kind
    tid = producer_loop._thread_id
    if tid is not None and <unsigned long>tid == PyThread_get_thread_ident():
        return producer_loop
    return _aio_get_running_loop()


cdef object _new_future(object loop):
    """What loop.create_future() makes: asyncio's Future(loop=loop), without the Python
    frame of BaseEventLoop.create_future, for a loop that uses it."""
    cdef PyObject *args[1]
    if type(loop) is _aio_loop_type:
        args[0] = <PyObject*>loop
        return PyObject_Vectorcall(_aio_future, args, 0, _LOOP_KWNAMES)
    return loop.create_future()


cdef bint _debug_enabled(object log) except -1:
    """log.isEnabledFor(logging.DEBUG), without its Python frame when the logger's cache
    already holds False (what isEnabledFor then returns, disabled or not)."""
    cdef PyObject *found
    if type(log) is _logger_type:
        cache = log._cache
        if type(cache) is dict:
            found = PyDict_GetItemWithError(cache, 10)
            if found is not NULL and <object>found is False:
                return False
    return log.isEnabledFor(10)


class AIOKafkaProducer:
    # A namespace only: the coroutine made below carries aiokafka's names, its qualname
    # "AIOKafkaProducer.send" (as in a never-awaited coroutine's warning), as aiokafka's
    # own send() does.

    @cython.wraparound(True)  # pending[-1]
    async def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None,
                   headers=None):
        cdef object parts, txn_manager, key_bytes, value_bytes, size, estimator, accumulator
        cdef object batches, pending, batch, builder, metadata, future, offset
        cdef PyObject *found
        cdef Py_ssize_t k, v
        parts = self.client.cluster._partitions
        if type(parts) is dict:
            found = PyDict_GetItemWithError(parts, topic)
            parts = <object>found if found is not NULL else None
        else:
            parts = parts.get(topic)
        # with debug logging on, aiokafka's own send() writes its line (from its own frame)
        if (parts is None or (value is None and key is None) or _debug_enabled(_aio_log)
                or (partition is not None and not (type(partition) is int and partition >= 0
                                                   and partition in parts))):
            return await _aio_original_send(self, topic, value, key, partition, timestamp_ms,
                                            headers)
        txn_manager = self._txn_manager
        if (txn_manager is not None and txn_manager.transactional_id is not None
                and not txn_manager.is_in_transaction()):
            raise _aio_illegal_operation("Can't send messages while not in transaction")
        headers = headers or []
        if self._key_serializer is None and self._value_serializer is None:
            # AIOKafkaProducer._serialize without serializers: the size check alone
            key_bytes = key
            value_bytes = value
            estimator = _aio_producer_ns["DefaultRecordBatchBuilder"]
            k = _estimate_field(key)
            v = _estimate_field(value)
            if (k >= 0 and v >= 0 and type(headers) is list and not headers
                    and estimator in _aio_estimators):
                size = 82 + k + v + 1
            else:
                size = estimator.estimate_size_in_bytes(key, value, headers)
            if size > self._max_request_size:
                self._serialize(key, value, headers)  # raises aiokafka's own error
        else:
            key_bytes, value_bytes = self._serialize(key, value, headers)
        if partition is None:
            partition = self._partition(topic, None, key, value, key_bytes, value_bytes)
        accumulator = self._message_accumulator
        if not accumulator._closed and accumulator._exception is None:
            batches = accumulator._batches
            if type(batches) is _defaultdict or type(batches) is dict:
                # a plain tuple finds the TopicPartition key (same hash, same equality)
                found = PyDict_GetItemWithError(batches, (topic, partition))
                pending = <object>found if found is not NULL else None
            else:
                pending = batches.get(tuple.__new__(_aio_topic_partition, (topic, partition)))
            if pending:
                batch = pending[-1]
                builder = batch._builder
                # MessageBatch.append -> BatchBuilder.append as they are, inline: a producer's
                # own batch, its builder open and without serializers of its own
                if (type(batch) is _aio_message_batch and type(builder) is _aio_batch_builder
                        and not builder._closed and builder._key_serializer is None
                        and builder._value_serializer is None):
                    offset = builder._relative_offset
                    metadata = builder._builder.append(offset, timestamp_ms, key_bytes,
                                                       value_bytes, headers)
                    if metadata is not None:
                        builder._relative_offset = offset + 1
                        future = _new_future(_running_loop(self._loop))
                        batch._msg_futures.append((future, metadata))
                        return future
                    builder.close()  # full: add_message finds it closed, wakes the sender, waits
        tp = tuple.__new__(_aio_topic_partition, (topic, partition))
        return await accumulator.add_message(tp, key_bytes, value_bytes,
                                             self._request_timeout_ms / 1000,
                                             timestamp_ms=timestamp_ms, headers=headers)


aiokafka_send = AIOKafkaProducer.send


# ---- kafka-python's producer: a record into its partition's open batch, and its future --
#
# kafkawire.compat.kafka_python's send() hands a record here; the steps are
# RecordAccumulator.append -> ProducerBatch.try_append -> MemoryRecordsBuilder.append ->
# the builder's append -> FutureRecordMetadata(...), with the same locks and state changes,
# in one call.  The record futures of a batch are resolved by one callback per run of
# records appended here (KafkaPythonFutures) instead of two bound methods per record on
# the batch's FutureProduceResult: half the objects per record the collector tracks, and
# no Python frame per record on the sender thread.  Twin: compat/_factory_py.py.

cdef extern from *:
    """
    static int kw_allocates_plainly(PyObject *t) {
        return PyType_Check(t) && ((PyTypeObject *)t)->tp_alloc == PyType_GenericAlloc;
    }
    """
    bint _allocates_plainly "kw_allocates_plainly" (object t)

cdef object _kp_frm = None            # kafka.producer.future.FutureRecordMetadata
cdef bint _kp_frm_plain = False       # made by object.__new__, allocated by the default
cdef object _kp_new_lock = None       # what kafka-python's Future makes its _lock with
cdef PyTypeObject *_kp_metadata = NULL  # RecordMetadata, a 9-field namedtuple
cdef object _kp_metadata_type = None   # held: _kp_metadata points into it
cdef object _kp_future_log = None     # kafka.future's logger: errors of user callbacks
cdef object _kp_records_builder = None  # kafkawire's MemoryRecordsBuilder for kafka-python
cdef object _kp_batch_builder = None  # and its DefaultRecordBatchBuilder (an AiokafkaAppender)
cdef object _kp_atomic = None         # record_accumulator.AtomicInteger
cdef object _kp_monotonic = None


def configure_kafka_python(record_future, new_lock, record_metadata, future_log,
                           records_builder, batch_builder, atomic_integer, monotonic):
    """kafka-python's and kafkawire.compat.kafka_python's objects the functions below use
    (this module does not import kafka-python)."""
    global _kp_frm, _kp_new_lock, _kp_metadata, _kp_metadata_type, _kp_future_log
    global _kp_records_builder, _kp_batch_builder, _kp_atomic, _kp_monotonic, _kp_frm_plain
    _kp_frm = record_future
    _kp_frm_plain = record_future.__new__ is object.__new__ and _allocates_plainly(record_future)
    _kp_new_lock = new_lock
    _kp_metadata_type = record_metadata
    _kp_metadata = <PyTypeObject*>record_metadata
    _kp_future_log = future_log
    _kp_records_builder = records_builder
    _kp_batch_builder = batch_builder
    _kp_atomic = atomic_integer
    _kp_monotonic = monotonic


cdef class KafkaPythonFutures:
    """One callback (and errback, ``failure``) on a batch's FutureProduceResult for a run
    of its record futures: called with the batch's result, it resolves each as
    FutureRecordMetadata._produce_success and Future.success would, in order.

    kafka-python resolves each record from the batch future's own callback loop, so what
    a record lets out (its callbacks' error, with ``error_on_callbacks``) is logged there
    and the next record is resolved all the same, unless the batch future raises it too:
    each record here is resolved inside that loop's handling (``_kp_let_out``)."""

    cdef public list futures

    def __call__(self, result):
        cdef Py_ssize_t i, n = PyList_GET_SIZE(self.futures)
        cdef object f, md, tp, callbacks, lock
        offset, produce_timestamp_ms, record_exceptions_fn = result
        if record_exceptions_fn is not None:
            for f in self.futures:
                try:
                    f.failure(record_exceptions_fn(f.args[0]))
                except Exception:
                    _kp_let_out(f, "Error processing callback")
            return
        log_append_time = produce_timestamp_ms is not None and produce_timestamp_ms != -1
        # The collector paused, as in resolve_aiokafka_futures (the RecordMetadata made
        # here die with the batch's futures, right after), but not while a user's callback
        # runs: that code sees the collector as it left it, and may change that.
        cdef bint gc_was_enabled = PyGC_Disable()
        try:
            for i in range(n):
                f = <object>PyList_GET_ITEM(self.futures, i)
                batch_index, timestamp_ms, checksum, key_size, value_size, header_size = f.args
                tp = f._produce_future.topic_partition
                md = PyType_GenericAlloc(_kp_metadata, 9)
                _put(md, 0, tp[0])
                _put(md, 1, tp[1])
                _put(md, 2, tp)
                _put(md, 3, offset + batch_index if offset != -1 and batch_index is not None
                     else offset)
                _put(md, 4, produce_timestamp_ms if log_append_time else timestamp_ms)
                _put(md, 5, checksum)
                _put(md, 6, key_size)
                _put(md, 7, value_size)
                _put(md, 8, header_size)
                # Future.success(md)
                lock = f._lock
                lock.acquire()
                f.value = md
                f.is_done = True
                callbacks = f._callbacks
                f._callbacks = None
                f._errbacks = None
                lock.release()
                if callbacks:
                    if gc_was_enabled:
                        PyGC_Enable()
                    try:
                        for callback in callbacks:
                            try:
                                callback(md)
                            except Exception:
                                _kp_future_log.exception("Error processing callback")
                                if f.error_on_callbacks:
                                    raise
                    except Exception:
                        _kp_let_out(f, "Error processing callback")
                    finally:
                        gc_was_enabled = PyGC_Disable()
        finally:
            if gc_was_enabled:
                PyGC_Enable()

    def failure(self, error):
        for f in self.futures:
            try:
                f.failure(error)
            except Exception:
                _kp_let_out(f, "Error processing errback")


cdef void _kp_let_out(object f, str what) except *:
    # In an except block: what record future ``f`` let out reaches its batch future's
    # callback (or errback) loop in kafka-python, which logs it and goes on, or with its
    # own error_on_callbacks logs it and raises it (that loop, which calls this run, does
    # both then).
    if f._produce_future.error_on_callbacks:
        raise
    _kp_future_log.exception(what)


cdef object _kp_record_future(object produce_future, object offset, object timestamp,
                              object crc, object key, object value, object headers):
    cdef KafkaPythonFutures run
    if _kp_frm_plain:
        f = PyType_GenericAlloc(<PyTypeObject*>_kp_frm, 0)  # what object.__new__ makes of it
    else:
        f = _kp_frm.__new__(_kp_frm)
    # the fields FutureRecordMetadata.__init__ sets, in its order
    f.is_done = False
    f.value = None
    f.exception = None
    f._callbacks = []
    f._errbacks = []
    f._lock = _kp_new_lock()
    f._produce_future = produce_future
    f.args = (offset, timestamp, crc, _len_or_minus1(key), _len_or_minus1(value),
              sum([len(k.encode("utf-8")) + len(v) for k, v in headers]) if headers else -1)
    callbacks = produce_future._callbacks
    if (type(callbacks) is list and PyList_GET_SIZE(callbacks)
            and type(<object>PyList_GET_ITEM(callbacks, PyList_GET_SIZE(callbacks) - 1))
            is KafkaPythonFutures):
        # the run of records appended here goes on: one list append (the batch is open,
        # its future not done: its partition's lock is held)
        run = <KafkaPythonFutures>PyList_GET_ITEM(callbacks, PyList_GET_SIZE(callbacks) - 1)
        run.futures.append(f)
    else:
        run = KafkaPythonFutures.__new__(KafkaPythonFutures)
        run.futures = [f]
        produce_future._add_cb_eb(run, run.failure)
    return f


def kafka_python_record_future(produce_future, offset, timestamp, crc, key, value, headers):
    """FutureRecordMetadata(produce_future, offset, timestamp, crc, <key, value and
    header sizes>) of one appended record, resolved by the batch's KafkaPythonFutures."""
    return _kp_record_future(produce_future, offset, timestamp, crc, key, value, headers)


cdef inline void _kp_count(object counter, object by) except *:
    # AtomicInteger.increment()/decrement(), without its Python frame (its lock still
    # taken: another thread's increment() may be between reading and writing _val)
    if type(counter) is _kp_atomic:
        lock = counter._lock
        lock.acquire()
        try:
            counter._val += by
        finally:
            lock.release()
    elif by > 0:
        counter.increment()
    else:
        counter.decrement()


@cython.wraparound(True)  # dq[-1]
def kafka_python_append(acc, tp, timestamp_ms, key, value, headers):
    """RecordAccumulator.append(tp, timestamp_ms, key, value, headers)[:3]: the record goes
    into the partition's open batch here, as ProducerBatch.try_append puts it there;
    opening a new batch, and a closed accumulator, stay kafka-python's."""
    cdef Py_ssize_t size
    cdef AiokafkaAppender appender
    if not acc._closed:
        lock = acc._tp_locks.get(tp) or acc._tp_lock(tp)
        in_progress = acc._appends_in_progress
        _kp_count(in_progress, 1)  # abort_incomplete_batches() waits for appends in flight
        try:
            with lock:
                dq = acc._batches[tp]
                if dq:
                    batch = dq[-1]
                    records = batch.records
                    builder = records._builder if type(records) is _kp_records_builder else None
                    if (builder is not None and type(builder) is _kp_batch_builder
                            and (<AiokafkaAppender>builder)._fallback is None):
                        # MemoryRecordsBuilder.append -> the builder's append (both ours)
                        appender = <AiokafkaAppender>builder
                        offset = records._next_offset
                        if timestamp_ms is None:
                            timestamp_ms = int(_now() * 1000)
                        size = appender._add(offset, timestamp_ms, key, value, headers)
                        if size > 0:
                            records._next_offset = offset + 1
                            # records.is_full(), the builder being open and ours
                            return _kp_appended(batch, dq, size, offset, timestamp_ms, None,
                                                key, value, headers,
                                                appender._size >= records._batch_size)
                        metadata = None if size == 0 else builder.append(
                            offset, timestamp_ms, key, value, headers)
                        if metadata is not None:
                            records._next_offset = offset + 1
                    else:
                        metadata = records.append(timestamp_ms, key, value, headers)
                    if metadata is not None:
                        return _kp_appended(batch, dq, metadata.size, metadata.offset,
                                            metadata.timestamp, metadata.crc, key, value,
                                            headers, records.is_full())
        finally:
            _kp_count(in_progress, -1)
    return acc.append(tp, timestamp_ms, key, value, headers)[:3]


cdef tuple _kp_appended(object batch, object dq, object size, object offset, object timestamp,
                        object crc, object key, object value, object headers, bint full):
    # ProducerBatch.try_append's bookkeeping for a record its builder took, and
    # RecordAccumulator.append's answer: (future, batch full or not the last, False).
    if size > batch.max_record_size:
        batch.max_record_size = size
    batch.last_append = _kp_monotonic()
    future = _kp_record_future(batch.produce_future, offset, timestamp, crc, key, value, headers)
    batch._record_futures.append(future)
    return future, len(dq) > 1 or full, False
