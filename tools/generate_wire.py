"""Write kafkawire's API declarations from Apache Kafka's own message definitions.

Kafka defines every request, response and header as a JSON file (with // comments) under
``common/message/`` inside the ``org.apache.kafka:kafka-clients`` jar.  This script reads
them from two releases, the newest kafkawire tests against and 3.9 (the last release that
still defines the versions Kafka 4.0 removed, KIP-896), and writes their facts (names,
types, versions, nullability, defaults, tags) as ``src/kafkawire/wire/_messages.py``.
Where a message is in both, the newest release's definition wins for the versions it
still has and 3.9's declares the versions it dropped; the result is checked, version by
version, against both sources before it is written.

The jars come from the cache ``make kafka`` fills (``kafkawire.testing.kafka.kafka_jars``,
Maven Central on first use), or from ``--jar``.  Run from the repository root:

    python tools/generate_wire.py           # rewrite the generated module
    python tools/generate_wire.py --check   # exit 1, naming what differs, if it is stale

It lives outside the package: it reads jars (zipfile, subprocesses through Maven), which
the sans-IO ``kafkawire.wire`` must not import, and users never run it.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import zipfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "src", "kafkawire", "wire", "_messages.py")
#: The releases read: the newest first, then 3.9 for the versions 4.0 removed.
RELEASES = ("4.4.0", "3.9.1")
REGENERATE = "python tools/generate_wire.py"

_PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "int64", "float64", "string",
               "bytes", "records", "uuid"}
_INTS = {"int8", "int16", "uint16", "int32", "int64"}


class DefinitionError(Exception):
    """A message definition this generator cannot read or merge."""


# -- reading ---------------------------------------------------------------------------


def _strip_comments(text: str) -> str:
    # Kafka's definitions carry // line comments (Jackson reads them); JSON does not.
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise DefinitionError("unterminated /* comment")
            i = end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_versions(text: str | None) -> tuple[int, int | None] | None:
    if text is None:
        return None
    text = text.strip()
    if text == "none":
        return None
    if text.endswith("+"):
        return (int(text[:-1]), None)
    if "-" in text:
        low, high = text.split("-")
        return (int(low), int(high))
    return (int(text), int(text))


def _default(raw: Any, type_: str, name: str) -> Any:
    if raw is None:
        return _NO_DEFAULT
    if not isinstance(raw, str):  # a few definitions write a bare JSON false or number
        raw = json.dumps(raw)
    if raw == "null":
        return None
    if type_ == "bool":
        if raw not in ("true", "false"):
            raise DefinitionError(f"{name}: bool default {raw!r}")
        return raw == "true"
    if type_ in _INTS:
        return int(raw, 0)
    if type_ == "float64":
        return float(raw)
    if type_ == "string":
        return raw
    if raw == "":
        return _NO_DEFAULT
    raise DefinitionError(f"{name}: default {raw!r} for type {type_}")


class _NoDefaultMark:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


_NO_DEFAULT: Any = _NoDefaultMark()


def _field(raw: dict[str, Any], common: dict[str, list[dict[str, Any]]], where: str) -> dict[str, Any]:
    name = raw["name"]
    type_ = raw["type"]
    element = type_[2:] if type_.startswith("[]") else type_
    fields = None
    if element not in _PRIMITIVES:
        sub = raw.get("fields")
        if sub is None:
            if element not in common:
                raise DefinitionError(f"{where}.{name}: struct type {element} has no fields")
            sub = common[element]
        fields = [_field(f, common, f"{where}.{name}") for f in sub]
    elif raw.get("fields"):
        raise DefinitionError(f"{where}.{name}: primitive {type_} with fields")
    tagged = parse_versions(raw.get("taggedVersions"))
    if (tagged is None) != (raw.get("tag") is None):
        raise DefinitionError(f"{where}.{name}: tag without taggedVersions or the other way")
    return {
        "name": name,
        "type": type_,
        "versions": parse_versions(raw["versions"]),
        "nullable": parse_versions(raw.get("nullableVersions")),
        "default": _default(raw.get("default"), type_, f"{where}.{name}"),
        "tag": raw.get("tag"),
        "tagged": tagged,
        "entity": raw.get("entityType"),
        "ignorable": bool(raw.get("ignorable", False)),
        "map_key": bool(raw.get("mapKey", False)),
        "zero_copy": bool(raw.get("zeroCopy", False)),
        "flexible": parse_versions(raw["flexibleVersions"]) if "flexibleVersions" in raw else "message",
        "fields": fields,
    }


def read_jar(path: str) -> dict[str, dict[str, Any]]:
    """Every request, response and header definition in a kafka-clients jar, by name."""
    out: dict[str, dict[str, Any]] = {}
    with zipfile.ZipFile(path) as jar:
        for entry in sorted(jar.namelist()):
            if not (entry.startswith("common/message/") and entry.endswith(".json")):
                continue
            try:
                raw = json.loads(_strip_comments(jar.read(entry).decode("utf-8")))
            except ValueError as exc:
                raise DefinitionError(f"{path}!{entry}: {exc}") from None
            if raw.get("type") not in ("request", "response", "header"):
                continue
            common = {c["name"]: c["fields"] for c in raw.get("commonStructs", [])}
            name = raw["name"]
            out[name] = {
                "name": name,
                "kind": raw["type"],
                "key": raw.get("apiKey"),
                "valid": parse_versions(raw["validVersions"]),
                "flexible": parse_versions(raw.get("flexibleVersions", "none")),
                "deprecated": parse_versions(raw.get("deprecatedVersions")),
                "unstable_latest": bool(raw.get("latestVersionUnstable", False)),
                "listeners": tuple(raw.get("listeners", ())),
                "fields": [_field(f, common, name) for f in raw.get("fields", [])],
            }
    if not out:
        raise DefinitionError(f"{path} holds no common/message/*.json definitions")
    return out


# -- merging the newest release with 3.9 -----------------------------------------------


def _clip(r: tuple[int, int | None] | None, low: int, high: int | None) -> tuple[int, int | None] | None:
    if r is None:
        return None
    a = max(r[0], low)
    if r[1] is None:
        b = high
    elif high is None:
        b = r[1]
    else:
        b = min(r[1], high)
    if b is not None and a > b:
        return None
    return (a, b)


def _union(a: tuple[int, int | None] | None, b: tuple[int, int | None] | None, what: str) -> tuple[int, int | None] | None:
    if a is None:
        return b
    if b is None:
        return a
    lo, hi = (a, b) if a[0] <= b[0] else (b, a)
    if lo[1] is not None and lo[1] + 1 < hi[0]:
        raise DefinitionError(f"{what}: versions {a} and {b} leave a gap")
    high = None if lo[1] is None or hi[1] is None else max(lo[1], hi[1])
    return (lo[0], high)


def _merge_fields(new: list[dict[str, Any]], old: list[dict[str, Any]], cut: int, where: str) -> list[dict[str, Any]]:
    """``new``'s fields for versions >= cut, ``old``'s below it, as one declaration."""
    merged = []
    for f in new:
        g = dict(f)
        for key in ("versions", "nullable", "tagged"):
            g[key] = _clip(f[key], cut, None)
        merged.append(g)
    by_name = {g["name"]: g for g in merged}
    previous = None
    for f in old:
        if _clip(f["versions"], 0, cut - 1) is None:
            continue
        what = f"{where}.{f['name']}"
        g = by_name.get(f["name"])
        if g is None:
            g = dict(f)
            g["versions"] = g["nullable"] = g["tagged"] = None
            g["fields"] = [] if f["fields"] is not None else None
            index = 0 if previous is None else merged.index(previous) + 1
            merged.insert(index, g)
            by_name[f["name"]] = g
        elif (g["versions"] is not None and (g["type"] != f["type"] and not (g["fields"] is not None and f["fields"] is not None))):
            raise DefinitionError(f"{what}: type {f['type']} before v{cut}, {g['type']} after")
        for key in ("versions", "nullable", "tagged"):
            g[key] = _union(g[key], _clip(f[key], 0, cut - 1), f"{what} {key}")
        if f["tag"] is not None:
            if g["tag"] is not None and g["tag"] != f["tag"]:
                raise DefinitionError(f"{what}: tag {f['tag']} before v{cut}, {g['tag']} after")
            g["tag"] = f["tag"]
        if f["fields"] is not None:
            g["fields"] = _merge_fields(g["fields"] or [], f["fields"], cut, what)
        previous = g
    return merged


def _shape(fields: list[dict[str, Any]] | None, version: int) -> list[Any] | None:
    """What a declaration means in one version: the fields on the wire, in order."""
    if fields is None:
        return None
    out = []
    for f in fields:
        if not _in(f["versions"], version):
            continue
        out.append((f["name"], f["type"] if f["fields"] is None else "[]" if f["type"].startswith("[]") else "{}",
                    _in(f["nullable"], version), f["tag"] if _in(f["tagged"], version) else None,
                    repr(f["default"]), _shape(f["fields"], version)))
    return out


def _in(r: tuple[int, int | None] | None, v: int) -> bool:
    return r is not None and v >= r[0] and (r[1] is None or v <= r[1])


def merge(new: dict[str, Any] | None, old: dict[str, Any] | None) -> dict[str, Any]:
    if new is None and old is None:
        raise DefinitionError("a request without its response, or the other way round")
    if old is not None and old["unstable_latest"] and old["valid"] is not None:
        # 3.9's unstable newest version (an early-access preview, such as share groups' v0)
        # was never spoken by a released broker: only its stable versions are kept.
        low, high = old["valid"]
        assert high is not None
        old = dict(old, valid=(low, high - 1) if high > low else None, unstable_latest=False)
    if new is None or new["valid"] is None:
        assert old is not None
        return dict(old, valid_newest=None)
    if old is None or old["valid"] is None or old["valid"][0] >= new["valid"][0]:
        return dict(new, valid_newest=new["valid"])
    cut = new["valid"][0]
    name = new["name"]
    out = dict(new, valid_newest=new["valid"])
    out["valid"] = (old["valid"][0], new["valid"][1])
    flex_old = _clip(old["flexible"], 0, cut - 1)
    out["flexible"] = _union(flex_old, _clip(new["flexible"], cut, None), f"{name} flexibleVersions")
    if new["flexible"] is not None and flex_old is None and new["flexible"][0] < cut:
        out["flexible"] = _clip(new["flexible"], cut, None)
    out["deprecated"] = new["deprecated"] if new["deprecated"] is not None else _clip(old["deprecated"], 0, cut - 1)
    out["fields"] = _merge_fields(new["fields"], old["fields"], cut, name)
    # The merge must mean, version by version, exactly what its sources say.
    high = out["valid"][1]
    assert high is not None
    for v in range(out["valid"][0], high + 1):
        source = old if v < cut else new
        if _shape(out["fields"], v) != _shape(source["fields"], v):
            raise DefinitionError(f"{name} v{v}: the merged declaration differs from its source")
        if _in(out["flexible"], v) != _in(source["flexible"], v):
            raise DefinitionError(f"{name} v{v}: flexible differs from its source")
    return out


# -- writing ---------------------------------------------------------------------------


def _r(value: Any) -> str:
    return repr(value)


def _emit_field(f: dict[str, Any], indent: int, out: list[str]) -> None:
    pad = " " * indent
    args = [_r(f["name"]), _r(f["type"]), _r(f["versions"])]
    for key in ("nullable", "tag", "tagged", "entity"):
        if f[key] is not None:
            args.append(f"{key}={_r(f[key])}")
    if f["default"] is not _NO_DEFAULT:
        args.append(f"default={_r(f['default'])}")
    for key in ("ignorable", "map_key", "zero_copy"):
        if f[key]:
            args.append(f"{key}=True")
    if f["flexible"] != "message":
        args.append(f"flexible={_r(f['flexible'])}")
    head = f"{pad}F({', '.join(args)}"
    if f["fields"] is None:
        out.append(head + "),")
        return
    out.append(head + ", fields=(")
    for sub in f["fields"]:
        _emit_field(sub, indent + 4, out)
    out.append(f"{pad})),")


def _emit_message(m: dict[str, Any], indent: int, out: list[str], lead: str) -> None:
    pad = " " * indent
    args = [_r(m["name"]), _r(m["valid"]), f"valid_newest={_r(m['valid_newest'])}", f"flexible={_r(m['flexible'])}"]
    if m["deprecated"] is not None:
        args.append(f"deprecated={_r(m['deprecated'])}")
    if m["unstable_latest"]:
        args.append("unstable_latest=True")
    if m["listeners"]:
        args.append(f"listeners={_r(tuple(m['listeners']))}")
    out.append(f"{pad}{lead}M({', '.join(args)}, fields=(")
    for f in m["fields"]:
        _emit_field(f, indent + 4, out)
    out.append(f"{pad})),")


def render(releases: tuple[str, ...], definitions: list[dict[str, dict[str, Any]]]) -> str:
    newest, old = definitions
    # Requests and responses are matched by API key: an API may be renamed (key 74 was
    # ListClientMetricsResources before 4.1), and the newest release's name wins.
    def keyed(defs: dict[str, dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
        out = {}
        for m in defs.values():
            if m["kind"] != "header":
                if (m["kind"], m["key"]) in out:
                    raise DefinitionError(f"{m['kind']} of api key {m['key']} defined twice ({m['name']})")
                out[(m["kind"], m["key"])] = m
        return out

    new_keyed, old_keyed = keyed(newest), keyed(old)
    for (kind, key), m in list(old_keyed.items()):
        # Only requests say latestVersionUnstable; their responses share the versions.
        request = old_keyed.get(("request", key))
        if kind == "response" and request is not None and request["unstable_latest"]:
            old_keyed[(kind, key)] = dict(m, unstable_latest=True)
    out = [
        "# Generated by tools/generate_wire.py from Apache Kafka's message definitions",
        f"# (common/message/*.json in kafka-clients {' and '.join(releases)}).",
        f"# Do not edit: regenerate with `{REGENERATE}`.",
        '"""Every Kafka request, response and header definition, as data (see kafkawire.wire.spec)."""',
        "",
        "from kafkawire.wire.spec import NO_DEFAULT, ApiSpec",
        "from kafkawire.wire.spec import FieldSpec as F",
        "from kafkawire.wire.spec import MessageSpec as M",
        "",
        "__all__ = [\"APIS\", \"REQUEST_HEADER\", \"RESPONSE_HEADER\", \"SOURCES\"]",
        "",
        "#: The kafka-clients releases read, newest first.",
        f"SOURCES = {_r(tuple(releases))}",
        "",
    ]
    for header, const in (("RequestHeader", "REQUEST_HEADER"), ("ResponseHeader", "RESPONSE_HEADER")):
        _emit_message(merge(newest.get(header), old.get(header)), 0, out, f"{const} = ")
        out[-1] = out[-1][:-1]  # no trailing comma at module level
        out.append("")
    apis: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
    for key in sorted({k for kind, k in set(new_keyed) | set(old_keyed)}):
        pair = []
        for kind in ("request", "response"):
            m = merge(new_keyed.get((kind, key)), old_keyed.get((kind, key)))
            pair.append(m)
        request, response = pair
        if request["name"][: -len("Request")] != response["name"][: -len("Response")]:
            raise DefinitionError(f"api key {key}: {request['name']} answered by {response['name']}")
        apis[key] = (request, response)
    out.append("APIS = {")
    for key in sorted(apis):
        request, response = apis[key]
        api = request["name"][: -len("Request")]
        out.append(f"    {key}: ApiSpec(")
        out.append(f"        {key}, {_r(api)},")
        _emit_message(request, 8, out, "")
        _emit_message(response, 8, out, "")
        out.append("    ),")
    out.append("}")
    out.append("")
    text = "\n".join(out)
    if "NO_DEFAULT" not in text.split("__all__", 1)[1]:
        text = text.replace("import NO_DEFAULT, ApiSpec", "import ApiSpec")
    return text


# -- where the jars are ----------------------------------------------------------------


def clients_jar(version: str) -> str:
    """The kafka-clients jar of ``version`` from the test brokers' cache (fetched by Maven
    on first use)."""
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from kafkawire.testing.kafka import kafka_jars

    libs = kafka_jars(version)
    path = os.path.join(libs, f"kafka-clients-{version}.jar")
    if not os.path.exists(path):
        raise DefinitionError(f"{path} is missing: {libs} holds another Kafka release; unset "
                              f"KAFKA_HOME or pass --jar")
    return path


def generate(jars: list[str]) -> str:
    releases = []
    for jar in jars:
        m = re.search(r"kafka-clients-([0-9][^/]*)\.jar$", jar)
        releases.append(m.group(1) if m else os.path.basename(jar))
    return render(tuple(releases), [read_jar(j) for j in jars])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed module, write nothing")
    parser.add_argument("--jar", action="append", metavar="PATH",
                        help="a kafka-clients jar: give the newest, then 3.9's (default: the cached %s)" % " and ".join(RELEASES))
    parser.add_argument("--output", default=OUTPUT)
    args = parser.parse_args(argv)
    jars = args.jar or [clients_jar(v) for v in RELEASES]
    if len(jars) != 2:
        parser.error("give two --jar: the newest kafka-clients, then 3.9's")
    text = generate(jars)
    if args.check:
        try:
            with open(args.output, encoding="utf-8") as fh:
                current = fh.read()
        except FileNotFoundError:
            current = ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), "committed", "regenerated", lineterm="", n=1)
            sys.stdout.write("\n".join(list(diff)[:200]) + "\n")
            sys.stderr.write(f"{args.output} is stale: regenerate with `{REGENERATE}`\n")
            return 1
        return 0
    with open(args.output, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {args.output} from {', '.join(jars)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
