"""JSON Schema payloads into Arrow columns: Confluent-framed JSON values of one Kafka column
parsed by pyarrow's compiled JSON reader, one call per batch, with no Python object per
record.

:func:`arrow_type` derives the column's type from a JSON Schema document:

* ``object`` with ``properties`` -> struct of the properties (in the document's order);
  ``required`` properties must be present and non-null unless their type allows null;
* ``array`` with ``items`` (one schema) -> list;
* ``string`` -> string, ``integer`` -> int64, ``number`` -> float64, ``boolean`` -> bool;
  a string ``enum`` -> string;
* ``format: date-time`` -> timestamp(us, UTC) (RFC 3339's date-time, read by Arrow's ISO-8601
  parser, offsets honoured), ``format: date`` -> date32 (RFC 3339's full-date), as Spark's
  ``from_json`` reads them into TimestampType and DateType;
* ``"type": [T, "null"]``, ``anyOf``/``oneOf`` of ``{"type": "null"}`` and one schema -> that
  type, nullable;
* ``$ref`` to ``#``, ``#/definitions/...`` or ``#/$defs/...`` inside the document.

Anything else (a union of two non-null types, an object without properties or with only
``additionalProperties``, ``allOf``, ``$ref`` to another document, recursion) raises
:class:`JsonSchemaError` naming the place in the schema.  Constraints beyond types and
``required`` (``minimum``, ``pattern``, ``enum`` values, ``additionalProperties: false``...)
are not checked when reading into columns: the serializer checks them when it writes.  A
property given as ``null`` where its schema has no null reads as null unless it is
required: the Arrow reader does not tell an absent property from a null one.

:class:`JsonColumnDecoder` copies the batch's bytes once and overwrites each 5-byte header
with four spaces and a newline (a payload that is not an object is taken out first: its
first byte is not ``{``), then reads them all at once with the schema as pyarrow's explicit
schema, behind a leading ``{}`` (pyarrow's reader crashes on a first document that is
``null``).  A schema whose top level is not an object has each payload wrapped as
``{"v": <payload>}`` instead.  When the reader fails or yields a different number of rows
(a payload holding two documents, say), the batch is halved until the bad payloads are
found one by one: good batches pay nothing, a batch with k bad payloads pays
O(k log n) reader calls.  No I/O; pyarrow and numpy are imported on first use.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from kafkawire import errors

__all__ = ["JsonColumnDecoder", "JsonDecodeError", "JsonSchemaError", "arrow_type"]

SHORT_HEADER = "{} bytes, fewer than the 5-byte Confluent header"
BAD_MAGIC = "magic byte {}, not 0: not Confluent-framed"


class JsonSchemaError(errors.CodecError):
    """A JSON Schema this decoder cannot read into columns, saying where and why."""


class JsonDecodeError(errors.CodecError):
    """A payload that cannot be read: ``row`` in the column, ``schema_id`` from its header
    (None when the header itself is wrong), ``reason`` what was wrong."""

    def __init__(self, row: int, schema_id: int | None, reason: str):
        self.row, self.schema_id, self.reason = row, schema_id, reason
        where = f"row {row}" if schema_id is None else f"row {row} (schema id {schema_id})"
        super().__init__(f"JSON payload at {where}: {reason}")


class _Node:
    """One place in the schema: its Arrow type as read, its final type, whether null is
    allowed, and for objects the required properties; children by name or ``[]``."""

    def __init__(self, read: Any, final: Any, nullable: bool, required: tuple = (), children: dict | None = None):
        self.read, self.final, self.nullable = read, final, nullable
        self.required = required
        self.children = children or {}


def _pointer(doc: Any, ref: str, where: str) -> Any:
    if ref == "#":
        return doc
    if not ref.startswith("#/"):
        raise JsonSchemaError(f"{where}: $ref {ref!r} points outside this document, which typed columns do "
                              f"not follow; write the referenced schema into the document")
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise JsonSchemaError(f"{where}: $ref {ref!r} names nothing in the document")
    return node


def _node(doc: Any, s: Any, where: str, refs: tuple) -> _Node:
    import pyarrow as pa

    if s is True or s == {}:
        raise JsonSchemaError(f"{where}: a schema that allows any value has no column type; give it a type")
    if not isinstance(s, dict):
        raise JsonSchemaError(f"{where}: a schema must be an object, not {s!r:.80}")
    if "$ref" in s:
        ref = s["$ref"]
        if ref in refs:
            raise JsonSchemaError(f"{where}: $ref {ref!r} is recursive, which a column type cannot be")
        return _node(doc, _pointer(doc, ref, where), where, refs + (ref,))
    if "allOf" in s:
        raise JsonSchemaError(f"{where}: allOf is not read into columns; merge the schemas into one")
    for key in ("anyOf", "oneOf"):
        if key in s:
            branches = s[key]
            rest = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(rest) != 1:
                raise JsonSchemaError(f"{where}: {key} of {len(rest)} non-null schemas has no one column type; "
                                      f"only null and one schema are read into columns")
            inner = _node(doc, rest[0], f"{where}/{key}", refs)
            inner.nullable = inner.nullable or len(rest) < len(branches)
            return inner
    kind = s.get("type")
    nullable = False
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        nullable = len(rest) < len(kind)
        if len(rest) != 1:
            raise JsonSchemaError(f"{where}: type {kind} has no one column type; only null and one type are "
                                  f"read into columns")
        kind = rest[0]
    if kind is None:
        if "properties" in s:
            kind = "object"
        elif "items" in s:
            kind = "array"
        elif isinstance(s.get("enum"), list) and s["enum"] and all(isinstance(e, str) for e in s["enum"]):
            kind = "string"
        else:
            raise JsonSchemaError(f"{where}: no 'type' (or properties, items, string enum) to make a column of")
    if kind == "string":
        fmt = s.get("format")
        if fmt == "date-time":
            t = pa.timestamp("us", tz="UTC")
            return _Node(t, t, nullable)
        if fmt == "date":
            # read as an instant, then cast: Arrow's JSON reader converts strings to
            # timestamps but not to dates
            return _Node(pa.timestamp("s"), pa.date32(), nullable)
        return _Node(pa.string(), pa.string(), nullable)
    if kind == "integer":
        return _Node(pa.int64(), pa.int64(), nullable)
    if kind == "number":
        return _Node(pa.float64(), pa.float64(), nullable)
    if kind == "boolean":
        return _Node(pa.bool_(), pa.bool_(), nullable)
    if kind == "null":
        raise JsonSchemaError(f"{where}: a property that is always null has no column type")
    if kind == "array":
        items = s.get("items")
        if not isinstance(items, dict):
            raise JsonSchemaError(f"{where}: an array needs 'items' with one schema (tuple arrays are not "
                                  f"read into columns)")
        item = _node(doc, items, f"{where}/items", refs)
        return _Node(pa.list_(pa.field("element", item.read)), pa.list_(pa.field("element", item.final)),
                     nullable, children={"[]": item})
    if kind == "object":
        props = s.get("properties")
        if not isinstance(props, dict) or not props:
            raise JsonSchemaError(f"{where}: an object without 'properties' (a map, or any object) is not read "
                                  f"into columns; list its properties")
        children = {name: _node(doc, sub, f"{where}/properties/{name}", refs) for name, sub in props.items()}
        required = tuple(r for r in s.get("required", ()) if r in children)
        missing = [r for r in s.get("required", ()) if r not in children]
        if missing:
            raise JsonSchemaError(f"{where}: required {missing} are not among the properties")
        return _Node(pa.struct([pa.field(k, c.read) for k, c in children.items()]),
                     pa.struct([pa.field(k, c.final) for k, c in children.items()]),
                     nullable, required, children)
    raise JsonSchemaError(f"{where}: type {kind!r} is not a JSON Schema type read into columns")


def parse(schema: Any) -> _Node:
    """The root node of ``schema`` (JSON text or parsed)."""
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise JsonSchemaError(f"the JSON Schema is not JSON: {exc}") from None
    return _node(schema, schema, "#", ())


def arrow_type(schema: Any) -> Any:
    """The Arrow type a column of ``schema``'s values decodes into."""
    return parse(schema).final


def _bad_rows(arr: Any, node: _Node, rows: Any, path: str, out: dict) -> None:
    """Record in ``out`` (row -> reason) each row where a required property is missing or
    null, or a list item is null where the schema has no null; ``rows`` maps each slot of
    ``arr`` to its row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(arr):
        return
    valid = np.asarray(arr.is_valid())
    if pa.types.is_struct(arr.type):
        kids = dict(zip((arr.type.field(i).name for i in range(arr.type.num_fields)), arr.flatten()))
        for name in node.required:
            child = node.children[name]
            if child.nullable:
                continue
            missing = valid & np.asarray(kids[name].is_null())
            for r in rows[missing]:
                out.setdefault(int(r), f"required property {path}/{name} is missing or null")
        for name, child in node.children.items():
            if child.children:
                _bad_rows(kids[name], child, rows, f"{path}/{name}", out)
    elif pa.types.is_list(arr.type):
        item = node.children["[]"]
        lengths = np.asarray(pc.list_value_length(arr).fill_null(0))
        values = arr.flatten()
        item_rows = np.repeat(rows, lengths)
        if not item.nullable and values.null_count:
            for r in item_rows[np.asarray(values.is_null())]:
                out.setdefault(int(r), f"a null item in {path}, whose items cannot be null")
        if item.children:
            _bad_rows(values, item, item_rows, f"{path}/[]", out)


class JsonColumnDecoder:
    """Decodes columns of Confluent-framed JSON payloads into Arrow arrays of ``schema``'s
    type.  ``known_id``: called with each schema id a batch holds (once per id per call),
    False for an id that is not a usable JSON Schema (its rows fail); None takes every id.
    One decoder is used by one thread at a time."""

    def __init__(self, schema: Any, known_id: Callable[[int], bool] | None = None):
        import pyarrow as pa
        import pyarrow.json as pj

        self.node = parse(schema)
        self.arrow_type = self.node.final
        self.known_id = known_id
        # An object schema reads the payloads as they are, each header overwritten in place
        # with four spaces and a newline; any other is wrapped as {"v": ...}, a copy.
        self._wrap = not pa.types.is_struct(self.node.read)
        schema = (pa.schema([pa.field("v", self.node.read)]) if self._wrap
                  else pa.schema(list(self.node.read)))
        self._parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore",
                                      newlines_in_values=True)

    def _read(self, data: bytes, count: int) -> Any:
        """The column of the ``count`` payloads in ``data``, or None when the reader fails
        or finds a different number of documents."""
        import io

        import pyarrow as pa
        import pyarrow.json as pj

        data = b"{}\n" + data
        try:
            table = pj.read_json(io.BytesIO(data), parse_options=self._parse,
                                 read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1))
        except Exception as exc:
            self._last = str(exc)
            return None
        if table.num_rows != count + 1:
            self._last = f"{table.num_rows - 1} JSON values in one payload, not one"
            return None
        if self._wrap:
            return table.column("v").combine_chunks().slice(1)
        table = table.combine_chunks()
        return pa.StructArray.from_arrays([c.chunk(0) if c.num_chunks else pa.array([], c.type)
                                           for c in table.columns], fields=list(table.schema)).slice(1)

    def _bisect(self, out: Any, first: Any, last: Any, lo: int, hi: int, parts: list, bad: dict) -> None:
        """Read payloads ``lo`` to ``hi`` (their bytes ``out[first[lo]:last[hi - 1]]``);
        halve a range that fails until each bad payload is alone."""
        got = self._read(out[first[lo]:last[hi - 1]].tobytes(), hi - lo)
        if got is not None:
            parts.append((lo, got))
            return
        if hi - lo == 1:
            text = self._last.replace("Column(/v", "Column(").replace("Column()", "Column(/)")
            bad[lo] = text if text.endswith("not one") else (
                f"not JSON of the schema's types: {text.replace(' in row 1', '')}")
            return
        mid = (lo + hi) // 2
        self._bisect(out, first, last, lo, mid, parts, bad)
        self._bisect(out, first, last, mid, hi, parts, bad)

    @staticmethod
    def _wrapped(data: Any, starts: Any, lengths: Any, good: Any) -> tuple[Any, Any, Any]:
        """Each good payload as '{"v":' + its JSON + '}\n', gathered into one buffer by
        index arithmetic; (buffer, start of each, end of each)."""
        import numpy as np

        plen = lengths[good] - 5
        seg = np.zeros(len(good) + 1, np.int64)
        np.cumsum(plen + 7, out=seg[1:])
        out = np.empty(int(seg[-1]), np.uint8)
        for k, byte in enumerate(b'{"v":'):
            out[seg[:-1] + k] = byte
        out[seg[1:] - 2] = ord("}")
        out[seg[1:] - 1] = ord("\n")
        total = int(plen.sum())
        if total:
            within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(plen) - plen, plen)
            out[np.repeat(seg[:-1] + 5, plen) + within] = data[np.repeat(starts[good] + 5, plen) + within]
        return out, seg[:-1], seg[1:]

    def _in_place(self, data: Any, offsets: Any, valid: Any, good: Any, bad: dict,
                  ids: dict) -> tuple[Any, Any, Any, Any]:
        """The batch's bytes copied once, each good payload's header overwritten with four
        spaces and a newline, the other payloads' bytes blanked; a good payload that is not
        a JSON object (its first byte not '{') is taken out first (a null one is a null
        value where the schema allows it).  (buffer, start of each good payload, end of
        each, the good rows left)."""
        import numpy as np

        starts, ends = offsets[:-1], offsets[1:]
        base = int(offsets[0]) if len(offsets) else 0
        out = data[base:int(offsets[-1]) if len(offsets) else 0].copy()
        if len(good):
            lead = np.full(len(good), -1, np.int64)
            has = ends[good] - starts[good] > 5
            lead[has] = data[starts[good][has] + 5]
            odd = lead != ord("{")
            for r, byte in zip(good[odd].tolist(), lead[odd].tolist()):
                payload = data[int(starts[r]) + 5:int(ends[r])].tobytes()
                if payload.strip() == b"null":
                    if not self.node.nullable:
                        bad[r] = "the value is null, which its schema does not allow"
                else:
                    bad[r] = ("an empty JSON payload" if byte < 0 else
                              f"the JSON value is not an object (it starts with {chr(byte)!r}), which the schema's "
                              f"type is")
            good = good[~odd]
        keep = np.zeros(len(starts), bool)
        keep[good] = True
        blank = np.flatnonzero(valid & ~keep & (ends > starts))
        if len(blank):
            sizes = ends[blank] - starts[blank]
            total = int(sizes.sum())
            within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            out[np.repeat(starts[blank] - base, sizes) + within] = ord(" ")
        g = starts[good] - base
        for k in range(4):
            out[g + k] = ord(" ")
        out[g + 4] = ord("\n")
        return out, g, ends[good] - base, good

    def _run(self, payloads: Any) -> tuple[Any, dict, dict]:
        """(array, bad row -> reason, row -> schema id)."""
        import numpy as np
        import pyarrow as pa

        if isinstance(payloads, pa.ChunkedArray):
            payloads = payloads.combine_chunks() if payloads.num_chunks != 1 else payloads.chunk(0)
        if payloads.type not in (pa.binary(), pa.large_binary()):
            raise JsonSchemaError(f"payloads must be a binary array, not {payloads.type}")
        n = len(payloads)
        bufs = payloads.buffers()
        width = np.int32 if payloads.type == pa.binary() else np.int64
        offsets = (np.frombuffer(bufs[1], dtype=width)[payloads.offset:payloads.offset + n + 1]
                   if bufs[1] is not None else np.zeros(n + 1, width)).astype(np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        valid = np.asarray(payloads.is_valid()) if payloads.null_count else np.ones(n, bool)
        starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
        bad: dict[int, str] = {}
        ids: dict[int, int] = {}
        short = valid & (lengths < 5)
        magic = np.zeros(n, np.uint8)
        has_byte = valid & (lengths > 0)
        magic[has_byte] = data[starts[has_byte]]
        for r in np.flatnonzero(has_byte & (magic != 0)):
            bad[int(r)] = BAD_MAGIC.format(int(magic[r]))
        for r in np.flatnonzero(short & ~(has_byte & (magic != 0))):
            bad[int(r)] = SHORT_HEADER.format(int(lengths[r]))
        framed = valid & ~short & (magic == 0)
        rows = np.flatnonzero(framed)
        s = starts[rows]
        schema_ids = ((data[s + 1].astype(np.uint32) << 24) | (data[s + 2].astype(np.uint32) << 16)
                      | (data[s + 3].astype(np.uint32) << 8) | data[s + 4].astype(np.uint32))
        if self.known_id is not None:
            for sid in np.unique(schema_ids):
                if not self.known_id(int(sid)):
                    for r in rows[schema_ids == sid]:
                        bad[int(r)] = f"unknown schema id {int(sid)}: not a JSON Schema the registry holds"
        ids = dict(zip(rows.tolist(), schema_ids.tolist()))
        good = np.array([r for r in rows.tolist() if r not in bad] if bad else rows, np.int64)
        if self._wrap:
            out, first, last = self._wrapped(data, starts, lengths, good)
        else:
            out, first, last, good = self._in_place(data, offsets, valid, good, bad, ids)
        parts: list = []
        found_bad: dict[int, str] = {}
        if len(good):
            self._bisect(out, first, last, 0, len(good), parts, found_bad)
        for i, why in found_bad.items():
            bad[int(good[i])] = why
        position = np.full(n, -1, np.int64)
        base = 0
        pieces = []
        for lo, arr in parts:
            position[good[lo:lo + len(arr)]] = np.arange(base, base + len(arr))
            pieces.append(arr)
            base += len(arr)
        parts = pieces
        read = (pa.concat_arrays(parts) if parts else pa.array([], self.node.read))
        found: dict[int, str] = {}
        rows_of = np.full(len(read), -1, np.int64)
        rows_of[position[position >= 0]] = np.flatnonzero(position >= 0)
        if not self.node.nullable:
            for r in rows_of[np.asarray(read.is_null())] if len(read) else ():
                found[int(r)] = "the value is null, which its schema does not allow"
        if self.node.children:
            _bad_rows(read, self.node, rows_of, "", found)
        for r, why in found.items():
            bad.setdefault(r, why)
            position[r] = -1
        for r in bad:
            position[r] = -1
        take = pa.array(position, pa.int64(), mask=position < 0)
        out = read.take(take)
        if out.type != self.arrow_type:
            out = out.cast(self.arrow_type)
        return out, bad, ids

    def decode(self, payloads: Any) -> Any:
        """The Arrow array of the payloads (null where a payload is null); the first bad
        payload raises JsonDecodeError naming its row and schema id (FAILFAST)."""
        out, bad, ids = self._run(payloads)
        if bad:
            row = min(bad)
            raise JsonDecodeError(row, ids.get(row), bad[row])
        return out

    def decode_permissive(self, payloads: Any) -> tuple[Any, Any]:
        """``(array, errors)``: a bad payload gives a null row and its reason in ``errors``
        (a string array, null for good rows) instead of an error (PERMISSIVE)."""
        import pyarrow as pa

        out, bad, ids = self._run(payloads)
        reasons: list = [None] * len(out)
        for row, why in bad.items():
            reasons[row] = str(JsonDecodeError(row, ids.get(row), why))
        return out, pa.array(reasons, pa.string())
