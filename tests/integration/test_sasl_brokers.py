"""SASL against real brokers, through both shells' connections and clients.

Tansu started with ``--authentication`` requires SASL (it allows ApiVersions before the
login and closes the connection on anything else) and speaks SCRAM-SHA-256/512 and
OAUTHBEARER, but stores no users: every login fails there, each in its own way, and each
failure must reach the caller as its typed error naming the broker, the mechanism and the
fix.  Plain Tansu answers SaslHandshake with UNSUPPORTED_SASL_MECHANISM; librdkafka's mock
cluster has no SASL at all (its ApiVersions lists no SaslHandshake).  Neither accepts a
login: the successful logins, KIP-368 re-authentication and Kafka's own refusals are
proven against Apache Kafka in tests/integration/test_kafka_security.py (and the exchange
itself in tests/protocol/test_sasl.py).
"""

import asyncio
import time

import pytest

from kafkawire import errors
from kafkawire.aio.conn import AsyncBrokerConnection
from kafkawire.client.admin import Admin
from kafkawire.client.config import Config
from kafkawire.client.conn import BrokerConnection
from kafkawire.errors import KafkaConnectionError
from kafkawire.protocol.sasl import (
    SaslAuthenticationError,
    SaslUnsupportedMechanismError,
    ScramServerError,
)
from kafkawire.testing.brokers import TansuBroker
from kafkawire.testing.tls import TLSTansuBroker, tls_certificates  # noqa: F401

from first_calls import first_call
from shells import shell  # noqa: F401 - the fixture

pytestmark = pytest.mark.broker

USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture(scope="module")
def auth_broker():
    """A Tansu broker that requires SASL (and knows no user)."""
    with TansuBroker(extra_args=["--authentication"]) as broker:
        yield broker


def _scram(mechanism="SCRAM-SHA-256", protocol="SASL_PLAINTEXT", **extra):
    return {"security_protocol": protocol, "sasl_mechanism": mechanism,
            "sasl_plain_username": USER, "sasl_plain_password": PASSWORD, **extra}


def _plain():
    return _scram("PLAIN")


class _Tokens:
    """A token provider that counts its calls (the token is made up: Tansu refuses every
    token anyway)."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return ("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.", int(time.time() * 1000) + 3_600_000)


def _oauth(tokens):
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_provider": tokens}


# Long deadlines, so that "ended well before its deadline" holds on a loaded machine
# (a TLS and SASL handshake there can take over 2 s) while still telling a refusal that is
# final from one retried until the deadline.
DEADLINE = 30.0


def _connect(shell_name, bootstrap, **options):
    """Connect one connection of ``shell_name`` ("sync" or "asyncio") as the clients
    would, with client options; returns (the connection's name, seconds taken) or raises."""
    host, port = bootstrap.rsplit(":", 1)
    cfg = Config.client(bootstrap_servers=bootstrap, **options)
    common = dict(ssl_context=cfg.ssl_context, sasl=cfg.sasl,
                  version_overrides=cfg.api_version_overrides)
    start = time.monotonic()
    if shell_name == "sync":
        conn = BrokerConnection(host, int(port), **common)
        try:
            conn.connect(DEADLINE)
            return conn, time.monotonic() - start
        finally:
            assert conn.setup is not None and conn.setup.done()
            conn.close()
            conn.poller.close()

    async def run():
        aconn = AsyncBrokerConnection(host, int(port), **common)
        try:
            await aconn.connect(DEADLINE)
            return aconn
        finally:
            await aconn.aclose()

    return asyncio.run(run()), time.monotonic() - start


def _refused(shell_name, bootstrap, error, **options):
    start = time.monotonic()
    with pytest.raises(error) as info:
        _connect(shell_name, bootstrap, **options)
    # A refused login is answered at once: nothing waits for the setup deadline.
    assert time.monotonic() - start < DEADLINE / 3
    message = str(info.value)
    assert bootstrap in message, message
    return info.value, message


SHELL_NAMES = ["sync", "asyncio"]


# -- connections ------------------------------------------------------------------------------


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_unknown_user_names_the_user_and_the_fix(auth_broker, shell_name, mechanism):
    exc, message = _refused(shell_name, auth_broker.bootstrap, ScramServerError, **_scram(mechanism))
    assert exc.server_error == "unknown-user" and exc.mechanism == mechanism
    assert exc.code == 58 and not exc.retriable
    assert (f"{mechanism} authentication of user 'alice' failed: the broker answered "
            f"e=unknown-user (the broker has no SCRAM credential for this user and mechanism)") in message
    assert (f"create the {mechanism} credential of user 'alice' on the broker (Kafka: "
            f"kafka-configs.sh --alter --add-config '{mechanism}=[password=...]' --entity-type "
            f"users --entity-name alice), or fix sasl_plain_username") in message


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_scram_over_raw_tokens_after_saslhandshake_v0(auth_broker, shell_name):
    # SaslHandshake v0: the SCRAM messages go raw, size-prefixed, outside Kafka's framing
    # (KIP-43); Tansu answers them so too, up to the same e=unknown-user.
    exc, message = _refused(shell_name, auth_broker.bootstrap, ScramServerError,
                            **_scram(api_version_overrides={"SaslHandshake": 0}))
    assert exc.server_error == "unknown-user"
    assert "SCRAM-SHA-256 authentication of user 'alice' failed" in message


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_oauthbearer_token_rejected(auth_broker, shell_name):
    tokens = _Tokens()
    exc, message = _refused(shell_name, auth_broker.bootstrap, SaslAuthenticationError, **_oauth(tokens))
    assert type(exc) is SaslAuthenticationError and exc.code == 58
    assert exc.mechanism == "OAUTHBEARER" and exc.error_message == "SASL Authentication failed."
    assert ("OAUTHBEARER authentication failed: SASL Authentication failed. "
            "(SASL_AUTHENTICATION_FAILED, 58)") in message
    assert "check the token sasl_oauth_token_provider returns" in message
    assert tokens.calls == 1  # asked once, at login


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_plain_dropped_by_the_broker(auth_broker, shell_name):
    # Tansu offers no PLAIN and closes the connection on its SaslHandshake instead of
    # answering UNSUPPORTED_SASL_MECHANISM.
    exc, message = _refused(shell_name, auth_broker.bootstrap, errors.KafkaWireError, **_plain())
    assert not isinstance(exc, KafkaConnectionError)  # a login failure, not a network one
    assert "the broker closed the connection during the SASL handshake step of PLAIN" in message
    assert ("the broker dropped the connection during PLAIN authentication instead of answering: "
            "check that this listener expects SASL and enables PLAIN") in message


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_sasl_against_a_broker_without_sasl(tansu_broker, shell_name):
    exc, message = _refused(shell_name, tansu_broker.bootstrap, SaslUnsupportedMechanismError,
                            **_scram("SCRAM-SHA-512"))
    assert exc.code == errors.UnsupportedSaslMechanismError.code == 33
    assert exc.mechanism == "SCRAM-SHA-512"
    assert ("the broker does not offer SASL mechanism SCRAM-SHA-512; it named only SCRAM-SHA-512 "
            "itself, so SASL may be switched off on it") in message


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_sasl_against_a_broker_with_no_saslhandshake(mock_cluster, shell_name):
    # librdkafka's mock cluster has no SASL handlers and lists no SaslHandshake.
    bootstrap = mock_cluster.bootstrap.split(",")[0]
    exc, message = _refused(shell_name, bootstrap, SaslUnsupportedMechanismError, **_plain())
    assert exc.enabled_mechanisms == []
    assert "no SASL authentication (PLAIN or any other) on this listener" in message
    assert "connect to a listener with SASL enabled, or without SASL" in message


def test_sasl_ssl_through_tls(tls_certificates):  # noqa: F811
    # SASL_SSL: the TLS handshake (stunnel in front of Tansu), then SCRAM inside it.
    with TLSTansuBroker(tls_certificates, extra_args=["--authentication"]) as broker:
        for shell_name in SHELL_NAMES:
            exc, _ = _refused(shell_name, broker.bootstrap, ScramServerError,
                              **_scram(protocol="SASL_SSL", ssl_cafile=tls_certificates.cafile))
            assert exc.server_error == "unknown-user"


# -- clients ----------------------------------------------------------------------------------

CASES = {
    "scram-unknown-user": ("auth", ScramServerError, lambda: _scram(),
                           "authentication of user 'alice' failed: the broker answered e=unknown-user"),
    "oauthbearer-rejected": ("auth", SaslAuthenticationError, lambda: _oauth(_Tokens()),
                             r"OAUTHBEARER authentication failed: SASL Authentication failed\."),
    "plain-dropped": ("auth", errors.KafkaWireError, _plain,
                      "the broker dropped the connection during PLAIN authentication"),
    "no-sasl": ("plain", SaslUnsupportedMechanismError, lambda: _scram(),
                r"UNSUPPORTED_SASL_MECHANISM, 33"),
}


@pytest.fixture
def case_broker(request, auth_broker, tansu_broker):
    return {"auth": auth_broker, "plain": tansu_broker}


@pytest.mark.parametrize("case", sorted(CASES))
def test_clients_surface_the_login_failure_at_their_first_call(shell, case_broker, case):  # noqa: F811
    which, error, options, pattern = CASES[case]
    broker = case_broker[which]
    start = time.monotonic()
    with pytest.raises(error, match=pattern):
        first_call(shell.Producer, bootstrap_servers=broker.bootstrap, max_block_ms=int(DEADLINE * 1000), **options())
    with pytest.raises(error, match=pattern):
        first_call(shell.Consumer, bootstrap_servers=broker.bootstrap, request_timeout_ms=int(DEADLINE * 1000), **options())
    # Not retried until a deadline: a refused login is final.
    assert time.monotonic() - start < DEADLINE / 3


@pytest.mark.parametrize("case", sorted(CASES))
def test_admin_surfaces_the_login_failure(case_broker, case):
    which, error, options, pattern = CASES[case]
    with pytest.raises(error, match=pattern):
        first_call(Admin, bootstrap_servers=case_broker[which].bootstrap, request_timeout_ms=5000, **options())


# -- an independent client ----------------------------------------------------------------------


def test_confluent_kafka_is_refused_the_same_way(auth_broker, mock_cluster):
    """librdkafka, as a client, meets the same refusals: Tansu's e=unknown-user for SCRAM, a
    dropped connection for PLAIN, and no SaslHandshake on the mock."""
    ck = pytest.importorskip("confluent_kafka")

    def auth_errors(bootstrap, mechanism):
        seen = []
        producer = ck.Producer({
            "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism, "sasl.username": USER, "sasl.password": PASSWORD,
            "error_cb": lambda e: seen.append(e), "log_level": 0})
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(
                e.code() == ck.KafkaError._AUTHENTICATION for e in seen):
            producer.poll(0.1)
        return " | ".join(e.str() for e in seen if e.code() == ck.KafkaError._AUTHENTICATION)

    assert "SASL SCRAM authentication failed: broker responded with unknown-user" in auth_errors(
        auth_broker.bootstrap, "SCRAM-SHA-256")
    assert "SASL PLAIN mechanism handshake failed" in auth_errors(auth_broker.bootstrap, "PLAIN")
    assert "SASL Handshake not supported by broker" in auth_errors(
        mock_cluster.bootstrap.split(",")[0], "PLAIN")
