"""The layers import downwards only: kafkawire.aio (the asyncio shell) uses
kafkawire.core and kafkawire.protocol, never kafkawire.client (the sync shell); core
uses neither shell; protocol uses neither shell nor core.  Read from the source, so a
lazy import inside a function counts too."""

from __future__ import annotations

import ast
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
