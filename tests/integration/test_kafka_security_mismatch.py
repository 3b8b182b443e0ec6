"""A client whose security_protocol does not match the listener, on Apache Kafka, in both
shells: the error names security_protocol / sasl_mechanism and what to set, at once.

Kafka's SASL listeners answer ApiVersions to anyone, then close the connection on any
request but SaslHandshake; its listeners without SASL answer SaslHandshake with
ILLEGAL_SASL_STATE.  (TLS against plaintext and the other way round are covered in
test_kafka_security.py.)
"""

from __future__ import annotations

import re
import time

import pytest
from first_calls import first_call
from shells import SHELLS

from kafkawire import errors
from kafkawire.testing.kafka import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture(scope="module")
def kafka():
    with KafkaCluster(1, listeners=["SSL", "SASL_PLAINTEXT", "SASL_SSL"], users={USER: PASSWORD}) as cluster:
        yield cluster


def _refused(shell_name: str, config: dict, error: type[BaseException]) -> BaseException:
    shell = SHELLS[shell_name]
    start = time.monotonic()
    with pytest.raises(error) as info:
        first_call(shell.Producer, max_block_ms=20000, **config)
    # Kafka answers (or drops the connection) at once: nothing waits out max_block_ms.
    assert time.monotonic() - start < 10.0
    return info.value


@pytest.mark.parametrize("shell_name", sorted(SHELLS))
@pytest.mark.parametrize("listener,client", [("SASL_PLAINTEXT", "PLAINTEXT"), ("SASL_SSL", "SSL")])
def test_a_client_without_sasl_on_a_sasl_listener_is_told_to_set_sasl(kafka, shell_name, listener, client):
    config = kafka.client_config(client)
    config["bootstrap_servers"] = kafka.bootstrap_for(listener)
    exc = _refused(shell_name, config, errors.KafkaConnectionError)
    text = str(exc)
    # (How many requests were in flight depends on the shell: the sync producer's sender
    # thread asks for Metadata and a producer id beside the call's own request.)
    assert re.search(r"closed the connection with \d request\(s\) in flight, without answering the first "
                     r"request after ApiVersions: that is how a SASL listener drops a client that does not "
                     r"log in", text), text
    assert f"set security_protocol='{listener}' and sasl_mechanism" in text


@pytest.mark.parametrize("shell_name", sorted(SHELLS))
@pytest.mark.parametrize("listener,client", [("PLAINTEXT", "SASL_PLAINTEXT"), ("SSL", "SASL_SSL")])
def test_a_sasl_client_on_a_listener_without_sasl_is_told_to_drop_it(kafka, shell_name, listener, client):
    config = kafka.client_config(client, mechanism="SCRAM-SHA-256")
    config["bootstrap_servers"] = kafka.bootstrap_for(listener)
    exc = _refused(shell_name, config, errors.SaslIllegalStateError)
    assert exc.code == 34 and exc.request == "SaslHandshake" and not exc.retriable
    text = str(exc)
    assert "the broker refused SaslHandshake" in text
    assert "that is how a listener without SASL answers: if this port is a PLAINTEXT or SSL listener, " \
           "set security_protocol='PLAINTEXT' (or 'SSL') and leave sasl_mechanism unset" in text
    # Not the re-login advice, which is for a second handshake on a logged-in connection.
    assert "KIP-368" not in text
