"""Compressed batches with the exact bytes a host client writes.

kafkawire encodes the records uncompressed (one codec call); the host client's own
compressor then packs them the way the host does, so the framing (xerial snappy, the gzip
header and level, lz4 frame flags and level), the attributes and the CRC are the host's.
Imports no peer client: each compat module passes its host's compress function in.
"""

from __future__ import annotations

import struct

from kafkawire import codec as _codec

_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
V2_HEADER = 61
_V2_LENGTH_AT = 8  # batchLength counts the bytes after itself
_V2_CRC_AT = 17
_V2_CRC_FROM = 21  # KIP-98: CRC32C covers attributes..end
_V2_CODEC_AT = 22  # low byte of the int16 attributes
_LEGACY_CRC_AT = 12
_LEGACY_CRC_FROM = 16  # a message's CRC32 covers magic..end
_LEGACY_ATTRIBUTES_AT = 17

# A timestamp kafkawire's fast path takes: beyond this the hosts overflow in their own
# ways (OverflowError at append, struct.error at build), which only their builders show.
TIMESTAMP_LIMIT = 1 << 62


def v2_compressed(plain, codec_id: int, compress):
    """A magic-2 batch ``plain`` (encoded uncompressed) with its records compressed by
    ``compress``: header length, codec bits and CRC updated.  ``plain`` itself when
    compressing does not make the records smaller, as both hosts decide."""
    body = bytes(memoryview(plain)[V2_HEADER:])
    packed = compress(body)
    if len(body) <= len(packed):
        return plain
    out = bytearray(memoryview(plain)[:V2_HEADER])
    out += packed
    _INT32.pack_into(out, _V2_LENGTH_AT, len(out) - 12)
    out[_V2_CODEC_AT] |= codec_id
    _UINT32.pack_into(out, _V2_CRC_AT, _codec.crc32c(memoryview(out)[_V2_CRC_FROM:]))
    return out


def legacy_wrapper(packed, magic: int, codec_id: int) -> bytearray:
    """The magic 0/1 wrapper message around a compressed inner set, as the hosts write it
    before a broker assigns offsets: offset 0, timestamp 0, no key, the codec in its
    attributes."""
    out = bytearray(_codec.encode_message_set([(None, packed, 0)], magic=magic, base_offset=0))
    out[_LEGACY_ATTRIBUTES_AT] = codec_id
    _UINT32.pack_into(out, _LEGACY_CRC_AT, _codec.crc32(memoryview(out)[_LEGACY_CRC_FROM:]))
    return out


def replayed(builder, appended):
    """The host's own ``builder`` with every argument tuple in ``appended`` appended to it
    again: where the fast path hands a batch over to the host mid-way."""
    for args in appended:
        builder.append(*args)
    return builder


def headers_size(headers, _svi=_codec.size_of_varint):
    """Encoded size of magic-2 record headers, or None when they are not a list or tuple
    of (str, bytes-like or None) pairs (the host's builder decides what happens then)."""
    if type(headers) not in (list, tuple):
        return None
    size = _svi(len(headers))
    for pair in headers:
        if type(pair) not in (tuple, list) or len(pair) != 2:
            return None
        h_key, h_value = pair
        if type(h_key) is not str:
            return None
        n = len(h_key.encode("utf-8"))
        size += _svi(n) + n
        if h_value is None:
            size += 1
        elif type(h_value) in (bytes, bytearray, memoryview):
            n = len(h_value)
            size += _svi(n) + n
        else:
            return None
    return size


def entry_codec(view, start: int = 0) -> tuple[int, int]:
    """(magic, compression codec id) of the entry at ``view[start:]``."""
    magic = view[start + 16]
    at = _V2_CODEC_AT if magic >= 2 else _LEGACY_ATTRIBUTES_AT
    return magic, view[start + at] & 0x07


def unreadable_codec(host_codec, codec_id: int, magic: int) -> tuple[str, str | None] | None:
    """Why a host whose codec module is ``host_codec`` (``has_gzip()``...) refuses to read
    a batch compressed with ``codec_id``: ("unknown", None) for a codec it does not know
    (zstd before magic 2 included), ("missing", name) for one whose library it lacks
    (kafkawire's own decoder may have it); None when it reads it.  Both hosts check this,
    in these words, before decompressing."""
    names = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    if codec_id not in names or (codec_id == 4 and magic < 2):
        return ("unknown", None)
    name = names[codec_id]
    return None if getattr(host_codec, f"has_{name}")() else ("missing", name)


# ---- magic 0/1 wrappers with a null value ---------------------------------------

_LEGACY_KEY_AT = (18, 26)  # key length of a magic 0 / magic 1 message (after its timestamp)

# Both hosts' words for a compressed wrapper without a value, which they refuse before
# they look at its codec.
NULL_WRAPPER_MESSAGE = "Value of compressed message is None"


def _wrapper_value(view, magic: int) -> tuple[int, int] | None:
    """(start, length) of the value of the magic 0/1 message ``view`` (one whole entry);
    None when its key length is invalid or a length runs past its end (the codec says
    how)."""
    n = len(view)
    pos = _LEGACY_KEY_AT[magic]
    if n - pos < 4:
        return None
    (klen,) = _INT32.unpack_from(view, pos)
    if klen < -1:
        return None  # an invalid key length: the codec says so
    pos += 4 + max(klen, 0)
    if n - pos < 4:
        return None
    (vlen,) = _INT32.unpack_from(view, pos)
    return pos + 4, vlen


def null_wrapper(view) -> bool:
    """Whether the magic 0/1 entry ``view`` is a compressed wrapper with a null value."""
    if len(view) < 17 or view[16] > 1 or not view[_LEGACY_ATTRIBUTES_AT] & 0x07:
        return False
    value = _wrapper_value(view, view[16])
    return value is not None and value[1] == -1


def plain_lengths(message, magic: int) -> bool:
    """Whether a magic 0/1 message's key and value lengths are each -1 (null) or at least
    0 and inside it: the hosts walk a length below -1 backwards, kafkawire reads null."""
    pos = _LEGACY_KEY_AT[1 if magic else 0]
    try:
        (key_len,) = _INT32.unpack_from(message, pos)
        if key_len < -1:
            return False
        pos += 4 + max(key_len, 0)
        (value_len,) = _INT32.unpack_from(message, pos)
    except struct.error:
        return False
    return value_len >= -1 and pos + 4 + max(value_len, 0) <= len(message)


def whole_messages(inner, magic: int) -> bool:
    """Whether a compressed wrapper's inner set ``inner`` is one or more whole messages of
    the wrapper's ``magic`` (the hosts read every inner message with it), none itself
    compressed (the hosts refuse nested wrappers), that end where the set ends, each with
    plain_lengths."""
    n = len(inner)
    pos = 0
    while pos < n:
        if n - pos < 17:
            return False
        (size,) = _INT32.unpack_from(inner, pos + 8)
        end = pos + 12 + size
        if size < 0 or end > n or inner[pos + 16] != magic or inner[pos + 17] & 0x07 or (
                not plain_lengths(inner[pos:end], magic)):
            return False
        pos = end
    return n > 0


_XERIAL_HEADER = b"\x82SNAPPY\x00" + _INT32.pack(1) + _INT32.pack(1)


def xerial_alike(payload) -> bool:
    """Whether the hosts take a snappy ``payload`` for xerial framing exactly when
    kafkawire does: kafkawire goes by its 8-byte magic, the hosts by the whole 16-byte
    header (version 1, compatible 1) and something after it."""
    if bytes(payload[:8]) != _XERIAL_HEADER[:8]:
        return True
    return len(payload) > 16 and bytes(payload[:16]) == _XERIAL_HEADER


def v2_reads_alike(view, start: int = 0) -> bool:
    """Whether the hosts read the compressed payload of the magic-2 batch at ``start``
    of ``view`` as kafkawire does, as far as its framing goes (see xerial_alike)."""
    if view[start + _V2_CODEC_AT] & 0x07 != 2:
        return True
    (length,) = _INT32.unpack_from(view, start + _V2_LENGTH_AT)
    return xerial_alike(view[start + V2_HEADER:start + 12 + length])


def legacy_reads_alike(view, magic: int) -> bool:
    """Whether the hosts read the compressed payload of the magic 0/1 wrapper ``view`` as
    kafkawire does, as far as its framing goes (see xerial_alike)."""
    if view[_LEGACY_ATTRIBUTES_AT] & 0x07 != 2:
        return True
    at = _wrapper_value(view, magic)
    return at is not None and xerial_alike(view[at[0]:at[0] + max(at[1], 0)])
