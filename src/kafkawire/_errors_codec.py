"""The codec's exceptions: bytes that cannot be decoded, records that cannot be encoded,
compression problems; raised by :mod:`kafkawire.codec` and :mod:`kafkawire.compression`.

Both codec implementations (the Cython extension and the pure-Python twin) build their
exceptions through the factory functions at the bottom of this module, so the two give
the same exception types with the same messages.  Import from :mod:`kafkawire.errors`;
this module does no I/O.
"""

from __future__ import annotations

from kafkawire._errors_base import BrokerError, KafkaWireError

__all__ = [
    "CodecError",
    "TruncatedDataError",
    "CorruptRecordError",
    "UnsupportedMagicError",
    "UnsupportedCodecError",
    "CompressionLibraryMissingError",
    "NestingDepthError",
    "DecompressedSizeError",
    "EncodeError",
]


class CodecError(KafkaWireError, ValueError):
    """Bytes that cannot be decoded or values that cannot be encoded."""


class TruncatedDataError(CodecError):
    """A primitive or a length-prefixed field runs past the end of the buffer.

    Whole-batch decoders never raise this for a partial *trailing* message or batch (a
    fetch response ends that way routinely); they stop there instead.
    """


class CorruptRecordError(CodecError, BrokerError):
    """A message or batch whose checksum or structure is wrong (Kafka's CORRUPT_MESSAGE).

    ``offset`` is the offset of the message or batch, ``expected`` the CRC stored in it and
    ``found`` the CRC computed over its bytes (both None when the problem is structural).
    """

    code = 2
    retriable = True
    name = "CORRUPT_MESSAGE"
    meaning = (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key "
        "for a compacted topic, or is otherwise corrupt."
    )

    def __init__(
        self,
        message: str | None = None,
        offset: int | None = None,
        expected: int | None = None,
        found: int | None = None,
    ):
        BrokerError.__init__(self, message)
        self.offset = offset
        self.expected = expected
        self.found = found


class UnsupportedMagicError(CodecError):
    """A message or batch with a magic byte other than 0, 1 or 2."""


class UnsupportedCodecError(CodecError):
    """A compression codec id kafkawire does not know (or one not valid for a magic)."""


class CompressionLibraryMissingError(CodecError):
    """The package that implements a compression codec is not installed."""


class NestingDepthError(CodecError):
    """Compressed wrapper messages nested deeper than the ``max_depth`` option allows."""


class DecompressedSizeError(CodecError):
    """A compressed set decompresses past the ``max_decompressed_size`` option."""


class EncodeError(CodecError):
    """A record or option that cannot be encoded (out of range, wrong type)."""


# ---------------------------------------------------------------------------------------
# Factories shared by the two codec implementations, so their messages are identical.
# ---------------------------------------------------------------------------------------


def truncated(what: str, pos: int, need: int, have: int) -> TruncatedDataError:
    return TruncatedDataError(
        f"truncated {what} at byte {pos}: needs {need} bytes, {have} remain in the buffer"
    )


def crc_mismatch(kind: str, offset: int, expected: int, found: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{kind} at offset {offset} failed its CRC check: stored crc 0x{expected:08x}, "
        f"computed 0x{found:08x}; the data was damaged on the wire or on disk "
        f"(pass check_crcs=False to decode it anyway)",
        offset=offset,
        expected=expected,
        found=found,
    )


def corrupt(kind: str, offset: int, problem: str) -> CorruptRecordError:
    return CorruptRecordError(f"corrupt {kind} at offset {offset}: {problem}", offset=offset)


def unsupported_magic(magic: int, offset: int) -> UnsupportedMagicError:
    return UnsupportedMagicError(
        f"unsupported magic byte {magic} at offset {offset}: kafkawire decodes magic 0 and 1 "
        f"(MessageSet) and 2 (RecordBatch); the data is corrupt or from a newer format"
    )


def unsupported_codec(codec: int, magic: int | None = None) -> UnsupportedCodecError:
    if magic is None:
        return UnsupportedCodecError(
            f"unknown compression codec {codec}: kafkawire knows 0 none, 1 gzip, 2 snappy, "
            f"3 lz4 and 4 zstd"
        )
    return UnsupportedCodecError(
        f"compression codec {codec} is not valid with magic {magic}: zstd (4) needs "
        f"magic 2 (KIP-110); use magic 2 or another codec"
    )


def library_missing(codec_name: str, package: str) -> CompressionLibraryMissingError:
    return CompressionLibraryMissingError(
        f"{codec_name} compression needs the '{package}' package, which is not installed; "
        f"install it with: pip install {package}"
    )


def too_deep(depth: int, max_depth: int, offset: int) -> NestingDepthError:
    return NestingDepthError(
        f"compressed wrapper at offset {offset} is nested {depth} levels deep, past "
        f"max_depth={max_depth}; raise max_depth if this data is trusted"
    )


def too_big(codec_name: str, max_size: int) -> DecompressedSizeError:
    return DecompressedSizeError(
        f"{codec_name} data decompresses to more than max_decompressed_size={max_size} "
        f"bytes; raise max_decompressed_size if this data is trusted"
    )


def encode_error(problem: str) -> EncodeError:
    return EncodeError(problem)


def malformed(what: str, pos: int, problem: str) -> CodecError:
    return CodecError(f"malformed {what} at byte {pos}: {problem}")


def bad_compressed(codec_name: str, detail: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"{codec_name} data could not be decompressed ({detail}); the compressed set is "
        f"corrupt or was written with a different codec than its attributes say"
    )
