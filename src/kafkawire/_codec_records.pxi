# Part of kafkawire._codec, pulled in by ``include`` in _codec.pyx (one extension module:
# its declarations are in scope here).  What the decoders hand out: Record, Batch,
# ConsumerRecord.
# The twin, to read side by side: _pycodec_records.py.

# ---------------------------------------------------------------------------------------
# Record and Batch
# ---------------------------------------------------------------------------------------

# Records and Batches hold bytes, ints and tuples of them: they cannot form reference
# cycles unless a caller builds one on purpose, so they stay out of the cyclic GC.  With
# GC tracking, gen-0 collections (one per 700 new objects) cost about a fifth of a decode.
@cython.final
@cython.no_gc
cdef class Record:
    """One record: a MessageSet message (magic 0/1) or a RecordBatch record (magic 2)."""

    cdef public int64_t offset
    cdef public int64_t timestamp
    cdef public int timestamp_type
    cdef public object key
    cdef public object value
    cdef public object headers

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers=()):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    def __eq__(self, other):
        # Field by field, so Records of the two implementations compare equal.
        try:
            theirs = (other.offset, other.timestamp, other.timestamp_type, other.key,
                      other.value, tuple(other.headers))
        except (AttributeError, TypeError):
            return NotImplemented
        return (self.offset, self.timestamp, self.timestamp_type, self.key, self.value,
                tuple(self.headers)) == theirs

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, "
                f"timestamp_type={self.timestamp_type}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    def __reduce__(self):
        return (Record, (self.offset, self.timestamp, self.timestamp_type, self.key,
                         self.value, self.headers))


@cython.final
@cython.no_gc
cdef class Batch:
    """One RecordBatch (magic 2), or one top-level message of a MessageSet (magic 0/1)."""

    cdef public int64_t base_offset
    cdef public int magic
    cdef public uint32_t crc
    cdef public int attributes
    cdef public int compression
    cdef public int timestamp_type
    cdef public bint is_transactional
    cdef public bint is_control
    cdef public int32_t partition_leader_epoch
    cdef public int64_t last_offset_delta
    cdef public int64_t base_timestamp
    cdef public int64_t max_timestamp
    cdef public int64_t producer_id
    cdef public int producer_epoch
    cdef public int32_t base_sequence
    cdef public list records

    def __init__(self, base_offset, magic, crc, attributes, compression, timestamp_type,
                 is_transactional, is_control, partition_leader_epoch, last_offset_delta,
                 base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                 records):
        self.base_offset = base_offset
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.compression = compression
        self.timestamp_type = timestamp_type
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records = records

    def __repr__(self):
        return (f"Batch(base_offset={self.base_offset}, magic={self.magic}, "
                f"compression={self.compression}, is_control={self.is_control}, "
                f"records={len(self.records)})")


# What Consumer.poll() hands out, made by decode_consumer_records straight from the batch:
# one object per record (no Record to wrap), topic and partition shared by every record of
# a call.  Read-only: only the decoder and the constructor set fields, so a record holding
# bytes, str, None and tuples of them cannot be part of a reference cycle, and the decoder
# leaves those out of the cyclic GC (as CPython does for tuples of atomic objects); with
# deserializers, whose results may be anything, they are tracked.  The decoder allocates
# and fills records without the type's tp_new (_Decoder.consumer_record, _CRFields): keep
# the class free of cdef methods (a vtable tp_new would have to set) and of __cinit__.
@cython.final
cdef class ConsumerRecord:
    """One consumed record: ``topic``, ``partition``, ``offset``, ``timestamp``,
    ``timestamp_type``, ``key``, ``value``, ``headers`` (a tuple of (str, bytes or None)),
    all read-only."""

    # Object fields are read through member descriptors (see kw_fast_members below);
    # timestamp_type is an object too, at no cost (-1, 0 and 1 are cached ints).
    cdef readonly object topic
    cdef readonly object partition
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly object timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef readonly object headers

    def __init__(self, topic, partition, offset, timestamp, int timestamp_type, key, value,
                 headers=()):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = tuple(headers)

    def __repr__(self):
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r})")

    def __reduce__(self):
        return (ConsumerRecord, (self.topic, self.partition, self.offset, self.timestamp,
                                 self.timestamp_type, self.key, self.value, self.headers))


cdef extern from "Python.h":
    ctypedef struct PyObject
    ctypedef struct PyTypeObject
    void PyObject_GC_Track(object op)
    PyObject* _PyObject_GC_New(PyTypeObject* tp)  # what the PyObject_GC_New macro calls
    int PyList_Append(object list, PyObject* item) except -1
    void Py_DecRef(PyObject* o)
    void Py_INCREF(PyObject* o)


# The decoder fills a new record's struct itself (see _Decoder.consumer_record), through
# this view of it: raw pointers, so Cython does not release what the fields held before.
cdef extern from *:
    ctypedef struct _CRFields "struct __pyx_obj_9kafkawire_6_codec_ConsumerRecord":
        PyObject* topic
        PyObject* partition
        int64_t offset
        int64_t timestamp
        PyObject* timestamp_type
        PyObject* key
        PyObject* value
        PyObject* headers


# Cython reads cdef attributes through getset properties: a C call per read, which
# CPython's specializing interpreter (3.11+, PEP 659) leaves generic.  A read-only member
# descriptor of type T_OBJECT_EX (what __slots__ make) it turns into a direct load
# (LOAD_ATTR_SLOT): `r.value` in a loop over poll()'s records costs about half as much.
# The fields are never NULL (Cython sets them to None first), so T_OBJECT_EX never raises.
cdef extern from *:
    """
    #include <structmember.h>
    #ifdef Py_T_OBJECT_EX
    #define KW_T_OBJECT_EX Py_T_OBJECT_EX
    #define KW_READONLY Py_READONLY
    #else
    #define KW_T_OBJECT_EX T_OBJECT_EX
    #define KW_READONLY READONLY
    #endif
    #define KW_CR_OFF(f) offsetof(struct __pyx_obj_9kafkawire_6_codec_ConsumerRecord, f)
    #define KW_CR_TOPIC KW_CR_OFF(topic)
    #define KW_CR_PARTITION KW_CR_OFF(partition)
    #define KW_CR_TIMESTAMP_TYPE KW_CR_OFF(timestamp_type)
    #define KW_CR_KEY KW_CR_OFF(key)
    #define KW_CR_VALUE KW_CR_OFF(value)
    #define KW_CR_HEADERS KW_CR_OFF(headers)
    #define KW_NMEMBERS 6

    /* The descriptors point at these: they live as long as the module. */
    static PyMemberDef kw_cr_members[KW_NMEMBERS];

    /* Replace the type's properties named in ``names`` by read-only member descriptors
       at ``offsets``. */
    static int kw_fast_members(PyObject *type, const char **names, const Py_ssize_t *offsets)
    {
        PyTypeObject *t = (PyTypeObject *)type;
        int i;
        for (i = 0; i < KW_NMEMBERS; i++) {
            PyObject *d;
            kw_cr_members[i].name = names[i];
            kw_cr_members[i].type = KW_T_OBJECT_EX;
            kw_cr_members[i].offset = offsets[i];
            kw_cr_members[i].flags = KW_READONLY;
            kw_cr_members[i].doc = NULL;
            d = PyDescr_NewMember(t, &kw_cr_members[i]);
            if (d == NULL)
                return -1;
            if (PyDict_SetItemString(t->tp_dict, names[i], d) < 0) {
                Py_DECREF(d);
                return -1;
            }
            Py_DECREF(d);
        }
        PyType_Modified(t);
        return 0;
    }
    """
    Py_ssize_t KW_CR_TOPIC, KW_CR_PARTITION, KW_CR_TIMESTAMP_TYPE, KW_CR_KEY, KW_CR_VALUE
    Py_ssize_t KW_CR_HEADERS
    int kw_fast_members(object t, const char** names, const Py_ssize_t* offsets) except -1


cdef const char* _CR_NAMES[6]
cdef Py_ssize_t _CR_OFFSETS[6]
_CR_NAMES[:] = [b"topic", b"partition", b"timestamp_type", b"key", b"value", b"headers"]
_CR_OFFSETS[:] = [KW_CR_TOPIC, KW_CR_PARTITION, KW_CR_TIMESTAMP_TYPE, KW_CR_KEY, KW_CR_VALUE,
                  KW_CR_HEADERS]
kw_fast_members(ConsumerRecord, _CR_NAMES, _CR_OFFSETS)


cdef inline Record _new_record(int64_t offset, int64_t ts, int tt, object key, object value,
                               object headers):
    cdef Record r = Record.__new__(Record)
    r.offset = offset
    r.timestamp = ts
    r.timestamp_type = tt
    r.key = key
    r.value = value
    r.headers = headers
    return r


cdef inline object _bytes_or_none(cptr p, Py_ssize_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>p, n)

