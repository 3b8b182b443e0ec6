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

import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

from kafkawire.testing._process import BrokerStartError, LoopbackServer

__all__ = ["MotoS3Server"]

# moto answers any key pair: these only have to be the same on every broker.
_ACCESS_KEY = "kafkawire"
_SECRET_KEY = "kafkawire-secret"
# A bucket made by a plain PUT (no LocationConstraint) is in us-east-1.
_REGION = "us-east-1"
_S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class MotoS3Server(LoopbackServer):
    """moto's S3 server on ``127.0.0.1:port``, run as a child process.

    ``port`` defaults to a free port.  :meth:`start` returns once the server answers
    ListBuckets; :meth:`stop` ends the process by its own pid (SIGTERM, then SIGKILL).
    """

    name = "the moto S3 server"
    waits_for = "answer ListBuckets"
    error = BrokerStartError
    poll_interval = 0.1

    def __init__(self, port: int | None = None, *, start_timeout: float = 60.0,
                 stop_timeout: float = 5.0, python: str | None = None):
        super().__init__(port, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self._python = python or sys.executable

    @property
    def endpoint(self) -> str:
        """``"http://127.0.0.1:PORT"``."""
        if not self.port:
            raise BrokerStartError("the S3 server has not been started; call start() first")
        return f"http://{self.host}:{self.port}"

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

    def environment(self) -> dict[str, str]:
        # Nothing of the caller's AWS setup may reach moto (it would not matter) or leak
        # into what the tests read back; proxies would send loopback traffic elsewhere.
        return {k: v for k, v in os.environ.items()
                if not k.startswith("AWS_") and k.lower() not in ("http_proxy", "https_proxy")}

    def _hint(self, output: str) -> str:
        if "No module named" in output or "ModuleNotFoundError" in output:
            return " (moto's server needs the test extra: pip install 'moto[server]')"
        return ""

    def _ready(self) -> bool:
        try:
            with self._open("GET", "/", timeout=1.0) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

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

