"""An S3 server on 127.0.0.1 (the ``moto`` package's), for Tansu brokers that share storage.

::

    with MotoS3Server() as s3:
        s3.create_bucket("tansu")
        env = s3.tansu_env()   # AWS_ENDPOINT, AWS_ALLOW_HTTP, keys, region for tansu

Several Tansu brokers started with ``--storage-engine s3://BUCKET/`` and :meth:`tansu_env`
share one cluster's topics, offsets and producer state (see
:class:`kafkawire.testing.brokers.TansuCluster`).  moto keeps everything in memory; the
server is a child process stopped by its own pid.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
import xml.etree.ElementTree as ET
from typing import IO

from kafkawire.testing.brokers import LOOPBACK, BrokerStartError, _tail, free_port

__all__ = ["MotoS3Server"]

# moto answers any key pair: these only have to be the same on every broker.
_ACCESS_KEY = "kafkawire"
_SECRET_KEY = "kafkawire-secret"
# A bucket made by a plain PUT (no LocationConstraint) is in us-east-1.
_REGION = "us-east-1"
_S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class MotoS3Server:
    """moto's S3 server on ``127.0.0.1:port``, run as a child process.

    ``port`` defaults to a free port.  :meth:`start` returns once the server answers
    ListBuckets; :meth:`stop` ends the process by its own pid (SIGTERM, then SIGKILL).
    """

    def __init__(self, port: int | None = None, *, start_timeout: float = 60.0,
                 stop_timeout: float = 5.0, python: str | None = None):
        self.host = LOOPBACK
        self._fixed_port = port
        self.port: int = port or 0
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._python = python or sys.executable
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``"http://127.0.0.1:PORT"``."""
        if not self.port:
            raise BrokerStartError("the S3 server has not been started; call start() first")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def output(self, limit: int = 4000) -> str:
        """The last ``limit`` bytes the server wrote to stdout/stderr."""
        return _tail(self._log, limit) if self._log is not None else "(not started)"

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<MotoS3Server {self.host}:{self.port or '?'} {state}>"

    def tansu_env(self) -> dict[str, str]:
        """The environment a Tansu broker reads its S3 settings from (object_store's
        ``AWS_*`` variables): this endpoint over plain HTTP, fixed keys and region."""
        return {
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": _ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": _SECRET_KEY,
            "AWS_DEFAULT_REGION": _REGION,
        }

    # -- lifecycle ------------------------------------------------------------------

    def command(self) -> list[str]:
        return [self._python, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]

    def start(self) -> MotoS3Server:
        if self.running:
            raise BrokerStartError(f"{self!r} is already running")
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            self.port = self._fixed_port or free_port(self.host)
            if self._start_once() or attempt == attempts - 1:
                break
        if not self.running:
            raise BrokerStartError(
                f"the moto S3 server could not bind {self.host}:{self.port} (address in use):\n"
                f"{self.output()}"
            )
        return self

    def _start_once(self) -> bool:
        """Start and wait until ready; False when the port was taken meanwhile."""
        if self._log is not None:
            self._log.close()
        self._log = tempfile.TemporaryFile(prefix="kafkawire-moto-")
        # Nothing of the caller's AWS setup may reach moto (it would not matter) or leak
        # into what the tests read back; proxies would send loopback traffic elsewhere.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("AWS_") and k.lower() not in ("http_proxy", "https_proxy")}
        try:
            self._proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        except OSError as exc:
            raise BrokerStartError(f"cannot run {self._python} -m moto.server: {exc}") from exc
        _RUNNING.add(self)
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                _RUNNING.discard(self)
                text = self.output()
                if "address already in use" in text.lower():
                    return False
                hint = (" (moto's server needs the test extra: pip install 'moto[server]')"
                        if "No module named" in text or "ModuleNotFoundError" in text else "")
                raise BrokerStartError(
                    f"the moto S3 server exited with status {code} while starting on "
                    f"{self.host}:{self.port}{hint}; its output ends with:\n{text}"
                )
            if self._answers():
                return True
            if time.monotonic() >= deadline:
                self.stop()
                raise BrokerStartError(
                    f"the moto S3 server did not answer on {self.endpoint} within "
                    f"{self.start_timeout}s; its output ends with:\n{self.output()}"
                )
            time.sleep(0.1)

    def _answers(self) -> bool:
        try:
            with self._open("GET", "/", timeout=1.0) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> int | None:
        """Terminate the server (SIGTERM, then SIGKILL after ``stop_timeout``); idempotent."""
        proc, self._proc = self._proc, None
        _RUNNING.discard(self)
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=self.stop_timeout)
        return proc.returncode

    def close(self) -> None:
        """Stop the server and discard its output."""
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> MotoS3Server:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- buckets and objects --------------------------------------------------------

    def _open(self, method: str, path: str, timeout: float = 10.0):  # -> HTTPResponse
        # Path-style requests with an unsigned Authorization header: moto checks no
        # signatures, but answers an anonymous GetObject with 403.
        request = urllib.request.Request(self.endpoint + path, method=method, headers={
            "Authorization": f"AWS4-HMAC-SHA256 Credential={_ACCESS_KEY}/20240101/{_REGION}/s3/"
                             f"aws4_request, SignedHeaders=host, Signature=0",
        })
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return opener.open(request, timeout=timeout)

    def create_bucket(self, name: str, timeout: float = 10.0) -> str:
        """Create bucket ``name`` (no error if this server already has it); returns it."""
        try:
            with self._open("PUT", "/" + urllib.parse.quote(name), timeout=timeout):
                pass
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace")
            if exc.code == 409 and "BucketAlreadyOwnedByYou" in body:
                return name
            raise BrokerStartError(
                f"the moto S3 server refused to create bucket {name!r}: HTTP {exc.code}: {body}"
            ) from None
        return name

    def list_keys(self, bucket: str, prefix: str = "", timeout: float = 30.0) -> list[str]:
        """Every object key in ``bucket`` under ``prefix`` (ListObjectsV2, all pages)."""
        deadline = time.monotonic() + timeout
        keys: list[str] = []
        token: str | None = None
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            path = f"/{urllib.parse.quote(bucket)}?{urllib.parse.urlencode(query)}"
            with self._open("GET", path, timeout=max(0.1, deadline - time.monotonic())) as resp:
                root = ET.fromstring(resp.read())
            keys += [e.text or "" for e in root.iter(f"{_S3_NS}Key")]
            truncated = (root.findtext(f"{_S3_NS}IsTruncated") or "false") == "true"
            token = root.findtext(f"{_S3_NS}NextContinuationToken")
            if not truncated or not token:
                return keys

    def get_object(self, bucket: str, key: str, timeout: float = 10.0) -> bytes:
        path = f"/{urllib.parse.quote(bucket)}/{urllib.parse.quote(key)}"
        with self._open("GET", path, timeout=timeout) as resp:
            return resp.read()


# Servers still running when the interpreter exits are stopped then.
_RUNNING: weakref.WeakSet[MotoS3Server] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for server in list(_RUNNING):
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
