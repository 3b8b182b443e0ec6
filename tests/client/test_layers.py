"""The layers import downwards only: kafkawire.aio (the asyncio shell) uses
kafkawire.core and kafkawire.protocol, never kafkawire.client (the sync shell); core
uses neither shell; protocol uses neither shell nor core.  And no module imports one
that imports it back.  Read from the source, so a lazy import inside a function counts
too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import kafkawire

PACKAGE_DIR = Path(kafkawire.__file__).resolve().parent

# layer -> the packages it must not import
RULES = {
    "aio": ("kafkawire.client",),
    "core": ("kafkawire.client", "kafkawire.aio"),
    "protocol": ("kafkawire.client", "kafkawire.aio", "kafkawire.core"),
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:  # relative: within the layer's own package
                continue
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("layer", sorted(RULES))
def test_a_layer_imports_no_layer_above_it(layer: str) -> None:
    files = sorted((PACKAGE_DIR / layer).rglob("*.py"))
    assert files, f"no source under kafkawire/{layer}"
    offenders = {}
    for path in files:
        bad = sorted(n for n in _imports(path) if any(n == p or n.startswith(p + ".") for p in RULES[layer]))
        if bad:
            offenders[str(path.relative_to(PACKAGE_DIR))] = bad
    assert not offenders, f"kafkawire/{layer} imports what it must not: {offenders}"


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from kafkawire.client import producer\n")
    assert "kafkawire.client" in _imports(bad) and "kafkawire.client.producer" in _imports(bad)


# -- no import circles ------------------------------------------------------------------
# A module that imports one that imports it back works only while every name is read
# after both finished loading; moving one import breaks it.  The codec once had one
# (codec -> _columnar -> codec, through a lazy import for the Record type) and the test
# servers another (testing.brokers <-> testing.s3).  Lazy imports count here too.

# Circles known and not yet broken, each as the set of its modules: the test fails on any
# other.  Remove an entry when its circle goes.
KNOWN_CIRCLES: list[set[str]] = []

_PYX_IMPORT = re.compile(
    r"^\s*(?:from\s+([A-Za-z_][\w.]*)\s+import\s+(\([^)]*\)|[^\n#]*)|import\s+([A-Za-z_][\w.]*))",
    re.MULTILINE,
)


def _module_files(package_dir: Path, top: str) -> dict[str, Path]:
    files = {}
    for path in sorted(package_dir.rglob("*.py")) + sorted(package_dir.rglob("*.pyx")):
        parts = [top, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _import_edges(name: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that importing ``name`` may import (anywhere in its
    source), without its own parent packages: Python imports those first in any case."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    pairs: list[tuple[str, list[str]]] = []  # (module, names imported from it)
    if path.suffix == ".pyx":
        for base, names, plain in _PYX_IMPORT.findall(path.read_text(encoding="utf-8")):
            if plain:
                pairs.append((plain, []))
            else:
                names = [n.split(" as ")[0].strip() for n in names.strip("()").split(",")]
                pairs.append((base, [n for n in names if n]))
    else:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                pairs.extend((alias.name, []) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - (node.level - 1)] + ([base] if base else []))
                pairs.append((base, [alias.name for alias in node.names]))
    edges = set()
    for base, names in pairs:
        submodules = {f"{base}.{n}" for n in names if f"{base}.{n}" in modules}
        targets = submodules | ({base} if len(submodules) < len(names) or not names else set())
        for target in targets:
            parts = target.split(".")
            edges.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {e for e in edges if e in modules and e != name and e not in ancestors}


def import_circles(package_dir: Path, top: str) -> list[set[str]]:
    """Every set of modules that import each other in a circle (strongly connected)."""
    files = _module_files(package_dir, top)
    graph = {name: _import_edges(name, path, set(files)) for name, path in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_module_imports_one_that_imports_it_back() -> None:
    new = [sorted(c) for c in import_circles(PACKAGE_DIR, "kafkawire") if c not in KNOWN_CIRCLES]
    assert not new, f"import circles in kafkawire: {new}"


def test_the_circle_check_sees_lazy_circles_and_not_parent_packages(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "codec.py").write_text("from pkg._columns import Columns\n")
    (pkg / "_columns.py").write_text("def record():\n    from pkg import codec\n")
    (pkg / "_ext.pyx").write_text("def f():\n    from pkg._ext2 import (\n        g,\n    )\n")
    (pkg / "_ext2.py").write_text("from . import _ext\n")
    # a package that imports its submodules, which import siblings through it: no circle
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub.a import A\n")
    (pkg / "sub" / "a.py").write_text("from pkg.sub import b\nA = 1\n")
    (pkg / "sub" / "b.py").write_text("")
    circles = import_circles(pkg, "pkg")
    assert sorted(map(sorted, circles)) == [["pkg._columns", "pkg.codec"], ["pkg._ext", "pkg._ext2"]]


def test_the_old_error_modules_are_kafkawire_errors() -> None:
    import kafkawire.client.errors
    import kafkawire.core.errors
    import kafkawire.errors

    assert kafkawire.client.errors is kafkawire.core.errors is kafkawire.errors
    from kafkawire.client.errors import BufferExhaustedError, ConfigError

    assert BufferExhaustedError.__module__ == "kafkawire.errors" and ConfigError is kafkawire.errors.ConfigError
