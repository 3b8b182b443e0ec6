"""A real Schema Registry on 127.0.0.1: Apicurio Registry, Confluent-compatible.

:class:`ApicurioRegistry` runs Apicurio Registry's prebuilt Quarkus distribution
(``io.apicurio:apicurio-registry-app:<version>:tar.gz:all`` on Maven Central) as a child
process with in-memory storage.  It serves the Confluent Schema Registry REST API under
``/apis/ccompat/v7`` (:attr:`ApicurioRegistry.url`), which confluent-kafka's own
``SchemaRegistryClient`` talks to unchanged.

The tarball comes like Kafka's jars: :func:`registry_app` runs ``mvn
dependency:copy-dependencies`` on the pom shipped beside this module
(``apicurio-registry.pom.xml``) once per version into :func:`cache_dir`, and unpacks it
there.  The app's classes are Java 21: :func:`find_java` looks for a Java 21+ runtime
(``KAFKAWIRE_REGISTRY_JAVA``, ``JAVA_HOME``, ``/usr/lib/jvm/*``, ``java`` on the PATH)
and :func:`install_java` installs one with apt-get where the distribution has one
(``make kafka`` calls it).

::

    with ApicurioRegistry() as registry:
        client = SchemaRegistryClient(registry.url)

It listens on two free loopback ports (HTTP and Quarkus' management port, whose
``/health/ready`` says when it serves) and is stopped by its own pid.
"""

from __future__ import annotations

import fcntl
import glob
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request

from kafkawire.testing._maven import cache_dir, cached_dependencies, is_cached
from kafkawire.testing._process import ChildProcess, PortTaken, free_ports
from kafkawire.testing.brokers import BrokerStartError

__all__ = [
    "APICURIO_VERSION",
    "ApicurioRegistry",
    "MIN_JAVA",
    "find_java",
    "install_java",
    "java_version",
    "registry_app",
    "registry_app_cached",
]

#: The Apicurio Registry release the fixtures run (KAFKAWIRE_APICURIO_VERSION overrides it).
APICURIO_VERSION = os.environ.get("KAFKAWIRE_APICURIO_VERSION", "3.3.3")
#: Apicurio Registry 3's classes are compiled for Java 21.
MIN_JAVA = 21
#: A java executable (or a JDK/JRE home) to run the registry with, before any other.
JAVA_ENV = "KAFKAWIRE_REGISTRY_JAVA"

_POM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "apicurio-registry.pom.xml")
_VERSION_LINE = re.compile(r'version "(\d+)(?:\.(\d+))?')


# -- Java 21+ ------------------------------------------------------------------------------


def java_version(java: str) -> int | None:
    """The feature release of the ``java`` executable (17, 21, 25), None when it does not run."""
    try:
        out = subprocess.run([java, "-version"], stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _VERSION_LINE.search(out.stderr + out.stdout)
    if not found:
        return None
    major = int(found.group(1))
    # Java 8 and older call themselves 1.x.
    return int(found.group(2) or 0) if major == 1 else major


def _java_in(home_or_binary: str) -> str:
    if os.path.isdir(home_or_binary):
        return os.path.join(home_or_binary, "bin", "java")
    return home_or_binary


def _java_candidates() -> list[str]:
    seen: list[str] = []
    for where in (os.environ.get(JAVA_ENV), os.environ.get("JAVA_HOME")):
        if where:
            seen.append(_java_in(where))
    # Newest first: a name's release number decides ("temurin-25-jdk-amd64", "java-17-openjdk").
    homes = glob.glob("/usr/lib/jvm/*/bin/java")

    def release(path: str) -> int:
        numbers = re.findall(r"\d+", os.path.basename(os.path.dirname(os.path.dirname(path))))
        return max((int(n) for n in numbers if int(n) < 100), default=0)

    seen.extend(sorted(homes, key=release, reverse=True))
    on_path = shutil.which("java")
    if on_path:
        seen.append(on_path)
    out = []
    for path in seen:
        real = os.path.realpath(path)
        if real not in out and os.access(real, os.X_OK):
            out.append(real)
    return out


def find_java(minimum: int = MIN_JAVA) -> str | None:
    """A java executable of release ``minimum`` or newer, else None.  Looks at
    ``$KAFKAWIRE_REGISTRY_JAVA``, ``$JAVA_HOME``, every ``/usr/lib/jvm/*`` (newest first) and
    ``java`` on the PATH."""
    for java in _java_candidates():
        version = java_version(java)
        if version is not None and version >= minimum:
            return java
    return None


def install_java(minimum: int = MIN_JAVA, *, timeout: float = 900.0) -> str:
    """A Java ``minimum``+ runtime, installed with apt-get when none is on the machine.

    Returns :func:`find_java`'s answer when there is one.  Otherwise runs ``apt-get
    update`` and installs the first package the distribution offers among
    ``openjdk-N-jre-headless`` and ``temurin-N-jre`` (N from 25 down to ``minimum``).
    Raises :class:`BrokerStartError` naming what to do when there is no apt-get, no such
    package (Debian 12 ships Java 17 only) or the install fails."""
    found = find_java(minimum)
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        raise BrokerStartError(
            f"no Java {minimum}+ found (looked at ${JAVA_ENV}, $JAVA_HOME, /usr/lib/jvm/*, the PATH) "
            f"and apt-get is not available: install a Java {minimum}+ runtime (e.g. Temurin from "
            f"adoptium.net) and set ${JAVA_ENV} or JAVA_HOME to it")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")

    def apt_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*sudo, *args], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, env=env)

    apt_run(apt, "update", "-qq")
    wanted = [f"{kind}-{n}-{suffix}" for n in range(max(25, minimum), minimum - 1, -1)
              for kind, suffix in (("openjdk", "jre-headless"), ("temurin", "jre"))]
    offered = [name for name in wanted
               if "Candidate: (none)" not in (policy := apt_run("apt-cache", "policy", name).stdout)
               and "Candidate:" in policy]
    if not offered:
        raise BrokerStartError(
            f"no Java {minimum}+ found, and apt-get offers none of {wanted[:2]}... (Debian 12 "
            f"ships Java 17 only): install a Java {minimum}+ runtime (e.g. Temurin from "
            f"adoptium.net, or add Adoptium's apt repository) and set ${JAVA_ENV} or JAVA_HOME")
    result = apt_run(apt, "install", "-y", "-qq", "--no-install-recommends", offered[0])
    found = find_java(minimum)
    if result.returncode != 0 or found is None:
        output = (result.stdout + result.stderr).strip()[-2000:]
        raise BrokerStartError(f"apt-get install {offered[0]} did not give a Java {minimum}+ "
                               f"(exit {result.returncode}):\n{output}")
    return found


# -- the app -------------------------------------------------------------------------------


def _cache_name(version: str) -> str:
    return f"apicurio-registry-{version}"


def registry_app_cached(version: str = APICURIO_VERSION) -> bool:
    """Whether :func:`registry_app` would return without fetching or unpacking anything."""
    root = os.path.join(cache_dir(), _cache_name(version))
    return is_cached(_cache_name(version)) and os.path.exists(os.path.join(root, "app", "quarkus-run.jar"))


def registry_app(version: str = APICURIO_VERSION, *, timeout: float = 900.0) -> str:
    """The directory holding Apicurio Registry ``version``'s ``quarkus-run.jar`` (with its
    ``lib/`` and ``quarkus/`` beside it): fetched by Maven from Maven Central and unpacked
    into the cache on first use, one process at a time."""
    name = _cache_name(version)
    root = os.path.join(cache_dir(), name)
    app = os.path.join(root, "app")
    if registry_app_cached(version):
        return app
    tarball = f"apicurio-registry-app-{version}-all.tar.gz"
    libs = cached_dependencies(
        _POM, name, {"apicurio.version": version}, tarball,
        f"io.apicurio:apicurio-registry-app:{version}:tar.gz:all", BrokerStartError, timeout=timeout)
    with open(os.path.join(root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(app, "quarkus-run.jar")):  # unpacked while we waited
            return app
        staging = tempfile.mkdtemp(prefix="app-", dir=root)
        try:
            with tarfile.open(os.path.join(libs, tarball)) as tar:
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(staging, filter="data")
                else:  # Python before the extraction filters (3.10.11 / 3.11.3)
                    tar.extractall(staging)
            if not os.path.exists(os.path.join(staging, "quarkus-run.jar")):
                raise BrokerStartError(f"{tarball} holds no quarkus-run.jar at its top; is "
                                       f"{version} an Apicurio Registry 3 release?")
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        shutil.rmtree(app, ignore_errors=True)
        os.rename(staging, app)
    return app


# -- the server ----------------------------------------------------------------------------


class ApicurioRegistry(ChildProcess):
    """Apicurio Registry ``version`` on two free loopback ports, in-memory storage.

    :attr:`url` is its Confluent-compatible API (``/apis/ccompat/v7``).  ``properties``
    adds Quarkus/Apicurio system properties (``-Dkey=value``); ``java`` is the executable
    (default: :func:`find_java`); ``port`` fixes the HTTP port (default: a free one).  A fresh process starts with schema ids at 1 and global
    compatibility ``NONE`` (Confluent's default is ``BACKWARD``).
    """

    name = "Apicurio Registry"
    error = BrokerStartError
    waits_for = "answer 200 on /health/ready"
    poll_interval = 0.1

    def __init__(self, *, version: str = APICURIO_VERSION, properties: dict[str, str] | None = None,
                 java: str | None = None, heap: str = "512m", port: int | None = None,
                 start_timeout: float = 120.0, stop_timeout: float = 20.0):
        super().__init__(start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.version = version
        self.properties = dict(properties or {})
        self.java = java
        self.heap = heap
        self._fixed_port = port
        self.port = port or 0
        self.management_port = 0
        self._directory: str | None = None
        self._app: str | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible Schema Registry API (what registry clients are given)."""
        return f"{self.base_url}/apis/ccompat/v7"

    def _address(self) -> str:
        return f"{self.host}:{self.port or '?'} (management {self.management_port or '?'})"

    def _choose_ports(self) -> bool:
        self.port, self.management_port = free_ports(2, self.host)
        if self._fixed_port:
            self.port = self._fixed_port
            if self.management_port == self.port:  # free now, but it is the fixed one's
                self.management_port = next(p for p in free_ports(2, self.host) if p != self.port)
        return bool(self._fixed_port)

    def start(self) -> ApicurioRegistry:
        if self.java is None:
            self.java = find_java(MIN_JAVA)
            if self.java is None:
                raise BrokerStartError(
                    f"Apicurio Registry needs Java {MIN_JAVA}+ and none was found (looked at "
                    f"${JAVA_ENV}, $JAVA_HOME, /usr/lib/jvm/*, the PATH): run `make kafka` "
                    f"(it installs one with apt-get where it can) or set ${JAVA_ENV}")
        self._app = registry_app(self.version)
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="kafkawire-registry-")
        return super().start()

    def command(self) -> list[str]:
        assert self._app is not None and self._directory is not None and self.java is not None
        props = {
            "quarkus.http.host": self.host,
            "quarkus.http.port": str(self.port),
            "quarkus.management.host": self.host,
            "quarkus.management.port": str(self.management_port),
            "java.io.tmpdir": self._directory,
            **self.properties,
        }
        return [self.java, f"-Xmx{self.heap}", "-XX:+ExitOnOutOfMemoryError",
                *[f"-D{k}={v}" for k, v in props.items()],
                "-jar", os.path.join(self._app, "quarkus-run.jar")]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS" and not k.startswith("QUARKUS_")}
        env["LC_ALL"] = "C.UTF-8"
        return env

    def _ready(self) -> bool:
        text = self.output(2000)
        if "Port(s) already bound" in text or "seems to be in use" in text:
            raise PortTaken()
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.management_port}/health/ready",
                                        timeout=1.0) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _hint(self, output: str) -> str:
        if "UnsupportedClassVersionError" in output:
            return f" ({self.java} is older than Java {MIN_JAVA}: set ${JAVA_ENV} to a Java {MIN_JAVA}+)"
        return ""

    def _cleanup(self) -> None:
        if self._directory:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
