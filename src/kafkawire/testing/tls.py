"""A real TLS endpoint in front of a test broker: throwaway certificates and stunnel.

Neither test broker terminates TLS, so :class:`TLSTansuBroker` puts Debian's ``stunnel4``
(a real TLS server) on a free loopback port in front of a :class:`TansuBroker` that
*advertises the stunnel port*: the metadata then points clients back at TLS, and every
connection of a client goes through it.

* :class:`TestCertificates`: a throwaway CA (``cryptography``) and certificates signed
  by it in a directory: a server certificate for ``127.0.0.1``/``localhost``, the same
  for a wrong host name, an expired one, a client certificate for mutual TLS (its key
  encrypted with :attr:`TestCertificates.client_password`), and a second, unrelated CA.
* :class:`Stunnel`: one stunnel process serving any number of TLS ports (one
  :class:`TLSService` each), started as a child and stopped by its own pid.
* :class:`TLSTansuBroker`: a Tansu broker behind stunnel; besides the advertised, verified
  port it can serve extra ports with the wrong-host and expired certificates, all
  forwarding to the same broker.
* pytest fixtures: ``tls_certificates`` and ``tls_broker`` (session), and
  ``tls_broker_factory`` (per test).  Use them with ``from kafkawire.testing.tls import
  tls_broker, tls_certificates`` in a test module, or ``-p kafkawire.testing.tls``.

A missing stunnel is an error that says how to install it, never a skip.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Callable, Iterator

from kafkawire.testing._process import LOOPBACK, ChildProcess, Lifecycle, free_port, port_accepts
from kafkawire.testing.brokers import BrokerStartError, TansuBroker

__all__ = [
    "CertFiles",
    "Stunnel",
    "StunnelError",
    "TLSService",
    "TLSTansuBroker",
    "TestCertificates",
    "stunnel_binary",
    "tls_broker",
    "tls_broker_factory",
    "tls_certificates",
]

#: Set this to a ``stunnel`` executable to use it instead of the one on PATH.
STUNNEL_ENV = "KAFKAWIRE_STUNNEL"


class StunnelError(BrokerStartError):
    """stunnel is missing, or did not start."""


def stunnel_binary() -> str:
    """Path of the stunnel executable: ``$KAFKAWIRE_STUNNEL``, else ``stunnel4`` or
    ``stunnel`` on PATH (or in /usr/bin, /usr/sbin)."""
    override = os.environ.get(STUNNEL_ENV)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise StunnelError(f"${STUNNEL_ENV}={override!r} is not an executable file")
        return override
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/usr/sbin", "/usr/local/bin"])
    for name in ("stunnel4", "stunnel"):
        found = shutil.which(name, path=search)
        if found:
            return found
    if shutil.which("apt-get"):
        how = ("install it with `make stunnel` (as root it runs: apt-get update && "
               "apt-get install -y stunnel4)")
    else:
        how = ("apt-get is not available on this machine: install stunnel 5 with the system's "
               f"package manager, or set ${STUNNEL_ENV} to a stunnel executable")
    raise StunnelError(
        "stunnel is not installed: kafkawire's TLS tests put Debian's stunnel4 (a real TLS "
        f"server) in front of a Tansu broker; {how}"
    )


# -- certificates ---------------------------------------------------------------------


@dataclass(frozen=True)
class CertFiles:
    """A certificate and its private key, as PEM files."""

    certfile: str
    keyfile: str


class TestCertificates:
    """Throwaway certificates for TLS tests, written as PEM files into ``directory``.

    ``cafile``: the CA that signed ``server``, ``wrong_host``, ``expired`` and ``client``.
    ``other_cafile``: an unrelated CA that signed nothing here (a client trusting only it
    must refuse every server certificate).
    ``server``: valid for DNS ``localhost`` and IP ``127.0.0.1`` (and ``::1``).
    ``wrong_host``: valid, signed by the CA, but only for ``broker.invalid``.
    ``expired``: for ``127.0.0.1``/``localhost``, expired a day ago.
    ``client``: a client certificate (extended key usage clientAuth) whose key file is
    encrypted with ``client_password``.
    """

    __test__ = False  # not a pytest test class, despite its name

    client_password = "kafkawire-test"

    def __init__(self, directory: str | None = None):
        # Imported here: cryptography is a test dependency, not one of kafkawire's.
        import importlib.util

        if importlib.util.find_spec("cryptography") is None:  # pragma: no cover
            raise BrokerStartError(
                "TestCertificates needs the cryptography package: pip install 'kafkawire[test]'"
            )
        self._own_dir = directory is None
        self.directory = directory or tempfile.mkdtemp(prefix="kafkawire-tls-")
        os.makedirs(self.directory, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        ca_key, ca_cert = self._make_ca("kafkawire test CA", now)
        other_key, other_cert = self._make_ca("kafkawire unrelated test CA", now)
        self.cafile = self._write_cert("ca.pem", ca_cert)
        self.other_cafile = self._write_cert("other-ca.pem", other_cert)
        loopback = (["localhost"], ["127.0.0.1", "::1"])
        day = datetime.timedelta(days=1)
        self.server = self._issue("server", ca_key, ca_cert, "localhost", *loopback,
                                  now - day, now + 30 * day, client=False)
        self.wrong_host = self._issue("wrong-host", ca_key, ca_cert, "broker.invalid",
                                      ["broker.invalid"], [], now - day, now + 30 * day, client=False)
        self.expired = self._issue("expired", ca_key, ca_cert, "localhost", *loopback,
                                   now - 30 * day, now - day, client=False)
        self.client = self._issue("client", ca_key, ca_cert, "kafkawire test client", [], [],
                                  now - day, now + 30 * day, client=True,
                                  password=self.client_password)

    # The private key type: P-256 makes keys in microseconds, where RSA takes tens of ms.
    @staticmethod
    def _new_key():  # type: ignore[no-untyped-def]
        from cryptography.hazmat.primitives.asymmetric import ec

        return ec.generate_private_key(ec.SECP256R1())

    def _make_ca(self, name: str, now: datetime.datetime):  # type: ignore[no-untyped-def]
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.x509.oid import NameOID

        key = self._new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return key, cert

    def _issue(self, stem: str, ca_key, ca_cert, common_name: str,  # type: ignore[no-untyped-def]
               dns_names: list[str], ips: list[str], not_before: datetime.datetime,
               not_after: datetime.datetime, *, client: bool, password: str | None = None) -> CertFiles:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = self._new_key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
                critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
        )
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return CertFiles(self._write_cert(f"{stem}.pem", cert), self._write_key(f"{stem}.key", key, password))

    def _write_cert(self, name: str, cert) -> str:  # type: ignore[no-untyped-def]
        from cryptography.hazmat.primitives import serialization

        path = os.path.join(self.directory, name)
        with open(path, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        return path

    def _write_key(self, name: str, key, password: str | None) -> str:  # type: ignore[no-untyped-def]
        from cryptography.hazmat.primitives import serialization

        path = os.path.join(self.directory, name)
        encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path

    def cleanup(self) -> None:
        """Delete the directory (when this object made it)."""
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)


# -- stunnel ---------------------------------------------------------------------------


@dataclass
class TLSService:
    """One TLS port of a :class:`Stunnel`: TLS on ``127.0.0.1:port`` (0: a free port,
    filled in by start), forwarded in plaintext to ``target``.  With ``client_cafile``
    the port demands a client certificate signed by that CA (mutual TLS)."""

    name: str
    target: tuple[str, int]
    cert: CertFiles
    port: int = 0
    client_cafile: str | None = None


class Stunnel(ChildProcess):
    """One stunnel process serving ``services`` on loopback, run as a child process.

    :meth:`start` returns once every port accepts connections; :meth:`stop` ends the
    process by its own pid.  stunnel's log goes to a temporary file (:meth:`output`)."""

    name = "stunnel"
    error = StunnelError

    def __init__(self, services: list[TLSService], *, start_timeout: float = 10.0,
                 stop_timeout: float = 5.0, binary: str | None = None):
        names = [s.name for s in services]
        if not services or len(set(names)) != len(names):
            raise ValueError(f"Stunnel needs services with distinct names, got {names}")
        super().__init__(start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.services = services
        self._binary = binary
        self._fixed = {s.name for s in services if s.port}
        self._dir: str | None = None

    def port(self, name: str) -> int:
        for s in self.services:
            if s.name == name:
                return s.port
        raise KeyError(f"no stunnel service {name!r}; there are {[s.name for s in self.services]}")

    def _address(self) -> str:
        return f"{self.host} " + ", ".join(f"{s.name}={s.port or '?'}" for s in self.services)

    def config_text(self) -> str:
        lines = [
            "foreground = yes",
            "pid =",  # no pid file: the child's pid is known to its parent
            "syslog = no",
            "debug = notice",
        ]
        for s in self.services:
            lines += [
                "",
                f"[{s.name}]",
                f"accept = {self.host}:{s.port}",
                f"connect = {s.target[0]}:{s.target[1]}",
                f"cert = {s.cert.certfile}",
                f"key = {s.cert.keyfile}",
            ]
            if s.client_cafile:
                lines += [f"CAfile = {s.client_cafile}", "verifyChain = yes", "requireCert = yes"]
        return "\n".join(lines) + "\n"

    def _choose_ports(self) -> bool:
        for s in self.services:
            if s.name not in self._fixed:
                s.port = free_port(self.host)
        return bool(self._fixed)

    def command(self) -> list[str]:
        # Written afresh for each start: the ports may have changed.
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="kafkawire-stunnel-")
        conf = os.path.join(self._dir, "stunnel.conf")
        with open(conf, "w") as f:
            f.write(self.config_text())
        return [self._binary or stunnel_binary(), conf]

    def _ready(self) -> bool:
        # "Configuration successful" is printed once every accept socket is bound.
        return "configuration successful" in self.output(1 << 16).lower() and all(
            port_accepts(self.host, s.port, timeout=0.2) for s in self.services)

    def _cleanup(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


# -- a Tansu broker reachable only through TLS ----------------------------------------------


class _AdvertisingTansu(TansuBroker):
    """A Tansu broker that listens on its own port but advertises another (stunnel's)."""

    def __init__(self, advertised_port: int, **options: object):
        super().__init__(**options)  # type: ignore[arg-type]
        self.advertised_port = advertised_port

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--advertised-listener-url") + 1] = f"tcp://{self.host}:{self.advertised_port}"
        return cmd


class TLSTansuBroker(Lifecycle):
    """A Tansu broker behind stunnel: every client connection goes through TLS.

    ``bootstrap`` is the TLS port, which the broker advertises (its certificate is
    ``certs.server``, valid for 127.0.0.1 and localhost).  With ``require_client_cert``
    that port demands a client certificate signed by ``certs.cafile`` (mutual TLS).
    ``variants`` adds TLS ports with other server certificates in front of the same
    broker: any of ``"wrong_host"`` and ``"expired"`` (see :meth:`bootstrap_for`); they
    are for handshakes that must fail, or for a client that turned a check off.
    ``plaintext_bootstrap`` is the broker's own plaintext port (a TLS client there meets
    a plaintext broker).

    ::

        certs = TestCertificates()
        with TLSTansuBroker(certs) as broker:
            Producer(bootstrap_servers=broker.bootstrap, security_protocol="SSL",
                     ssl_cafile=certs.cafile)
    """

    def __init__(self, certs: TestCertificates, *, require_client_cert: bool = False,
                 variants: tuple[str, ...] = (), **tansu_options: object):
        unknown = set(variants) - {"wrong_host", "expired"}
        if unknown:
            raise ValueError(f"unknown TLS variants {sorted(unknown)}; there are wrong_host, expired")
        self.certs = certs
        self.require_client_cert = require_client_cert
        self.variants = tuple(variants)
        self._tansu_options = tansu_options
        self.tansu: TansuBroker | None = None
        self.stunnel: Stunnel | None = None

    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def port(self) -> int:
        if self.stunnel is None:
            raise BrokerStartError("the TLS broker has not been started; call start() first")
        return self.stunnel.port("kafka")

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"`` of the advertised TLS port."""
        return f"{self.host}:{self.port}"

    def bootstrap_for(self, variant: str) -> str:
        """``"127.0.0.1:PORT"`` of the TLS port that presents the ``variant`` certificate."""
        if self.stunnel is None:
            raise BrokerStartError("the TLS broker has not been started; call start() first")
        return f"{self.host}:{self.stunnel.port(variant)}"

    @property
    def plaintext_bootstrap(self) -> str:
        """The broker's own plaintext port (it advertises the TLS one)."""
        if self.tansu is None:
            raise BrokerStartError("the TLS broker has not been started; call start() first")
        return self.tansu.bootstrap

    @property
    def pids(self) -> dict[str, int | None]:
        return {"tansu": self.tansu.pid if self.tansu else None,
                "stunnel": self.stunnel.pid if self.stunnel else None}

    @property
    def running(self) -> bool:
        """Both stunnel and the broker run."""
        return bool(self.stunnel and self.stunnel.running and self.tansu and self.tansu.running)

    def __repr__(self) -> str:
        return f"<TLSTansuBroker tansu={self.tansu!r} stunnel={self.stunnel!r}>"

    def start(self) -> TLSTansuBroker:
        # The broker must advertise stunnel's port, so that port is chosen first; if
        # someone takes it before stunnel binds it, both start again on new ports.
        last: Exception | None = None
        for _attempt in range(3):
            tls_port = free_port(LOOPBACK)
            self.tansu = _AdvertisingTansu(tls_port, **self._tansu_options).start()
            target = (self.tansu.host, self.tansu.port)
            services = [TLSService("kafka", target, self.certs.server, port=tls_port,
                                   client_cafile=self.certs.cafile if self.require_client_cert else None)]
            services += [TLSService(v, target, getattr(self.certs, v)) for v in self.variants]
            self.stunnel = Stunnel(services)
            try:
                self.stunnel.start()
                return self
            except StunnelError as exc:
                last = exc
                self.stop()
                if "could not bind" not in str(exc):
                    raise
        raise StunnelError(f"could not start stunnel in front of tansu: {last}")

    def stop(self) -> None:
        """Stop stunnel, then the broker, each by its own pid; idempotent."""
        stunnel, self.stunnel = self.stunnel, None
        tansu, self.tansu = self.tansu, None
        if stunnel is not None:
            stunnel.close()
        if tansu is not None:
            tansu.close()

    close = stop

    def _started(self) -> bool:
        return self.stunnel is not None


# -- pytest fixtures -------------------------------------------------------------------

# pytest is needed only for the fixtures: the classes above work without it.
try:
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def tls_certificates() -> Iterator[TestCertificates]:
        """Throwaway CA and certificates (see :class:`TestCertificates`), for the session."""
        certs = TestCertificates()
        yield certs
        certs.cleanup()

    @pytest.fixture(scope="session")
    def tls_broker(tls_certificates: TestCertificates) -> Iterator[TLSTansuBroker]:
        """A Tansu broker reachable through TLS only (stunnel in front, advertising it), with
        the ``wrong_host`` and ``expired`` variant ports; shared by the session."""
        with TLSTansuBroker(tls_certificates, variants=("wrong_host", "expired")) as broker:
            yield broker

    @pytest.fixture
    def tls_broker_factory(tls_certificates: TestCertificates) -> Iterator[Callable[..., TLSTansuBroker]]:
        """``factory(**TLSTansuBroker options)`` starts a fresh TLS broker for this test
        (``require_client_cert=True`` for mutual TLS); stopped when the test ends."""
        started: list[TLSTansuBroker] = []

        def factory(**options: object) -> TLSTansuBroker:
            broker = TLSTansuBroker(tls_certificates, **options)  # type: ignore[arg-type]
            started.append(broker)
            return broker.start()

        yield factory
        for broker in reversed(started):
            broker.stop()
