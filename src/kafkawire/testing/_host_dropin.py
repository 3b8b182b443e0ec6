"""pytest plugin (``-p kafkawire.testing._host_dropin``): a host client's own test run with
kafkawire's drop-in installed for the whole session.

``KAFKAWIRE_HOST_DROPIN`` names the drop-in module (kafkawire.compat.kafka_python or
.aiokafka), installed before any test module is imported; ``KAFKAWIRE_HOST_VERSION`` is
the host version the run is meant for, checked against the one imported.  Each test
starts with the drop-in in place (a test that swaps classes by hand cannot leave the
next one running the host's own), and the summary says it was.
"""

from __future__ import annotations

import importlib
import os

_dropin = None


def pytest_configure(config):
    global _dropin
    _dropin = importlib.import_module(os.environ["KAFKAWIRE_HOST_DROPIN"])
    expected = os.environ.get("KAFKAWIRE_HOST_VERSION")
    if expected and _dropin.host_version() != expected:
        raise RuntimeError(f"{_dropin.HOST} {_dropin.host_version()} imported, "
                           f"{expected} expected: check PYTHONPATH")
    _dropin.install()
    if not _dropin.installed():
        raise RuntimeError(f"{_dropin.__name__}.install() left it not installed")


def pytest_runtest_setup(item):
    if not _dropin.installed():
        _dropin.install()


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(
        f"kafkawire drop-in {_dropin.__name__} on {_dropin.HOST} {_dropin.host_version()}: "
        f"installed={_dropin.installed()}")
