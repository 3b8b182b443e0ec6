"""One object per Kafka API: its key, its version range, and its request/response classes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafkawire import errors
from kafkawire.protocol.schema import Field, Struct, Writer, build_struct, decode, encode

__all__ = ["Api", "ApiVersionError"]


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
