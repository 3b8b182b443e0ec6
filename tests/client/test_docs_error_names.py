"""Every exception name the README and docs/*.md give exists where they send people: a
bare ``SomethingError`` in :mod:`kafkawire.errors` (the README: "a typed error from
kafkawire.errors"), a dotted ``kafkawire.x.SomethingError`` in that module, and each
``from kafkawire.x import SomethingError`` a page shows works as written."""

from __future__ import annotations

import builtins
import importlib
import pathlib
import re

import pytest

import kafkawire.errors

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NAME = re.compile(r"(?<![\w.])((?:[a-z_][\w]*\.)*)([A-Z]\w*Error)\b")
FROM_IMPORT = re.compile(r"from (kafkawire[\w.]*) import ([^\n#]+)")


def _lookup(module: str, name: str) -> object:
    """``module.name``; a kafkawire.spark name is read from the package's source when
    PySpark, which the package imports, is not installed (the wheel tests' venv)."""
    try:
        return getattr(importlib.import_module(module), name, None)
    except ModuleNotFoundError as exc:
        if exc.name != "pyspark":
            raise
    init = ROOT / "src" / pathlib.Path(*module.split(".")) / "__init__.py"
    return Exception if re.search(rf'"{name}"', init.read_text(encoding="utf-8")) else None


def _named(page: pathlib.Path) -> list[tuple[str, str]]:
    """(module or "", name) of each exception name on ``page``."""
    return [(m.group(1).rstrip("."), m.group(2)) for m in NAME.finditer(page.read_text(encoding="utf-8"))]


def test_the_scan_finds_names_bare_and_dotted():
    # The scan is only as good as its pattern: both forms, and nothing inside a longer name.
    text = "raises `SaslAuthenticationError`; kafkawire.spark.KafkawireOptionError: ...; MyErrorish"
    assert [(m.group(1).rstrip("."), m.group(2)) for m in NAME.finditer(text)] == [
        ("", "SaslAuthenticationError"), ("kafkawire.spark", "KafkawireOptionError")]
    assert any(name == "ScramServerError" for _m, name in _named(ROOT / "docs" / "security.md"))


# A page whose own errors live in one module says so once, in a comment the page does not
# show: ``<!-- exceptions: kafkawire.schema.errors -->``; bare names are looked up there too.
PAGE_MODULE = re.compile(r"<!-- exceptions: (kafkawire[\w.]*) -->")


def _bare(page: pathlib.Path, name: str) -> object:
    """A bare name: kafkawire.errors first, then the page's own module, then builtins."""
    for module in ("kafkawire.errors", *PAGE_MODULE.findall(page.read_text(encoding="utf-8"))):
        value = _lookup(module, name)
        if value is not None:
            return value
    return getattr(builtins, name, None)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_exception_name_exists_where_the_page_sends_people(page):
    missing = []
    for module, name in _named(page):
        value = _lookup(module, name) if module.startswith("kafkawire") else _bare(page, name)
        if not (isinstance(value, type) and issubclass(value, Exception)):
            missing.append(f"{module or 'kafkawire.errors'}.{name}")
    assert not missing, f"{page.name} names exceptions that do not exist there: {sorted(set(missing))}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_error_import_a_page_shows_works(page):
    for module, names in FROM_IMPORT.findall(page.read_text(encoding="utf-8")):
        for name in re.findall(r"\b([A-Z]\w*Error)\b", names):
            assert isinstance(_lookup(module, name), type), (page.name, module, name)


def test_the_sasl_errors_are_the_ones_a_refused_login_raises():
    from kafkawire.protocol import sasl

    for name in ("SaslAuthenticationError", "ScramServerError", "SaslUnsupportedMechanismError",
                 "SaslIllegalStateError", "OAuthBearerServerError", "SaslError"):
        assert getattr(kafkawire.errors, name) is getattr(sasl, name)
    # Kafka's SASL_AUTHENTICATION_FAILED (58): catching the table's class catches the login's.
    assert issubclass(kafkawire.errors.SaslAuthenticationError, kafkawire.errors.for_code(58))
    assert issubclass(kafkawire.errors.ScramServerError, kafkawire.errors.SaslAuthenticationError)
    assert kafkawire.errors.SaslAuthenticationError.code == 58
    assert not kafkawire.errors.SaslAuthenticationError.retriable


def test_errors_defined_elsewhere_are_the_same_classes():
    from kafkawire.client.admin import AdminError
    from kafkawire.core.fork import ForkedClientError
    from kafkawire.protocol.transactions import TransactionStateError

    assert kafkawire.errors.AdminError is AdminError
    assert kafkawire.errors.ForkedClientError is ForkedClientError
    assert kafkawire.errors.TransactionStateError is TransactionStateError
    assert {"AdminError", "SaslAuthenticationError"} <= set(dir(kafkawire.errors))
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchError'"):
        kafkawire.errors.NoSuchError  # noqa: B018
