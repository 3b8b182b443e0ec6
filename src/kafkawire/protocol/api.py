"""One object per Kafka API: its key, its version range, and its request/response classes.

:func:`from_generated` builds one from Kafka's own definition (kafkawire.wire): every API in
kafkawire.protocol.apis is built so.  :class:`Api` itself takes field lists, for a layout
no current definition describes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafkawire import errors
from kafkawire.protocol.schema import _UNSET, Field, Struct, Writer, build_struct, decode, encode
from kafkawire.wire import APIS, NO_DEFAULT, FieldSpec

__all__ = ["Api", "ApiVersionError", "from_generated"]


class ApiVersionError(errors.KafkaWireError):
    """A request asked for a version kafkawire or the broker does not support."""


class Api:
    """A Kafka API: ``key``, ``name``, versions ``min_version..max_version``.

    ``flexible_from`` is the first flexible version (KIP-482), or None.  ``Request`` and
    ``Response`` are the generated struct classes.
    """

    def __init__(
        self,
        key: int,
        name: str,
        versions: tuple[int, int],
        flexible_from: int | None,
        request: Sequence[Field],
        response: Sequence[Field],
    ):
        self.key = key
        self.name = name
        self.min_version, self.max_version = versions
        self.flexible_from = flexible_from
        self.Request = build_struct(f"{name}Request", request, flexible_from)
        self.Response = build_struct(f"{name}Response", response, flexible_from)
        self.Request.api = self  # type: ignore[attr-defined]
        self.Response.api = self  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"<Api {self.name} key={self.key} v{self.min_version}-v{self.max_version}>"

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def check_version(self, version: int) -> None:
        if not self.min_version <= version <= self.max_version:
            raise ApiVersionError(
                f"{self.name} v{version} is not supported by kafkawire "
                f"(v{self.min_version} to v{self.max_version})"
            )

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions responses keep header v0 even in flexible versions, so a client can
        # read the answer before it knows which versions the broker speaks (KIP-511).
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0

    # Bodies only; headers are added by kafkawire.protocol.headers / the connection.
    def encode_request(self, request: Struct, version: int, w: Writer | None = None) -> Writer:
        self.check_version(version)
        return encode(request, version, w)

    def decode_request(self, buf: Any, version: int) -> Struct:
        self.check_version(version)
        return _whole(self.Request, buf, version)

    def encode_response(self, response: Struct, version: int, w: Writer | None = None) -> Writer:
        self.check_version(version)
        return encode(response, version, w)

    def decode_response(self, buf: Any, version: int) -> Struct:
        self.check_version(version)
        return _whole(self.Response, buf, version)


def _whole(cls: type[Struct], buf: Any, version: int) -> Struct:
    # Bytes left over are not an error: the newer side may append fields we do not know.
    return decode(cls, buf, version)[0]


def from_generated(key: int, *, max_version: int | None = None) -> Api:
    """The Api for ``key`` from Kafka's own definition (kafkawire.wire), for its versions
    up to ``max_version`` (default: the newest stable one).

    Fields that exist in none of those versions are left out, so the classes hold only
    what kafkawire speaks.
    """
    spec = APIS[key]
    low, high = spec.valid
    assert high is not None
    if spec.request.unstable_latest:
        # An unstable version may still change before its release: never spoken by default.
        high -= 1
    if max_version is not None:
        if max_version > high:
            raise ValueError(f"{spec.name} v{max_version}: Kafka's definition stops at v{high}")
        high = max_version
    flexible = spec.flexible
    if flexible is not None and flexible[1] is not None:
        raise ValueError(f"{spec.name}: flexible versions {flexible} end; the schema has no such form")
    return Api(key, spec.name, (low, high), None if flexible is None else flexible[0],
               request=_fields(spec.name, spec.request.fields, low, high),
               response=_fields(spec.name, spec.response.fields, low, high))


def _fields(api: str, specs: Sequence[FieldSpec], low: int, high: int) -> list[Field]:
    out = []
    for g in specs:
        if g.versions is None or g.versions[0] > high or (g.versions[1] is not None and g.versions[1] < low):
            continue
        since, until = g.versions
        last = high if until is None else min(until, high)
        where = f"{api}.{g.py}"
        nullable_since = None
        # Nullable only in versions below those spoken (ShareFetch's Records in v0): not at all.
        if g.nullable is not None and (g.nullable[1] is None or g.nullable[1] >= max(since, low)):
            if g.nullable[1] is not None and g.nullable[1] < last:
                raise ValueError(f"{where}: nullable only in {g.nullable}; the schema has no such form")
            nullable_since = g.nullable[0]
        tag = None
        if g.tagged is not None:
            if g.tagged[0] > max(since, low) or (g.tagged[1] is not None and g.tagged[1] < last):
                raise ValueError(f"{where}: tagged in {g.tagged} only, not in all of {g.versions}")
            tag = g.tag
        if g.flexible != "message":
            raise ValueError(f"{where}: flexible versions of its own; the schema has no such form")
        default = _UNSET if g.default is NO_DEFAULT else g.default
        kw: dict[str, Any] = {"since": since, "until": until, "nullable_since": nullable_since,
                              "default": default, "tag": tag}
        if g.fields is not None:
            out.append(Field(g.py, fields=_fields(api, g.fields, low, high), struct_name=g.element,
                             array=g.is_array, **kw))
        else:
            out.append(Field(g.py, g.type, **kw))
    return out
