"""Moved to :mod:`kafkawire.core.errors`, which both shells share; this name stays for
existing imports and is the same module object."""

import sys

from kafkawire.core import errors as _moved

sys.modules[__name__] = _moved
