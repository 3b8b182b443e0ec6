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
