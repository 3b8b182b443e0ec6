# cython: language_level=3, freethreading_compatible=False
# freethreading_compatible=False: on a free-threaded CPython (3.13t/3.14t) importing this
# module turns the GIL back on, with a RuntimeWarning.  Not True yet, because the module
# has mutable module-level state shared by threads: the lazy caches _Columns and
# _data_too_large (decode_columnar writes the pair one after the other, so without the GIL
# a second thread can see _Columns set and call _data_too_large while it is still None),
# _record_fields and _ColumnsType (in _codec_columnar.pxi and _codec_encode.pxi).  Import those at module init, make sure nothing else is
# written after import, then declare True.
"""kafkawire._codec: the compiled codec core (contract: _codec.pyi).

Same names, results, exceptions and messages as the pure-Python twin kafkawire._pycodec;
every exception is built by the factories in kafkawire.errors.  Hot loops work on raw
pointers obtained once per input buffer; every length read from the wire is checked
against the bytes that remain before it is used.

One extension module, written in parts that ``include`` pulls in here (so calls between
parts stay direct C calls, inlined where declared inline).  Each part has a twin module of
the same name, to read side by side:

    _codec_crc.pxi         _pycodec_crc.py         CRC32 (magic 0/1), CRC32C (magic 2)
    _codec_primitives.pxi  _pycodec_primitives.py  ints, varints, strings, tagged fields
    _codec_records.pxi     _pycodec_records.py     Record, Batch, ConsumerRecord
    _codec_decode.pxi      _pycodec_decode.py      MessageSet and RecordBatch to objects
    _codec_columnar.pxi    _pycodec_columnar.py    decode_columnar (to a Columns)
    _codec_encode.pxi      _pycodec_encode.py      RecordBatch, MessageSet, Columns to bytes

Here: the C declarations every part uses, and _getbuf, their way to a buffer's bytes.
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.bytearray cimport PyByteArray_FromStringAndSize, PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize, PyByteArray_Check
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.tuple cimport PyTuple_GET_SIZE
from libc.stdint cimport int8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t
from libc.stdint cimport INT64_MIN, INT64_MAX
from libc.string cimport memcpy, memset
from libc.stdlib cimport malloc, free

cimport cython

from kafkawire import errors as _errors
from kafkawire import compression as _compression

ctypedef const unsigned char* cptr

IMPLEMENTATION = "cython"

# Below this many bytes releasing the GIL costs more than it gives.
DEF NOGIL_BYTES = 65536

cdef tuple _EMPTY = ()


cdef int _getbuf(object obj, Py_buffer* view) except -1:
    """A simple (contiguous) buffer of ``obj``; a non-contiguous one is a TypeError."""
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except (BufferError, ValueError):  # numpy says ValueError
        if memoryview(obj).c_contiguous:
            raise
        raise TypeError(
            f"a {type(obj).__name__} that is not C-contiguous cannot be decoded: pass bytes, "
            f"a bytearray or a contiguous buffer (copy it with bytes(...))") from None
    return 0


include "_codec_crc.pxi"
include "_codec_primitives.pxi"
include "_codec_records.pxi"
include "_codec_decode.pxi"
include "_codec_columnar.pxi"
include "_codec_encode.pxi"
