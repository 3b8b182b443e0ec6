"""SASL and TLS against Apache Kafka itself (kafkawire.testing.KafkaCluster), in both shells.

Two single-node clusters, each shared by the module:

* ``kafka``: PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners, every SASL mechanism
  enabled; logins (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with Kafka's unsecured JWS
  validator) of the sync Producer/Consumer/Admin and the asyncio AsyncProducer/AsyncConsumer,
  SCRAM users created over the wire (KIP-554), refusals, TLS and its failures;
* ``strict_kafka``, for the broker settings the first must not have: its SSL listener
  demands a client certificate (``ssl.client.auth=required``), SASL sessions last 2 s
  (``connections.max.reauth.ms``, KIP-368), and its SASL_PLAINTEXT listener enables
  SCRAM-SHA-512 and OAUTHBEARER only.

Where Kafka differs from the other test brokers (tests/integration/test_sasl_brokers.py,
test_tls.py): it stores SASL users, so logins succeed; a refused SCRAM login is a
SaslAuthenticate error (SASL_AUTHENTICATION_FAILED) with Kafka's generic text, never an RFC
5802 ``e=`` server-error as Tansu sends; SaslHandshake's refusal lists the mechanisms the
listener enables (Tansu echoes the one asked for); a TLS client on a plaintext port is
dropped at once (Tansu waits for the announced request and the handshake times out); a
client without a certificate on the mutual-TLS listener gets a bad_certificate alert right
after the handshake (stunnel: certificate_required, or a bare reset).  Kafka also ends an
OAUTHBEARER session with its token even without ``connections.max.reauth.ms``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from first_calls import first_call
from settle import eventually
from shells import SHELLS, shell  # noqa: F401 - the fixture

from kafkawire import errors
from kafkawire.aio.conn import AsyncBrokerConnection
from kafkawire.client.admin import (
    Admin,
    AdminError,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafkawire.client.config import Config
from kafkawire.client.conn import BrokerConnection
from kafkawire.errors import BrokerTLSError, NoBrokersAvailableError
from kafkawire.protocol.sasl import (
    OAuthBearerServerError,
    SaslAuthenticationError,
    SaslMechanism,
    SaslUnsupportedMechanismError,
)
from kafkawire.testing.kafka import SASL_MECHANISMS, KafkaCluster, unsecured_jwt

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

USER, PASSWORD = "alice", "alice-secret"
# Created over the wire (Kafka's format tool splits --add-scram on ','): '=' and ',' are
# escaped in SCRAM's saslname, and the password travels only as its salted form.
SPECIAL_USER, SPECIAL_PASSWORD = "o=ne,two", "pä=ss,wörd€"
# Kafka refuses a re-login that starts within 1 s of the previous one (KIP-368's minimum
# interval), and clients re-login at 85-95% of the session: 2 s leaves room for both.
REAUTH_MS = 2000
SHELL_NAMES = sorted(SHELLS)
RECORDS = [(f"k{i}".encode(), f"value-{i}".encode() * (i % 3 + 1)) for i in range(20)]


@pytest.fixture(scope="module")
def kafka():
    with KafkaCluster(1, listeners=["SSL", "SASL_PLAINTEXT", "SASL_SSL"], users={USER: PASSWORD}) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def strict_kafka():
    with KafkaCluster(1, listeners=["SSL", "SASL_PLAINTEXT", "SASL_SSL"], users={USER: PASSWORD},
                      ssl_client_auth="required", broker_config={
                          "connections.max.reauth.ms": REAUTH_MS,
                          "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
                      }) as cluster:
        yield cluster


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class _Tokens:
    """An OAUTHBEARER token provider (unsecured JWS for ``subject``) that counts its calls."""

    def __init__(self, subject: str = USER):
        self.subject = subject
        self.calls = 0

    def __call__(self) -> tuple[str, int]:
        self.calls += 1
        return unsecured_jwt(self.subject)


def _conns(client: Any) -> list[Any]:
    """The client's broker connections (the sync producer's sender thread may change the
    dict while it is read: read again)."""
    while True:
        try:
            return list(client.cluster._conns.values())
        except RuntimeError:
            continue


def _roundtrip(shell, config: dict[str, Any], records=RECORDS) -> list[Any]:  # noqa: F811
    """Produce ``records`` to a new topic and read them back; returns the connections used."""
    topic = _topic("security")
    with shell.Producer(linger_ms=1, max_block_ms=20000, **config) as p:
        futures = [p.send(topic, v, key=k, partition=0) for k, v in records]
        p.flush(20)
        assert [f.result(10).offset for f in futures] == list(range(len(records)))
        conns = _conns(p)
    with shell.Consumer(auto_offset_reset="earliest", request_timeout_ms=20000, **config) as c:
        c.assign([(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < len(records) and time.monotonic() < deadline:
            got += c.poll(0.5)
        conns += _conns(c)
    assert [(r.key, r.value) for r in got] == records
    return conns


def _connect(shell_name: str, bootstrap: str, sasl: SaslMechanism | None = None, **options: Any) -> Any:
    """One connection of ``shell_name``, set up as the clients set theirs up (TLS, ApiVersions,
    SASL), then closed; raises what its setup raised."""
    host, port = bootstrap.rsplit(":", 1)
    options.pop("bootstrap_servers", None)
    if sasl is not None:  # a mechanism of the test's own: the config sets up TLS only
        options["security_protocol"] = options.get("security_protocol", "PLAINTEXT").replace("SASL_", "")
    cfg = Config.client(bootstrap_servers=bootstrap, **options)
    common = dict(ssl_context=cfg.ssl_context, sasl=sasl or cfg.sasl)
    if shell_name == "sync":
        conn = BrokerConnection(host, int(port), **common)
        try:
            conn.connect(10.0)
            return conn
        finally:
            conn.close()
            conn.poller.close()

    async def run() -> AsyncBrokerConnection:
        aconn = AsyncBrokerConnection(host, int(port), **common)
        try:
            await aconn.connect(10.0)
            return aconn
        finally:
            await aconn.aclose()

    return asyncio.run(run())


def _refused(shell_name: str, bootstrap: str, error: type[BaseException], sasl: SaslMechanism | None = None,
             **options: Any) -> BaseException:
    start = time.monotonic()
    with pytest.raises(error) as info:
        _connect(shell_name, bootstrap, sasl, **options)
    # Kafka answers at once: nothing waits for the 10 s setup deadline.
    assert time.monotonic() - start < 3.0
    assert f"broker {bootstrap}" in str(info.value), str(info.value)
    return info.value


def _both_refused(bootstrap: str, error: type[BaseException], **options: Any) -> str:
    """Both shells refuse with ``error`` and the very same message; returns it."""
    sync, aio = (str(_refused(name, bootstrap, error, **options)) for name in ("sync", "asyncio"))
    assert sync == aio
    return sync


class _Mechanism(SaslMechanism):
    """A client side that sends ``first`` as its initial response (or offers a mechanism
    named ``name`` that Kafka does not have) and stops at the broker's first answer."""

    def __init__(self, name: str, first: bytes = b""):
        super().__init__()
        self.name = name
        self.first = first

    def fresh(self) -> _Mechanism:
        return _Mechanism(self.name, self.first)

    def initial_response(self) -> bytes:
        self._start()
        return self.first

    def respond(self, challenge: bytes) -> bytes | None:
        raise AssertionError(f"the broker answered the first message: {bytes(challenge)!r}")


# -- logins ------------------------------------------------------------------------------------

LOGINS = [("SSL", None)] + [(listener, mechanism) for listener in ("SASL_PLAINTEXT", "SASL_SSL")
                            for mechanism in SASL_MECHANISMS]


@pytest.mark.parametrize("listener,mechanism", LOGINS, ids=[f"{x}-{m}" if m else x for x, m in LOGINS])
def test_login_then_produce_and_read_back(kafka, shell, listener, mechanism):  # noqa: F811
    config = kafka.client_config(listener, mechanism=mechanism)
    tokens = None
    if mechanism == "OAUTHBEARER":
        config["sasl_oauth_token_provider"] = tokens = _Tokens()
    conns = _roundtrip(shell, config)
    port = int(config["bootstrap_servers"].rsplit(":", 1)[1])
    # Every connection went to this listener (Kafka advertises each listener's own port).
    assert conns and {c.port for c in conns} == {port}
    if mechanism is None:
        assert all(c.sasl_result is None for c in conns)
        return
    assert {c.sasl_result.mechanism for c in conns} == {mechanism}
    lifetimes = {c.sasl_result.session_lifetime_ms for c in conns}
    if tokens is None:
        # No session limit on this cluster (connections.max.reauth.ms unset): 0, no re-login.
        assert lifetimes == {0}
    else:
        # ... but an OAUTHBEARER session ends with its token (KIP-368): here in an hour.
        assert all(3_500_000 < ms <= 3_600_000 for ms in lifetimes), lifetimes
        assert tokens.calls >= len(conns)  # asked at every login


@pytest.mark.parametrize("listener,mechanism", LOGINS[1:], ids=[f"{x}-{m}" for x, m in LOGINS[1:]])
def test_admin_logs_in(kafka, listener, mechanism):
    config = kafka.client_config(listener, mechanism=mechanism)
    topic = _topic("security-admin")
    with Admin(**config) as admin:
        created = admin.create_topics([topic], num_partitions=2)
        assert created[topic].num_partitions == 2
        # (Not describe_topics at once: Kafka answers CreateTopics before its broker's
        # metadata has the topic, and that answer is UNKNOWN_TOPIC_OR_PARTITION.)
        assert list(admin.describe_cluster().brokers) == [1]
        assert [i.mechanism for i in admin.describe_user_scram_credentials([USER])[USER]] == [
            "SCRAM-SHA-256", "SCRAM-SHA-512"]
        conns = _conns(admin)
    assert conns and all(c.sasl_result.mechanism == mechanism for c in conns)


# -- SCRAM users created over the wire (KIP-554) ------------------------------------------------


@pytest.fixture(scope="module")
def special_user(kafka):
    """SPECIAL_USER with both SCRAM credentials, created by kafkawire's admin client logged
    in over SASL_SSL; both in one call, though Kafka refuses a user named twice in one
    AlterUserScramCredentials request (the client sends them one after the other)."""
    with Admin(**kafka.client_config("SASL_SSL", mechanism="SCRAM-SHA-512")) as admin:
        result = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(SPECIAL_USER, "SCRAM-SHA-256", SPECIAL_PASSWORD),
            UserScramCredentialUpsertion(SPECIAL_USER, "SCRAM-SHA-512", SPECIAL_PASSWORD, iterations=8192),
        ])
        assert result == {SPECIAL_USER: None}
        # Kafka answers once its controller has the change; brokers serve it a moment later.
        eventually(lambda: _described(admin, SPECIAL_USER), [
            ScramCredentialInfo("SCRAM-SHA-256", 4096), ScramCredentialInfo("SCRAM-SHA-512", 8192)])
    return SPECIAL_USER, SPECIAL_PASSWORD


def _described(admin: Admin, user: str) -> Any:
    """The user's credentials as described, or the error type while there are none."""
    found = admin.describe_user_scram_credentials([user], raise_on_error=False)[user]
    return type(found) if isinstance(found, BaseException) else found


def test_scram_credentials_described_and_refused_as_kafka_says(kafka, special_user):
    with Admin(**kafka.client_config("PLAINTEXT")) as admin:
        described = admin.describe_user_scram_credentials([SPECIAL_USER, USER])
        assert described == {
            SPECIAL_USER: [ScramCredentialInfo("SCRAM-SHA-256", 4096), ScramCredentialInfo("SCRAM-SHA-512", 8192)],
            USER: [ScramCredentialInfo("SCRAM-SHA-256", 4096), ScramCredentialInfo("SCRAM-SHA-512", 4096)],
        }
        everyone = admin.describe_user_scram_credentials()
        assert everyone[SPECIAL_USER] == described[SPECIAL_USER] and USER in everyone
        nobody = f"nobody-{uuid.uuid4().hex[:6]}"
        missing = admin.describe_user_scram_credentials([nobody], raise_on_error=False)[nobody]
        assert isinstance(missing, errors.ResourceNotFoundError)
        assert "Attempt to describe a user credential that does not exist" in str(missing)
        # Kafka caps the iterations at 16384, and a deletion needs a credential to delete.
        with pytest.raises(AdminError) as info:
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion("too-many", "SCRAM-SHA-256", "x", iterations=16385),
                UserScramCredentialDeletion(nobody, "SCRAM-SHA-512")])
        assert isinstance(info.value.errors["too-many"], errors.UnacceptableCredentialError)
        assert "Too many iterations" in str(info.value.errors["too-many"])
        assert isinstance(info.value.errors[nobody], errors.ResourceNotFoundError)
        # Two alterations of one credential in one call: refused before anything is sent.
        with pytest.raises(ValueError, match="more than one alteration of its SCRAM-SHA-256 credential"):
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(nobody, "SCRAM-SHA-256", "x"),
                UserScramCredentialDeletion(nobody, "SCRAM-SHA-256")])
        # A user created and deleted again.
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(nobody, "SCRAM-SHA-256", "x")])
        eventually(lambda: _described(admin, nobody), [ScramCredentialInfo("SCRAM-SHA-256", 4096)])
        assert admin.alter_user_scram_credentials([UserScramCredentialDeletion(nobody, "SCRAM-SHA-256")]) == {nobody: None}
        eventually(lambda: _described(admin, nobody), errors.ResourceNotFoundError)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_special_user_logs_in(kafka, special_user, shell, mechanism):  # noqa: F811
    user, password = special_user
    config = kafka.client_config("SASL_SSL", mechanism=mechanism, user=user, password=password)
    conns = _roundtrip(shell, config, RECORDS[:5])
    assert {c.sasl_result.mechanism for c in conns} == {mechanism}
    # The same name with the password's non-ASCII characters dropped is refused.
    wrong = kafka.client_config("SASL_SSL", mechanism=mechanism, user=user, password="p=ss,wrd")
    with pytest.raises(SaslAuthenticationError):
        first_call(shell.Producer, max_block_ms=20000, **wrong)


def test_confluent_kafka_logs_in_as_the_user_kafkawire_created(kafka, special_user):
    ck = pytest.importorskip("confluent_kafka")
    user, password = special_user
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        conf = {"bootstrap.servers": kafka.bootstrap_for("SASL_SSL"), "security.protocol": "SASL_SSL",
                "ssl.ca.location": kafka.certificates.cafile, "sasl.mechanisms": mechanism,
                "sasl.username": user, "sasl.password": password, "log_level": 0}
        topic = _topic("security-ck")
        producer = ck.Producer(conf)
        for k, v in RECORDS[:5]:
            producer.produce(topic, v, key=k, partition=0)
        assert producer.flush(20) == 0, f"confluent-kafka could not log in as {user!r} with {mechanism}"
        consumer = ck.Consumer({**conf, "group.id": topic, "enable.auto.commit": False})
        try:
            consumer.assign([ck.TopicPartition(topic, 0, 0)])
            got: list[Any] = []
            deadline = time.monotonic() + 20
            while len(got) < 5 and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and not m.error():
                    got.append((m.key(), m.value()))
        finally:
            consumer.close()
        assert got == RECORDS[:5]


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_kafka_scram_login_takes_ascii_user_names_only(kafka, shell_name):
    """Kafka stores a SCRAM user with a non-ASCII name but never logs it in: its
    client-first message grammar takes ASCII saslnames only."""
    name = "ñoño"
    with Admin(**kafka.client_config("PLAINTEXT")) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(name, "SCRAM-SHA-256", "ñ-secret")])
        # Stored and served (so the refusal below is the login's, not a user not yet known).
        eventually(lambda: _described(admin, name), [ScramCredentialInfo("SCRAM-SHA-256", 4096)])
    bootstrap = kafka.bootstrap_for("SASL_PLAINTEXT")
    refused = _refused(shell_name, bootstrap, SaslAuthenticationError,
                       **kafka.client_config("SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", user=name,
                                             password="ñ-secret"))
    assert "due to invalid credentials with SASL mechanism SCRAM-SHA-256" in str(refused)
    # Why: an authorization id other than the user reaches Kafka's own check (and its own
    # message) once the client-first message parses; a non-ASCII one in the same place does
    # not parse, so the refusal is the generic one.  The saslname pattern is ASCII-only.
    if shell_name == "sync":
        differs = _refused("sync", bootstrap, SaslAuthenticationError, _Mechanism(
            "SCRAM-SHA-256", b"n,a=bob,n=alice,r=nonce"), security_protocol="SASL_PLAINTEXT")
        assert "authorization id that is different from username" in str(differs)
        unparsed = _refused("sync", bootstrap, SaslAuthenticationError, _Mechanism(
            "SCRAM-SHA-256", "n,a=bøb,n=alice,r=nonce".encode()), security_protocol="SASL_PLAINTEXT")
        assert "due to invalid credentials" in str(unparsed)


# -- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_is_refused_at_once(kafka, shell, mechanism):  # noqa: F811
    config = kafka.client_config("SASL_SSL", mechanism=mechanism, password="not-the-password")
    bootstrap = config["bootstrap_servers"]
    start = time.monotonic()
    with pytest.raises(SaslAuthenticationError) as info:
        first_call(shell.Producer, max_block_ms=20000, **config)
    with pytest.raises(SaslAuthenticationError):
        first_call(shell.Consumer, request_timeout_ms=20000, **config)
    assert time.monotonic() - start < 5.0  # not retried until max_block_ms
    # Kafka refuses SCRAM as it refuses PLAIN, in SaslAuthenticate with its own text (no
    # RFC 5802 e= attribute): the same typed error for both.
    exc = info.value
    assert type(exc) is SaslAuthenticationError and exc.code == 58 and not exc.retriable
    assert exc.mechanism == mechanism
    kafka_says = ("Authentication failed: Invalid username or password" if mechanism == "PLAIN" else
                  f"Authentication failed during authentication due to invalid credentials with SASL "
                  f"mechanism {mechanism}")
    assert str(exc) == (f"broker {bootstrap}: {mechanism} authentication failed: {kafka_says} "
                        f"(SASL_AUTHENTICATION_FAILED, 58); check sasl_plain_username and sasl_plain_password")


def test_expired_oauthbearer_token_is_refused_with_kafkas_status(kafka, shell):  # noqa: F811
    config = kafka.client_config("SASL_PLAINTEXT", mechanism="OAUTHBEARER")
    config["sasl_oauth_token_provider"] = lambda: unsecured_jwt(USER, lifetime_s=-60)
    with pytest.raises(OAuthBearerServerError) as info:
        first_call(shell.Producer, max_block_ms=20000, **config)
    assert info.value.status == "invalid_token" and info.value.code == 58
    assert "the broker refused the token (status 'invalid_token')" in str(info.value)
    assert "check the token sasl_oauth_token_provider returns" in str(info.value)


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_unknown_mechanism_is_refused_with_what_the_listener_offers(kafka, shell_name):
    # kafkawire itself speaks four mechanisms and says so before connecting ...
    with pytest.raises(errors.ConfigError, match="'SCRAM-SHA-1' is not supported by kafkawire; set "
                                                 "sasl_mechanism to one of PLAIN, SCRAM-SHA-256"):
        Config.client(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_SSL",
                      sasl_mechanism="SCRAM-SHA-1", sasl_plain_username="u", sasl_plain_password="p")
    # ... and Kafka, asked for one it lacks, lists the ones this listener enables.
    exc = _refused(shell_name, kafka.bootstrap_for("SASL_PLAINTEXT"), SaslUnsupportedMechanismError,
                   _Mechanism("SCRAM-SHA-1"), security_protocol="SASL_PLAINTEXT")
    assert exc.code == 33 and exc.mechanism == "SCRAM-SHA-1"
    assert sorted(exc.enabled_mechanisms) == sorted(SASL_MECHANISMS)  # in Kafka's own order
    assert (f"the broker does not offer SASL mechanism SCRAM-SHA-1; it offers "
            f"{', '.join(exc.enabled_mechanisms)}: configure a mechanism the broker enables") in str(exc)


# -- TLS ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_wrong_ca_is_the_same_tls_error_in_both_shells(kafka, listener):
    options = {**kafka.client_config(listener, mechanism="SCRAM-SHA-256"),
               "ssl_cafile": kafka.certificates.other_cafile}
    bootstrap = options.pop("bootstrap_servers")
    message = _both_refused(bootstrap, BrokerTLSError, **options)
    assert message == (
        f"TLS handshake with broker {bootstrap} failed: certificate verify failed: unable to get local "
        f"issuer certificate: the broker's certificate is not signed by a CA in ssl_cafile "
        f"({kafka.certificates.other_cafile}); set ssl_cafile to the CA (PEM) that signed the "
        f"broker's certificate")
    # The clients of both shells give up at once with it (waiting would not help).
    for shell_name, shell_ in SHELLS.items():
        start = time.monotonic()
        with pytest.raises(NoBrokersAvailableError, match=r"BrokerTLSError: TLS handshake .* not signed by a CA"):
            first_call(shell_.Producer, bootstrap_servers=bootstrap, max_block_ms=20000, **options)
        assert time.monotonic() - start < 3.0, shell_name


def test_plaintext_and_tls_mismatches_are_named_in_both_shells(kafka):
    # A plaintext client on the SSL listener: Kafka answers its ApiVersions with a TLS alert.
    message = _both_refused(kafka.bootstrap_for("SSL"), BrokerTLSError)
    assert "answered in TLS but security_protocol is PLAINTEXT: this port is an SSL listener" in message
    # A TLS client on the PLAINTEXT listener: Kafka reads the ClientHello's first bytes as a
    # request size over its limit and closes the connection at once.
    for shell_name in SHELL_NAMES:
        exc = _refused(shell_name, kafka.bootstrap, BrokerTLSError, security_protocol="SSL",
                       ssl_cafile=kafka.certificates.cafile)
        assert "the broker closed the connection during the TLS handshake" in str(exc)
        assert "the port is probably a PLAINTEXT (or SASL_PLAINTEXT) listener" in str(exc)


def test_mutual_tls(strict_kafka, shell):  # noqa: F811
    config = strict_kafka.client_config("SSL")
    assert config["ssl_certfile"] == strict_kafka.certificates.client.certfile
    conns = _roundtrip(shell, config, RECORDS[:5])
    assert conns and all(c.port == strict_kafka[0].ports["SSL"] for c in conns)


def test_mutual_tls_without_a_client_certificate(strict_kafka):
    options = {k: v for k, v in strict_kafka.client_config("SSL").items()
               if k not in ("ssl_certfile", "ssl_keyfile", "ssl_password")}
    bootstrap = options.pop("bootstrap_servers")
    message = _both_refused(bootstrap, BrokerTLSError, **options)
    # Kafka (TLS 1.3) checks the certificate once the client's side of the handshake is done
    # and answers with a bad_certificate alert, which the first read meets.
    assert message.startswith(f"TLS connection to broker {bootstrap} failed right after the handshake: "
                              f"the broker rejected the client certificate (")
    assert message.endswith("a broker that requires a client certificate (mutual TLS, "
                            "ssl.client.auth=required) does this when none is given: set ssl_certfile "
                            "and ssl_keyfile")
    for shell_ in SHELLS.values():
        with pytest.raises(NoBrokersAvailableError, match="set ssl_certfile and ssl_keyfile"):
            first_call(shell_.Producer, bootstrap_servers=bootstrap, max_block_ms=20000, **options)


# -- the strict cluster's SASL: a disabled mechanism, re-authentication (KIP-368) ------------------


def test_disabled_mechanism_is_refused_with_the_listeners_list(strict_kafka, shell):  # noqa: F811
    config = strict_kafka.client_config("SASL_PLAINTEXT", mechanism="PLAIN")
    with pytest.raises(SaslUnsupportedMechanismError) as info:
        first_call(shell.Producer, max_block_ms=20000, **config)
    assert info.value.enabled_mechanisms == ["SCRAM-SHA-512", "OAUTHBEARER"]
    assert (f"broker {config['bootstrap_servers']}: the broker does not offer SASL mechanism PLAIN; "
            f"it offers SCRAM-SHA-512, OAUTHBEARER: configure a mechanism the broker enables "
            f"(UNSUPPORTED_SASL_MECHANISM, 33)") == str(info.value)


# Alone: the re-logins must land inside 2 s sessions while the test's own loop drives them.
@pytest.mark.alone
def test_reauthentication_with_traffic_flowing(strict_kafka, shell):  # noqa: F811
    """Two producer/consumer pairs, SCRAM-SHA-512 over SASL_SSL and OAUTHBEARER over
    SASL_PLAINTEXT, produce and consume without pause for 3.5 session lifetimes: every
    connection logs in again at least three times on the same socket (the broker would
    close one whose session ran out), nothing is lost or repeated, and each OAUTHBEARER
    re-login asks the token provider for a token again."""
    tokens = _Tokens()
    pairs = []
    for listener, mechanism in (("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "OAUTHBEARER")):
        config = strict_kafka.client_config(listener, mechanism=mechanism)
        if mechanism == "OAUTHBEARER":
            config["sasl_oauth_token_provider"] = tokens
        topic = _topic(f"reauth-{mechanism.lower()}")
        producer = shell.Producer(linger_ms=5, max_block_ms=20000, **config)
        consumer = shell.Consumer(auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                  request_timeout_ms=20000, **config)
        consumer.assign([(topic, 0)])
        pairs.append({"mechanism": mechanism, "topic": topic, "producer": producer, "consumer": consumer,
                      "futures": [], "got": []})
    try:
        # Warm up: every connection of every client is set up before the clock starts.
        for pair in pairs:
            pair["futures"].append(pair["producer"].send(pair["topic"], b"0", partition=0))
            pair["futures"][0].result(20)
            while not pair["got"]:
                pair["got"] += pair["consumer"].poll(0.5)
        seen = {id(c): c for pair in pairs for who in ("producer", "consumer") for c in _conns(pair[who])}
        tokens_before = tokens.calls
        start = time.monotonic()
        while time.monotonic() - start < 3.5 * REAUTH_MS / 1000:
            for pair in pairs:
                n = len(pair["futures"])
                pair["futures"] += [pair["producer"].send(pair["topic"], str(n + i).encode(), partition=0)
                                    for i in range(20)]
                pair["got"] += pair["consumer"].poll(0.02)
                for who in ("producer", "consumer"):
                    seen.update((id(c), c) for c in _conns(pair[who]))
        for pair in pairs:
            pair["producer"].flush(20)
            deadline = time.monotonic() + 20
            while len(pair["got"]) < len(pair["futures"]) and time.monotonic() < deadline:
                pair["got"] += pair["consumer"].poll(0.5)
            sent = len(pair["futures"])
            assert [f.result(0).offset for f in pair["futures"]] == list(range(sent))
            assert [int(r.value) for r in pair["got"]] == list(range(sent)), pair["mechanism"]
        final = {id(c): c for pair in pairs for who in ("producer", "consumer") for c in _conns(pair[who])}
    finally:
        for pair in pairs:
            pair["producer"].close()
            pair["consumer"].close()
    brokers = [c for c in seen.values() if c.node_id is not None]
    state = [(c, c.sasl_result, c.setups, c.reauthentications, c.last_error, final.get(id(c)) is c)
             for c in brokers]
    assert len(brokers) == 4, state  # one per client: producers and consumers to node 1
    for c in brokers:
        assert final.get(id(c)) is c, f"{c} was replaced: the broker closed it"
        assert c.setups == 1, f"{c} connected {c.setups} times"
        assert c.sasl_result.session_lifetime_ms == REAUTH_MS
        assert c.reauthentications >= 3, f"{c} re-authenticated {c.reauthentications} times"
    oauth = [c for c in brokers if c.sasl_result.mechanism == "OAUTHBEARER"]
    assert len(oauth) == 2
    # One token per re-login, and no new connection logged in meanwhile.  A connection
    # may close in the middle of a re-login due just then: it asked for its token but
    # never counted the re-login, so each may have taken one token more.
    relogins = sum(c.reauthentications for c in oauth)
    assert relogins <= tokens.calls - tokens_before <= relogins + len(oauth), (tokens.calls - tokens_before, state)
