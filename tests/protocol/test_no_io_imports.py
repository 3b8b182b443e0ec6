"""The sans-IO modules never import socket, ssl, selectors, asyncio, threading or time.

Checked twice:

* statically: every import statement in their source (module level or inside functions,
  and the Cython source) is read, so a lazy import is caught too;
* at run time: a fresh interpreter (-I -S) imports them all, and the I/O modules that
  appear are compared with a baseline interpreter that imports only the modules kafkawire
  itself imports (see the test for which).  Anything beyond the baseline came from kafkawire.
  Forbidden modules already loaded at interpreter start-up (``time`` is) are dropped from
  sys.modules first, in both interpreters, so that an import of them shows.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import kafkawire

FORBIDDEN = {"socket", "ssl", "selectors", "asyncio", "threading", "time"}
PACKAGE_DIR = Path(kafkawire.__file__).resolve().parent
SRC_DIR = PACKAGE_DIR.parent

TOP_MODULES = ["codec", "_pycodec", "compression", "errors", "_errors_base", "_errors_codec",
               "_errors_table", "_errors_client", "_columnar", "_pycodec_crc", "_pycodec_primitives",
               "_pycodec_records", "_pycodec_decode", "_pycodec_columnar", "_pycodec_encode",
               "_avro_columns", "_pyavro", "_errors_sasl"]


def sans_io_files() -> dict[str, Path]:
    """Module name -> source file, for every module under the sans-IO rule."""
    files = {f"kafkawire.{name}": PACKAGE_DIR / f"{name}.py" for name in TOP_MODULES}
    for path in sorted([*(PACKAGE_DIR / "protocol").rglob("*.py"), *(PACKAGE_DIR / "wire").rglob("*.py")]):
        rel = path.relative_to(SRC_DIR).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    files.update({f"kafkawire.schema.{m}": PACKAGE_DIR / "schema" / f"{m}.py" for m in ("_core", "errors", "framing", "_serde", "_avro_writer")})
    return files


def _walk(tree: ast.AST, import_time_only: bool) -> list[ast.AST]:
    if not import_time_only:
        return list(ast.walk(tree))
    # Statements that run at import: everything outside function bodies.
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def imported_names(module: str, path: Path, import_time_only: bool = False) -> set[str]:
    """Absolute names of every module ``path`` imports, anywhere in the file (or only at import)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in _walk(tree, import_time_only):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                names.add(".".join(base + ([node.module] if node.module else [])))
            else:
                names.add(node.module or "")
    return names


def test_every_sans_io_module_exists() -> None:
    missing = [name for name, path in sans_io_files().items() if not path.exists()]
    assert not missing, f"sans-IO modules without source: {missing}"


def test_source_has_no_io_imports() -> None:
    offenders = {}
    for module, path in sans_io_files().items():
        if not path.exists():  # reported by test_every_sans_io_module_exists
            continue
        bad = sorted(n for n in imported_names(module, path) if n.split(".")[0] in FORBIDDEN)
        if bad:
            offenders[module] = bad
    assert not offenders, f"sans-IO modules importing I/O modules: {offenders}"


@pytest.mark.parametrize("name", ["_codec.pyx", "_accumulate.pyx", "_frames.pyx"])
def test_cython_source_has_no_io_imports(name: str) -> None:
    pyx = PACKAGE_DIR / name
    assert pyx.exists(), f"the Cython source {name} is missing"
    # An extension's parts (the .pxi files it includes) hold most of its imports.
    sources = [pyx, *sorted(PACKAGE_DIR.glob(f"{pyx.stem}_*.pxi"))]
    imports = re.findall(
        r"^\s*(?:c?import|from)\s+([A-Za-z_][\w.]*)",
        "\n".join(p.read_text(encoding="utf-8") for p in sources), re.MULTILINE
    )
    assert imports, f"expected to find some import statements in {name}"
    bad = sorted(n for n in imports if n.split(".")[0] in FORBIDDEN)
    assert not bad, f"{name} (with {[p.name for p in sources[1:]]}) imports I/O modules: {bad}"


def test_import_scanner_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    # The static check is only as good as its scanner.
    src = tmp_path / "mod.py"
    src.write_text("import os\ndef f():\n    import time\n    from . import x\n    from .. import y\n")
    assert imported_names("pkg.sub.mod", src) == {"os", "time", "pkg.sub", "pkg"}
    assert imported_names("pkg.sub.mod", src, import_time_only=True) == {"os"}


_PROBE = r"""
import sys
sys.path[:0] = PATHS
FORBIDDEN = set(FORBIDDEN_LIST)
for name in FORBIDDEN & set(sys.modules):
    del sys.modules[name]
import importlib, json
failed = {}
for name in MODULES:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = repr(exc)
print(json.dumps({"loaded": sorted(FORBIDDEN & set(sys.modules)), "failed": failed}))
"""


def run_probe(modules: list[str]) -> dict:
    paths = [str(SRC_DIR), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    code = (
        _PROBE.replace("PATHS", repr(paths))
        .replace("FORBIDDEN_LIST", repr(sorted(FORBIDDEN)))
        .replace("MODULES", repr(modules))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_sans_io_modules_loads_no_io_module() -> None:
    # The baseline: the standard-library modules kafkawire imports anywhere, plus the
    # third-party ones it imports at import time (numpy loads datetime, which loads time).
    # Third-party modules imported lazily (pyarrow loads socket and threading) stay out.
    files = sans_io_files()
    others = set()
    for module, path in files.items():
        if not path.exists():  # reported by test_every_sans_io_module_exists
            continue
        for name in imported_names(module, path):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names and top != "__future__":
                others.add(name)
        for name in imported_names(module, path, import_time_only=True):
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top != "kafkawire":
                others.add(name)
    baseline = run_probe(sorted(others))
    assert not baseline["failed"], baseline["failed"]
    result = run_probe(sorted(files))
    assert not result["failed"], f"sans-IO modules that do not import: {result['failed']}"
    extra = sorted(set(result["loaded"]) - set(baseline["loaded"]))
    assert not extra, (
        f"importing kafkawire's sans-IO modules loads {extra}, which the modules they "
        f"import ({sorted(others)}) do not"
    )


def test_runtime_probe_detects_an_io_import() -> None:
    # The probe must see an I/O import when there is one, `time` included.
    assert set(run_probe(["time", "socket"])["loaded"]) >= {"time", "socket"}
    assert run_probe(["struct"])["loaded"] == []
