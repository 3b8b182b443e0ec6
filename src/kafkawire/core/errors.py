"""Moved to :mod:`kafkawire.errors`, which holds every exception kafkawire raises (the
client's in its ``_errors_client`` part); this name stays for existing imports and is the
same module object."""

import sys

from kafkawire import errors as _moved

sys.modules[__name__] = _moved
