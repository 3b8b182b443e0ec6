"""A Spark standalone cluster (one master, N workers) as child processes on 127.0.0.1,
and Spark's own JVM Kafka connector for a session's ``spark.jars``.

:class:`SparkStandaloneCluster` runs the master and worker daemons from the installed
``pyspark`` package itself (its ``bin/spark-class`` and ``jars/``): no separate Spark
download, no ``sbin/start-*.sh`` (the PyPI package ships none of them), nothing outside
loopback.  A driver connects with ``SparkSession.builder.master(cluster.master_url)``;
its tasks then run in executor JVMs that the workers start, each with its own Python
worker processes, so a job really crosses process boundaries, as on a real cluster.

Quirks (one line each):
- The master starts a REST submission server on the fixed port 6066 by default: it is
  turned off here, or two clusters on one machine would collide.
- Spark silently moves to the next port when one is taken (``spark.port.maxRetries``):
  the master URL is read back from the master's log, not assumed.
- The PyPI package has no ``conf/``; ``SPARK_CONF_DIR`` points at a private empty one so
  no ``spark-env.sh`` or ``spark-defaults.conf`` of the caller's leaks in.
- Tasks run the driver's ``PYSPARK_PYTHON`` (default ``python3`` from PATH), whatever the
  workers' environment says, and a driver without ``SPARK_LOCAL_IP`` binds a non-loopback
  address: run drivers in :meth:`SparkStandaloneCluster.driver_env`.
- Executors (and their Python workers) are children of the worker JVMs, in the process
  group this class gives each daemon: stopping a worker stops them, and whatever is left
  of that group afterwards is killed by its group id.

:func:`kafka_connector_jars` gives the jars of ``format("kafka")``
(``org.apache.spark:spark-sql-kafka-0-10_2.13``), which the pyspark package does not ship:
Maven resolves them from Maven Central once per version, from the small pom beside this
module (``spark-kafka-connector.pom.xml``), into the cache Apache Kafka's broker jars use
(:func:`kafkawire.testing.kafka.cache_dir`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from kafkawire.testing._process import (
    LOOPBACK,
    Lifecycle,
    free_port,
    spawn,
    tail,
    track,
    untrack,
    wait_or_kill,
)

from kafkawire.testing._maven import cached_dependencies

__all__ = ["ConnectorJarsError", "SPARK_CONNECTOR_VERSION", "SparkClusterError", "SparkStandaloneCluster",
           "kafka_connector_jars", "pyspark_home"]

#: The release of Spark's JVM Kafka connector that :func:`kafka_connector_jars` fetches
#: (``KAFKAWIRE_SPARK_CONNECTOR_VERSION`` overrides it).  PyPI's PySpark is 4.3.0, but no
#: 4.3.0 connector is published on Maven Central; 4.2.0, the newest that is, runs inside
#: PySpark 4.3 (tests/spark/test_conformance.py reads, writes and streams through it).
SPARK_CONNECTOR_VERSION = os.environ.get("KAFKAWIRE_SPARK_CONNECTOR_VERSION", "4.2.0")

_CONNECTOR_POM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark-kafka-connector.pom.xml")

_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI_PORT = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")
_MASTER_ALIVE = "New state: ALIVE"
_REGISTERED = "Successfully registered with master"


class SparkClusterError(RuntimeError):
    """The standalone cluster could not be found, did not start, or died while starting."""


class ConnectorJarsError(RuntimeError):
    """Spark's JVM Kafka connector could not be fetched (no Maven, no network, no such release)."""


def kafka_connector_jars(version: str = SPARK_CONNECTOR_VERSION, *, timeout: float = 900.0) -> list[str]:
    """The jar paths of Spark's JVM Kafka connector ``version``, for a session's
    ``spark.jars`` (comma-joined), so ``format("kafka")`` runs beside ``format("kafkawire")``.

    The connector, ``spark-token-provider-kafka-0-10``, ``kafka-clients`` and
    ``commons-pool2``: what the pyspark package lacks.  Fetched by Maven from Maven Central
    on first use and kept under :func:`~kafkawire.testing.kafka.cache_dir` (one process
    fetches, others wait on a lock file); raises :class:`ConnectorJarsError` saying what
    is missing.
    """
    libs = cached_dependencies(
        _CONNECTOR_POM, f"spark-kafka-connector-{version}", {"spark.connector.version": version},
        f"spark-sql-kafka-0-10_2.13-{version}.jar",
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version} (set KAFKAWIRE_SPARK_CONNECTOR_VERSION "
        f"to a release that is published)", ConnectorJarsError, timeout=timeout)
    return sorted(os.path.join(libs, n) for n in os.listdir(libs) if n.endswith(".jar"))


def pyspark_home() -> str:
    """The installed ``pyspark`` package directory: it doubles as ``SPARK_HOME``."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkClusterError(
            "a standalone Spark cluster needs pyspark: pip install 'kafkawire[spark]'"
        )
    home = list(spec.submodule_search_locations)[0]
    if not os.path.isfile(os.path.join(home, "bin", "spark-class")) or not os.path.isdir(
        os.path.join(home, "jars")
    ):
        raise SparkClusterError(
            f"pyspark at {home} has no bin/spark-class or jars/ (pyspark-client and "
            "pyspark-connect ship no JVM); install the full pyspark package"
        )
    return home


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


class _Daemon:
    """One master or worker JVM: its process, its log file, its name in messages."""

    def __init__(self, name: str, log_path: str, proc: subprocess.Popen[bytes]):
        self.name = name
        self.log_path = log_path
        self.proc = proc

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> None:
        """Wait for the daemon to exit (SIGKILL after ``timeout``), then sweep its group."""
        proc = self.proc
        wait_or_kill(proc, timeout)
        # The daemon led its own process group (start_new_session): executors and their
        # Python workers it started are in it and must not outlive it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class SparkStandaloneCluster(Lifecycle):
    """A Spark master and ``workers`` workers on 127.0.0.1, run as child processes.

    ::

        with SparkStandaloneCluster(workers=2) as cluster:
            ... SparkSession.builder.master(cluster.master_url) ... (in a subprocess) ...

    Each worker offers ``cores`` cores and ``memory`` to executors (small by default:
    size ``spark.executor.memory`` to fit).  Python tasks run ``python`` (default: this
    interpreter, the one with kafkawire installed) when the driver runs in
    :meth:`driver_env`: the driver chooses, not the workers.  :meth:`start`
    returns once every worker has registered with the master; :meth:`stop` ends the
    daemons by their own pids.  Logs and work directories live in a temporary directory
    removed by :meth:`close`; their tails are in every start error (see :meth:`output`).
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "256m",
        python: str | None = None,
        start_timeout: float = 120.0,
        stop_timeout: float = 15.0,
        conf: dict[str, str] | None = None,
        extra_env: dict[str, str] | None = None,
    ):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.host = LOOPBACK
        self.num_workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._conf = dict(conf or {})
        self._extra_env = dict(extra_env or {})
        self._dir: str | None = None
        self._master: _Daemon | None = None
        self._workers: list[_Daemon] = []
        self._master_url: str | None = None
        self._webui_port: int | None = None

    # -- properties -----------------------------------------------------------------

    @property
    def master_url(self) -> str:
        """``"spark://127.0.0.1:PORT"``, as the master reported it."""
        if self._master_url is None:
            raise SparkClusterError("the cluster has not been started; call start() first")
        return self._master_url

    @property
    def webui_url(self) -> str:
        """The master's web UI; ``webui_url + "/json/"`` describes workers and apps."""
        if self._webui_port is None:
            raise SparkClusterError("the cluster has not been started; call start() first")
        return f"http://{self.host}:{self._webui_port}"

    @property
    def pids(self) -> list[int]:
        """The master's pid, then the workers'."""
        return [d.proc.pid for d in self._daemons()]

    @property
    def running(self) -> bool:
        daemons = self._daemons()
        return bool(daemons) and all(d.proc.poll() is None for d in daemons)

    def output(self, limit: int = 4000) -> str:
        """The last ``limit`` bytes of each daemon's log, headed by its name."""
        daemons = self._daemons()
        if not daemons:
            return "(not started)"
        return "\n".join(
            f"--- {d.name} ({d.log_path}):\n{tail(d.log_path, limit)}" for d in daemons
        )

    def driver_env(self) -> dict[str, str]:
        """An environment for a driver process of this cluster (``subprocess.run(env=...)``).

        The driver, not the worker, picks the Python its tasks run (its ``PYSPARK_PYTHON``,
        default ``python3`` from PATH), and binds its first non-loopback address unless
        ``SPARK_LOCAL_IP`` says otherwise: both are set here, the caller's Spark settings
        are dropped.
        """
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))
        }
        env.update(SPARK_LOCAL_IP=self.host, PYSPARK_PYTHON=self.python,
                   PYSPARK_DRIVER_PYTHON=self.python)
        return env

    def state(self) -> dict[str, object]:
        """The master's JSON status (workers, cores, applications), fetched on loopback."""
        # No proxy: the caller's http_proxy must not see (or swallow) a loopback request.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.webui_url + "/json/", timeout=2.0) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def __repr__(self) -> str:
        state = f"{len(self._workers)} workers" if self.running else "stopped"
        return f"<SparkStandaloneCluster {self._master_url or '?'} {state}>"

    # -- lifecycle ------------------------------------------------------------------

    def _daemons(self) -> list[_Daemon]:
        return ([self._master] if self._master is not None else []) + self._workers

    def _environment(self, home: str) -> dict[str, str]:
        # None of the caller's Spark settings (SPARK_MASTER_OPTS, SPARK_LOCAL_DIRS, a
        # SPARK_HOME of another version, ...) may reach the daemons.
        env = self.driver_env()
        assert self._dir is not None
        env.update(
            SPARK_HOME=home,
            SPARK_CONF_DIR=os.path.join(self._dir, "conf"),
            SPARK_LOCAL_DIRS=os.path.join(self._dir, "local"),
            SPARK_DAEMON_MEMORY=self.daemon_memory,
        )
        env.update(self._extra_env)
        return env

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> _Daemon:
        assert self._dir is not None
        log_path = os.path.join(self._dir, f"{name}.log")
        with open(log_path, "wb") as log:
            # In its own process group, so the executors it starts can be swept by group.
            proc = spawn(args, log, env, SparkClusterError)
        return _Daemon(name, log_path, proc)

    def start(self) -> SparkStandaloneCluster:
        if self._daemons():
            raise SparkClusterError(f"{self!r} is already started")
        home = pyspark_home()
        self._dir = tempfile.mkdtemp(prefix="kafkawire-spark-")
        track(self)
        try:
            self._start(home)
        except BaseException:
            # The error carries the logs' tails: nothing of a failed start is left behind.
            self.close()
            raise
        return self

    def _start(self, home: str) -> None:
        assert self._dir is not None
        for sub in ("conf", "local"):
            os.mkdir(os.path.join(self._dir, sub))
        props = os.path.join(self._dir, "cluster.properties")
        conf = {"spark.master.rest.enabled": "false", **self._conf}
        with open(props, "w", encoding="utf-8") as f:
            f.writelines(f"{k} {v}\n" for k, v in conf.items())
        env = self._environment(home)
        spark_class = os.path.join(home, "bin", "spark-class")
        deadline = time.monotonic() + self.start_timeout

        # spark-class execs java, so the pid Popen returns is the daemon's own.
        self._master = self._spawn(
            "master",
            [spark_class, "org.apache.spark.deploy.master.Master",
             "--host", self.host, "--port", str(free_port(self.host)),
             "--webui-port", str(free_port(self.host)), "--properties-file", props],
            env,
        )
        while True:
            self._check_alive(self._master)
            text = _read(self._master.log_path)
            url, ui = _MASTER_URL.search(text), _MASTER_UI_PORT.search(text)
            if url and ui and _MASTER_ALIVE in text:
                self._master_url, self._webui_port = url.group(1), int(ui.group(1))
                break
            self._check_deadline(deadline, "the master did not become ALIVE")
            time.sleep(0.1)

        for i in range(1, self.num_workers + 1):
            work_dir = os.path.join(self._dir, f"worker-{i}")
            os.mkdir(work_dir)
            self._workers.append(self._spawn(
                f"worker-{i}",
                [spark_class, "org.apache.spark.deploy.worker.Worker",
                 "--host", self.host, "--port", str(free_port(self.host)),
                 "--webui-port", str(free_port(self.host)),
                 "--cores", str(self.cores), "--memory", self.memory,
                 "--work-dir", work_dir, "--properties-file", props, self._master_url],
                env,
            ))
        while True:
            for daemon in self._daemons():
                self._check_alive(daemon)
            if all(_REGISTERED in _read(w.log_path) for w in self._workers):
                # The workers say so; the master must agree before a driver asks it.
                try:
                    alive = self.state().get("aliveworkers")
                except (OSError, ValueError):
                    alive = None
                if alive == self.num_workers:
                    return
            self._check_deadline(
                deadline, f"{self.num_workers} workers did not register with the master"
            )
            time.sleep(0.2)

    def _check_alive(self, daemon: _Daemon) -> None:
        code = daemon.proc.poll()
        if code is not None:
            raise SparkClusterError(
                f"the Spark {daemon.name} exited with status {code} while starting; "
                f"the logs end with:\n{self.output()}"
            )

    def _check_deadline(self, deadline: float, what: str) -> None:
        if time.monotonic() >= deadline:
            raise SparkClusterError(
                f"{what} within {self.start_timeout}s; the logs end with:\n{self.output()}"
            )

    def stop(self) -> None:
        """Stop the workers (and so their executors), then the master; idempotent."""
        workers, self._workers = self._workers, []
        master, self._master = self._master, None
        untrack(self)
        # Workers first, all at once: a master stopped first leaves them retrying it.
        for stage in (workers, [master] if master is not None else []):
            for daemon in stage:
                daemon.terminate()
            for daemon in stage:
                daemon.wait(self.stop_timeout)

    def close(self) -> None:
        """Stop the cluster and remove its logs and work directories."""
        self.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._master_url = self._webui_port = None

    def _started(self) -> bool:
        return self.running

