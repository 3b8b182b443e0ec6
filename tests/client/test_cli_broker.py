"""`kafkawire broker`: the port it takes, the line that says so, and every stop signal
(SIGINT, SIGTERM, SIGHUP) stopping the broker it started, by the command run as a user runs it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from kafkawire.cli import _broker_port, _port_free
from kafkawire.testing.brokers import free_port, port_accepts

_READY = re.compile(r"\(pid (\d+)\) (?:listens on|took) port (\d+): bootstrap_servers='localhost:(\d+)'")


def test_the_default_port_when_free_else_a_free_one_and_why(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr("kafkawire.cli.BROKER_PORT", taken)
        port, why = _broker_port(None)
        assert port != taken and _port_free(port) and why == f"port {taken} is in use, so "
    free = free_port()
    monkeypatch.setattr("kafkawire.cli.BROKER_PORT", free)
    assert _broker_port(None) == (free, "")
    assert _broker_port(free) == (free, "")  # asked for: used as it is


def _run_until_ready(*args: str) -> tuple[subprocess.Popen[str], int, int]:
    proc = subprocess.Popen([sys.executable, "-m", "kafkawire", "broker", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:  # ends if the command exits before it is ready
        seen.append(line)
        m = _READY.search(line)
        if m:
            pid, port, bootstrap_port = map(int, m.groups())
            assert port == bootstrap_port
            assert proc.stdout.readline().strip() == f"localhost:{port}"
            return proc, pid, port
    proc.wait(10)
    raise AssertionError(f"kafkawire broker exited {proc.returncode} before it was ready:\n{''.join(seen)}")


def _assert_stopped(proc: subprocess.Popen[str], pid: int, port: int) -> None:
    assert proc.wait(30) == 0, proc.stderr.read()
    with pytest.raises(ProcessLookupError):  # the broker is gone, reaped by the command
        os.kill(pid, 0)
    assert not port_accepts("127.0.0.1", port) and _port_free(port)


@pytest.mark.tansu
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_every_stop_signal_stops_tansu(sig):
    port = free_port()
    proc, pid, took = _run_until_ready("--broker", "tansu", "--port", str(port))
    try:
        assert took == port and port_accepts("127.0.0.1", port)
        proc.send_signal(sig)
        _assert_stopped(proc, pid, port)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.kafka
def test_sigterm_stops_apache_kafka():
    port = free_port()
    proc, pid, took = _run_until_ready("--broker", "kafka", "--port", str(port))
    try:
        from kafkawire import Producer

        assert took == port
        with Producer(bootstrap_servers=f"localhost:{port}") as p:  # it serves, on that port
            assert p.send("cli-broker", b"x").result(30).offset == 0
        proc.send_signal(signal.SIGTERM)
        _assert_stopped(proc, pid, port)
    finally:
        if proc.poll() is None:
            proc.kill()


def _kafka_nodes() -> dict[int, int]:
    """pid -> parent pid of every Apache Kafka node running on this machine."""
    nodes = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"kafka.Kafka\0" not in f.read():
                    continue
            with open(f"/proc/{entry}/stat") as f:
                nodes[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return nodes


@pytest.mark.kafka
def test_a_stop_signal_while_kafka_starts_leaves_nothing_behind():
    before = set(_kafka_nodes())
    proc = subprocess.Popen([sys.executable, "-m", "kafkawire", "broker", "--broker", "kafka", "--port",
                             str(free_port())], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert "starting Apache Kafka" in proc.stderr.readline()
        time.sleep(2.5)  # formatting the storage or starting the node
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    # A node this command left behind is an orphan now (others' nodes have their parents).
    orphans = [pid for pid, parent in _kafka_nodes().items() if pid not in before and parent in (1, proc.pid)]
    assert not orphans
