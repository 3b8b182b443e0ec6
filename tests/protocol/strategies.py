"""Hypothesis strategies built from the schema declarations, for any Api at any version.

``requests(api, v)`` / ``responses(api, v)`` walk ``api.Request._fields`` (or Response)
and draw valid instances: only fields that exist in version ``v`` get drawn values (the
others keep their defaults, which is also what the decoder gives them), tagged fields only
in flexible versions, None only where the field is nullable in ``v``, integers within their
wire type, finite floats, UUIDs, and ``records`` as plain bytes.

Decoded ``records`` fields come back as memoryviews: compare objects with :func:`plain`.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

from kafkawire.protocol.api import Api
from kafkawire.protocol.schema import Field, Struct

__all__ = ["for_struct", "requests", "responses", "plain", "scalar"]

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

# Strings must be encodable as UTF-8, so no lone surrogates.
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=16)


def scalar(kind: str) -> st.SearchStrategy[Any]:
    """A strategy for one value of a scalar wire type."""
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        return st.integers(lo, hi)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return _TEXT
    if kind == "bytes":
        return st.binary(max_size=32)
    if kind == "records":
        return st.binary(max_size=64)
    if kind == "uuid":
        return st.uuids()
    raise ValueError(f"no strategy for wire type {kind!r}")


def _field(cls: type[Struct], f: Field, version: int, max_items: int) -> st.SearchStrategy[Any]:
    if f.type == "struct":
        element: st.SearchStrategy[Any] = for_struct(getattr(cls, "_sub_" + f.name), version, max_items)
    else:
        element = scalar(f.elem if f.array else f.type)  # type: ignore[arg-type]
    value = st.lists(element, max_size=max_items) if f.array else element
    if f.nullable(version):
        value = st.none() | value
    return value


@functools.lru_cache(maxsize=None)
def for_struct(cls: type[Struct], version: int, max_items: int = 3) -> st.SearchStrategy[Struct]:
    """Instances of the generated struct class ``cls`` valid at ``version``."""
    flexible = cls._flexible_from is not None and version >= cls._flexible_from
    drawn = {}
    for f in cls._fields:
        if not f.exists(version):
            continue
        if f.tag is not None and not flexible:
            continue  # tagged fields only travel in flexible versions (KIP-482)
        drawn[f.name] = _field(cls, f, version, max_items)
    return st.fixed_dictionaries(drawn).map(lambda kw: cls(**kw))


def requests(api: Api, version: int, max_items: int = 3) -> st.SearchStrategy[Struct]:
    return for_struct(api.Request, version, max_items)


def responses(api: Api, version: int, max_items: int = 3) -> st.SearchStrategy[Struct]:
    return for_struct(api.Response, version, max_items)


def plain(obj: Struct) -> dict[str, Any]:
    """``obj`` as nested dicts and lists, with record memoryviews turned into bytes."""
    return obj.to_dict()
