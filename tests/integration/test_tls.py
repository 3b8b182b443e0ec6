"""TLS end to end: kafkawire (and confluent-kafka, as an independent client) through
Debian's stunnel4 in front of a Tansu broker that advertises the TLS port, with throwaway
certificates (kafkawire.testing.tls).  Every failure must be a BrokerTLSError that names
the broker, what was wrong and the fix, and none may outlast the setup deadline.  Apache
Kafka's own SSL listener (mutual TLS too, and both shells) is in test_kafka_security.py."""

import ssl
import time
import uuid

import pytest
from first_calls import first_call

from kafkawire.client.config import Config
from kafkawire.client.conn import BrokerConnection
from kafkawire.client.consumer import Consumer
from kafkawire.errors import (
    BrokerConnectTimeoutError,
    BrokerTLSError,
    BrokerTLSHandshakeTimeoutError,
    NoBrokersAvailableError,
)
from kafkawire.client.producer import Producer

# The fixtures: tls_broker (for the session, with wrong-host and expired certificate
# ports), tls_broker_factory (per test) and tls_certificates.
from kafkawire.testing.tls import tls_broker, tls_broker_factory, tls_certificates  # noqa: F401

pytestmark = pytest.mark.broker

RECORDS = [(f"k{i}".encode(), f"value-{i}".encode() * (i % 4 + 1)) for i in range(40)]


def _topic(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _tls(certs, **extra):
    return {"security_protocol": "SSL", "ssl_cafile": certs.cafile, **extra}


def _mtls(certs, **extra):
    return _tls(certs, ssl_certfile=certs.client.certfile, ssl_keyfile=certs.client.keyfile,
                ssl_password=certs.client_password, **extra)


def _connect(bootstrap, timeout=3.0, **options):
    """Connect one BrokerConnection as the client would (options as for a Producer)."""
    host, port = bootstrap.rsplit(":", 1)
    cfg = Config.client(bootstrap_servers=bootstrap, **options)
    conn = BrokerConnection(host, int(port), ssl_context=cfg.ssl_context)
    start = time.monotonic()
    try:
        conn.connect(timeout)
        return conn, time.monotonic() - start
    finally:
        conn.close()
        conn.poller.close()


def _refused(bootstrap, error=BrokerTLSError, timeout=3.0, **options):
    with pytest.raises(error) as info:
        _connect(bootstrap, timeout, **options)
    assert info.value.port == int(bootstrap.rsplit(":", 1)[1])
    assert f"broker {bootstrap}" in str(info.value)
    return str(info.value)


def _roundtrip(bootstrap, options):
    topic = _topic("tls")
    with Producer(bootstrap_servers=bootstrap, linger_ms=1, **options) as p:
        futures = [p.send(topic, v, key=k, partition=0) for k, v in RECORDS]
        p.flush(20)
        assert [f.result(0).offset for f in futures] == list(range(len(RECORDS)))
        conns = list(p.cluster._conns.values())
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **options) as c:
        c.assign([(topic, 0)])
        got = []
        for _ in range(20):
            got += c.poll(1.0)
            if len(got) >= len(RECORDS):
                break
        conns += list(c.cluster._conns.values())
        brokers = dict(c.cluster.brokers)
    assert [(r.key, r.value) for r in got] == RECORDS
    return topic, conns, brokers


def test_producer_and_consumer_through_verified_tls(tls_broker, tls_certificates):
    topic, conns, brokers = _roundtrip(tls_broker.bootstrap, _tls(tls_certificates))
    # The broker advertises the TLS port, so every connection went through stunnel.
    assert set(brokers.values()) == {("127.0.0.1", tls_broker.port)}
    assert conns and all(c.port == tls_broker.port for c in conns)


def test_confluent_kafka_through_the_same_tls_port(tls_broker, tls_certificates):
    ck = pytest.importorskip("confluent_kafka")
    conf = {"bootstrap.servers": tls_broker.bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": tls_certificates.cafile,
            "ssl.endpoint.identification.algorithm": "https", "log_level": 3}
    # confluent-kafka writes, kafkawire reads ...
    topic = _topic("tls-from-ck")
    p = ck.Producer(conf)
    for k, v in RECORDS:
        p.produce(topic, v, key=k, partition=0)
    assert p.flush(20) == 0
    with Consumer(bootstrap_servers=tls_broker.bootstrap, auto_offset_reset="earliest",
                  **_tls(tls_certificates)) as c:
        c.assign([(topic, 0)])
        got = []
        for _ in range(20):
            got += c.poll(1.0)
            if len(got) >= len(RECORDS):
                break
    assert [(r.key, r.value) for r in got] == RECORDS
    # ... and reads what kafkawire wrote.
    topic = _topic("tls-to-ck")
    with Producer(bootstrap_servers=tls_broker.bootstrap, linger_ms=1, **_tls(tls_certificates)) as kp:
        for k, v in RECORDS:
            kp.send(topic, v, key=k, partition=0)
        kp.flush(20)
    c = ck.Consumer({**conf, "group.id": "tls", "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < len(RECORDS) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append((m.key(), m.value()))
    finally:
        c.close()
    assert got == RECORDS


def test_mutual_tls(tls_broker_factory, tls_certificates):
    broker = tls_broker_factory(require_client_cert=True)
    _topic_, conns, _ = _roundtrip(broker.bootstrap, _mtls(tls_certificates))
    assert conns and all(c.port == broker.port for c in conns)
    # Without a client certificate the broker drops the connection once the handshake is
    # done (TLS 1.3 checks the client's certificate after the client's side finished).
    # Whether its alert (certificate required) arrives before the reset is a matter of timing.
    message = _refused(broker.bootstrap, **_tls(tls_certificates))
    assert "right after the handshake" in message, message
    assert "requires a client certificate (mutual TLS" in message
    assert "set ssl_certfile and ssl_keyfile" in message
    # A certificate the broker does not accept as a client's (the server's own: no clientAuth).
    server_cert = {"ssl_certfile": tls_certificates.server.certfile,
                   "ssl_keyfile": tls_certificates.server.keyfile}
    message = _refused(broker.bootstrap, **_tls(tls_certificates, **server_cert))
    assert "right after the handshake" in message, message
    assert (f"the broker may not trust the client certificate in ssl_certfile "
            f"({tls_certificates.server.certfile})") in message
    # The producer reports the same, for the bootstrap address it tried, from its first
    # send(): at once when the alert came (not retriable), else (a reset, which a broker
    # going away gives too) at its deadline, after trying again.
    expected = r"BrokerTLSError: .*set ssl_certfile and ssl_keyfile"
    with pytest.raises(NoBrokersAvailableError, match=expected):
        p = Producer(bootstrap_servers=broker.bootstrap, max_block_ms=3000, **_tls(tls_certificates))
        try:
            p.send("tls-first", b"v")
        finally:
            p.close(1)


def test_wrong_ca_is_refused(tls_broker, tls_certificates):
    message = _refused(tls_broker.bootstrap, security_protocol="SSL",
                       ssl_cafile=tls_certificates.other_cafile)
    assert message.startswith(f"TLS handshake with broker {tls_broker.bootstrap} failed: certificate "
                              f"verify failed: unable to get local issuer certificate: ")
    assert (f"the broker's certificate is not signed by a CA in ssl_cafile "
            f"({tls_certificates.other_cafile}); set ssl_cafile to the CA") in message
    # The system's trust store does not know the test CA either.
    assert "not signed by a CA in the system's trust store" in _refused(
        tls_broker.bootstrap, security_protocol="SSL")
    # Producer and Consumer surface it at their first call (their constructors ask no
    # broker), at once: no wait fixes it.
    wrong_ca = {"security_protocol": "SSL", "ssl_cafile": tls_certificates.other_cafile}
    expected = r"BrokerTLSError: TLS handshake .* not signed by a CA in ssl_cafile"
    start = time.monotonic()
    with pytest.raises(NoBrokersAvailableError, match=expected):
        first_call(Producer, bootstrap_servers=tls_broker.bootstrap, max_block_ms=3000, **wrong_ca)
    with pytest.raises(NoBrokersAvailableError, match=expected):
        first_call(Consumer, bootstrap_servers=tls_broker.bootstrap, request_timeout_ms=3000, **wrong_ca)
    assert time.monotonic() - start < 2.5


def test_wrong_hostname_is_refused_unless_the_check_is_off(tls_broker, tls_certificates):
    wrong = tls_broker.bootstrap_for("wrong_host")
    message = _refused(wrong, **_tls(tls_certificates))
    assert ("certificate verify failed: IP address mismatch, certificate is not valid for "
            "'127.0.0.1'") in message
    assert "the broker's certificate does not name the host '127.0.0.1'" in message
    assert "ssl_check_hostname=False" in message
    # Chain still verified, host name not: accepted (Java's endpoint identification "" too).
    for off in ({"ssl_check_hostname": False}, {"ssl_endpoint_identification_algorithm": ""}):
        conn, _ = _connect(wrong, **_tls(tls_certificates, **off))
        assert conn.protocol is None  # closed by _connect, after it was ready
    # ... but not with the wrong CA.
    assert "not signed by a CA" in _refused(wrong, security_protocol="SSL", ssl_check_hostname=False,
                                            ssl_cafile=tls_certificates.other_cafile)
    # A producer bootstrapped through that port reaches the advertised (right) one after it.
    no_check = _tls(tls_certificates, ssl_check_hostname=False)
    with Producer(bootstrap_servers=wrong, linger_ms=1, **no_check) as p:
        assert p.send(_topic("tls-nocheck"), b"v", partition=0).result(10).offset == 0


def test_expired_certificate_is_refused(tls_broker, tls_certificates):
    message = _refused(tls_broker.bootstrap_for("expired"), **_tls(tls_certificates))
    assert "certificate verify failed: certificate has expired: the broker's certificate" in message
    assert "renew it on the broker" in message
    # Turning the host name check off does not accept an expired certificate.
    _refused(tls_broker.bootstrap_for("expired"), **_tls(tls_certificates, ssl_check_hostname=False))


def test_plaintext_client_against_the_tls_port(tls_broker, tls_certificates):
    message = _refused(tls_broker.bootstrap)
    assert "dropped the connection before answering ApiVersions, without sending a byte" in message
    assert "set security_protocol='SSL'" in message
    # A dropped connection could also be a broker going away, so it is retried until the
    # first send()'s deadline.
    p = Producer(bootstrap_servers=tls_broker.bootstrap, max_block_ms=1500)
    try:
        with pytest.raises(NoBrokersAvailableError, match=r"BrokerTLSError: .*set security_protocol='SSL'"):
            p.send("tls-first", b"v")
    finally:
        p.close(1)


def test_tls_client_against_a_plaintext_broker_is_bounded_by_the_setup_deadline(tls_broker, tls_certificates):
    # Tansu reads the ClientHello's first bytes as a huge request size and waits for the
    # rest: only the deadline (socket_connection_setup_timeout_ms) ends the handshake.
    start = time.monotonic()
    message = _refused(tls_broker.plaintext_bootstrap, BrokerTLSHandshakeTimeoutError, timeout=1.0,
                       **_tls(tls_certificates))
    assert time.monotonic() - start < 2.5
    assert "did not finish within 1000 ms" in message and "PLAINTEXT" in message
    assert issubclass(BrokerTLSHandshakeTimeoutError, BrokerConnectTimeoutError)
    start = time.monotonic()
    # Retriable (a slow broker looks the same): the constructor asks no broker, and the
    # first send() tries again after each setup deadline, up to max_block_ms.
    p = Producer(bootstrap_servers=tls_broker.plaintext_bootstrap, max_block_ms=2000,
                 socket_connection_setup_timeout_ms=800, **_tls(tls_certificates))
    assert time.monotonic() - start < 2.0
    try:
        with pytest.raises(NoBrokersAvailableError, match="BrokerTLSHandshakeTimeoutError"):
            p.send("tls-first", b"v")
    finally:
        p.close(1)
    assert time.monotonic() - start < 5.5


def test_user_ssl_context_is_used_as_given(tls_broker, tls_certificates):
    ctx = ssl.create_default_context(cafile=tls_certificates.cafile)
    conn, _ = _connect(tls_broker.bootstrap, security_protocol="SSL", ssl_context=ctx)
    other = ssl.create_default_context(cafile=tls_certificates.other_cafile)
    message = _refused(tls_broker.bootstrap, security_protocol="SSL", ssl_context=other,
                       ssl_cafile=tls_certificates.cafile)  # ssl_context wins
    assert "not signed by a CA in the ssl_context given" in message


def test_tls_fixture_processes_are_stopped_by_pid(tls_broker_factory):
    import os

    broker = tls_broker_factory()
    pids = broker.pids
    assert all(pids.values())
    broker.stop()
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_missing_stunnel_is_an_error_that_says_how_to_install_it(monkeypatch):
    import shutil

    from kafkawire.testing import tls as tls_testing

    monkeypatch.delenv(tls_testing.STUNNEL_ENV, raising=False)
    monkeypatch.setattr(shutil, "which", lambda name, path=None: None)
    with pytest.raises(tls_testing.StunnelError, match="stunnel is not installed.*apt-get is not available"):
        tls_testing.stunnel_binary()
    monkeypatch.setattr(shutil, "which",
                        lambda name, path=None: "/usr/bin/apt-get" if name == "apt-get" else None)
    with pytest.raises(tls_testing.StunnelError, match="install it with `make stunnel`"):
        tls_testing.stunnel_binary()
