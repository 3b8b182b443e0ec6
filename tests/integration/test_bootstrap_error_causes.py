"""A bootstrap that reached no broker says why in types, not only in its message:
NoBrokersAvailableError keeps each attempt's typed exception in ``.errors`` and the first
(for a permanent refusal, the refusal) as ``__cause__``; a refusal no wait fixes (a wrong
CA) is also an instance of the refusal's class, so ``except BrokerTLSError`` catches it; a
refused login is its own error.  On Apache Kafka, in both shells."""

from __future__ import annotations

import time

import pytest
from first_calls import first_call
from shells import ADMINS, SHELLS

from kafkawire.errors import (
    BrokerConnectionRefusedError,
    BrokerTLSError,
    KafkaConnectionError,
    NoBrokersAvailableError,
)
from kafkawire.protocol.sasl import SaslAuthenticationError
from kafkawire.testing import free_port
from kafkawire.testing.kafka import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

USER, PASSWORD = "carol", "carol-secret"
SHELL_NAMES = sorted(SHELLS)


@pytest.fixture(scope="module")
def kafka():
    with KafkaCluster(1, listeners=["SSL", "SASL_PLAINTEXT"], users={USER: PASSWORD}) as cluster:
        yield cluster


def _dead() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_wrong_ca_is_catchable_as_a_tls_error(kafka, shell_name):
    options = {**kafka.client_config("SSL"), "ssl_cafile": kafka.certificates.other_cafile}
    tls = options.pop("bootstrap_servers")
    start = time.monotonic()
    with pytest.raises(BrokerTLSError) as info:  # the class of the refusal, not the text
        first_call(SHELLS[shell_name].Producer, bootstrap_servers=tls, max_block_ms=20000, **options)
    assert time.monotonic() - start < 5.0  # permanent: at once, not at max_block_ms
    exc = info.value
    assert isinstance(exc, NoBrokersAvailableError) and not exc.retriable
    assert exc.errors and all(type(e) is BrokerTLSError for e in exc.errors), exc.errors
    assert exc.__cause__ is exc.errors[0]
    assert "not signed by a CA in ssl_cafile" in str(exc.__cause__)
    assert (exc.host, exc.port) == ("127.0.0.1", int(tls.rsplit(":", 1)[1]))


@pytest.mark.deadlines
@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_wrong_ca_beside_a_dead_address_is_in_errors(kafka, shell_name):
    # One address refuses for good, the other is merely not up: the bootstrap waits for
    # the second to its deadline, and the TLS refusal is among the errors, typed.
    options = {**kafka.client_config("SSL"), "ssl_cafile": kafka.certificates.other_cafile}
    tls = options.pop("bootstrap_servers")
    with pytest.raises(NoBrokersAvailableError) as info:
        with ADMINS[shell_name](bootstrap_servers=f"{_dead()},{tls}", request_timeout_ms=1500,
                                reconnect_backoff_ms=50, **options) as admin:
            admin.list_topics()
    exc = info.value
    assert exc.retriable and not isinstance(exc, BrokerTLSError)
    kinds = {type(e) for e in exc.errors}
    assert kinds == {BrokerConnectionRefusedError, BrokerTLSError}, exc.errors
    # The cause is the first attempt, whichever address the bootstrap tried first.
    assert exc.__cause__ is exc.errors[0]
    assert [type(e) for e in exc.errors].count(BrokerTLSError) == 1  # not tried again


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_refused_login_is_its_own_error(kafka, shell_name):
    config = kafka.client_config("SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", password="wrong")
    sasl = config.pop("bootstrap_servers")
    start = time.monotonic()
    with pytest.raises(SaslAuthenticationError) as info:
        first_call(SHELLS[shell_name].Producer, bootstrap_servers=f"{_dead()},{sasl}", max_block_ms=20000, **config)
    assert time.monotonic() - start < 5.0
    exc = info.value
    assert not isinstance(exc, KafkaConnectionError) and not exc.retriable and exc.code == 58
    assert "check sasl_plain_username and sasl_plain_password" in str(exc)


@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_login_error_keeps_the_token_providers_cause(kafka, shell_name):
    class VaultDown(Exception):
        pass

    def provider():
        try:
            raise ConnectionRefusedError("vault at 127.0.0.1:1 refused")
        except ConnectionRefusedError as exc:
            raise VaultDown("no token") from exc

    config = kafka.client_config("SASL_PLAINTEXT", mechanism="OAUTHBEARER")
    config["sasl_oauth_token_provider"] = provider
    with pytest.raises(VaultDown) as info:
        first_call(SHELLS[shell_name].Producer, max_block_ms=20000, **config)
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


@pytest.mark.deadlines
@pytest.mark.parametrize("shell_name", SHELL_NAMES)
def test_nothing_listening_is_retried_and_each_refusal_kept(shell_name):
    boot = _dead()
    admin = ADMINS[shell_name] if shell_name == "sync" else None
    start = time.monotonic()
    with pytest.raises(NoBrokersAvailableError) as info:
        if admin is not None:
            with admin(bootstrap_servers=boot, request_timeout_ms=1500, reconnect_backoff_ms=50,
                       reconnect_backoff_max_ms=200) as a:
                a.list_topics()
        else:
            SHELLS[shell_name].Producer(bootstrap_servers=boot, max_block_ms=1500, reconnect_backoff_ms=50,
                                        reconnect_backoff_max_ms=200)
    took = time.monotonic() - start
    assert 1.2 < took < 5.0, took  # to the deadline, not at once
    exc = info.value
    assert exc.retriable
    # Retriable: only the summary's class (no refusal decided it).
    assert not isinstance(exc, BrokerConnectionRefusedError)
    assert len(exc.errors) >= 3, exc.errors  # each attempt, not only the last
    assert all(isinstance(e, BrokerConnectionRefusedError) for e in exc.errors), exc.errors
    assert all(e.port == int(boot.rsplit(":", 1)[1]) for e in exc.errors)
    assert exc.__cause__ is exc.errors[0]
    assert f"{len(exc.errors)} attempts" in str(exc)


@pytest.mark.deadlines
def test_sync_send_to_nothing_listening_keeps_the_last_refusal():
    from kafkawire.client.producer import Producer

    with Producer(bootstrap_servers=_dead(), max_block_ms=1000, reconnect_backoff_ms=50) as p:
        with pytest.raises(NoBrokersAvailableError) as info:
            p.send("t", b"v")
    exc = info.value
    assert exc.retriable and exc.errors
    assert all(isinstance(e, BrokerConnectionRefusedError) for e in exc.errors)
    assert exc.__cause__ is exc.errors[0]
