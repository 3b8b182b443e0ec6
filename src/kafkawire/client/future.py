"""Moved to :mod:`kafkawire.core.future`, which both shells share; this name stays for
existing imports and is the same module object."""

import sys

from kafkawire.core import future as _moved

sys.modules[__name__] = _moved
