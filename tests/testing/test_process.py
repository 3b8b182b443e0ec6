"""The child-process lifecycle all of kafkawire.testing's servers share (testing._process).

A plain HTTP server from the standard library (``python -m http.server``) stands in for
the child: the lifecycle is the same whatever the child serves.  MotoS3Server and
Stunnel, the other users of it, are checked here too; TansuBroker in test_brokers.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from typing import Iterator

import pytest

from kafkawire.testing import BrokerStartError, MotoS3Server, Stunnel, TestCertificates, TLSService
from kafkawire.testing._process import LOOPBACK, LoopbackServer, _RUNNING, free_port, free_ports, port_accepts

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]


class HTTPServer(LoopbackServer):
    name = "the http server"
    error = BrokerStartError

    def __init__(self, port: int | None = None, *, argv: list[str] | None = None,
                 start_timeout: float = 10.0, stop_timeout: float = 5.0):
        super().__init__(port, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.argv = argv

    def command(self) -> list[str]:
        if self.argv is not None:
            return self.argv
        return [sys.executable, "-u", "-m", "http.server", "--bind", self.host, str(self.port)]

    def _ready(self) -> bool:
        # Another process may listen on the port: only the child's own word counts.
        return "Serving HTTP" in self.output() and super()._ready()


def gone(pid: int) -> bool:
    """True when ``pid`` no longer exists (or is a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_start_stop_and_state() -> None:
    server = HTTPServer()
    assert (server.pid, server.running, server.output()) == (None, False, "(not started)")
    assert repr(server) == "<HTTPServer 127.0.0.1:? stopped>"
    with server:
        pid, port = server.pid, server.port
        assert server.running and pid and port_accepts("127.0.0.1", port)
        assert repr(server) == f"<HTTPServer 127.0.0.1:{port} pid {pid}>"
        assert server in _RUNNING
        with pytest.raises(BrokerStartError, match="already running"):
            server.start()
        assert server.stop() == -signal.SIGTERM
        assert server.pid is None and not server.running and server not in _RUNNING
        assert gone(pid) and not port_accepts("127.0.0.1", port)
        assert server.stop() is None  # idempotent
        assert server.output() != "(not started)"  # kept after a stop, for errors
        server.start()  # again, on a new free port
        assert server.running and server.pid != pid
        pid = server.pid
    assert gone(pid) and server.output() == "(not started)"  # close() discards the output


def test_stop_kills_a_child_that_ignores_sigterm() -> None:
    code = textwrap.dedent("""
        import signal, socket, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
        print("Serving HTTP (not really)", flush=True)
        time.sleep(60)
    """)
    port = free_port()
    with HTTPServer(port, argv=[sys.executable, "-c", code, str(port)], stop_timeout=0.5) as server:
        pid = server.pid
        assert server.stop() == -signal.SIGKILL
        assert gone(pid)


def test_died_while_starting_reports_status_and_output() -> None:
    server = HTTPServer(argv=[sys.executable, "-c", "print('no config here'); raise SystemExit(3)"])
    with pytest.raises(BrokerStartError,
                       match=r"the http server exited with status 3 while starting on "
                             r"127\.0\.0\.1:\d+; its output ends with:\nno config here"):
        server.start()
    assert not server.running and server not in _RUNNING
    server.close()


def test_not_ready_in_time_is_stopped() -> None:
    server = HTTPServer(argv=[sys.executable, "-c", "import time; print('waiting'); time.sleep(60)"],
                        start_timeout=0.5)
    with pytest.raises(BrokerStartError, match=r"did not accept connections on 127\.0\.0\.1:\d+ "
                                               r"within 0\.5s(.|\n)*waiting"):
        server.start()
    assert not server.running and server.pid is None and server not in _RUNNING
    server.close()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another socket listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_fixed_port_taken_is_a_clear_error(taken_port: int) -> None:
    server = HTTPServer(taken_port)
    with pytest.raises(BrokerStartError, match=rf"could not bind 127\.0\.0\.1:{taken_port} "
                                               r"\(address in use\)"):
        server.start()
    assert not server.running
    server.close()


def test_free_port_taken_meanwhile_is_retried_on_another(taken_port: int) -> None:
    chosen: list[int] = []

    class Unlucky(HTTPServer):
        # The first free port is one somebody else binds before the child does.
        def _choose_ports(self) -> bool:
            fixed = super()._choose_ports()
            if not chosen:
                self.port = taken_port
            chosen.append(self.port)
            return fixed

    with Unlucky() as server:
        assert chosen[0] == taken_port and len(chosen) == 2
        assert server.port == chosen[1] != taken_port and port_accepts("127.0.0.1", server.port)


def test_children_left_running_are_stopped_at_exit(tmp_path) -> None:
    script = tmp_path / "leave.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_process import HTTPServer
        print(HTTPServer().start().pid, flush=True)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert gone(int(done.stdout))


def test_moto_s3_server_lifecycle() -> None:
    with MotoS3Server() as s3:
        pid = s3.pid
        assert s3.running and s3.endpoint == f"http://127.0.0.1:{s3.port}"
        s3.create_bucket("kw-lifecycle")
        assert s3.list_keys("kw-lifecycle") == []
    assert gone(pid) and not s3.running


def test_stunnel_lifecycle(tmp_path, taken_port: int) -> None:
    certs = TestCertificates(str(tmp_path))
    # A backend that only listens: stunnel's ports accepting is what is checked here.
    backend = ("127.0.0.1", taken_port)
    services = [TLSService("a", backend, certs.server), TLSService("b", backend, certs.expired)]
    with Stunnel(services) as stunnel:
        pid, conf_dir = stunnel.pid, stunnel._dir
        assert stunnel.port("a") != stunnel.port("b")
        assert all(port_accepts("127.0.0.1", stunnel.port(n)) for n in "ab")
        assert repr(stunnel) == (f"<Stunnel 127.0.0.1 a={stunnel.port('a')}, "
                                 f"b={stunnel.port('b')} pid {pid}>")
    assert gone(pid) and conf_dir is not None and not os.path.exists(conf_dir)


def test_ports_chosen_together_are_distinct_and_free():
    ports = free_ports(40)
    assert len(set(ports)) == 40
    for port in ports[:5]:  # nothing listens there: each can be bound at once
        with socket.socket() as s:
            s.bind((LOOPBACK, port))
