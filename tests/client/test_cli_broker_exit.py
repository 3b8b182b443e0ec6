"""`kafkawire broker` when the broker it started dies on its own: the command notices
(asleep on the child's exit, not polling), says so, and exits 1."""

from __future__ import annotations

import os
import signal

import pytest

from kafkawire.testing.brokers import free_port
from test_cli_broker import _run_until_ready


@pytest.mark.tansu
def test_a_broker_that_dies_ends_the_command_with_1():
    proc, pid, _port = _run_until_ready("--broker", "tansu", "--port", str(free_port()))
    try:
        os.kill(pid, signal.SIGKILL)
        assert proc.wait(15) == 1
        assert "kafkawire broker: Tansu exited" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
