"""The columnar shape of decoded records: flat numpy arrays over one contiguous buffer.

:func:`kafkawire.codec.decode_columnar` returns a :class:`Columns` that is still a view of
the fetched bytes (nothing copied: arrays of where each key and value starts there);
``data`` and the offsets arrays are built from it on first use.  ``to_arrow`` turns a
Columns into a pyarrow RecordBatch with Spark's Kafka schema sharing ``data``, and
:func:`kafkawire.codec.encode_columnar` encodes one.  Both codec implementations build
this same class; each hands it its own ``Record`` type, so the records a Columns gives out
are those of the implementation that decoded it.  This module imports neither
implementation nor :mod:`kafkawire.codec` (they import it).

This module does no I/O; numpy is imported on first use (a tenth of a second that a
program decoding record objects never pays), pyarrow too.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from kafkawire import errors


class _Numpy:
    """numpy, imported by the first attribute looked up (then ``np`` is numpy itself)."""

    def __getattr__(self, name: str) -> Any:
        global np
        import numpy

        np = numpy
        return getattr(numpy, name)


np: Any = _Numpy()

__all__ = ["Columns"]

_INT32_MAX = 2**31 - 1
# The buffer and offset arrays a decoder may leave unbuilt (see Columns, "views").
_LAZY = ("data", "key_offsets", "value_offsets", "header_key_offsets", "header_value_offsets")
# A view's arrays (see Columns._from_view): its public ones, then where keys, values and
# header keys and values start in the view's buffers, and header key lengths.
_VIEW_ARRAYS = {
    "offsets": "int64",
    "timestamps": "int64",
    "timestamp_types": "int8",
    "key_lengths": "int32",
    "value_lengths": "int32",
    "header_index": "int32",
    "header_value_lengths": "int32",
    "_key_starts": "int64",
    "_value_starts": "int64",
    "_header_key_starts": "int64",
    "_header_key_lengths": "int32",
    "_header_value_starts": "int64",
}
_FIELDS = (
    ("data", "uint8"),
    ("offsets", "int64"),
    ("timestamps", "int64"),
    ("timestamp_types", "int8"),
    ("key_offsets", "int32"),
    ("key_lengths", "int32"),
    ("value_offsets", "int32"),
    ("value_lengths", "int32"),
    ("header_index", "int32"),
    ("header_key_offsets", "int32"),
    ("header_value_offsets", "int32"),
    ("header_value_lengths", "int32"),
)


# The Record type of a Columns made by its public constructors without ``record_type``:
# that of the implementation kafkawire.codec loaded, which codec registers when it loads.
_default_record_type = None


def use_record_type(record_type: type) -> None:
    """Make ``record_type`` the Record of Columns built without one (kafkawire.codec's)."""
    global _default_record_type
    _default_record_type = record_type


def data_too_large(total: int) -> errors.CodecError:
    """The error for columnar data past what int32 offsets can address (both codecs)."""
    return errors.CodecError(
        f"columnar data of {total} bytes is more than the {_INT32_MAX} bytes int32 offsets "
        f"can address; decode in smaller pieces"
    )


def _bad(problem: str) -> errors.EncodeError:
    return errors.encode_error(f"Columns: {problem}")


def _as_bytes(i: int, what: str, value) -> bytes | bytearray | None:
    if value is None or type(value) is bytes or type(value) is bytearray:
        return value
    try:
        return memoryview(value).tobytes()
    except TypeError:
        raise errors.encode_error(
            f"record {i}: {what} must be bytes-like or None, not {type(value).__name__}"
        ) from None


def record_fields(i: int, rec, timestamp: int):
    """Normalize encoder input ``rec`` (record number ``i``).

    Returns ``(key, value, timestamp, headers)``: key/value bytes, bytearray or None,
    timestamp an int, headers a tuple of (UTF-8 key bytes, value bytes or None).  Shared by
    the pure-Python encoders and :meth:`Columns.from_records`.
    """
    if type(rec) is tuple:
        n = len(rec)
        if n == 2:
            key, value = rec
            ts = None
            headers = ()
        elif n == 3:
            key, value, ts = rec
            headers = ()
        elif n == 4:
            key, value, ts, headers = rec
        else:
            raise errors.encode_error(
                f"record {i}: a record tuple has 2 to 4 items "
                f"(key, value[, timestamp[, headers]]), not {n}"
            )
    else:
        try:
            key = rec.key
            value = rec.value
            ts = rec.timestamp
            headers = rec.headers
        except AttributeError:
            raise errors.encode_error(
                f"record {i}: expected a Record or a (key, value[, timestamp[, headers]]) "
                f"tuple, not {type(rec).__name__}"
            ) from None
    if ts is None:
        ts = timestamp
    elif type(ts) is not int:
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise errors.encode_error(
                f"record {i}: timestamp must be an int or None, not {type(ts).__name__}"
            )
        ts = int(ts)
    key = _as_bytes(i, "key", key)
    value = _as_bytes(i, "value", value)
    if headers:
        out = []
        try:
            items = list(headers)
        except TypeError:
            raise errors.encode_error(
                f"record {i}: headers must be an iterable of (key, value) pairs, "
                f"not {type(headers).__name__}"
            ) from None
        for h in items:
            try:
                hk, hv = h
            except (TypeError, ValueError):
                raise errors.encode_error(
                    f"record {i}: a header is a (key, value) pair, not {h!r}"
                ) from None
            if type(hk) is str:
                hk = hk.encode("utf-8", "surrogatepass")
                try:
                    hk.decode("utf-8")
                except UnicodeDecodeError:
                    raise errors.encode_error(
                        f"record {i}: header key {h[0]!r:.60} is not valid Unicode"
                    ) from None
            elif isinstance(hk, (bytes, bytearray, memoryview)):
                hk = bytes(hk)
                try:
                    hk.decode("utf-8")
                except UnicodeDecodeError:
                    raise errors.encode_error(
                        f"record {i}: header key {hk!r:.60} is not valid UTF-8"
                    ) from None
            else:
                raise errors.encode_error(
                    f"record {i}: header key must be str or bytes, not {type(hk).__name__}"
                )
            out.append((hk, _as_bytes(i, "header value", hv)))
        headers = tuple(out)
    else:
        headers = ()
    return key, value, ts, headers


def gather_spans(segments, bases, starts, lengths, out, pos, offsets) -> int:
    """Copy spans (``starts``/``lengths``, -1 = null) of a view's buffers into ``out``
    from ``pos`` on; ``offsets[i]`` gets where span ``i`` landed, ``offsets[n]`` the end.
    Returns the end.  The extension passes its own loop with the same contract."""
    mv = memoryview(out)
    one = segments[0] if len(segments) == 1 else None
    for i, (start, n) in enumerate(zip(starts.tolist(), lengths.tolist())):
        offsets[i] = pos
        if n > 0:
            if one is not None:
                mv[pos : pos + n] = one[start : start + n]
            else:
                j = bisect_right(bases, start) - 1
                b = start - bases[j]
                mv[pos : pos + n] = segments[j][b : b + n]
            pos += n
    offsets[len(lengths)] = pos
    return pos


class Columns:
    """Decoded records as flat arrays over one buffer (see ``to_arrow`` for Spark's schema).

    ``data`` holds every key (record order), then every value, then every header key
    (UTF-8), then every header value.  Key ``i`` is ``data[key_offsets[i]:key_offsets[i+1]]``
    (likewise values and header keys/values); a null key or value has length -1 in
    ``key_lengths``/``value_lengths`` and an empty span.  The headers of record ``i`` are
    header slots ``header_index[i]`` to ``header_index[i+1]``.

    Views: ``decode_columnar`` copies no record bytes.  Its Columns keeps the fetched
    buffer (and the decompressed buffer of each compressed entry) and, per key, value and
    header, where its bytes start there; ``key``/``value``/``headers``/``record``/
    ``to_records``, ``payload_size`` and the numeric arrays read them in place.  ``data``
    and the four ``*_offsets`` arrays are built on first use (``to_arrow`` and
    ``encode_columnar`` use them): one copy of the record bytes, after which the buffers
    are let go and ``is_view`` is False.  A writable input (a bytearray, say) is copied
    once when decoded, so changing it later never changes decoded records; pass bytes or
    a read-only memoryview to avoid that copy.  While a view, the Columns keeps the whole
    input alive (buffers no kept record points into are let go at once).

    ``record_type`` is the class ``record`` and ``to_records`` build: a decoder passes its
    own implementation's, and the constructors default to ``kafkawire.codec.Record``.
    """

    __slots__ = tuple(
        ("_" + name) if name in _LAZY else name for name, _ in _FIELDS
    ) + (
        "_view",
        # a view's buffers: memoryviews (format "B") and where each starts in the one
        # address space the starts below count in; None once ``data`` is built
        "_segments",
        "_bases",
        "_gather",
        "_key_starts",
        "_value_starts",
        "_header_key_starts",
        "_header_key_lengths",
        "_header_value_starts",
        "_raw",  # a view's arrays not yet wrapped: see _from_view
        "_record_type",  # None: _default_record_type
    )

    def __init__(
        self,
        data,
        offsets,
        timestamps,
        timestamp_types,
        key_offsets,
        key_lengths,
        value_offsets,
        value_lengths,
        header_index,
        header_key_offsets,
        header_value_offsets,
        header_value_lengths,
        *,
        record_type: type | None = None,
    ):
        args = (
            data,
            offsets,
            timestamps,
            timestamp_types,
            key_offsets,
            key_lengths,
            value_offsets,
            value_lengths,
            header_index,
            header_key_offsets,
            header_value_offsets,
            header_value_lengths,
        )
        arrays = {}
        for (name, dtype), arg in zip(_FIELDS, args):
            try:
                arrays[name] = np.frombuffer(arg, dtype=dtype)
            except (TypeError, ValueError) as exc:
                raise _bad(f"{name} is not a buffer of {np.dtype(dtype).name} ({exc})") from None
        self._set_arrays(arrays, record_type)
        self._validate()

    def _set_arrays(self, arrays, record_type) -> None:
        for name, _ in _FIELDS:
            setattr(self, "_" + name if name in _LAZY else name, arrays[name])
        self._view = memoryview(self._data)
        self._segments = None
        self._raw = None
        self._record_type = record_type

    @classmethod
    def _from_decoder(cls, *buffers, record_type: type | None = None) -> Columns:
        """Wrap the buffers a codec decoder filled, in constructor order, without _validate.

        The decoders build these arrays consistent by construction (and check the 2 GiB
        limit themselves); skipping the numpy checks is a fifth of a columnar decode.
        """
        self = cls.__new__(cls)
        self._set_arrays(
            {name: np.frombuffer(arg, dtype=dtype) for (name, dtype), arg in zip(_FIELDS, buffers)},
            record_type,
        )
        return self

    @classmethod
    def _from_view(cls, segments, bases, raw, gather=None, record_type=None) -> Columns:
        """A view (see the class): record fields in place in ``segments``, not copied.

        ``segments`` are "B" memoryviews; segment ``j`` covers ``bases[j]`` up to
        ``bases[j + 1]`` of the address space that the int64 starts count in (the fetched
        buffer first, then each decompressed one in decoding order).  ``raw`` maps each
        name in _VIEW_ARRAYS to (buffer, byte offset, item count) of its array: the
        decoders' results, wrapped as numpy arrays on first use (a decode wraps none).
        Starts of null entries are where their bytes would have been.  ``gather`` copies
        spans into ``data`` (the extension passes its C loop; default: ``gather_spans``);
        ``record_type`` is the decoding implementation's Record.  Both codecs build views
        with identical arrays; decoders checked them: no _validate.
        """
        self = cls.__new__(cls)
        self._raw = raw
        self._record_type = record_type
        # the _LAZY attributes, unbuilt (spelled out: a loop of setattr was nearly half the
        # fixed cost of a decode_columnar call)
        self._data = self._key_offsets = self._value_offsets = None
        self._header_key_offsets = self._header_value_offsets = self._view = None
        self._gather = gather_spans if gather is None else gather
        self._bases = bases = tuple(bases)
        if len(segments) > 1:
            # Let go of buffers no kept record points into (batches before start_offset,
            # control batches): an empty stand-in keeps every other base where it is.
            used = np.zeros(len(segments), dtype=bool)
            edges = np.asarray(bases, dtype=np.int64)
            for starts, lengths in (
                (self._key_starts, self.key_lengths),
                (self._value_starts, self.value_lengths),
                (self._header_key_starts, self._header_key_lengths),
                (self._header_value_starts, self.header_value_lengths),
            ):
                if len(starts):
                    used[np.searchsorted(edges, starts[lengths > 0], side="right") - 1] = True
            segments = [s if used[j] else memoryview(b"") for j, s in enumerate(segments)]
        self._segments = tuple(segments)
        return self

    def __getattr__(self, name):
        # Only for attributes not set yet: a view's arrays, wrapped on first use.
        try:
            buf, offset, count = object.__getattribute__(self, "_raw")[name]
        except (KeyError, AttributeError, TypeError):
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r}"
            ) from None
        arr = np.frombuffer(buf, dtype=_VIEW_ARRAYS[name], count=count, offset=offset)
        setattr(self, name, arr)
        return arr

    # ---- the buffer and offsets of a view, built on first use ---------------------------
    def _build_data(self) -> None:
        """Copy a view's record bytes into ``data`` (keys, values, header keys, header
        values) and set the ``*_offsets`` arrays; then let go of the fetched buffers."""
        spans = (
            (self._key_starts, self.key_lengths),
            (self._value_starts, self.value_lengths),
            (self._header_key_starts, self._header_key_lengths),
            (self._header_value_starts, self.header_value_lengths),
        )
        total = sum(int(np.maximum(lengths, 0).sum(dtype=np.int64)) for _, lengths in spans)
        if total > _INT32_MAX:  # pragma: no cover - the decoders refuse such views
            raise data_too_large(total)
        data = bytearray(total)
        built = []
        pos = 0
        for starts, lengths in spans:
            offs = np.empty(len(lengths) + 1, dtype=np.int32)
            pos = self._gather(self._segments, self._bases, starts, lengths, data, pos, offs)
            built.append(offs)
        if self._segments is None:  # another thread built them meanwhile: keep those
            return
        arr = np.frombuffer(data, dtype=np.uint8)
        (self._key_offsets, self._value_offsets, self._header_key_offsets,
         self._header_value_offsets) = built
        self._data = arr
        self._view = memoryview(arr)
        self._segments = self._bases = None
        self._key_starts = self._value_starts = None
        self._header_key_starts = self._header_key_lengths = self._header_value_starts = None

    @property
    def data(self) -> np.ndarray:
        """Every key, then every value, header key and header value (uint8)."""
        if self._segments is not None:
            self._build_data()
        return self._data

    @property
    def key_offsets(self) -> np.ndarray:
        if self._segments is not None:
            self._build_data()
        return self._key_offsets

    @property
    def value_offsets(self) -> np.ndarray:
        if self._segments is not None:
            self._build_data()
        return self._value_offsets

    @property
    def header_key_offsets(self) -> np.ndarray:
        if self._segments is not None:
            self._build_data()
        return self._header_key_offsets

    @property
    def header_value_offsets(self) -> np.ndarray:
        if self._segments is not None:
            self._build_data()
        return self._header_value_offsets

    @property
    def is_view(self) -> bool:
        """True while the record bytes are read in place from the decoded buffers (until
        ``data`` or an ``*_offsets`` array is first used)."""
        return self._segments is not None

    @property
    def payload_size(self) -> int:
        """Bytes of keys, values, header keys and header values: ``len(data)``, without
        building ``data`` for a view."""
        if self._segments is None:
            return len(self._data)
        return sum(
            int(np.maximum(lengths, 0).sum(dtype=np.int64))
            for lengths in (self.key_lengths, self.value_lengths, self._header_key_lengths,
                            self.header_value_lengths)
        )

    def _bytes_at(self, start: int, n: int) -> bytes:
        """A view's ``n`` bytes at ``start`` of its address space."""
        segs = self._segments
        if len(segs) == 1:
            return segs[0][start : start + n].tobytes()
        j = bisect_right(self._bases, start) - 1
        b = start - self._bases[j]
        return segs[j][b : b + n].tobytes()

    def _slicer(self):
        """A function (start, n) -> bytes over a view's buffers."""
        segs = self._segments
        if len(segs) == 1:
            seg = segs[0]
            return lambda start, n: seg[start : start + n].tobytes()
        bases = self._bases

        def take(start, n):
            j = bisect_right(bases, start) - 1
            b = start - bases[j]
            return segs[j][b : b + n].tobytes()

        return take

    def _validate(self) -> None:
        n = len(self.offsets)
        h = len(self.header_value_lengths)
        size = len(self.data)
        if size > _INT32_MAX:
            raise data_too_large(size)
        for name, want in (
            ("timestamps", n),
            ("timestamp_types", n),
            ("key_offsets", n + 1),
            ("key_lengths", n),
            ("value_offsets", n + 1),
            ("value_lengths", n),
            ("header_index", n + 1),
            ("header_key_offsets", h + 1),
            ("header_value_offsets", h + 1),
        ):
            got = len(getattr(self, name))
            if got != want:
                raise _bad(f"{name} has {got} entries, expected {want} for {n} records, {h} headers")
        for name, limit in (
            ("key_offsets", size),
            ("value_offsets", size),
            ("header_key_offsets", size),
            ("header_value_offsets", size),
            ("header_index", h),
        ):
            arr = getattr(self, name)
            if arr[0] < 0 or arr[-1] > limit or (len(arr) > 1 and bool(np.any(arr[1:] < arr[:-1]))):
                raise _bad(f"{name} must rise monotonically from 0 or more to at most {limit}")
        if int(self.header_index[0]) != 0 or int(self.header_index[-1]) != h:
            raise _bad(f"header_index must run from 0 to the {h} header slots")
        for name, offs in (
            ("key_lengths", self.key_offsets),
            ("value_lengths", self.value_offsets),
            ("header_value_lengths", self.header_value_offsets),
        ):
            lengths = getattr(self, name)
            spans = np.diff(offs)
            if bool(np.any(np.where(lengths < 0, spans != 0, lengths != spans))):
                raise _bad(f"{name} disagree with their offsets (null entries need an empty span)")

    # ---- record access -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.offsets)

    def __repr__(self) -> str:
        return (
            f"Columns({len(self.offsets)} records, {len(self.header_value_lengths)} headers, "
            f"{self.payload_size} bytes of data)"
        )

    def _index(self, i: int) -> int:
        n = len(self.offsets)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"record index {i} out of range for {n} records")
        return i

    def key(self, i: int) -> bytes | None:
        i = self._index(i)
        n = int(self.key_lengths[i])
        if n < 0:
            return None
        if self._segments is not None:
            return self._bytes_at(int(self._key_starts[i]), n)
        start = int(self._key_offsets[i])
        return self._view[start : start + n].tobytes()

    def value(self, i: int) -> bytes | None:
        i = self._index(i)
        n = int(self.value_lengths[i])
        if n < 0:
            return None
        if self._segments is not None:
            return self._bytes_at(int(self._value_starts[i]), n)
        start = int(self._value_offsets[i])
        return self._view[start : start + n].tobytes()

    def _header_spans(self):
        """(take, header key starts, their lengths, header value starts) as lists, for
        a view or a built Columns alike; take(start, n) gives the bytes."""
        if self._segments is not None:
            return (
                self._slicer(),
                self._header_key_starts.tolist(),
                self._header_key_lengths.tolist(),
                self._header_value_starts.tolist(),
            )
        view = self._view
        hko = self._header_key_offsets
        return (
            lambda start, n: view[start : start + n].tobytes(),
            hko[:-1].tolist(),
            np.diff(hko).tolist(),
            self._header_value_offsets[:-1].tolist(),
        )

    def headers(self, i: int) -> tuple[tuple[str, bytes | None], ...]:
        i = self._index(i)
        first, end = int(self.header_index[i]), int(self.header_index[i + 1])
        if first == end:
            return ()
        if self._segments is not None:
            take = self._slicer()
            hks, hkl, hvs = self._header_key_starts, self._header_key_lengths, self._header_value_starts
        else:
            view = self._view
            take = lambda start, n: view[start : start + n].tobytes()  # noqa: E731
            hko = self._header_key_offsets
            hks, hkl = hko[:-1], np.diff(hko)
            hvs = self._header_value_offsets
        hvl = self.header_value_lengths
        out = []
        for j in range(first, end):
            k = str(take(int(hks[j]), int(hkl[j])), "utf-8")
            n = int(hvl[j])
            out.append((k, None if n < 0 else take(int(hvs[j]), n)))
        return tuple(out)

    @property
    def record_type(self) -> type:
        """The Record class :meth:`record` and :meth:`to_records` build."""
        record_type = self._record_type or _default_record_type
        if record_type is None:
            raise errors.CodecError(
                "this Columns was built without a Record type before kafkawire.codec was "
                "imported: import kafkawire.codec, or pass record_type="
            )
        return record_type

    def record(self, i: int):
        i = self._index(i)
        return self.record_type(
            int(self.offsets[i]),
            int(self.timestamps[i]),
            int(self.timestamp_types[i]),
            self.key(i),
            self.value(i),
            self.headers(i),
        )

    def to_records(self) -> list:
        """Every record as a :attr:`record_type` (copies keys and values out)."""
        Record = self.record_type
        if self._segments is not None:
            take = self._slicer()
            ks = self._key_starts.tolist()
            vs = self._value_starts.tolist()
        else:
            view = self._view
            take = lambda start, n: view[start : start + n].tobytes()  # noqa: E731
            ks = self._key_offsets.tolist()
            vs = self._value_offsets.tolist()
        kl = self.key_lengths.tolist()
        vl = self.value_lengths.tolist()
        hi = self.header_index.tolist()
        hvl = self.header_value_lengths.tolist()
        hks = hkl = hvs = None
        out = []
        for i, (off, ts, tt) in enumerate(
            zip(self.offsets.tolist(), self.timestamps.tolist(), self.timestamp_types.tolist())
        ):
            key = None if kl[i] < 0 else take(ks[i], kl[i])
            value = None if vl[i] < 0 else take(vs[i], vl[i])
            if hi[i] == hi[i + 1]:
                headers = ()
            else:
                if hks is None:
                    _, hks, hkl, hvs = self._header_spans()
                headers = tuple(
                    (
                        str(take(hks[j], hkl[j]), "utf-8"),
                        None if hvl[j] < 0 else take(hvs[j], hvl[j]),
                    )
                    for j in range(hi[i], hi[i + 1])
                )
            out.append(Record(off, ts, tt, key, value, headers))
        return out

    # ---- Arrow -----------------------------------------------------------------------------
    def to_arrow(self, topic: str | None = None, partition: int | None = None):
        """A pyarrow RecordBatch with Spark's Kafka source schema, sharing ``data``.

        Columns: key binary, value binary, [topic string, partition int32 when given],
        offset int64, timestamp timestamp[ms, UTC], timestampType int32,
        headers list<struct<key: string, value: binary>>.  Key, value and header bytes and
        the offset/timestamp arrays are not copied (a view builds ``data`` first: Arrow's
        binary arrays need each column's bytes in one piece).
        """
        try:
            import pyarrow as pa
        except ImportError:
            raise errors.CodecError(
                "Columns.to_arrow needs the 'pyarrow' package, which is not installed; "
                "install it with: pip install pyarrow"
            ) from None
        n = len(self.offsets)
        h = len(self.header_value_lengths)
        data = pa.py_buffer(self.data)

        def validity(lengths):
            nulls = lengths < 0
            if not bool(nulls.any()):
                return None
            return pa.py_buffer(np.packbits(~nulls, bitorder="little"))

        key = pa.Array.from_buffers(
            pa.binary(), n, [validity(self.key_lengths), pa.py_buffer(self.key_offsets), data]
        )
        value = pa.Array.from_buffers(
            pa.binary(), n, [validity(self.value_lengths), pa.py_buffer(self.value_offsets), data]
        )
        header_key = pa.Array.from_buffers(
            pa.string(), h, [None, pa.py_buffer(self.header_key_offsets), data]
        )
        header_value = pa.Array.from_buffers(
            pa.binary(),
            h,
            [validity(self.header_value_lengths), pa.py_buffer(self.header_value_offsets), data],
        )
        struct_type = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        header_struct = pa.StructArray.from_arrays(
            [header_key, header_value], fields=list(struct_type)
        )
        headers = pa.Array.from_buffers(
            pa.list_(struct_type),
            n,
            [None, pa.py_buffer(self.header_index)],
            children=[header_struct],
        )
        arrays = [key, value]
        names = ["key", "value"]
        if topic is not None:
            arrays.append(pa.repeat(pa.scalar(topic, pa.string()), n))
            names.append("topic")
        if partition is not None:
            arrays.append(pa.repeat(pa.scalar(partition, pa.int32()), n))
            names.append("partition")
        arrays += [
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.offsets)]),
            pa.Array.from_buffers(
                pa.timestamp("ms", tz="UTC"), n, [None, pa.py_buffer(self.timestamps)]
            ),
            pa.array(self.timestamp_types.astype(np.int32), pa.int32()),
            headers,
        ]
        names += ["offset", "timestamp", "timestampType", "headers"]
        return pa.RecordBatch.from_arrays(arrays, names=names)

    # ---- building, for encoding ----------------------------------------------------------
    @classmethod
    def from_records(cls, records, timestamp: int = -1, *, record_type: type | None = None) -> Columns:
        """Columns from encoder input (Records or tuples, as ``encode_record_batch`` takes).

        A Record keeps its offset and timestamp type; tuple ``i`` gets offset ``i`` and
        timestamp type 0 (CreateTime).
        """
        offsets = []
        timestamps = []
        ttypes = []
        keys = []
        values = []
        hkeys = []
        hvalues = []
        hcounts = []
        for i, rec in enumerate(records):
            key, value, ts, headers = record_fields(i, rec, timestamp)
            if type(rec) is tuple:
                offsets.append(i)
                ttypes.append(0)
            else:
                offsets.append(rec.offset)
                ttypes.append(rec.timestamp_type)
            timestamps.append(ts)
            keys.append(key)
            values.append(value)
            hcounts.append(len(headers))
            for hk, hv in headers:
                hkeys.append(hk)
                hvalues.append(hv)
        try:
            offsets_arr = np.array(offsets, dtype=np.int64)
            ts_arr = np.array(timestamps, dtype=np.int64)
            tt_arr = np.array(ttypes, dtype=np.int8)
        except OverflowError as exc:
            raise errors.encode_error(f"Columns.from_records: value out of range ({exc})") from None
        return cls._build(offsets_arr, ts_arr, tt_arr, keys, values, hcounts, hkeys, hvalues,
                          record_type)

    @classmethod
    def _build(cls, offsets, timestamps, ttypes, keys, values, hcounts, hkeys, hvalues,
               record_type):
        def spans(items, start):
            lengths = np.fromiter(
                (-1 if x is None else len(x) for x in items), dtype=np.int64, count=len(items)
            )
            offs = np.empty(len(items) + 1, dtype=np.int64)
            offs[0] = start
            np.cumsum(np.maximum(lengths, 0), out=offs[1:])
            offs[1:] += start
            return offs, lengths

        ko, kl = spans(keys, 0)
        vo, vl = spans(values, int(ko[-1]))
        hko, _ = spans(hkeys, int(vo[-1]))
        hvo, hvl = spans(hvalues, int(hko[-1]))
        total = int(hvo[-1])
        if total > _INT32_MAX:
            raise data_too_large(total)
        data = bytearray().join([x for part in (keys, values, hkeys, hvalues) for x in part if x])
        hi = np.zeros(len(hcounts) + 1, dtype=np.int64)
        np.cumsum(np.asarray(hcounts, dtype=np.int64), out=hi[1:])
        i32 = np.int32
        return cls(
            data,
            offsets,
            timestamps,
            ttypes,
            ko.astype(i32),
            kl.astype(i32),
            vo.astype(i32),
            vl.astype(i32),
            hi.astype(i32),
            hko.astype(i32),
            hvo.astype(i32),
            hvl.astype(i32),
            record_type=record_type,
        )

    @classmethod
    def from_arrow(cls, batch, *, record_type: type | None = None) -> Columns:
        """Columns from a pyarrow RecordBatch or Table with (at least) ``key`` and ``value``.

        Optional columns, as ``to_arrow`` writes them: ``offset`` (default: row number),
        ``timestamp`` (timestamp or int64 milliseconds; default and null: -1),
        ``timestampType`` (default 0) and ``headers``.  Key and value may be binary or string.
        """
        import pyarrow as pa

        names = batch.schema.names
        for required in ("key", "value"):
            if required not in names:
                raise _bad(f"from_arrow needs a {required!r} column; the batch has {names}")

        def column(name):
            col = batch.column(name)
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
            return col

        n = batch.num_rows

        def binary_spans(arr, what):
            t = arr.type
            if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
                arr = arr.cast(pa.binary())
            elif not pa.types.is_binary(t):
                raise _bad(f"from_arrow: column {what!r} must be binary or string, not {t}")
            m = len(arr)
            bufs = arr.buffers()
            offs = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset : arr.offset + m + 1]
            start, end = int(offs[0]), int(offs[-1])
            body = bufs[2]
            region = b"" if body is None or end == start else body[start:end]
            lengths = np.diff(offs).astype(np.int64)
            if arr.null_count:
                nulls = arr.is_null().to_numpy(zero_copy_only=False)
                lengths[nulls] = -1
            return region, (offs - start).astype(np.int64), lengths

        kr, ko, kl = binary_spans(column("key"), "key")
        vr, vo, vl = binary_spans(column("value"), "value")
        if "offset" in names:
            offsets = column("offset").cast(pa.int64()).fill_null(-1).to_numpy()
        else:
            offsets = np.arange(n, dtype=np.int64)
        if "timestamp" in names:
            ts = column("timestamp")
            if pa.types.is_timestamp(ts.type):
                ts = ts.cast(pa.timestamp("ms", tz=ts.type.tz), safe=False)
            timestamps = ts.cast(pa.int64()).fill_null(-1).to_numpy()
        else:
            timestamps = np.full(n, -1, dtype=np.int64)
        if "timestampType" in names:
            ttypes = column("timestampType").cast(pa.int8()).fill_null(0).to_numpy()
        else:
            ttypes = np.zeros(n, dtype=np.int8)
        if "headers" in names:
            lists = column("headers")
            bufs = lists.buffers()
            loffs = np.frombuffer(bufs[1], dtype=np.int32)[lists.offset : lists.offset + n + 1]
            hi = (loffs - loffs[0]).astype(np.int64)
            entries = lists.values.slice(int(loffs[0]), int(loffs[-1] - loffs[0]))
            hkr, hko, _ = binary_spans(entries.field("key"), "headers.key")
            hvr, hvo, hvl = binary_spans(entries.field("value"), "headers.value")
        else:
            hi = np.zeros(n + 1, dtype=np.int64)
            hkr = hvr = b""
            hko = hvo = np.zeros(1, dtype=np.int64)
            hvl = np.zeros(0, dtype=np.int64)
        regions = (kr, vr, hkr, hvr)
        sizes = [len(memoryview(r)) if not isinstance(r, pa.Buffer) else r.size for r in regions]
        total = sum(sizes)
        if total > _INT32_MAX:
            raise data_too_large(total)
        data = bytearray(total)
        pos = 0
        bases = []
        for r, size in zip(regions, sizes):
            bases.append(pos)
            data[pos : pos + size] = memoryview(r)
            pos += size
        i32 = np.int32
        # Consistent by construction (spans of valid Arrow arrays): no _validate pass.
        return cls._from_decoder(
            data,
            np.ascontiguousarray(offsets, dtype=np.int64),
            np.ascontiguousarray(timestamps, dtype=np.int64),
            np.ascontiguousarray(ttypes, dtype=np.int8),
            (ko + bases[0]).astype(i32),
            kl.astype(i32),
            (vo + bases[1]).astype(i32),
            vl.astype(i32),
            hi.astype(i32),
            (hko + bases[2]).astype(i32),
            (hvo + bases[3]).astype(i32),
            hvl.astype(i32),
            record_type=record_type,
        )
