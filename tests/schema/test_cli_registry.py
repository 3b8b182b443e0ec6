"""`kafkawire registry`: a real registry up on the port it names, its URL on stdout, and a
stop signal stopping it, by the command run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from kafkawire.cli import _port_free
from kafkawire.schema import Schema, SchemaRegistryClient
from kafkawire.testing.brokers import free_port, port_accepts

pytestmark = pytest.mark.registry

_READY = re.compile(r"\(pid (\d+)\) (?:listens on|took) port (\d+): schema\.registry\.url='([^']+)'")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_registry_serves_the_api_until_a_stop_signal(sig: signal.Signals) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kafkawire", "registry", "--port", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        assert proc.stderr is not None and proc.stdout is not None
        for line in proc.stderr:  # ends if the command exits before it is ready
            seen.append(line)
            m = _READY.search(line)
            if m:
                break
        else:
            proc.wait(10)
            raise AssertionError(f"kafkawire registry exited {proc.returncode} before it was ready:\n{''.join(seen)}")
        pid, took, url = int(m.group(1)), int(m.group(2)), m.group(3)
        assert took == port and url == f"http://127.0.0.1:{port}/apis/ccompat/v7"
        assert proc.stdout.readline().strip() == url
        text = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
        with SchemaRegistryClient(url) as registry:
            schema_id = registry.register_schema("cli-value", Schema(text))
            assert registry.get_schema(schema_id).schema_str == text
        proc.send_signal(sig)
        assert proc.wait(60) == 0, proc.stderr.read()
        with pytest.raises(ProcessLookupError):  # the registry is gone, reaped by the command
            os.kill(pid, 0)
        assert not port_accepts("127.0.0.1", port) and _port_free(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
