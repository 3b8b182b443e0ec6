"""The hosts' own record batch classes, out of reach of install(), for the data
kafkawire's decoder refuses.

A drop-in must be indistinguishable from its host, damaged data included: the same
records, or the same exception class raised at the same record.  The hosts' readers let
many exceptions out for damaged bytes (struct.error, AssertionError, IndexError, the
compression libraries' own ...), each where their walk happens to stumble; rather than
imitate every one of them, a drop-in hands an entry kafkawire's decoder refuses to the
host's own batch class, and the host itself decides.

install() replaces the hosts' record classes in their modules, and the hosts' batch
code looks those names up at call time (a legacy batch makes ``LegacyRecord(...)``),
so the host classes are used through subclasses (``frozen``) whose methods see a copy of
their module's namespace taken when the drop-in was imported, before any install().

Two guards keep the host's code from taking the process down where kafkawire's decoder
refused for a reason of its own (each a difference kept on purpose, see the fuzz target
tests/fuzz/atheris_compat.py):

* ``bounded``: a compressed payload that decompresses past kafkawire's limit
  (codec.DEFAULT_MAX_DECOMPRESSED_SIZE) raises the host's corrupt-record error instead of
  being inflated without bound (a few kilobytes of gzip can ask for gigabytes);
* ``walk_once``: a magic 0/1 inner message set whose sizes lead the host's header walk
  back to a place it has read (a size of -12 and below) raises the host's corrupt-record
  error instead of looping for ever, as kafka-python's walk does.
"""

from __future__ import annotations

import types

from kafkawire import codec as _codec
from kafkawire import compression as _compression
from kafkawire import errors as _errors

__all__ = ["bounded", "bounded_decoders", "frozen", "walk_once"]

_LIMIT = _codec.DEFAULT_MAX_DECOMPRESSED_SIZE


def _rebind(value, space: dict):
    """``value`` (a class attribute) with its functions' globals ``space``; None when it
    holds no function of its own."""
    if isinstance(value, types.FunctionType):
        fn = types.FunctionType(value.__code__, space, value.__name__, value.__defaults__,
                                value.__closure__)
        fn.__kwdefaults__ = value.__kwdefaults__
        fn.__qualname__ = value.__qualname__
        fn.__doc__ = value.__doc__
        return fn
    if isinstance(value, property):
        parts = [None if f is None else _rebind(f, space)
                 for f in (value.fget, value.fset, value.fdel)]
        return property(*parts, value.__doc__)
    if isinstance(value, (classmethod, staticmethod)):
        return type(value)(_rebind(value.__func__, space))
    return None


def frozen(module, names, globals_=None, methods=None) -> dict:
    """Subclasses of ``module``'s classes ``names`` (a list), each with its methods'
    globals a copy of ``module``'s namespace as it is now, in which those names are the
    subclasses; ``globals_`` replaces names in that copy, ``methods`` ({class name:
    {attribute: function}}) methods of a class (their globals the copy too)."""
    space = dict(vars(module))
    space.update(globals_ or {})
    out = {}
    for name in names:
        cls = space[name]
        ns = {"__slots__": (), "__module__": cls.__module__, "__qualname__": cls.__qualname__,
              "__doc__": cls.__doc__}
        for key, value in vars(cls).items():
            rebound = _rebind(value, space)
            if rebound is not None:
                ns[key] = rebound
        for key, value in ((methods or {}).get(name) or {}).items():
            ns[key] = _rebind(value, space)
        out[name] = type(cls)(cls.__name__, (cls,), ns)
    space.update(out)
    return out


def bounded(decode, codec_id: int, corrupt, legacy_lz4: bool = False):
    """``decode`` (a host's decompress function for ``codec_id``), refusing with
    ``corrupt`` (the host's corrupt-record class) a payload that decompresses past
    kafkawire's limit; anything else is left to ``decode``, errors included."""

    def call(data, *args, **kwargs):
        try:
            _compression.decompress(codec_id, data, _LIMIT, legacy_lz4=legacy_lz4)
        except _errors.DecompressedSizeError as exc:
            raise corrupt(str(exc)) from None
        except (_errors.CodecError, ValueError, TypeError):
            pass  # the host's own decompressor says what is wrong, in its words
        return decode(data, *args, **kwargs)

    call.__name__ = getattr(decode, "__name__", "decode")
    return call


# The hosts' decompress functions by the names their record modules use, and each one's
# codec id (the attributes' low bits).
_DECODERS = (("gzip_decode", 1), ("snappy_decode", 2), ("lz4_decode", 3), ("zstd_decode", 4))


def bounded_decoders(module, corrupt) -> dict:
    """Each decompress function ``module`` (a host's record module) uses, :func:`bounded`,
    by name: the ``globals_`` for :func:`frozen`."""
    return {name: bounded(getattr(module, name), codec_id, corrupt)
            for name, codec_id in _DECODERS if hasattr(module, name)}


def walk_once(corrupt):
    """A header walk over a decompressed message set, as the hosts' ``_read_all_headers``
    do (each message's header and where it starts, until the end of the set), that
    raises ``corrupt`` where the sizes lead back to a message it has read."""

    def _read_all_headers(self):
        buf_len = len(self._buffer)
        pos = 0
        seen = set()
        out = []
        while pos < buf_len:
            if pos in seen:
                raise corrupt(f"the sizes of the inner message set lead back to the message "
                              f"at byte {pos}: the data is corrupt")
            seen.add(pos)
            header = self._read_header(pos)
            out.append((header, pos))
            pos += self.LOG_OVERHEAD + header[1]
        return out

    return _read_all_headers


def valid_bytes_once(corrupt):
    """kafka-python's ``MemoryRecords.valid_bytes`` (the walk to the first partial entry,
    the position put back after), raising ``corrupt`` where the entries' sizes lead the
    walk back to a place it has been (a size of -12 and below), where kafka-python's
    loops for ever."""

    def valid_bytes(self):
        if self._remaining_bytes is None:
            next_slice, pos = self._next_slice, self._pos
            seen = set()
            try:
                while self._remaining_bytes is None:
                    if self._pos in seen:
                        raise corrupt(f"the entry sizes lead back to byte {self._pos}: "
                                      f"the data is corrupt")
                    seen.add(self._pos)
                    self._cache_next()
            finally:
                self._next_slice, self._pos = next_slice, pos
        return len(self._buffer) - self._remaining_bytes

    return valid_bytes


class HostWalk:
    """A host's own MemoryRecords (a ``frozen`` one) walked batch by batch, ended with
    ``corrupt`` where the entries' sizes lead the walk back to a place it has been: the
    host's walk would hand out the same batches for ever."""

    __slots__ = ("records", "_seen", "_corrupt")

    def __init__(self, records, corrupt) -> None:
        self.records = records
        self._seen: set = set()
        self._corrupt = corrupt

    def has_next(self) -> bool:
        return self.records.has_next()

    def next_batch(self):
        records = self.records
        start = records._pos
        batch = records.next_batch()
        if batch is not None and records._next_slice is not None:
            # the walk's whole state: the entry it looks at next, buffer[start:_pos]
            state = (start, records._pos)
            if state in self._seen:
                raise self._corrupt(f"the entry sizes lead back to the entry at byte "
                                    f"{start}: the data is corrupt")
            self._seen.add(state)
        return batch
