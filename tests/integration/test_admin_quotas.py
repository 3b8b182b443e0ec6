"""Client quotas (KIP-546) through kafkawire's Admin and AsyncAdmin on Apache Kafka:
alter_client_quotas sets and removes them per entity, describe_client_quotas finds them by
exact name, default and any name, each state compared with what Kafka's own
``kafka-configs`` tool (kafka.admin.ConfigCommand, run with java from the cached jars)
prints for it.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess

import pytest
from settle import eventually
from shells import make_admin  # noqa: F401 - the fixture
from topics import unique_name

from kafkawire import errors
from kafkawire.client.admin import AdminError, ClientQuotaEntity
from kafkawire.testing.kafka import java_binary

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

TIMEOUT = 30.0
# kafka.admin.ConfigCommand is in Kafka 3.9's core jar (4.x moved it to the tools jar, which
# the broker's cache does not hold); it speaks the same quota APIs to any broker.
TOOL_LIBS = os.path.expanduser("~/.cache/kafkawire/kafka-3.9.1/libs")


@pytest.fixture
def admin(kafka_broker, make_admin):
    """Admin, then AsyncAdmin behind the same interface."""
    with make_admin(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms=15000) as a:
        yield a


def kafka_configs(kafka, *entity: str) -> dict[str, float]:
    """The quotas ``kafka-configs --describe`` prints for one entity."""
    if not glob.glob(os.path.join(TOOL_LIBS, "kafka_2.13-*.jar")):
        pytest.fail(f"Kafka's tool jars are not in {TOOL_LIBS}: run `make kafka` first")
    out = subprocess.run(
        [java_binary(), "-cp", os.path.join(TOOL_LIBS, "*"), "kafka.admin.ConfigCommand",
         "--bootstrap-server", kafka.bootstrap, "--describe", *entity],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    found: dict[str, float] = {}
    for line in out.stdout.splitlines():
        m = re.match(r"Quota configs for .* are (.*)$", line)
        if m:
            for pair in filter(None, m.group(1).split(", ")):
                k, v = pair.split("=")
                found[k] = float(v)
    return found


def test_set_describe_and_remove_quotas_as_kafka_configs_shows_them(kafka_broker, admin):
    user, client = unique_name("qu"), unique_name("qc")
    alice = ClientQuotaEntity(user=user)
    alice_app = ClientQuotaEntity({"user": user, "client-id": client})
    alice_default_client = ClientQuotaEntity(user=user, client_id=None)
    got = admin.alter_client_quotas({
        alice: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048},
        alice_app: {"request_percentage": 50.0},
        alice_default_client: {"consumer_byte_rate": 4096.0},
    }, timeout=TIMEOUT)
    assert got == {alice: None, alice_app: None, alice_default_client: None}

    want = {alice: {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0},
            alice_default_client: {"consumer_byte_rate": 4096.0},
            alice_app: {"request_percentage": 50.0}}
    eventually(lambda: admin.describe_client_quotas({"user": user}, timeout=TIMEOUT), want, TIMEOUT)
    assert admin.describe_client_quotas({"user": user}, strict=True, timeout=TIMEOUT) == {alice: want[alice]}
    assert admin.describe_client_quotas({"user": user, "client-id": client}, timeout=TIMEOUT) == {
        alice_app: want[alice_app]}
    assert admin.describe_client_quotas({"user": user, "client-id": None}, timeout=TIMEOUT) == {
        alice_default_client: want[alice_default_client]}
    assert admin.describe_client_quotas({"user": user, "client-id": ClientQuotaEntity.ANY}, timeout=TIMEOUT) == {
        alice_app: want[alice_app], alice_default_client: want[alice_default_client]}
    everything = admin.describe_client_quotas(timeout=TIMEOUT)
    assert {e: v for e, v in everything.items() if dict(e).get("user") == user} == want

    assert kafka_configs(kafka_broker, "--entity-type", "users", "--entity-name", user) == want[alice]
    assert kafka_configs(kafka_broker, "--entity-type", "users", "--entity-name", user,
                         "--entity-type", "clients", "--entity-name", client) == want[alice_app]

    # None removes one quota, leaving the entity's others.
    admin.alter_client_quotas({alice: {"producer_byte_rate": None}, alice_app: {"request_percentage": None}},
                              timeout=TIMEOUT)
    eventually(lambda: admin.describe_client_quotas({"user": user}, strict=True, timeout=TIMEOUT),
               {alice: {"consumer_byte_rate": 2048.0}}, TIMEOUT)
    assert kafka_configs(kafka_broker, "--entity-type", "users", "--entity-name", user) == {
        "consumer_byte_rate": 2048.0}
    assert alice_app not in admin.describe_client_quotas({"user": user}, timeout=TIMEOUT)
    admin.alter_client_quotas({alice: {"consumer_byte_rate": None},
                               alice_default_client: {"consumer_byte_rate": None}}, timeout=TIMEOUT)
    eventually(lambda: admin.describe_client_quotas({"user": user}, timeout=TIMEOUT), {}, TIMEOUT)


def test_a_quota_the_broker_refuses_fails_alone(kafka_broker, admin):
    user = unique_name("qu")
    good, bad = ClientQuotaEntity(user=user), ClientQuotaEntity(user=unique_name("qv"))
    with pytest.raises(AdminError) as info:
        admin.alter_client_quotas({good: {"producer_byte_rate": 10.0}, bad: {"no_such_quota": 1.0}},
                                  timeout=TIMEOUT)
    assert info.value.results[good] is None
    assert isinstance(info.value.results[bad], errors.InvalidRequestError)
    assert "no_such_quota" in str(info.value.results[bad])
    # validate_only checks without changing anything.
    other = ClientQuotaEntity(user=unique_name("qw"))
    assert admin.alter_client_quotas({other: {"producer_byte_rate": 5.0}}, validate_only=True,
                                     timeout=TIMEOUT) == {other: None}
    eventually(lambda: admin.describe_client_quotas({"user": user}, timeout=TIMEOUT),
               {good: {"producer_byte_rate": 10.0}}, TIMEOUT)
    assert admin.describe_client_quotas({"user": dict(other)["user"]}, timeout=TIMEOUT) == {}
    admin.alter_client_quotas({good: {"producer_byte_rate": None}}, timeout=TIMEOUT)
