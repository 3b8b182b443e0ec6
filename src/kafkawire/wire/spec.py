"""The shape of a generated API declaration: the facts of Kafka's message definitions.

``kafkawire.wire._messages`` is generated from the JSON message definitions inside the
``kafka-clients`` jars (``tools/generate_wire.py``) and written with these classes.  Only
facts are kept: names, types, versions, nullability, defaults, tags; the definitions'
prose stays in Kafka.

A version range is ``(low, high)``, both inclusive, ``high`` None for "and every later
version" (Kafka's ``"3+"``); None instead of a range is Kafka's ``"none"``.

This module does no I/O.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["NO_DEFAULT", "ApiSpec", "FieldSpec", "MessageSpec", "in_range", "snake_case"]


class _NoDefault:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


#: A field without a ``"default"`` in Kafka's definition: the type's zero value applies.
NO_DEFAULT: Any = _NoDefault()


def in_range(versions: tuple[int, int | None] | None, version: int) -> bool:
    """Whether ``version`` lies in a version range (None, Kafka's "none", holds none)."""
    if versions is None:
        return False
    low, high = versions
    return version >= low and (high is None or version <= high)


_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9]|$)|[A-Z]?[a-z0-9]+|[A-Z]+")
# Words Kafka capitalises inside: KRaft is one word, 2PC (two-phase commit, KIP-939) another.
_WHOLE_WORDS = (("KRaft", "Kraft"), ("2Pc", "_2pc"))


def snake_case(name: str) -> str:
    """Kafka's PascalCase field name as Python spells it: ``ThrottleTimeMs`` ->
    ``throttle_time_ms``, ``SessionID`` -> ``session_id``, ``Enable2Pc`` -> ``enable_2pc``."""
    for word, spelling in _WHOLE_WORDS:
        name = name.replace(word, spelling)
    return "_".join(w.lower() for w in _WORD.findall(name))


class FieldSpec:
    """One field: ``name`` is Kafka's, ``py`` its snake_case spelling.

    ``type`` is Kafka's type name: a primitive (``int32``, ``string``, ``records``...), an
    array ``[]T`` of a primitive or a struct, or a struct's name.  A struct or an array of
    structs carries its ``fields`` (common structs are written out where they are used).
    ``tagged`` is the range of versions in which the field is a tagged field number ``tag``
    (KIP-482).  ``entity`` is Kafka's ``entityType`` (``topicName``, ``brokerId``...).
    """

    __slots__ = ("name", "py", "type", "versions", "nullable", "default", "tag", "tagged",
                 "entity", "ignorable", "map_key", "zero_copy", "flexible", "fields")

    def __init__(self, name: str, type: str, versions: tuple[int, int | None] | None, *,
                 nullable: tuple[int, int | None] | None = None, default: Any = NO_DEFAULT,
                 tag: int | None = None, tagged: tuple[int, int | None] | None = None,
                 entity: str | None = None, ignorable: bool = False, map_key: bool = False,
                 zero_copy: bool = False, flexible: tuple[int, int | None] | None | str = "message",
                 fields: tuple[FieldSpec, ...] | None = None):
        self.name = name
        self.py = snake_case(name)
        self.type = type
        self.versions = versions
        self.nullable = nullable
        self.default = default
        self.tag = tag
        self.tagged = tagged
        self.entity = entity
        self.ignorable = ignorable
        self.map_key = map_key
        self.zero_copy = zero_copy
        #: "message" when the message's flexible versions apply (all but a few header fields).
        self.flexible = flexible
        self.fields = fields

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        """The element type of an array, else the type itself."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.fields is not None

    def exists(self, version: int) -> bool:
        return in_range(self.versions, version)

    def is_nullable(self, version: int) -> bool:
        return in_range(self.nullable, version)

    def is_tagged(self, version: int) -> bool:
        return in_range(self.tagged, version)

    def __repr__(self) -> str:
        return f"<FieldSpec {self.name} {self.type} {self.versions}>"


class MessageSpec:
    """A request, a response or a header: its versions and its fields.

    ``valid`` spans the newest definition and 3.9's (the versions Kafka 4.0 removed are
    still declared); ``valid_newest`` is the newest release's own range (None when that
    release no longer defines the message).
    """

    __slots__ = ("name", "valid", "valid_newest", "flexible", "deprecated", "unstable_latest",
                 "listeners", "fields")

    def __init__(self, name: str, valid: tuple[int, int | None], *,
                 valid_newest: tuple[int, int | None] | None,
                 flexible: tuple[int, int | None] | None, deprecated: tuple[int, int | None] | None = None,
                 unstable_latest: bool = False, listeners: tuple[str, ...] = (),
                 fields: tuple[FieldSpec, ...] = ()):
        self.name = name
        self.valid = valid
        self.valid_newest = valid_newest
        self.flexible = flexible
        self.deprecated = deprecated
        self.unstable_latest = unstable_latest
        self.listeners = listeners
        self.fields = fields

    def is_flexible(self, version: int) -> bool:
        return in_range(self.flexible, version)

    def __repr__(self) -> str:
        return f"<MessageSpec {self.name} {self.valid}>"


class ApiSpec:
    """One Kafka API: its key, its name (``Produce``), its request and its response."""

    __slots__ = ("key", "name", "request", "response")

    def __init__(self, key: int, name: str, request: MessageSpec, response: MessageSpec):
        self.key = key
        self.name = name
        self.request = request
        self.response = response

    @property
    def valid(self) -> tuple[int, int | None]:
        return self.request.valid

    @property
    def flexible(self) -> tuple[int, int | None] | None:
        return self.request.flexible

    def __repr__(self) -> str:
        return f"<ApiSpec {self.name} key={self.key} {self.valid}>"
