"""Test ids for the compat suites' parameters."""

from __future__ import annotations

import re


def stable_id(value: object) -> str:
    """A parameter's repr without object addresses (a memoryview's): every pytest process
    (pytest-xdist's workers too) collects the same test ids."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))
