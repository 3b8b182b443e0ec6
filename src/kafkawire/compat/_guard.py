"""The host versions each drop-in is tested with, and what install() does on another.

The drop-ins reach into their hosts' private modules and names: a host release may
rename one (install() would then fail part-way) or change what one means (records would
then read differently, silently).  So install() refuses a host version outside the
tested range with UntestedHostError, before it replaces anything: the host's own record
layer, always right, stays in place.  ``install(force=True)`` installs anyway, with one
UntestedHostWarning per process.  Refusing rather than warning: a warning in a service's
log is rarely read, and the price of refusing is speed, not correctness.
"""

from __future__ import annotations

import re
import warnings

from kafkawire.errors import KafkaWireError

__all__ = ["UntestedHostError", "UntestedHostWarning", "check", "is_tested"]


class UntestedHostError(KafkaWireError, RuntimeError):
    """install() on a host client version the drop-in is not tested with; nothing was
    replaced.  ``host``, ``version`` and ``tested`` (the lowest and highest tested
    versions) say which."""

    def __init__(self, message: str, *, host: str, version: str, tested: tuple[str, str]):
        super().__init__(message)
        self.host = host
        self.version = version
        self.tested = tested


class UntestedHostWarning(RuntimeWarning):
    """install(force=True) on a host client version the drop-in is not tested with."""


_RELEASE = re.compile(r"\d+(\.\d+)*")


def _key(version: str) -> tuple[int, ...] | None:
    """A final release's numbers (trailing zeros dropped); None for anything else (a
    pre-release, a local build): those are not tested."""
    if not _RELEASE.fullmatch(version):
        return None
    parts = [int(p) for p in version.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def is_tested(version: str, tested: tuple[str, str]) -> bool:
    """Whether ``version`` is a final release from ``tested[0]`` to ``tested[1]``."""
    key = _key(version)
    return key is not None and _key(tested[0]) <= key <= _key(tested[1])


_warned: set[tuple[str, str]] = set()


def describe(host: str, tested: tuple[str, str]) -> str:
    low, high = tested
    return f"{host} {low}" if low == high else f"{host} {low} to {high}"


def check(host: str, version: str, tested: tuple[str, str], force: bool) -> None:
    """Raise UntestedHostError for an untested ``version`` of ``host``; with ``force``,
    warn once instead."""
    if is_tested(version, tested):
        return
    what = (f"{host} {version} is not a version kafkawire's drop-in is tested with "
            f"({describe(host, tested)})")
    if not force:
        raise UntestedHostError(
            f"{what}: its private record-layer code, which the drop-in replaces, may have "
            f"changed, so nothing was installed and {host}'s own record layer stays in "
            f"place. Install a tested version (pip install 'kafkawire[{host}]'), or call "
            f"install(force=True) to install anyway", host=host, version=version, tested=tested)
    if (host, version) not in _warned:
        _warned.add((host, version))
        warnings.warn(f"{what}; installed anyway (force=True): compare its results with "
                      f"{host}'s own before relying on them", UntestedHostWarning, stacklevel=3)


def env_check(host: str, version: str, tested: tuple[str, str], env_var: str,
              value: str) -> bool:
    """For the environment opt-in (``env_var`` set to ``value``) and the ``python -m``
    runner: whether to install.  An untested version warns once and is left to its own
    record layer (raising would stop the user's program), unless the value is "force"."""
    if is_tested(version, tested):
        return True
    if value == "force":
        check(host, version, tested, True)
        return True
    warnings.warn(f"{host} {version} is not a version kafkawire's drop-in is tested with "
                  f"({describe(host, tested)}): not installed, {host}'s own record layer "
                  f"is used. Set {env_var}=force to install anyway", UntestedHostWarning,
                  stacklevel=3)
    return False
