"""Both forms of a compiled module, for the tests that hold its twin to it."""

import importlib
from types import ModuleType

import pytest


def both_forms(compiled: str, twin: ModuleType) -> tuple[list, ModuleType | None]:
    """(pytest params of the twin and, when built, of the module named ``compiled``;
    that module or None).  Without a compiler the twin alone is tested; CI expects the
    extension (the implementation tests fail there without it)."""
    try:
        built: ModuleType | None = importlib.import_module(compiled)
    except ImportError:
        built = None
    params = [pytest.param(twin, id="python")]
    if built is not None:
        params.append(pytest.param(built, id="cython"))
    return params, built
