"""The pure-Python twin of kafkawire._codec: same names, same results, same errors.

The contract (names, signatures, semantics) is ``_codec.pyi``; exceptions come from the
factories in :mod:`kafkawire.errors`, so messages match the compiled extension.  Import
through :mod:`kafkawire.codec`, which picks the implementation.

Written in parts, each beside the compiled part of the same name (_codec_<part>.pxi), to
read side by side; this module re-exports their names:

    _pycodec_crc         CRC32 (magic 0/1), CRC32C (magic 2)
    _pycodec_primitives  ints, varints, strings, tagged fields
    _pycodec_records     Record, Batch, ConsumerRecord
    _pycodec_decode      MessageSet and RecordBatch to objects
    _pycodec_columnar    decode_columnar (to a Columns)
    _pycodec_encode      RecordBatch, MessageSet, Columns to bytes

This module does no I/O.
"""

from __future__ import annotations

# Every name the twin had before it was split stays importable from here (but the lazy CRC
# table caches, rebound on first use: a copy here would go stale).
from kafkawire import compression as _compression  # noqa: F401
from kafkawire import errors  # noqa: F401
from kafkawire._columnar import Columns, data_too_large, record_fields  # noqa: F401
from kafkawire._pycodec_crc import (  # noqa: F401
    crc32, crc32c, crc32c_implementation, _CRC32C_POLY, _LITTLE, _NUMPY_CRC_MIN,
    _crc32c_numpy, _crc32c_tables, _shift_arrays, _shift_level, _shift_lists,
)
from kafkawire._pycodec_primitives import (  # noqa: F401
    _INT8_MIN, _INT8_MAX, _INT16_MIN, _INT16_MAX, _INT32_MIN, _INT32_MAX, _INT64_MIN,
    _INT64_MAX, _UINT32_MAX, _M32, _M64, _S_INT8, _S_INT16, _S_INT32, _S_INT64,
    _S_UINT32, _S_ENTRY, _S_LEGACY, _S_BATCH, alloc_buffer, _contiguous, _bytes_view,
    _nbytes, _remain, _fixed_reader, read_int8, read_int16, read_int32, read_int64,
    read_uint32, _read_uv, read_uvarint, read_varint, read_varlong, _read_body,
    _decode_utf8, read_string, read_bytes, read_compact_string, read_compact_bytes,
    read_array_length, read_compact_array_length, read_tagged_fields, _range_error,
    _fixed_writer, write_int8, write_int16, write_int32, write_int64, write_uint32,
    _UV1, _uv_bytes, _zz32, _zz64, write_uvarint, write_varint, write_varlong,
    size_of_uvarint, size_of_varint, _utf8, _buffer_len, write_string, write_bytes,
    write_compact_string, write_compact_bytes, write_array_length,
    write_compact_array_length, write_tagged_fields,
)
from kafkawire._pycodec_records import (  # noqa: F401
    Record, Batch, ConsumerRecord, _RECORD_FIELDS, _BATCH_FIELDS, _CONSUMER_FIELDS,
    _SETTERS, _SET_KEY, _SET_VALUE, _fill,
)
from kafkawire._pycodec_decode import (  # noqa: F401
    DEFAULT_MAX_DEPTH, DEFAULT_MAX_DECOMPRESSED_SIZE, decode_batches, decode_records,
    decode_consumer_records, _Options, _options, _entries, _parse_message,
    _decode_legacy_set, _decode_message, _decode_legacy_top, _decode_v2, _RecordError,
    _varint_slow, _span, _outside_int64, _decode_v2_records, MAX_LAYOUT, _RecordField,
    _FIELD_OFFSET, _FIELD_TIMESTAMP, _FIELD_TIMESTAMP_TYPE, _FIELD_KEY, _FIELD_VALUE,
    _FIELD_KEY_SIZE, _FIELD_VALUE_SIZE, _FIELD_HEADERS, _FIELD_CRC, _check_layout,
    decode_records_with,
)
from kafkawire._pycodec_columnar import (  # noqa: F401
    decode_columnar,
)
from kafkawire._pycodec_encode import (  # noqa: F401
    encode_record_batch, encode_message_set, encode_columnar, _normalize,
    _encode_records_section, _check_range, _check_ts, _check_codec, _encode_batch_items,
    _message, _encode_message_set_items, _columns_items,
)

__all__ = [
    "IMPLEMENTATION",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Record",
    "Batch",
    "ConsumerRecord",
    "crc32",
    "crc32c",
    "crc32c_implementation",
    "decode_batches",
    "decode_records",
    "decode_columnar",
    "decode_consumer_records",
    "encode_message_set",
    "encode_record_batch",
    "encode_columnar",
]

IMPLEMENTATION = "python"

# Shown by their public path in reprs and pickled by it, as before the twin was split: the
# same classes.
for _cls in (Record, Batch, ConsumerRecord):
    _cls.__module__ = __name__
del _cls
