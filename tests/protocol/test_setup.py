"""protocol/setup.py: a connection's setup (ApiVersions with its retries, then SASL, or a
KIP-368 re-login) driven with bytes alone; the broker's side is played here with the API
classes (test_connection's frame/parse_request)."""

from __future__ import annotations

import pytest

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.api import ApiVersionError
from kafkawire.protocol.connection import Connection
from kafkawire.protocol.sasl import PlainMechanism, SaslAuthenticationError
from kafkawire.protocol.setup import AUTHENTICATING, DONE, NEGOTIATING, ConnectionSetup, relogin_holds
from test_connection import api_versions_response, frame, parse_request

API_VERSIONS = apis.get("ApiVersions")
HANDSHAKE = apis.get("SaslHandshake")
AUTHENTICATE = apis.get("SaslAuthenticate")
KAFKA_LIKE = {18: (0, 3), 17: (0, 1), 36: (0, 2), 3: (0, 12)}


class Broker:
    """Answers each request the setup writes with the next of ``answers`` (a response
    object, or a callable of the request giving one)."""

    def __init__(self, setup: ConnectionSetup):
        self.setup = setup
        self.seen: list[tuple[int, int, object]] = []
        self.pending = setup.start()

    def answer(self, response: object, *, split: bool = False) -> None:
        key, version, cid, _client, request = parse_request(self.pending)
        self.seen.append((key, version, request))
        api = apis.get(key)
        data = frame(cid, api, version, response)
        if split:  # any split of the stream works
            out: list = []
            for i in range(len(data)):
                out += self.setup.receive(data[i:i + 1])
            self.pending = out
        else:
            self.pending = self.setup.receive(data)


def setup_for(sasl=None, login_only=False, protocol=None):
    return ConnectionSetup(protocol or Connection("t"), sasl, "broker 1 at h:9", "h", 9, login_only=login_only)


def test_unsupported_version_is_asked_again_at_the_brokers_version_then_done():
    s = setup_for()
    b = Broker(s)
    assert s.phase == NEGOTIATING and not s.received_any
    b.answer(api_versions_response({18: (0, 2)}, error_code=35), split=True)
    assert s.received_any and s.api_versions_sent == 2 and b.pending
    b.answer(api_versions_response(KAFKA_LIKE))
    assert s.done and b.pending == [] and s.protocol.negotiated
    assert [v for _k, v, _r in b.seen] == [API_VERSIONS.max_version, 2]


def test_a_broker_refusing_every_apiversions_version_ends_the_setup_typed():
    s = setup_for()
    b = Broker(s)
    with pytest.raises(ApiVersionError, match="does not speak ApiVersions"):
        for _ in range(10):
            b.answer(api_versions_response({18: (0, 0)}, error_code=35))
    assert s.api_versions_sent == 2  # asked again at v0 once, then gave up


def test_another_apiversions_error_ends_the_setup_at_once():
    b = Broker(setup_for())
    with pytest.raises(errors.ConnectionClosedError, match="broker 1 at h:9 answered ApiVersions with error code 1"):
        b.answer(api_versions_response({}, error_code=1))


def test_sasl_plain_logs_in_and_says_when_to_log_in_again():
    s = setup_for(PlainMechanism("alice", "secret"))
    b = Broker(s)
    b.answer(api_versions_response(KAFKA_LIKE))
    assert s.phase == AUTHENTICATING
    b.answer(HANDSHAKE.Response(error_code=0, mechanisms=["PLAIN", "SCRAM-SHA-256"]))
    assert b.seen[-1][2].mechanism == "PLAIN"
    b.answer(AUTHENTICATE.Response(error_code=0, error_message=None, auth_bytes=b"", session_lifetime_ms=60000))
    assert b.seen[-1][2].auth_bytes == b"\0alice\0secret"
    assert s.phase == DONE and s.result is not None
    at = s.reauthenticate_at(1000.0, 0.0)
    assert at is not None and 1000.0 < at < 1060.0


def test_a_refused_login_names_the_broker_and_the_fix():
    b = Broker(setup_for(PlainMechanism("alice", "wrong")))
    b.answer(api_versions_response(KAFKA_LIKE))
    b.answer(HANDSHAKE.Response(error_code=0, mechanisms=["PLAIN"]))
    with pytest.raises(SaslAuthenticationError) as info:
        b.answer(AUTHENTICATE.Response(error_code=58, error_message="Authentication failed", auth_bytes=b"",
                                       session_lifetime_ms=0))
    text = str(info.value)
    assert text.startswith("broker 1 at h:9") and "check sasl_plain_username and sasl_plain_password" in text


def test_a_broker_that_closes_mid_login_is_read_as_a_listener_without_that_mechanism():
    s = setup_for(PlainMechanism("alice", "secret"))
    b = Broker(s)
    assert s.closed_error() is None  # before SASL: the shell's reading (TLS rules) applies
    b.answer(api_versions_response(KAFKA_LIKE))
    err = s.closed_error()
    assert err is not None and "dropped the connection during PLAIN authentication" in str(err)


def test_a_re_login_starts_with_sasl_on_a_negotiated_connection():
    proto = Connection("t")
    first = setup_for(protocol=proto)
    Broker(first).answer(api_versions_response(KAFKA_LIKE))
    again = setup_for(PlainMechanism("alice", "secret"), login_only=True, protocol=proto)
    b = Broker(again)
    assert b.pending and parse_request(b.pending)[0] == HANDSHAKE.key
    b.answer(HANDSHAKE.Response(error_code=0, mechanisms=["PLAIN"]))
    b.answer(AUTHENTICATE.Response(error_code=0, error_message=None, auth_bytes=b"", session_lifetime_ms=0))
    assert again.done and again.reauthenticate_at(5.0, 0.5) is None  # no session lifetime: no re-login


@pytest.mark.parametrize("phase, login_only, expected", [
    (NEGOTIATING, False, "did not answer ApiVersions in time"),
    (AUTHENTICATING, False, "did not finish PLAIN authentication within the setup timeout (2s"),
    (AUTHENTICATING, True, "did not finish PLAIN re-authentication (KIP-368) within 2s (request_timeout_ms)"),
])
def test_a_timeout_is_named_by_its_phase(phase, login_only, expected):
    s = setup_for(PlainMechanism("a", "b"), login_only=login_only)
    s.phase = phase
    err = s.timeout_error(2.0)
    assert isinstance(err, errors.BrokerConnectTimeoutError) and expected in str(err)


def test_bytes_the_setup_cannot_follow_end_it_typed():
    s = setup_for()
    s.start()
    with pytest.raises(errors.ConnectionClosedError, match="cannot follow"):
        s.receive(b"\x00\x00\x00\x08\x00\x00\x00\x63garbage!")


def test_relogin_holds_requests_while_a_relogin_runs_or_once_it_is_due():
    assert not relogin_holds(None, None, 100.0)  # no re-login scheduled (no SASL, or no lifetime)
    assert not relogin_holds(None, 100.5, 100.0)  # scheduled, not due yet
    assert relogin_holds(None, 100.0, 100.0)  # due now
    assert relogin_holds("running", None, 100.0)  # running: due time already cleared
