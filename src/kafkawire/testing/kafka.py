"""Apache Kafka itself, in KRaft mode, as child processes on 127.0.0.1: the reference broker.

:class:`KafkaCluster` runs 1 or 3 (any number of) combined broker+controller nodes from
Apache Kafka's own jars.  The jars come from ``$KAFKA_HOME/libs`` when ``KAFKA_HOME``
names a Kafka distribution, else from Maven Central: :func:`kafka_jars` runs ``mvn
dependency:copy-dependencies`` on the small pom shipped beside this module
(``kafka-broker.pom.xml``) once per version and keeps the result under
:func:`cache_dir`, so later runs start in seconds.

::

    with KafkaCluster(3, min_insync_replicas=2) as cluster:
        producer = Producer(bootstrap_servers=cluster.bootstrap, acks="all")
        cluster.kill(0)        # SIGKILL node 1 (index 0)
        cluster.restart(0)     # same ports and log dirs

Listeners: ``PLAINTEXT`` always (the brokers also talk to each other on it), and any of
``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``, each on its own port per node.  The SSL ones
use certificates made by :class:`~kafkawire.testing.tls.TestCertificates`;
``ssl_client_auth="required"`` makes the ``SSL`` listener demand a client certificate.
The SASL ones accept PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (Kafka's
unsecured JWS validator: :func:`unsecured_jwt` makes tokens for it); the users are created
at format time (``--add-scram`` for SCRAM, the JAAS ``user_<name>`` options for PLAIN).
:meth:`KafkaCluster.client_config` gives the kafkawire options for a listener.

A node that does not start raises :class:`~kafkawire.testing.BrokerStartError` with the
tail of its log.  Everything is stopped by its own pid.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Iterable, Mapping

from kafkawire.testing._maven import cache_dir, cached_dependencies, is_cached
from kafkawire.testing._process import LOOPBACK, ChildProcess, Lifecycle, PortTaken, free_ports, port_accepts
from kafkawire.testing.brokers import BrokerStartError

__all__ = [
    "KAFKA_MATRIX_VERSION",
    "KAFKA_VERSION",
    "KafkaCluster",
    "KafkaNode",
    "SASL_MECHANISMS",
    "cache_dir",
    "kafka_jars",
    "kafka_jars_cached",
    "unsecured_jwt",
]

#: The Apache Kafka release the fixtures run unless told otherwise (KAFKAWIRE_KAFKA_VERSION).
KAFKA_VERSION = os.environ.get("KAFKAWIRE_KAFKA_VERSION", "4.4.0")
#: The release of the broker matrix's older line (KAFKAWIRE_KAFKA_MATRIX_VERSION): 3.9, the
#: last before Kafka 4 removed the oldest API versions (KIP-896).
KAFKA_MATRIX_VERSION = os.environ.get("KAFKAWIRE_KAFKA_MATRIX_VERSION", "3.9.1")
#: A Kafka distribution (its ``libs/`` holds the jars) to use instead of Maven Central.
KAFKA_HOME_ENV = "KAFKA_HOME"

#: What the SASL listeners accept.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_POM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka-broker.pom.xml")
# The line KafkaRaftServer logs once the node serves (its broker unfenced).
_READY_MARK = b"Kafka Server started"
# Only the lines that say why something failed, and the readiness line.
_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = INFO
"""

_DEFAULT_JVM_OPTIONS = (
    "-Xms128m", "-Xmx768m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
)


# -- where the jars come from ----------------------------------------------------------


def java_binary() -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on the PATH (Kafka 4 needs Java 17 or newer)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise BrokerStartError("java is not on the PATH: Apache Kafka needs Java 17 or newer "
                               "(apt-get install -y openjdk-17-jre-headless), or set JAVA_HOME")
    return found


def _home_libs() -> str | None:
    home = os.environ.get(KAFKA_HOME_ENV)
    if not home:
        return None
    libs = os.path.join(home, "libs")
    if not any(n.startswith("kafka_2.") for n in _listdir(libs)):
        raise BrokerStartError(
            f"${KAFKA_HOME_ENV}={home!r} is not a Kafka distribution (no kafka_2.*.jar in "
            f"{libs}); unset it to have the jars fetched from Maven Central"
        )
    return libs


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def kafka_jars(version: str = KAFKA_VERSION, *, timeout: float = 900.0) -> str:
    """The directory holding Apache Kafka ``version``'s broker jars.

    ``$KAFKA_HOME/libs`` when ``KAFKA_HOME`` is set (its version wins); else the cache,
    filled on first use by Maven from Maven Central (one process at a time: others wait on
    a lock file).  Raises :class:`BrokerStartError` naming what is missing.
    """
    libs = _home_libs()
    if libs:
        return libs
    return cached_dependencies(
        _POM, f"kafka-{version}", {"kafka.version": version}, f"kafka_2.13-{version}.jar",
        f"org.apache.kafka:kafka_2.13:{version} and its dependencies (or set ${KAFKA_HOME_ENV} "
        f"to a Kafka distribution)", BrokerStartError, timeout=timeout)


def kafka_jars_cached(version: str = KAFKA_VERSION) -> bool:
    """Whether :func:`kafka_jars` would return without fetching anything (``KAFKA_HOME``
    set, or the jars already in the cache)."""
    return bool(os.environ.get(KAFKA_HOME_ENV)) or is_cached(f"kafka-{version}")


# -- tokens and properties -------------------------------------------------------------


def unsecured_jwt(subject: str, lifetime_s: float = 3600.0, *, scope: str | None = None) -> tuple[str, int]:
    """An unsecured JWS (``alg: none``) for ``subject`` and its expiry in epoch ms, the form
    Kafka's default OAUTHBEARER validator accepts; usable as a kafkawire token provider's
    return value."""
    now = time.time()
    expiry = now + lifetime_s

    def part(obj: Mapping[str, Any]) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    claims: dict[str, Any] = {"sub": subject, "iat": int(now), "exp": int(expiry)}
    if scope:
        claims["scope"] = scope
    return f"{part({'alg': 'none'})}.{part(claims)}.", int(expiry * 1000)


def _java_property(value: str) -> str:
    """``value`` escaped for a Java .properties file read as ISO-8859-1 (\\uXXXX beyond ASCII)."""
    out = []
    for ch in value:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        else:
            for unit in ch.encode("utf-16-be").hex(" ", 2).split():
                out.append(f"\\u{unit}")
    return "".join(out)


def _jaas_string(value: str) -> str:
    if '"' in value or "\\" in value:
        raise ValueError(f"a JAAS option value cannot hold a quote or backslash: {value!r}")
    return f'"{value}"'


def _jaas_name_ok(name: str) -> bool:
    # PLAIN users are JAAS options named user_<name>: the name must be a JAAS token.
    return bool(name) and all(c.isascii() and (c.isalnum() or c in "_-.") for c in name)


def cluster_id() -> str:
    """A fresh KRaft cluster id: 16 random bytes, URL-safe base64 without padding, never
    starting with '-' (the format tool would take ``-t -abc`` for a missing argument)."""
    while True:
        value = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not value.startswith("-"):
            return value


# -- one node --------------------------------------------------------------------------


class KafkaNode(ChildProcess):
    """One combined broker+controller of a :class:`KafkaCluster` (its ports, its log dir)."""

    name = "Apache Kafka"
    error = BrokerStartError
    waits_for = "log 'Kafka Server started'"
    poll_interval = 0.1
    # The ports are the cluster's (the quorum names them): a node cannot choose new ones
    # alone, so a taken one fails start() (restart()); KafkaCluster.start chooses them all
    # again (start_on_chosen_ports).
    start_attempts = 1

    def __init__(self, cluster: KafkaCluster, node_id: int, ports: dict[str, int], directory: str):
        super().__init__(start_timeout=cluster.start_timeout, stop_timeout=cluster.stop_timeout)
        self.cluster = cluster
        self.node_id = node_id
        #: The port of each listener (PLAINTEXT, CONTROLLER, and the cluster's others).
        self.ports = ports
        self.directory = directory
        self._scanned = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.ports['PLAINTEXT']}"

    @property
    def properties_file(self) -> str:
        return os.path.join(self.directory, "server.properties")

    def _address(self) -> str:
        return f"{self.host}:{self.ports.get('PLAINTEXT', '?')} (node {self.node_id})"

    def _choose_ports(self) -> bool:
        return True

    def command(self) -> list[str]:
        c = self.cluster
        # java.io.tmpdir inside the node's directory: lz4-java unpacks its native library
        # there and deletes it only at a clean JVM exit, so a killed node would leave one
        # in /tmp each time; close() deletes this directory.  jvm_options can override it.
        return [java_binary(), f"-Djava.io.tmpdir={os.path.join(self.directory, 'tmp')}", *c.jvm_options,
                f"-Dlog4j2.configurationFile={c.log4j_file}",
                f"-Dkafka.logs.dir={os.path.join(self.directory, 'logs')}",
                "-cp", os.path.join(c.libs, "*"), "kafka.Kafka", self.properties_file]

    def environment(self) -> dict[str, str]:
        # KAFKA_OPTS, KAFKA_HEAP_OPTS and friends are read by Kafka's shell scripts only, but
        # a JAVA_TOOL_OPTIONS from the caller would reach this JVM: leave it out.
        env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
        env["LC_ALL"] = "C.UTF-8"
        return env

    def _start_once(self) -> None:
        self._scanned = 0
        super()._start_once()

    def _ready(self) -> bool:
        assert self._log is not None
        # Read what the node wrote since the last look (the log only grows while it runs).
        size = os.fstat(self._log.fileno()).st_size
        start = max(0, self._scanned - len(_READY_MARK))
        chunk = os.pread(self._log.fileno(), size - start, start)
        self._scanned = size
        return _READY_MARK in chunk and port_accepts(self.host, self.ports["PLAINTEXT"], timeout=0.5)

    def _hint(self, output: str) -> str:
        if "UnsupportedClassVersionError" in output:
            return " (this Kafka needs a newer Java: set JAVA_HOME to Java 17 or newer)"
        return ""

    def kill(self, sig: int = signal.SIGKILL) -> int | None:
        """Send ``sig`` (SIGKILL: a crash) by pid and wait for the exit; ports and data kept."""
        return self._end(sig)

    def start_on_chosen_ports(self) -> None:
        """The first start: :class:`PortTaken` if a port of the cluster's choice was taken
        meanwhile (the cluster then chooses all of them again), other failures as start()."""
        if self.running:
            raise self.error(f"{self!r} is already running")
        self._start_once()


# -- the cluster -----------------------------------------------------------------------

_PORT_ATTEMPTS = 3  # cluster starts on new ports when one was taken before its node bound it


class KafkaCluster(Lifecycle):
    """Apache Kafka ``version`` in KRaft mode: ``size`` combined broker+controller nodes.

    ``replication_factor`` (default ``min(size, 3)``) is the default for new topics and the
    internal ones; ``min_insync_replicas`` (default 1) the broker-wide minimum.
    ``listeners`` adds SSL/SASL listeners beside PLAINTEXT; ``users`` (name: password) are
    the SASL users (PLAIN only for names that are JAAS tokens: ASCII letters, digits and
    ``_-.``; SCRAM for all), ``ssl_client_auth`` is the SSL listener's ``ssl.client.auth``.
    ``transaction_version`` / ``group_version`` set those KRaft features at format time
    (``transaction_version=0`` formats Kafka 4 without KIP-890).  ``broker_config`` adds or
    overrides server.properties entries on every node, ``node_config`` ({node id: {key:
    value}}) on one node (``broker.rack``, say).  ``plaintext_port`` fixes node 1's
    PLAINTEXT port (default: a free one, as for every other port).

    ``super_users`` (SASL user names) turns on Kafka's ACL authorizer (StandardAuthorizer):
    those users may do anything, and so may PLAINTEXT clients (the nodes talk to each other
    and to the controller over PLAINTEXT as User:ANONYMOUS, which must stay a super user);
    every other SASL user has no ACL, so each of its calls is refused with an
    authorization error (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED, ...).
    """

    def __init__(
        self,
        size: int = 1,
        *,
        version: str = KAFKA_VERSION,
        listeners: Iterable[str] = ("PLAINTEXT",),
        replication_factor: int | None = None,
        min_insync_replicas: int = 1,
        users: Mapping[str, str] | None = None,
        ssl_client_auth: str = "none",
        certificates: Any = None,
        transaction_version: int | None = None,
        group_version: int | None = None,
        broker_config: Mapping[str, Any] | None = None,
        node_config: Mapping[int, Mapping[str, Any]] | None = None,
        plaintext_port: int | None = None,
        super_users: Iterable[str] | None = None,
        jvm_options: Iterable[str] = _DEFAULT_JVM_OPTIONS,
        start_timeout: float = 120.0,
        stop_timeout: float = 20.0,
    ):
        if size < 1:
            raise ValueError(f"a KafkaCluster needs at least one node, not {size}")
        wanted = list(dict.fromkeys(["PLAINTEXT", *[str(x).upper() for x in listeners]]))
        unknown = [x for x in wanted if x not in LISTENERS]
        if unknown:
            raise ValueError(f"unknown listener(s) {unknown}; choose from {list(LISTENERS)}")
        if ssl_client_auth not in ("none", "requested", "required"):
            raise ValueError(f"ssl_client_auth must be none, requested or required, not {ssl_client_auth!r}")
        self.size = size
        self.version = version
        self.listeners = wanted
        self.replication_factor = replication_factor or min(size, 3)
        self.min_insync_replicas = min_insync_replicas
        self.users = dict(users if users is not None else {"alice": "alice-secret"})
        self._check_users(self.users)
        self.ssl_client_auth = ssl_client_auth
        self.certificates = certificates
        self._own_certificates = False
        self.transaction_version = transaction_version
        self.group_version = group_version
        self.broker_config = dict(broker_config or {})
        self.node_config = {int(k): dict(v) for k, v in (node_config or {}).items()}
        self.plaintext_port = plaintext_port
        self.super_users = None if super_users is None else list(super_users)
        self.jvm_options = list(jvm_options)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.cluster_id = cluster_id()
        self.nodes: list[KafkaNode] = []
        self.directory: str | None = None
        self.libs = ""
        self.log4j_file = ""

    # -- addresses and client options --------------------------------------------------

    def _require_started(self) -> None:
        if not self.nodes:
            raise BrokerStartError("the Kafka cluster has not been started; call start() first")

    @property
    def bootstrap(self) -> str:
        """Every node's PLAINTEXT ``host:port``, comma-separated, node 1 first."""
        return self.bootstrap_for("PLAINTEXT")

    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def port(self) -> int:
        """Node 1's PLAINTEXT port (for code that talks to one broker)."""
        self._require_started()
        return self.nodes[0].ports["PLAINTEXT"]

    def bootstrap_for(self, listener: str) -> str:
        """Every node's ``host:port`` on ``listener`` (SSL, SASL_PLAINTEXT, SASL_SSL)."""
        self._require_started()
        listener = listener.upper()
        if listener not in self.listeners:
            raise BrokerStartError(f"this cluster has no {listener} listener; it has {self.listeners}")
        return ",".join(f"{n.host}:{n.ports[listener]}" for n in self.nodes)

    def client_config(self, listener: str = "PLAINTEXT", *, mechanism: str | None = None,
                      user: str | None = None, password: str | None = None) -> dict[str, Any]:
        """kafkawire options that reach this cluster on ``listener``: bootstrap servers,
        security protocol, the CA (SSL listeners), the client certificate (the SSL listener
        with ``ssl_client_auth``), and the SASL login for ``mechanism`` as ``user`` (the
        first user by default; ``password`` overrides the user's own)."""
        listener = listener.upper()
        config: dict[str, Any] = {"bootstrap_servers": self.bootstrap_for(listener),
                                  "security_protocol": listener}
        if "SSL" in listener:
            config["ssl_cafile"] = self.certificates.cafile
            if listener == "SSL" and self.ssl_client_auth != "none":
                config.update(ssl_certfile=self.certificates.client.certfile,
                              ssl_keyfile=self.certificates.client.keyfile,
                              ssl_password=self.certificates.client_password)
        if listener.startswith("SASL"):
            mechanism = (mechanism or "PLAIN").upper()
            config["sasl_mechanism"] = mechanism
            name = user if user is not None else next(iter(self.users))
            if mechanism == "OAUTHBEARER":
                config["sasl_oauth_token_provider"] = lambda: unsecured_jwt(name)
            else:
                config["sasl_plain_username"] = name
                config["sasl_plain_password"] = password if password is not None else self.users.get(name, "")
        return config

    def __getitem__(self, index: int) -> KafkaNode:
        return self.nodes[index]

    def node(self, node_id: int) -> KafkaNode:
        """The node whose ``node.id`` is ``node_id`` (1-based, as Metadata names them)."""
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id}; the nodes are {[n.node_id for n in self.nodes]}")

    def __repr__(self) -> str:
        return f"<KafkaCluster {self.version} {self.nodes!r}>"

    # -- configuration -----------------------------------------------------------------

    def _server_properties(self, node: KafkaNode) -> dict[str, str]:
        voters = ",".join(f"{n.node_id}@{LOOPBACK}:{n.ports['CONTROLLER']}" for n in self.nodes)
        names = [*self.listeners, "CONTROLLER"]
        internal_rf = str(self.replication_factor)
        internal_isr = str(min(self.replication_factor, max(self.min_insync_replicas, 1)))
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": ",".join(f"{x}://{LOOPBACK}:{node.ports[x]}" for x in names),
            "advertised.listeners": ",".join(f"{x}://{LOOPBACK}:{node.ports[x]}" for x in self.listeners),
            "listener.security.protocol.map": ",".join(
                f"{x}:{'PLAINTEXT' if x == 'CONTROLLER' else x}" for x in names),
            "log.dirs": os.path.join(node.directory, "data"),
            "num.partitions": "1",
            "default.replication.factor": str(self.replication_factor),
            "min.insync.replicas": str(self.min_insync_replicas),
            "offsets.topic.replication.factor": internal_rf,
            "transaction.state.log.replication.factor": internal_rf,
            "transaction.state.log.min.isr": internal_isr,
            "share.coordinator.state.topic.replication.factor": internal_rf,
            "share.coordinator.state.topic.min.isr": internal_isr,
            # Fewer internal partitions than production's 50: created in a fraction of the time.
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.num.partitions": "4",
            # A test's first group should not wait 3 s for more members, and a test may use
            # session timeouts below production's 6 s minimum to see a lost member quickly.
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "500",
            "auto.create.topics.enable": "true",
            # Keep every record: tests stamp records with fixed dates beyond the default
            # 7 days, which the first retention check (30 s after start) would delete.
            "log.retention.ms": "-1",
        }
        if any(x.startswith("SASL") for x in self.listeners):
            props["sasl.enabled.mechanisms"] = ",".join(SASL_MECHANISMS)
            plain_users = " ".join(f"user_{u}={_jaas_string(p)}" for u, p in self.users.items()
                                   if _jaas_name_ok(u))
            for listener in self.listeners:
                if not listener.startswith("SASL"):
                    continue
                prefix = f"listener.name.{listener.lower()}"
                props[f"{prefix}.plain.sasl.jaas.config"] = (
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};")
                for scram in ("scram-sha-256", "scram-sha-512"):
                    props[f"{prefix}.{scram}.sasl.jaas.config"] = (
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;")
                props[f"{prefix}.oauthbearer.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                    'unsecuredLoginStringClaim_sub="kafkawire-broker";')
        if any("SSL" in x for x in self.listeners):
            assert self.directory is not None
            props.update({
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": os.path.join(self.directory, "server-keystore.pem"),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": self.certificates.cafile,
            })
            if "SSL" in self.listeners:
                props["listener.name.ssl.ssl.client.auth"] = self.ssl_client_auth
        if self.super_users is not None:
            props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            props["super.users"] = ";".join(f"User:{u}" for u in ["ANONYMOUS", *self.super_users])
        props.update({k: str(v).lower() if isinstance(v, bool) else str(v)
                      for k, v in {**self.broker_config, **self.node_config.get(node.node_id, {})}.items()})
        return props

    def _write_node(self, node: KafkaNode) -> None:
        for sub in ("logs", "tmp"):
            os.makedirs(os.path.join(node.directory, sub), exist_ok=True)
        with open(node.properties_file, "w", encoding="ascii") as f:
            for key, value in self._server_properties(node).items():
                f.write(f"{key}={_java_property(value)}\n")

    def _format_args(self) -> list[str]:
        args: list[str] = []
        if self.transaction_version is not None:
            args += ["--feature", f"transaction.version={self.transaction_version}"]
        if self.group_version is not None:
            args += ["--feature", f"group.version={self.group_version}"]
        if any(x.startswith("SASL") for x in self.listeners):
            for name, password in self.users.items():
                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                    # Quoted, so that '=' may appear in either.
                    args += ["--add-scram",
                             f'{mechanism}=[name={_jaas_string(name)},password={_jaas_string(password)}]']
        return args

    @staticmethod
    def _check_users(users: Mapping[str, str]) -> None:
        for name, password in users.items():
            # The format tool splits --add-scram on ',' even inside quotes, and Kafka's SCRAM
            # server matches the client-first message's saslname against ASCII only.
            bad = [what for what, text in (("name", name), ("password", password))
                   if "," in text or '"' in text or "\\" in text]
            if bad or not name.isascii():
                raise ValueError(
                    f"SASL user {name!r}: Kafka's format tool cannot create a SCRAM user whose "
                    f"name or password holds ',', '\"' or '\\', and Kafka's SCRAM login accepts "
                    f"ASCII names only; create such a user after start() with an admin client "
                    f"(AlterUserScramCredentials)"
                )

    def _format(self, node: KafkaNode) -> None:
        args = [java_binary(), f"-Dlog4j2.configurationFile={self.log4j_file}",
                "-cp", os.path.join(self.libs, "*"), "kafka.tools.StorageTool", "format",
                "-t", self.cluster_id, "-c", node.properties_file, *self._format_args()]
        try:
            result = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                    timeout=self.start_timeout, env=node.environment())
        except subprocess.TimeoutExpired:
            raise BrokerStartError(f"formatting Kafka node {node.node_id} took over {self.start_timeout}s") from None
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()[-3000:]
            raise BrokerStartError(
                f"kafka.tools.StorageTool format failed for node {node.node_id} "
                f"(exit {result.returncode}):\n{output}"
            )

    # -- lifecycle ---------------------------------------------------------------------

    def _started(self) -> bool:
        return bool(self.nodes)

    def start(self) -> KafkaCluster:
        if self.nodes:
            raise BrokerStartError(f"{self!r} is already started")
        try:
            self.libs = kafka_jars(self.version)
            self.directory = tempfile.mkdtemp(prefix="kafkawire-kafka-")
            self.log4j_file = os.path.join(self.directory, "log4j2.properties")
            with open(self.log4j_file, "w") as f:
                f.write(_LOG4J2)
            if any("SSL" in x for x in self.listeners):
                self._prepare_tls()
            attempt = 1
            while not self._start_nodes(os.path.join(self.directory, f"try-{attempt}") if attempt > 1
                                        else self.directory):
                # A port was taken between free_ports() and a node's bind (another process
                # bound it, or a client's connection got it as its own): all afresh.
                if self.plaintext_port or attempt >= _PORT_ATTEMPTS:
                    raise BrokerStartError(
                        f"{self!r}: a port the cluster chose was taken before its node bound it, "
                        f"{attempt} time(s)" + (f" (plaintext_port={self.plaintext_port} is fixed)"
                                                if self.plaintext_port else ""))
                attempt += 1
        except BaseException:
            self.close()
            raise
        return self

    def _start_nodes(self, base: str) -> bool:
        """Make, format and start the nodes on newly chosen ports, under ``base``; False
        (every node stopped and forgotten) when one found its port taken."""
        names = [*self.listeners, "CONTROLLER"]
        chosen = iter(free_ports(len(names) * self.size))
        for i in range(self.size):
            ports = {x: next(chosen) for x in names}
            if i == 0 and self.plaintext_port:
                ports["PLAINTEXT"] = self.plaintext_port
            self.nodes.append(KafkaNode(self, i + 1, ports, os.path.join(base, f"node-{i + 1}")))
        for node in self.nodes:
            self._write_node(node)
        # Each node waits for a quorum of the others before it serves: format and start
        # them side by side.
        self._each(self._format, self.nodes)
        with concurrent.futures.ThreadPoolExecutor(self.size) as pool:
            futures = [pool.submit(n.start_on_chosen_ports) for n in self.nodes]
        if any(isinstance(f.exception(), PortTaken) for f in futures):
            nodes, self.nodes = self.nodes, []
            for node in nodes:  # SIGKILL: a node left without its quorum would not stop soon
                node.kill()
                node.close()
            return False
        for f in futures:
            f.result()
        return True

    @staticmethod
    def _each(action: Any, nodes: list[KafkaNode]) -> None:
        with concurrent.futures.ThreadPoolExecutor(max(1, len(nodes))) as pool:
            for future in [pool.submit(action, n) for n in nodes]:
                future.result()

    def _prepare_tls(self) -> None:
        assert self.directory is not None
        if self.certificates is None:
            from kafkawire.testing.tls import TestCertificates

            self.certificates = TestCertificates(os.path.join(self.directory, "certs"))
            self._own_certificates = True
        server = self.certificates.server
        # Kafka's PEM keystore: the private key (PKCS#8) and the certificate in one file.
        with open(os.path.join(self.directory, "server-keystore.pem"), "w") as out:
            for path in (server.keyfile, server.certfile):
                with open(path) as f:
                    out.write(f.read())

    def kill(self, index: int, sig: int = signal.SIGKILL) -> int | None:
        """SIGKILL (or ``sig``) node ``index`` (0-based) by its pid; ports and data kept."""
        return self.nodes[index].kill(sig)

    def restart(self, index: int, sig: int = signal.SIGKILL) -> KafkaNode:
        """Kill node ``index`` if it runs and start it again on its ports with its data;
        returns once it serves (with a quorum of the others up)."""
        node = self.nodes[index]
        node.kill(sig)
        return node.start()

    def stop_node(self, index: int) -> int | None:
        """Stop node ``index`` cleanly (SIGTERM: it hands its leaderships over first)."""
        return self.nodes[index].stop()

    def running(self) -> list[int]:
        """Indexes of the nodes that run."""
        return [i for i, n in enumerate(self.nodes) if n.running]

    def stop(self) -> None:
        """Stop every node by its pid (data kept until :meth:`close`)."""
        for node in reversed(self.nodes):
            node.stop()

    def close(self) -> None:
        """Stop every node and delete the cluster's directory; idempotent."""
        nodes, self.nodes = self.nodes, []
        # SIGKILL: the data is deleted next, and a clean shutdown of the last node of a
        # quorum waits for the others until its timeout.
        for node in nodes:
            node.kill()
        for node in nodes:
            node.close()
        if self._own_certificates and self.certificates is not None:
            self.certificates = None
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
