"""protocol/setup.py's reading of a set-up connection the broker closed with requests in
flight: the SASL hint is given only when the first request after ApiVersions is among them
and the client did not log in (test_kafka_security_mismatch.py shows it on Apache Kafka)."""

from __future__ import annotations

from kafkawire.protocol import apis
from kafkawire.protocol.connection import Connection
from kafkawire.protocol.sasl import PlainMechanism
from kafkawire.protocol.setup import closed_in_flight_error, dropped_without_login
from test_connection import api_versions_response, frame, metadata_response
from test_setup import KAFKA_LIKE, Broker, setup_for

METADATA = apis.get("Metadata")
HINT = "that is how a SASL listener drops a client that does not log in"


def _set_up(retry: bool = False) -> Connection:
    s = setup_for()
    b = Broker(s)
    if retry:  # an older broker: ApiVersions asked twice, so the first request's id is 2
        b.answer(api_versions_response({18: (0, 2)}, error_code=35))
    b.answer(api_versions_response(KAFKA_LIKE))
    assert s.done
    return s.protocol


def _closed(protocol: Connection, in_flight: int, *, sasl=None, tls=False) -> str:
    return str(closed_in_flight_error(protocol, in_flight, name="broker h:9", host="h", port=9,
                                      sasl=sasl, tls=tls))


def test_the_first_request_after_apiversions_unanswered_gets_the_hint():
    for retry in (False, True):
        proto = _set_up(retry)
        proto.send(METADATA, METADATA.Request(topics=[]), 12)
        text = _closed(proto, 1)
        assert not closed_in_flight_error(proto, 1, name="b", host="h", port=9, sasl=None, tls=False).retriable
        assert text.startswith("broker h:9 closed the connection with 1 request(s) in flight, without answering")
        assert HINT in text and "set security_protocol='SASL_PLAINTEXT' and sasl_mechanism" in text
        assert "set security_protocol='SASL_SSL'" in _closed(proto, 1, tls=True)


def test_no_hint_once_the_broker_answered_after_apiversions():
    proto = _set_up()
    cid, _ = proto.send(METADATA, METADATA.Request(topics=[]), 12)
    proto.send(METADATA, METADATA.Request(topics=[]), 12)
    proto.receive_data(frame(cid, METADATA, 12, metadata_response(12)))
    assert proto.in_flight == 1
    assert _closed(proto, 1) == "broker h:9 closed the connection with 1 request(s) in flight"
    assert closed_in_flight_error(proto, 1, name="b", host="h", port=9, sasl=None, tls=False).retriable


def test_no_hint_for_a_client_that_logs_in_or_has_nothing_in_flight():
    proto = _set_up()
    proto.send(METADATA, METADATA.Request(topics=[]), 12)
    assert HINT not in _closed(proto, 1, sasl=PlainMechanism("u", "p"))
    assert _closed(_set_up(), 0) == "broker h:9 closed the connection"
    # A connection whose setup never finished is the setup's to read, not this one's.
    assert HINT not in _closed(Connection("t"), 1)
    assert _closed(None, 1) == "broker h:9 closed the connection with 1 request(s) in flight"


def test_a_write_into_the_dropped_connection_gets_the_hint_too():
    # The broker's close can reach a request being written as a broken pipe (or a reset)
    # instead of the end of the stream: the same drop, the same hint.
    facts = dict(name="broker h:9", host="h", port=9, sasl=None, tls=False)
    proto = _set_up()
    proto.send(METADATA, METADATA.Request(topics=[]), 12)
    for exc in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
        err = dropped_without_login(exc, proto, 1, **facts)
        assert err is not None and not err.retriable and HINT in str(err)
    # Anything else, or a connection the hint does not fit, is left to the shell's own error.
    assert dropped_without_login(TimeoutError(), proto, 1, **facts) is None
    assert dropped_without_login(None, proto, 1, **facts) is None
    assert dropped_without_login(BrokenPipeError(), proto, 1, **dict(facts, sasl=PlainMechanism("u", "p"))) is None
