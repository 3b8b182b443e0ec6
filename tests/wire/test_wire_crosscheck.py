"""Every API kafkawire declares (kafkawire.protocol.apis) says, version by version, what
Kafka's own definitions say (kafkawire.wire, generated from them): the same fields in the
same order, spelt in snake_case, with the same types, nullability and tagged-field
numbers, and the same flexible versions.  Every API is now built from those definitions
(from_generated), so a difference is a fault in how it reads them, unless it is one of the
exceptions named below with the reason it stays.

Defaults are compared too: a tagged field is left off the wire when it equals its
default (KIP-482), so there they must agree exactly.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkawire.protocol import apis
from kafkawire.protocol.schema import Field
from kafkawire.wire import APIS, NO_DEFAULT, FieldSpec
from kafkawire.wire.spec import in_range

_ZERO: dict[str, Any] = {
    "bool": False, "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "int64": 0, "float64": 0.0,
    "string": "", "bytes": b"", "records": None, "uuid": uuid.UUID(int=0),
}

#: Differences that stay, each with why: (API name, what differs) -> reason.
KNOWN: dict[tuple[str, str], str] = {
}


def _hand_type(f: Field) -> str:
    if f.type == "struct":
        return "[]struct" if f.array else "struct"
    return f"[]{f.elem}" if f.array else f.type


def _kafka_type(g: FieldSpec) -> str:
    if g.is_struct:
        return "[]struct" if g.is_array else "struct"
    return g.type


def _hand_default(owner: type, f: Field) -> Any:
    value = getattr(owner, "_default_" + f.name)()
    if f.type == "struct" and not f.array and value is not None:
        return "a struct"
    return value


def _kafka_default(g: FieldSpec) -> Any:
    if g.default is not NO_DEFAULT:
        return g.default
    if g.is_array:
        return []
    if g.is_struct:
        return "a struct"
    return _ZERO[g.type]


def _compare(path: str, owner: type, hand: list[Field], kafka: tuple[FieldSpec, ...], version: int,
             out: list[str]) -> None:
    mine = [f for f in hand if f.exists(version)]
    theirs = [g for g in kafka if g.exists(version)]
    if [f.name for f in mine] != [g.py for g in theirs]:
        if len(mine) == len(theirs) and all(
                _hand_type(f) == _kafka_type(g) for f, g in zip(mine, theirs)):
            for f, g in zip(mine, theirs):
                if f.name != g.py:
                    out.append(f"{path}.{f.name}: Kafka names it {g.py}")
        else:
            out.append(f"{path}: fields {[f.name for f in mine]}, Kafka's {[g.py for g in theirs]}")
            return
    for f, g in zip(mine, theirs):
        where = f"{path}.{f.name}"
        if _hand_type(f) != _kafka_type(g):
            out.append(f"{where}: type {_hand_type(f)}, Kafka's {_kafka_type(g)}")
            continue
        if f.nullable(version) != g.is_nullable(version):
            out.append(f"{where}: nullable {f.nullable(version)}, Kafka's {g.is_nullable(version)}")
        tag = g.tag if g.is_tagged(version) else None
        if f.tag != tag:
            out.append(f"{where}: tag {f.tag}, Kafka's {tag}")
        mine_default, kafka_default = _hand_default(owner, f), _kafka_default(g)
        if mine_default != kafka_default and not (
                # kafkawire's convention: a field that may be null reads as None when a version
                # lacks it or nobody set it (Kafka's classes hold "" or []); what a version
                # without nullability sends is checked by the encoder, not hidden here.
                mine_default is None and g.nullable is not None and f.tag is None):
            out.append(f"{where}: default {mine_default!r}, Kafka's {kafka_default!r}")
        if f.fields is not None and g.fields is not None:
            _compare(where, getattr(owner, "_sub_" + f.name), f.fields, g.fields, version, out)


def differences(key: int) -> dict[str, list[int]]:
    """What differs between kafkawire's declaration of ``key`` and Kafka's -> the versions."""
    api, kafka = apis.get(key), APIS[key]
    found: dict[str, list[int]] = {}
    for version in range(api.min_version, api.max_version + 1):
        out: list[str] = []
        if not in_range(kafka.valid, version):
            out.append(f"v{version} is not a version Kafka defines ({kafka.valid})")
        else:
            if api.is_flexible(version) != kafka.request.is_flexible(version):
                out.append(f"flexible {api.is_flexible(version)}, Kafka's {kafka.request.is_flexible(version)}")
            _compare("request", api.Request, api.Request._fields, kafka.request.fields, version, out)
            _compare("response", api.Response, api.Response._fields, kafka.response.fields, version, out)
        for line in out:
            found.setdefault(line, []).append(version)
    return found


@pytest.mark.parametrize("key", sorted(apis.BY_KEY), ids=lambda k: apis.get(k).name)
def test_declaration_matches_kafkas_definition(key):
    name = apis.get(key).name
    assert key in APIS, f"{name} (key {key}) is not an API Kafka defines"
    unexplained = {what: versions for what, versions in differences(key).items() if (name, what) not in KNOWN}
    assert not unexplained, f"{name} differs from Kafka's definition (fix protocol/apis):\n" + "\n".join(
        f"  v{v[0]}-v{v[-1]}: {what}" for what, v in unexplained.items())


def test_every_known_exception_is_still_there():
    # An exception the declarations no longer show is dropped from KNOWN, not kept to rot.
    gone = [(name, what) for name, what in sorted(KNOWN) if what not in differences(apis.get(name).key)]
    assert not gone, f"no longer differing, drop from KNOWN: {gone}"


def test_the_comparison_sees_a_transcription_error():
    from kafkawire.protocol.api import Api
    from kafkawire.protocol.schema import Field as F

    typo = Api(17, "SaslHandshake", (0, 1), None, request=[F("mechanism", "bytes")],
               response=[F("error_code", "int16"), F("mechanisms", "[]string", nullable_since=1)])
    found: list[str] = []
    _compare("request", typo.Request, typo.Request._fields, APIS[17].request.fields, 1, found)
    _compare("response", typo.Response, typo.Response._fields, APIS[17].response.fields, 1, found)
    assert found == ["request.mechanism: type bytes, Kafka's string",
                     "response.mechanisms: nullable True, Kafka's False"]
