"""The lifecycle every test server of kafkawire.testing shares, in one place.

:class:`ChildProcess` is a server run as a child process on free loopback ports: start
(retried on new ports when another process took a free one meanwhile), wait until it is
ready, keep its output in a temporary file whose tail goes into every error, stop it by
its own pid (SIGTERM, then SIGKILL after ``stop_timeout``), a context manager, and a stop
at interpreter exit.  :class:`LoopbackServer` is the one-port kind.  A subclass gives
only what is its own: :meth:`~ChildProcess.command`, :meth:`~ChildProcess.environment`,
its readiness check (``_ready``) and its extras.

:class:`Lifecycle` is the context manager alone, for what runs several children
(a cluster, a broker behind stunnel, a Spark cluster); :func:`spawn`, :func:`wait_or_kill`
and :func:`track` are the pieces those use directly.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from typing import IO, Any, TypeVar

LOOPBACK = "127.0.0.1"

# What a child that found its port taken prints: Rust's io::Error ("Address in use") and
# C's strerror (EADDRINUSE: "Address already in use").
_PORT_TAKEN_MARKS = ("address in use", "address already in use")

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class BrokerStartError(RuntimeError):
    """A test broker (or a server one needs) could not be found, did not start, or died
    while starting.  Defined here, beside the lifecycle that raises it, so that every
    server module imports it from below and none from another."""


class PortTaken(Exception):
    """Another process bound the port between :func:`free_port` and the child's bind."""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct TCP ports on ``host`` that nothing listens on right now.  All
    are held open while they are chosen: ports picked one at a time can repeat once
    the earlier one is closed (seen: two listeners of one Kafka node on one port)."""
    held = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            s.bind((host, 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a TCP connection to (host, port) succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, deadline: float) -> bool:
    """Poll until (host, port) accepts a connection or ``time.monotonic()`` passes ``deadline``."""
    delay = 0.01
    while True:
        if port_accepts(host, port):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def tail(log: IO[bytes] | str | None, limit: int = 4000) -> str:
    """The last ``limit`` bytes of a log (an open file or a path), as text."""
    if log is None:
        return "(not started)"
    if isinstance(log, str):
        try:
            with open(log, "rb") as f:
                return tail(f, limit)
        except OSError:
            return "(no output)"
    log.flush()
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - limit))
    # tansu colours its log lines even into a file.
    text = _ANSI.sub("", log.read().decode("utf-8", "replace")).strip()
    return text or "(no output)"


def spawn(args: list[str], log: IO[bytes], env: dict[str, str] | None,
          error: type[Exception]) -> subprocess.Popen[bytes]:
    """Start ``args`` with its output into ``log``; ``error`` when it cannot be run."""
    try:
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            # Its own session: a Ctrl-C in the terminal reaches pytest only, which then
            # stops the child in order, and whatever the child starts can be swept by group.
            start_new_session=True,
        )
    except OSError as exc:
        raise error(f"cannot run {args[0]}: {exc}") from exc


def wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait for ``proc`` to exit, SIGKILL it (by its pid) after ``timeout``; its status."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
    return proc.returncode


# Whatever still runs when the interpreter exits (a test run interrupted between start
# and stop) is stopped then, so no child outlives the process that started it.  Held
# strongly: a running child whose owner nobody references any more must be stopped too.
_RUNNING: set[Any] = set()


def track(owner: Any) -> None:
    """Have ``owner.stop()`` called at interpreter exit unless :func:`untrack` comes first."""
    _RUNNING.add(owner)


def untrack(owner: Any) -> None:
    _RUNNING.discard(owner)


@atexit.register
def _stop_all() -> None:
    for owner in list(_RUNNING):
        try:
            owner.stop()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


_L = TypeVar("_L", bound="Lifecycle")


class Lifecycle:
    """``with thing:`` starts it unless it is started already, and closes it at the end."""

    def _started(self) -> bool:
        raise NotImplementedError

    def start(self: _L) -> _L:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _L) -> _L:
        if not self._started():
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_C = TypeVar("_C", bound="ChildProcess")


class ChildProcess(Lifecycle):
    """A server run as a child process on free loopback ports.

    :meth:`start` picks the ports (:meth:`_choose_ports`) and returns once :meth:`_ready`
    says so; :meth:`stop` ends the process by its own pid.  Its output goes to a
    temporary file whose tail every start error carries (see :meth:`output`); it is kept
    after a stop, until :meth:`close`.  :class:`LoopbackServer` is the one-port kind.
    """

    #: Its name in messages: "tansu", "the moto S3 server", "stunnel".
    name = "the child process"
    #: What it did not do when it is not ready by ``start_timeout``.
    waits_for = "accept connections"
    #: What :meth:`start` raises (BrokerStartError, StunnelError).
    error: type[Exception] = RuntimeError
    #: Seconds between two readiness checks.
    poll_interval = 0.02
    #: Start attempts on new free ports when the port was taken meanwhile.
    start_attempts = 3

    def __init__(self, *, start_timeout: float, stop_timeout: float):
        self.host = LOOPBACK
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # -- what a subclass gives --------------------------------------------------------

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str] | None:
        """The child's environment (None: this process's)."""
        return None

    def _ready(self) -> bool:
        """True once the child serves; may raise :class:`PortTaken`."""
        raise NotImplementedError

    def _choose_ports(self) -> bool:
        """Pick the ports of the next start attempt; True when they are fixed (no retry)."""
        raise NotImplementedError

    def _address(self) -> str:
        """Where it listens, for messages."""
        raise NotImplementedError

    def _hint(self, output: str) -> str:
        """More words for a child that died while starting, from its output."""
        return ""

    def _cleanup(self) -> None:
        """Remove what the subclass made for the child (called by :meth:`close`)."""

    # -- state ------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _started(self) -> bool:
        return self.running

    def output(self, limit: int = 4000) -> str:
        """The last ``limit`` bytes the child wrote to stdout/stderr."""
        return tail(self._log, limit)

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<{type(self).__name__} {self._address()} {state}>"

    # -- lifecycle --------------------------------------------------------------------

    def start(self: _C) -> _C:
        if self.running:
            raise self.error(f"{self!r} is already running")
        attempt = 1
        while True:
            fixed = self._choose_ports()
            try:
                self._start_once()
                return self
            except PortTaken:
                if fixed or attempt >= self.start_attempts:
                    raise self.error(
                        f"{self.name} could not bind {self._address()} (address in use):\n"
                        f"{self.output()}"
                    ) from None
            attempt += 1

    def _start_once(self) -> None:
        if self._log is not None:
            self._log.close()
        self._log = tempfile.TemporaryFile(prefix=f"kafkawire-{type(self).__name__.lower()}-")
        self._proc = spawn(self.command(), self._log, self.environment(), self.error)
        track(self)
        deadline = time.monotonic() + self.start_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                untrack(self)
                text = self.output()
                if any(mark in text.lower() for mark in _PORT_TAKEN_MARKS):
                    raise PortTaken()
                raise self.error(
                    f"{self.name} exited with status {code} while starting on "
                    f"{self._address()}{self._hint(text)}; its output ends with:\n{text}"
                )
            try:
                if self._ready():
                    return
            except PortTaken:
                self.stop()
                raise
            if time.monotonic() >= deadline:
                self.stop()
                raise self.error(
                    f"{self.name} did not {self.waits_for} on {self._address()} within "
                    f"{self.start_timeout}s; its output ends with:\n{self.output()}"
                )
            time.sleep(self.poll_interval)

    def stop(self) -> int | None:
        """Terminate the child (SIGTERM, then SIGKILL after ``stop_timeout``); idempotent.

        Returns the exit status, or None if it was not running.
        """
        return self._end(signal.SIGTERM)

    def _end(self, sig: int) -> int | None:
        """Send ``sig`` to the child by its pid and wait for it (SIGKILL after
        ``stop_timeout``); the port and output are kept.  The status, or None."""
        proc, self._proc = self._proc, None
        untrack(self)
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
        return wait_or_kill(proc, self.stop_timeout)

    def close(self) -> None:
        """Stop the child and discard its output."""
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None
        self._cleanup()


class LoopbackServer(ChildProcess):
    """A :class:`ChildProcess` on one port, ``127.0.0.1:port`` (default: a free port);
    ready, unless a subclass knows better, once the port accepts connections."""

    def __init__(self, port: int | None = None, *, start_timeout: float, stop_timeout: float):
        super().__init__(start_timeout=start_timeout, stop_timeout=stop_timeout)
        self._fixed_port = port
        self.port: int = port or 0

    def _choose_ports(self) -> bool:
        self.port = self._fixed_port or free_port(self.host)
        return bool(self._fixed_port)

    def _address(self) -> str:
        return f"{self.host}:{self.port or '?'}"

    def _ready(self) -> bool:
        return port_accepts(self.host, self.port, timeout=0.2)
