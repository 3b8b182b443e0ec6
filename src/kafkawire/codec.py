"""kafkawire's codec: Kafka's message formats, usable on its own by any Kafka client.

Everything here works on bytes and does no I/O.  The implementation is the compiled
extension ``kafkawire._codec`` when it is importable, else the pure-Python twin
``kafkawire._pycodec``; both follow the contract in ``_codec.pyi`` and give identical
results and exceptions.  Set ``KAFKAWIRE_PUREPYTHON=1`` to force the twin.
``IMPLEMENTATION`` says which one is loaded ("cython" or "python").

Formats: MessageSet magic 0 and 1, RecordBatch magic 2; compression none (0), gzip (1),
snappy (2), lz4 (3), zstd (4).  See docs/internals.md for examples.
"""

from __future__ import annotations

import os as _os

if _os.environ.get("KAFKAWIRE_PUREPYTHON", "") not in ("", "0"):
    from kafkawire import _pycodec as _impl
else:
    try:
        from kafkawire import _codec as _impl  # type: ignore[no-redef]
    except ImportError:  # no compiler at install time: the twin is complete, only slower
        from kafkawire import _pycodec as _impl  # type: ignore[no-redef]

from kafkawire._columnar import Columns, use_record_type
from kafkawire.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
)

__all__ = [
    "IMPLEMENTATION",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "CODEC_NONE",
    "CODEC_GZIP",
    "CODEC_SNAPPY",
    "CODEC_LZ4",
    "CODEC_ZSTD",
    "Record",
    "Batch",
    "Columns",
    "crc32",
    "crc32c",
    "crc32c_implementation",
    "alloc_buffer",
    "decode_batches",
    "decode_records",
    "decode_columnar",
    "decode_records_with",
    "FIELD_OFFSET",
    "FIELD_TIMESTAMP",
    "FIELD_TIMESTAMP_TYPE",
    "FIELD_KEY",
    "FIELD_VALUE",
    "FIELD_KEY_SIZE",
    "FIELD_VALUE_SIZE",
    "FIELD_HEADERS",
    "FIELD_CRC",
    "encode_message_set",
    "encode_record_batch",
    "encode_columnar",
    "read_int8",
    "read_int16",
    "read_int32",
    "read_int64",
    "read_uint32",
    "read_uvarint",
    "read_varint",
    "read_varlong",
    "read_string",
    "read_bytes",
    "read_compact_string",
    "read_compact_bytes",
    "read_array_length",
    "read_compact_array_length",
    "read_tagged_fields",
    "write_int8",
    "write_int16",
    "write_int32",
    "write_int64",
    "write_uint32",
    "write_uvarint",
    "write_varint",
    "write_varlong",
    "write_string",
    "write_bytes",
    "write_compact_string",
    "write_compact_bytes",
    "write_array_length",
    "write_compact_array_length",
    "write_tagged_fields",
    "size_of_uvarint",
    "size_of_varint",
]

IMPLEMENTATION: str = _impl.IMPLEMENTATION
DEFAULT_MAX_DEPTH: int = _impl.DEFAULT_MAX_DEPTH
DEFAULT_MAX_DECOMPRESSED_SIZE: int = _impl.DEFAULT_MAX_DECOMPRESSED_SIZE

Record = _impl.Record
Batch = _impl.Batch
# A Columns its user builds (Columns(...), from_records, from_arrow) gives out these Records;
# one a decoder builds gives out that decoder's own.
use_record_type(Record)
crc32 = _impl.crc32
crc32c = _impl.crc32c
crc32c_implementation = _impl.crc32c_implementation
alloc_buffer = _impl.alloc_buffer
decode_batches = _impl.decode_batches
decode_records = _impl.decode_records
decode_columnar = _impl.decode_columnar
encode_message_set = _impl.encode_message_set
encode_record_batch = _impl.encode_record_batch
encode_columnar = _impl.encode_columnar
read_int8 = _impl.read_int8
read_int16 = _impl.read_int16
read_int32 = _impl.read_int32
read_int64 = _impl.read_int64
read_uint32 = _impl.read_uint32
read_uvarint = _impl.read_uvarint
read_varint = _impl.read_varint
read_varlong = _impl.read_varlong
read_string = _impl.read_string
read_bytes = _impl.read_bytes
read_compact_string = _impl.read_compact_string
read_compact_bytes = _impl.read_compact_bytes
read_array_length = _impl.read_array_length
read_compact_array_length = _impl.read_compact_array_length
read_tagged_fields = _impl.read_tagged_fields
write_int8 = _impl.write_int8
write_int16 = _impl.write_int16
write_int32 = _impl.write_int32
write_int64 = _impl.write_int64
write_uint32 = _impl.write_uint32
write_uvarint = _impl.write_uvarint
write_varint = _impl.write_varint
write_varlong = _impl.write_varlong
write_string = _impl.write_string
write_bytes = _impl.write_bytes
write_compact_string = _impl.write_compact_string
write_compact_bytes = _impl.write_compact_bytes
write_array_length = _impl.write_array_length
write_compact_array_length = _impl.write_compact_array_length
write_tagged_fields = _impl.write_tagged_fields
size_of_uvarint = _impl.size_of_uvarint
size_of_varint = _impl.size_of_varint

# Placeholders in decode_records_with's ``layout``: each stands for that field of the record.
FIELD_OFFSET = _impl._FIELD_OFFSET
FIELD_TIMESTAMP = _impl._FIELD_TIMESTAMP
FIELD_TIMESTAMP_TYPE = _impl._FIELD_TIMESTAMP_TYPE  # 0 CreateTime, 1 LogAppendTime, -1 in magic 0
FIELD_KEY = _impl._FIELD_KEY
FIELD_VALUE = _impl._FIELD_VALUE
FIELD_KEY_SIZE = _impl._FIELD_KEY_SIZE  # the key's length in bytes, -1 for a null key
FIELD_VALUE_SIZE = _impl._FIELD_VALUE_SIZE  # the value's, -1 for a null value
FIELD_HEADERS = _impl._FIELD_HEADERS  # a tuple of (str, bytes | None)
FIELD_CRC = _impl._FIELD_CRC  # a magic 0/1 message's own CRC (innermost); None in magic 2


decode_records_with = _impl.decode_records_with


# For kafkawire's own consumer (kafkawire.protocol.fetcher), not part of the codec API:
# the records poll() hands out, made straight from the fetched batches by the
# implementation loaded above.
_ConsumerRecord = _impl.ConsumerRecord
_decode_consumer_records = _impl.decode_consumer_records
