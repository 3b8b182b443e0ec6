"""Which form of a compiled module to load: the compiled one along with the compiled
codec, else (KAFKAWIRE_PUREPYTHON=1, no compiler at install) its pure-Python twin, so
that every twin goes with the codec's."""

from __future__ import annotations

import importlib
from types import ModuleType

from kafkawire import codec


def load(compiled: str, twin: str) -> ModuleType:
    """The module named ``compiled`` if the codec is compiled and it is built, else ``twin``."""
    if codec.IMPLEMENTATION != "python":
        try:
            return importlib.import_module(compiled)
        except ImportError:  # built before this extension existed: the twin is complete, only slower
            pass
    return importlib.import_module(twin)
