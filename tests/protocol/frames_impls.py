"""Both forms of kafkawire._frames for the tests that hold them to each other: the
compiled one (when built) and its pure-Python twin."""

import pytest

from kafkawire.protocol import _frames_py

try:
    from kafkawire import _frames as _compiled
except ImportError:  # no compiler here: the twin alone is tested (CI expects the extension)
    _compiled = None

IMPLS = [pytest.param(_frames_py, id="python")]
if _compiled is not None:
    IMPLS.append(pytest.param(_compiled, id="cython"))


def record_reads(monkeypatch, name: str) -> list:
    """Every result of kafkawire.protocol.connection's reader ``name`` (produce_answer,
    fetch_answer) from now on: None where the general reader took over."""
    from kafkawire.protocol import connection

    read: list = []
    original = getattr(connection, name)
    monkeypatch.setattr(connection, name, lambda *a: read.append(original(*a)) or read[-1])
    return read
