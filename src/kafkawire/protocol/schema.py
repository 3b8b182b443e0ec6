"""The schema language: each Kafka API declared once, for all of its versions.

A declaration is a tree of :class:`Field` objects.  Each field says in which versions it
exists (``since``/``until``, inclusive), its type, its default and from which version it
may be null.  Whether a version is *flexible* (KIP-482: compact strings, bytes and arrays,
tagged fields after every struct, request header v2 and response header v1) is a property
of the version, declared once per API.

From a declaration, :func:`build_struct` makes one Python class per struct and, lazily and
once per version, generates the source of an encoder and a decoder specialised to that
version, compiles it and caches it.  Nothing walks the field list at run time.

``default=None`` declares a null default (Kafka's ``"default": "null"``).

Types: ``bool int8 int16 uint16 int32 int64 float64 uuid string bytes records``, an array
of one of those written ``"[]int32"``, or a nested struct (``Field(..., fields=[...])``,
``array=True`` for an array of structs).  ``records`` is a bytes field carrying record
data: decoded as a zero-copy memoryview of the response buffer, encoded as given (kept as
its own chunk, never copied into the request buffer).

This module does no I/O.
"""

from __future__ import annotations

import keyword
import struct
import uuid as _uuid
from collections.abc import Sequence
from typing import Any

from kafkawire import errors

__all__ = ["Field", "Struct", "Writer", "build_struct", "decode", "encode"]

_FIXED = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}
_VARLEN = ("string", "bytes", "records")
_TYPES = set(_FIXED) | set(_VARLEN) | {"uuid"}
_ZERO_UUID = _uuid.UUID(int=0)
_NO_UNTIL = 1 << 30
_UNSET: Any = object()  # "no default declared": the type's zero value is used


class Field:
    """One field of a request, a response or a nested struct."""

    __slots__ = (
        "name", "type", "since", "until", "nullable_since", "default", "tag",
        "fields", "struct_name", "array", "elem",
    )

    def __init__(
        self,
        name: str,
        type: str = "struct",
        *,
        since: int = 0,
        until: int | None = None,
        nullable_since: int | None = None,
        default: Any = _UNSET,
        tag: int | None = None,
        fields: Sequence[Field] | None = None,
        struct_name: str | None = None,
        array: bool = False,
    ):
        self.name = name
        self.since = since
        self.until = _NO_UNTIL if until is None else until
        self.nullable_since = nullable_since
        self.tag = tag
        self.fields = list(fields) if fields is not None else None
        self.struct_name = struct_name
        self.array = array
        self.elem = None
        if type.startswith("[]"):
            self.array = True
            self.elem = type[2:]
            if self.elem not in _TYPES:
                raise ValueError(f"field {name}: unknown array element type {self.elem!r}")
        elif self.fields is not None:
            type = "struct"
        elif type not in _TYPES:
            raise ValueError(f"field {name}: unknown type {type!r}")
        self.type = type
        self.default = default

    def exists(self, version: int) -> bool:
        return self.since <= version <= self.until

    def nullable(self, version: int) -> bool:
        return self.nullable_since is not None and version >= self.nullable_since

    def default_value(self) -> Any:
        if self.default is not _UNSET:
            return self.default
        if self.nullable_since == 0 and not self.array and self.type != "struct":
            return None
        if self.array:
            return []
        if self.type == "string":
            return ""
        if self.type == "bytes":
            return b""
        if self.type == "records":
            return None
        if self.type == "uuid":
            return _ZERO_UUID
        if self.type == "bool":
            return False
        if self.type == "float64":
            return 0.0
        return 0


class Struct:
    """Base of every generated request, response and nested struct class."""

    __slots__ = ()
    _fields: tuple[Field, ...] = ()
    _flexible_from: int | None = None

    def __init__(self, **kwargs: Any):
        for f in self._fields:
            if f.name in kwargs:
                value = kwargs.pop(f.name)
            else:
                value = getattr(type(self), "_default_" + f.name)()
            object.__setattr__(self, f.name, value)
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no field(s) {', '.join(sorted(kwargs))}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            if isinstance(v, memoryview):
                return bytes(v)
            return v

        return {f.name: conv(getattr(self, f.name)) for f in self._fields}


class Writer:
    """Output of an encoder: a bytearray plus zero-copy chunks for record data."""

    __slots__ = ("buf", "chunks")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.chunks: list[Any] = []

    def raw(self, data: Any) -> None:
        """Append ``data`` as its own chunk (record batches are not copied)."""
        if self.buf:
            self.chunks.append(bytes(self.buf))
            self.buf.clear()
        self.chunks.append(data)

    def parts(self) -> list[Any]:
        if self.buf:
            self.chunks.append(bytes(self.buf))
            self.buf.clear()
        out, self.chunks = self.chunks, []
        return out

    def getvalue(self) -> bytes:
        return b"".join(self.parts())


# ---------------------------------------------------------------------------------------
# Run-time helpers used by the generated code.
# ---------------------------------------------------------------------------------------

_S = {k: struct.Struct(">" + c) for k, (c, _n) in _FIXED.items()}


def _uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise errors.truncated("uvarint", start, pos - start + 1, end - start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 35:
            raise errors.malformed("varint", start, "longer than 5 bytes")


def _put_uvarint(out: bytearray, value: int) -> None:
    if value < 0 or value > 0xFFFFFFFF:
        raise errors.encode_error(f"uvarint value {value} out of range")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _length(buf: Any, pos: int, end: int, flexible: bool, wide: bool, what: str) -> tuple[int, int]:
    """Read a length prefix; -1 means null.  Checks the length against the bytes present."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        n -= 1
    elif wide:
        if end - pos < 4:
            raise errors.truncated(what, pos, 4, end - pos)
        (n,) = _S["int32"].unpack_from(buf, pos)
        pos += 4
    else:
        if end - pos < 2:
            raise errors.truncated(what, pos, 2, end - pos)
        (n,) = _S["int16"].unpack_from(buf, pos)
        pos += 2
    if n < -1:
        raise errors.malformed(what, pos, f"negative length {n}")
    if n > end - pos:
        raise errors.truncated(what, pos, n, end - pos)
    return n, pos


def _fixed(kind: str, buf: Any, pos: int, end: int) -> tuple[Any, int]:
    s = _S[kind]
    if end - pos < s.size:
        raise errors.truncated(kind, pos, s.size, end - pos)
    return s.unpack_from(buf, pos)[0], pos + s.size


def _read_string(buf: Any, pos: int, end: int, flexible: bool) -> tuple[str | None, int]:
    n, pos = _length(buf, pos, end, flexible, False, "string")
    if n < 0:
        return None, pos
    try:
        return str(buf[pos : pos + n], "utf-8"), pos + n
    except UnicodeDecodeError as exc:
        raise errors.malformed("string", pos, f"invalid UTF-8 ({exc.reason})") from None


def _read_bytes(buf: Any, pos: int, end: int, flexible: bool) -> tuple[bytes | None, int]:
    n, pos = _length(buf, pos, end, flexible, True, "bytes")
    if n < 0:
        return None, pos
    return bytes(buf[pos : pos + n]), pos + n


def _read_records(buf: Any, pos: int, end: int, flexible: bool) -> tuple[memoryview | None, int]:
    n, pos = _length(buf, pos, end, flexible, True, "records")
    if n < 0:
        return None, pos
    return buf[pos : pos + n], pos + n


# Topic ids seen in answers: a cluster has few, and making a UUID (about 2 µs) was most
# of a one-partition Fetch answer's decoding.  UUIDs are immutable, so one is shared.
_UUIDS: dict[bytes, _uuid.UUID] = {}
_UUIDS_KEPT = 4096


def _read_uuid(buf: Any, pos: int, end: int) -> tuple[_uuid.UUID, int]:
    if end - pos < 16:
        raise errors.truncated("uuid", pos, 16, end - pos)
    raw = bytes(buf[pos : pos + 16])
    value = _UUIDS.get(raw)
    if value is None:
        if len(_UUIDS) >= _UUIDS_KEPT:
            _UUIDS.clear()
        value = _UUIDS[raw] = _uuid.UUID(bytes=raw)
    return value, pos + 16


def _array_len(buf: Any, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        n -= 1
    else:
        n, pos = _fixed("int32", buf, pos, end)
    if n < -1:
        raise errors.malformed("array", pos, f"negative length {n}")
    # Every element takes at least one byte: a count beyond the bytes left is corrupt,
    # and checking it first keeps a hostile count from allocating a huge list.
    if n > end - pos:
        raise errors.truncated("array", pos, n, end - pos)
    return n, pos


_ARRAY_UNPACK: dict[tuple[str, int], Any] = {}


def _fixed_array(buf: Any, pos: int, end: int, flexible: bool, kind: str) -> tuple[list[Any] | None, int]:
    """An array of fixed-width scalars, read with one unpack after one bounds check."""
    n, pos = _array_len(buf, pos, end, flexible)
    if n < 0:
        return None, pos
    code, size = _FIXED[kind]
    if n * size > end - pos:
        raise errors.truncated(kind, pos + (end - pos) // size * size, size, (end - pos) % size)
    unpack = _ARRAY_UNPACK.get((code, n))
    if unpack is None:
        unpack = struct.Struct(f">{n}{code}").unpack_from
        if n < 256:  # cache the common small sizes only
            _ARRAY_UNPACK[(code, n)] = unpack
    return list(unpack(buf, pos)), pos + n * size


def _skip_tags(buf: Any, pos: int, end: int) -> tuple[dict[int, bytes], int]:
    count, pos = _uvarint(buf, pos, end)
    tags: dict[int, bytes] = {}
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        if size > end - pos:
            raise errors.truncated("tagged field", pos, size, end - pos)
        tags[tag] = bytes(buf[pos : pos + size])
        pos += size
    return tags, pos


def _put_null(out: bytearray, flexible: bool, wide: bool, nullable: bool, name: str) -> None:
    """A null string, bytes or array: length -1 (0 in the compact form of flexible versions)."""
    if not nullable:
        raise errors.encode_error(f"field {name} is not nullable in this version")
    out += b"\x00" if flexible else b"\xff\xff\xff\xff" if wide else b"\xff\xff"


def _put_string(out: bytearray, value: str | None, flexible: bool, nullable: bool, name: str) -> None:
    if value is None:
        return _put_null(out, flexible, False, nullable, name)
    data = value.encode("utf-8")
    if flexible:
        _put_uvarint(out, len(data) + 1)
    else:
        if len(data) > 0x7FFF:
            raise errors.encode_error(f"field {name}: string of {len(data)} bytes is too long")
        out += _S["int16"].pack(len(data))
    out += data


def _put_bytes(w: Writer, value: Any, flexible: bool, nullable: bool, name: str, raw: bool) -> None:
    out = w.buf
    if value is None:
        return _put_null(out, flexible, True, nullable, name)
    n = memoryview(value).nbytes
    if flexible:
        _put_uvarint(out, n + 1)
    else:
        out += _S["int32"].pack(n)
    if raw:
        if n:
            w.raw(value)
    else:
        out += value


def _put_array_len(out: bytearray, value: Any, flexible: bool, nullable: bool, name: str) -> int:
    if value is None:
        _put_null(out, flexible, True, nullable, name)
        return -1
    n = len(value)
    if flexible:
        _put_uvarint(out, n + 1)
    else:
        out += _S["int32"].pack(n)
    return n


def _put_fixed(out: bytearray, kind: str, value: Any, name: str) -> None:
    try:
        out += _S[kind].pack(value)
    except struct.error:
        raise errors.encode_error(f"field {name}: {kind} value {value!r} out of range") from None


def _put_uuid(out: bytearray, value: Any, name: str) -> None:
    if isinstance(value, _uuid.UUID):
        out += value.bytes
    elif isinstance(value, (bytes, bytearray)) and len(value) == 16:
        out += value
    else:
        raise errors.encode_error(f"field {name}: expected a uuid.UUID, got {value!r}")


_ENV = {
    "_S": _S,
    "_uvarint": _uvarint,
    "_put_uvarint": _put_uvarint,
    "_fixed": _fixed,
    "_read_string": _read_string,
    "_read_bytes": _read_bytes,
    "_read_records": _read_records,
    "_read_uuid": _read_uuid,
    "_array_len": _array_len,
    "_skip_tags": _skip_tags,
    "_fixed_array": _fixed_array,
    "_put_string": _put_string,
    "_put_bytes": _put_bytes,
    "_put_array_len": _put_array_len,
    "_put_fixed": _put_fixed,
    "_put_uuid": _put_uuid,
    "Writer": Writer,
}


# ---------------------------------------------------------------------------------------
# Code generation.
# ---------------------------------------------------------------------------------------


class _Gen:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def var(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _read_scalar(g: _Gen, ind: int, kind: str, target: str, flexible: bool) -> None:
    if kind in _FIXED:
        g.emit(ind, f"{target}, pos = _fixed({kind!r}, buf, pos, end)")
    elif kind == "string":
        g.emit(ind, f"{target}, pos = _read_string(buf, pos, end, {flexible})")
    elif kind == "bytes":
        g.emit(ind, f"{target}, pos = _read_bytes(buf, pos, end, {flexible})")
    elif kind == "records":
        g.emit(ind, f"{target}, pos = _read_records(buf, pos, end, {flexible})")
    elif kind == "uuid":
        g.emit(ind, f"{target}, pos = _read_uuid(buf, pos, end)")


def _write_scalar(g: _Gen, ind: int, kind: str, value: str, f: Field, version: int, flexible: bool) -> None:
    nullable = f.nullable(version)
    if kind in _FIXED:
        g.emit(ind, f"_put_fixed(w.buf, {kind!r}, {value}, {f.name!r})")
    elif kind == "string":
        g.emit(ind, f"_put_string(w.buf, {value}, {flexible}, {nullable}, {f.name!r})")
    elif kind in ("bytes", "records"):
        g.emit(ind, f"_put_bytes(w, {value}, {flexible}, {nullable}, {f.name!r}, {kind == 'records'})")
    elif kind == "uuid":
        g.emit(ind, f"_put_uuid(w.buf, {value}, {f.name!r})")


def _gen_decode_field(g: _Gen, ind: int, f: Field, cls_expr: str, target: str, version: int, flexible: bool) -> None:
    """Emit code reading field ``f`` into the expression ``target``."""
    if f.array:
        n = g.var("n")
        lst = g.var("l")
        g.emit(ind, f"{n}, pos = _array_len(buf, pos, end, {flexible})")
        g.emit(ind, f"if {n} < 0:")
        g.emit(ind + 1, f"{target} = None")
        g.emit(ind, "else:")
        g.emit(ind + 1, f"{lst} = []")
        item = g.var("x")
        if f.type == "struct":
            dec = g.var("d")
            g.emit(ind + 1, f"{dec} = {cls_expr}._decoder({version})")
            g.emit(ind + 1, f"for _ in range({n}):")
            g.emit(ind + 2, f"{item}, pos = {dec}(buf, pos, end)")
        else:
            g.emit(ind + 1, f"for _ in range({n}):")
            _read_scalar(g, ind + 2, f.elem, item, flexible)  # type: ignore[arg-type]
        g.emit(ind + 2, f"{lst}.append({item})")
        g.emit(ind + 1, f"{target} = {lst}")
    elif f.type == "struct":
        if f.nullable(version):
            # Nullable structs carry an int8 presence marker (-1 null, 1 present).
            mark = g.var("m")
            g.emit(ind, f"{mark}, pos = _fixed('int8', buf, pos, end)")
            g.emit(ind, f"if {mark} < 0:")
            g.emit(ind + 1, f"{target} = None")
            g.emit(ind, "else:")
            g.emit(ind + 1, f"{target}, pos = {cls_expr}._decoder({version})(buf, pos, end)")
        else:
            g.emit(ind, f"{target}, pos = {cls_expr}._decoder({version})(buf, pos, end)")
    else:
        _read_scalar(g, ind, f.type, target, flexible)


def _gen_encode_field(g: _Gen, ind: int, f: Field, cls_expr: str, value: str, version: int, flexible: bool) -> None:
    if f.array:
        item = g.var("x")
        v = g.var("v")
        g.emit(ind, f"{v} = {value}")
        g.emit(ind, f"if _put_array_len(w.buf, {v}, {flexible}, {f.nullable(version)}, {f.name!r}) > 0:")
        if f.type == "struct":
            enc = g.var("e")
            g.emit(ind + 1, f"{enc} = {cls_expr}._encoder({version})")
            g.emit(ind + 1, f"for {item} in {v}:")
            g.emit(ind + 2, f"{enc}({item}, w)")
        else:
            g.emit(ind + 1, f"for {item} in {v}:")
            _write_scalar(g, ind + 2, f.elem, item, f, version, flexible)  # type: ignore[arg-type]
    elif f.type == "struct":
        if f.nullable(version):
            v = g.var("v")
            g.emit(ind, f"{v} = {value}")
            g.emit(ind, f"if {v} is None:")
            g.emit(ind + 1, "w.buf += b'\\xff'")
            g.emit(ind, "else:")
            g.emit(ind + 1, "w.buf += b'\\x01'")
            g.emit(ind + 1, f"{cls_expr}._encoder({version})({v}, w)")
        else:
            g.emit(ind, f"{cls_expr}._encoder({version})({value}, w)")
    else:
        _write_scalar(g, ind, f.type, value, f, version, flexible)


def _sub_expr(f: Field) -> str:
    return f"cls._sub_{f.name}"


def _plain_fixed(f: Field, version: int) -> bool:
    return f.exists(version) and f.tag is None and not f.array and f.type in _FIXED


def _gen_decoder(cls: type[Struct], version: int) -> Any:
    flexible = cls._flexible_from is not None and version >= cls._flexible_from
    g = _Gen()
    consts: dict[str, Any] = {}
    g.emit(0, "def decode(buf, pos, end):")
    g.emit(1, "o = cls.__new__(cls)")
    tagged = []
    fields = cls._fields
    for f in fields:
        if not f.exists(version) or f.tag is not None:
            g.emit(1, f"o.{f.name} = cls._default_{f.name}()")
            if f.exists(version) and flexible:
                tagged.append(f)
    i = 0
    while i < len(fields):
        f = fields[i]
        if not f.exists(version) or f.tag is not None:
            i += 1
            continue
        if _plain_fixed(f, version):
            # A run of fixed-width fields is read with one bounds check and one unpack;
            # when the bytes run short, the field-by-field path names the failing type.
            run = []
            while i < len(fields) and (_plain_fixed(fields[i], version) or not fields[i].exists(version)):
                if fields[i].exists(version):
                    run.append(fields[i])
                i += 1
            fmt = ">" + "".join(_FIXED[x.type][0] for x in run)
            unpack = g.var("_st")
            consts[unpack] = struct.Struct(fmt).unpack_from
            size = struct.calcsize(fmt)
            targets = ", ".join(f"o.{x.name}" for x in run) + ("," if len(run) == 1 else "")
            g.emit(1, f"if end - pos >= {size}:")
            g.emit(2, f"{targets} = {unpack}(buf, pos)")
            g.emit(2, f"pos += {size}")
            g.emit(1, "else:")
            for x in run:
                g.emit(2, f"o.{x.name}, pos = _fixed({x.type!r}, buf, pos, end)")
            continue
        if f.array and f.type != "struct" and f.elem in _FIXED:
            g.emit(1, f"o.{f.name}, pos = _fixed_array(buf, pos, end, {flexible}, {f.elem!r})")
            i += 1
            continue
        tmp = g.var("t")
        _gen_decode_field(g, 1, f, _sub_expr(f), tmp, version, flexible)
        g.emit(1, f"o.{f.name} = {tmp}")
        i += 1
    if flexible and not tagged:
        # Almost every struct carries an empty tag section: a single zero byte.
        g.emit(1, "if pos < end and buf[pos] == 0:")
        g.emit(2, "pos += 1")
        g.emit(1, "else:")
        g.emit(2, "_tags, pos = _skip_tags(buf, pos, end)")
    elif flexible:
        # Usually empty too (the defaults set above stand): one byte, no tag dict.
        g.emit(1, "if pos < end and buf[pos] == 0:")
        g.emit(2, "pos += 1")
        g.emit(1, "else:")
        g.emit(2, "tags, pos = _skip_tags(buf, pos, end)")
        for f in tagged:
            g.emit(2, f"if {f.tag} in tags:")
            g.emit(3, f"tb = memoryview(tags[{f.tag}])")
            tmp = g.var("t")
            # A tagged field's value is decoded from its own buffer.
            g.emit(3, "def _sub(buf, pos, end):")
            _gen_decode_field(g, 4, f, _sub_expr(f), tmp, version, flexible)
            g.emit(4, f"return {tmp}, pos")
            g.emit(3, f"o.{f.name} = _sub(tb, 0, len(tb))[0]")
    g.emit(1, "return o, pos")
    return _compile(g, cls, "decode", consts)


def _gen_encoder(cls: type[Struct], version: int) -> Any:
    flexible = cls._flexible_from is not None and version >= cls._flexible_from
    g = _Gen()
    g.emit(0, "def encode(o, w):")
    tagged = []
    for f in cls._fields:
        if not f.exists(version):
            continue
        if f.tag is not None:
            if flexible:
                tagged.append(f)
            continue
        _gen_encode_field(g, 1, f, _sub_expr(f), f"o.{f.name}", version, flexible)
    if flexible:
        # Tagged fields go out in ascending tag order whatever the declaration order (KIP-482).
        tagged.sort(key=lambda f: f.tag)
        if not tagged:
            g.emit(1, "w.buf.append(0)")
        else:
            # Tagged fields equal to their default are left out (KIP-482).
            g.emit(1, "present = []")
            for f in tagged:
                g.emit(1, f"if o.{f.name} != cls._default_{f.name}():")
                g.emit(2, "tw = Writer()")
                g.emit(2, "_w, w = w, tw")
                _gen_encode_field(g, 2, f, _sub_expr(f), f"o.{f.name}", version, flexible)
                g.emit(2, "w = _w")
                g.emit(2, f"present.append(({f.tag}, tw.getvalue()))")
            g.emit(1, "_put_uvarint(w.buf, len(present))")
            g.emit(1, "for tag, data in present:")
            g.emit(2, "_put_uvarint(w.buf, tag)")
            g.emit(2, "_put_uvarint(w.buf, len(data))")
            g.emit(2, "w.buf += data")
    if len(g.lines) == 1:
        g.emit(1, "pass")
    return _compile(g, cls, "encode")


def _compile(g: _Gen, cls: type[Struct], name: str, consts: dict[str, Any] | None = None) -> Any:
    source = "\n".join(g.lines)
    env = dict(_ENV)
    env.update(consts or {})
    env["cls"] = cls
    code = compile(source, f"<kafkawire schema {cls.__qualname__} {name}>", "exec")
    exec(code, env)  # noqa: S102 - source generated above from the declarations only
    fn = env[name]
    fn.__source__ = source
    return fn


def build_struct(name: str, fields: Sequence[Field], flexible_from: int | None, qualname: str | None = None) -> type[Struct]:
    """Make the class for one struct (and, recursively, for its nested structs)."""
    ns: dict[str, Any] = {
        "__slots__": tuple(f.name for f in fields),
        "_fields": tuple(fields),
        "_flexible_from": flexible_from,
        "_decoders": {},
        "_encoders": {},
    }
    cls = type(name, (Struct,), ns)
    cls.__qualname__ = qualname or name
    seen = set()
    for f in fields:
        if f.name in seen:
            raise ValueError(f"{name}: field {f.name} declared twice")
        seen.add(f.name)
        if f.type == "struct":
            sub_name = f.struct_name or (f.name.title().replace("_", ""))
            sub = build_struct(sub_name, f.fields or (), flexible_from, f"{cls.__qualname__}.{sub_name}")
            setattr(cls, sub_name, sub)
            setattr(cls, "_sub_" + f.name, sub)
        setattr(cls, "_default_" + f.name, staticmethod(_default_factory(f, cls)))
    cls._new_default = staticmethod(_first_new_default(cls))  # type: ignore[attr-defined]
    cls.__init__ = _first_init(cls)  # type: ignore[method-assign]
    cls._decoder = classmethod(_cached(_gen_decoder, "_decoders"))  # type: ignore[attr-defined]
    cls._encoder = classmethod(_cached(_gen_encoder, "_encoders"))  # type: ignore[attr-defined]
    return cls


_IMMUTABLE = (int, float, str, bytes, bool, type(None), _uuid.UUID)


def _default_expr(cls: type[Struct], f: Field, g: _Gen, consts: dict[str, Any]) -> str:
    """An expression for field ``f``'s default in generated code (a constant when the
    default is immutable)."""
    value = getattr(cls, "_default_" + f.name)()
    if f.array and f.default is _UNSET:
        return "[]"
    if type(value) in _IMMUTABLE:
        name = g.var("_c")
        consts[name] = value
        return name
    return f"cls._default_{f.name}()"


def _gen_init(cls: type[Struct]) -> Any:
    """``cls.__init__`` as Struct.__init__ behaves (keyword arguments, the others at their
    defaults), without its loop over the fields: a request is built on every call."""
    g = _Gen()
    consts: dict[str, Any] = {"_MISSING": _UNSET}
    names = [f.name for f in cls._fields]
    g.emit(0, "def __init__(self, *, " + "".join(f"{n}=_MISSING, " for n in names) + "**_extra):")
    g.emit(1, "if _extra:")
    g.emit(2, "raise TypeError(f\"{type(self).__name__} has no field(s) {', '.join(sorted(_extra))}\")")
    for f in cls._fields:
        g.emit(1, f"self.{f.name} = {_default_expr(cls, f, g, consts)} if {f.name} is _MISSING else {f.name}")
    if not names:
        g.emit(1, "pass")
    return _compile(g, cls, "__init__", consts)


def _first_init(cls: type[Struct]) -> Any:
    """``cls.__init__`` until the first instance, which generates it (see _first_new_default);
    Struct.__init__ itself where a field's name is a Python keyword or one the generated
    code uses."""
    if any(keyword.iskeyword(f.name) or f.name in ("self", "cls", "_extra", "_MISSING") or f.name.startswith("_c")
           for f in cls._fields):
        return Struct.__init__

    def first(self: Any, **kwargs: Any) -> None:
        init = _gen_init(cls)
        if cls.__dict__.get("__init__") is first:
            cls.__init__ = init  # type: ignore[method-assign]
        init(self, **kwargs)

    return first


def _gen_new_default(cls: type[Struct]) -> Any:
    """A function making ``cls`` with every field at its default, as ``cls()`` does,
    without __init__'s per-field lookups: a decoder makes one for every tagged struct an
    answer leaves out (three per Fetch partition), and cls() took about 2.6 µs."""
    g = _Gen()
    consts: dict[str, Any] = {}
    g.emit(0, "def new():")
    g.emit(1, "o = cls.__new__(cls)")
    for f in cls._fields:
        g.emit(1, f"o.{f.name} = {_default_expr(cls, f, g, consts)}")
    g.emit(1, "return o")
    return _compile(g, cls, "new", consts)


def _first_new_default(cls: type[Struct]) -> Any:
    """``cls._new_default`` until its first call, which generates it (at import, the
    175 structs' would add about 20 ms)."""
    made: list[Any] = []

    def first() -> Any:
        if not made:  # a caller may hold on to this function: generate once
            made.append(_gen_new_default(cls))
            cls._new_default = staticmethod(made[0])  # type: ignore[attr-defined]
        return made[0]()

    return first


def _default_factory(f: Field, cls: type[Struct]) -> Any:
    if f.type == "struct" and not f.array:
        if f.default is not _UNSET:
            return lambda: f.default
        if f.nullable_since == 0:
            return lambda: None
        sub = getattr(cls, "_sub_" + f.name)
        return lambda: sub._new_default()
    if f.array and f.default is _UNSET:
        return list
    value = f.default_value()
    return lambda: value


def _cached(generator: Any, attr: str) -> Any:
    def get(cls: type[Struct], version: int) -> Any:
        cache = cls.__dict__[attr]
        fn = cache.get(version)
        if fn is None:
            fn = cache[version] = generator(cls, version)
        return fn

    return get


def encode(obj: Struct, version: int, w: Writer | None = None) -> Writer:
    """Encode ``obj`` at ``version`` into a Writer (made if not given)."""
    if w is None:
        w = Writer()
    type(obj)._encoder(version)(obj, w)  # type: ignore[attr-defined]
    return w


def decode(cls: type[Struct], buf: Any, version: int, pos: int = 0, end: int | None = None) -> tuple[Struct, int]:
    """Decode an instance of ``cls`` at ``version`` from ``buf[pos:end]``; returns (obj, pos)."""
    if not isinstance(buf, memoryview):
        buf = memoryview(buf)
    if end is None:
        end = len(buf)
    return cls._decoder(version)(buf, pos, end)  # type: ignore[attr-defined]
