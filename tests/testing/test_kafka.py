"""kafkawire.testing.KafkaCluster: Apache Kafka from its Maven Central jars, as a fixture."""

from __future__ import annotations

import os
import uuid

import pytest

from kafkawire.client.admin import Admin
from kafkawire.testing import BrokerStartError, KafkaCluster
from kafkawire.testing.kafka import _java_property, cache_dir, kafka_jars, unsecured_jwt


def test_java_property_escapes_what_iso_8859_1_cannot_hold():
    assert _java_property("plain=text,1") == "plain=text,1"
    assert _java_property("pä") == "p\\u00e4"
    assert _java_property("a\\b") == "a\\\\b"
    assert _java_property("\U0001f600") == "\\ud83d\\ude00"  # a surrogate pair


def test_unsecured_jwt_has_the_claims_kafka_checks():
    import base64
    import json

    token, expiry_ms = unsecured_jwt("alice", 60)
    header, payload, signature = token.split(".")
    assert signature == ""
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    assert json.loads(base64.urlsafe_b64decode(pad(header))) == {"alg": "none"}
    claims = json.loads(base64.urlsafe_b64decode(pad(payload)))
    assert claims["sub"] == "alice" and claims["exp"] * 1000 <= expiry_ms < (claims["exp"] + 1) * 1000


def test_bad_options_are_refused_before_anything_starts():
    with pytest.raises(ValueError, match="unknown listener"):
        KafkaCluster(listeners=["SASL_TLS"])
    with pytest.raises(ValueError, match="ssl_client_auth"):
        KafkaCluster(ssl_client_auth="maybe")
    with pytest.raises(ValueError, match="AlterUserScramCredentials"):
        KafkaCluster(users={"a,b": "secret"})
    with pytest.raises(ValueError, match="at least one node"):
        KafkaCluster(0)


def test_kafka_home_that_is_not_a_distribution_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path))
    with pytest.raises(BrokerStartError, match="not a Kafka distribution"):
        kafka_jars()


def test_kafka_home_is_used_instead_of_maven(monkeypatch, tmp_path):
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "kafka_2.13-9.9.9.jar").write_bytes(b"")
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path))
    assert kafka_jars("1.0.0") == str(libs)


@pytest.mark.broker
def test_the_jars_are_cached_once_fetched(kafka_broker):
    libs = kafka_jars(kafka_broker.version)
    if not os.environ.get("KAFKA_HOME"):
        assert libs.startswith(cache_dir())
        assert os.path.exists(os.path.join(os.path.dirname(libs), "complete"))
    assert f"kafka_2.13-{kafka_broker.version}.jar" in os.listdir(libs)


@pytest.mark.broker
def test_session_broker_serves_metadata_and_records(kafka_broker):
    with Admin(bootstrap_servers=kafka_broker.bootstrap) as admin:
        cluster = admin.describe_cluster(timeout=20)
        assert sorted(cluster.brokers) == [1]
        assert cluster.cluster_id == kafka_broker.cluster_id
    from kafkawire import Consumer, Producer

    topic = f"fixture-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=kafka_broker.bootstrap, acks="all") as p:
        meta = p.send(topic, b"hello").result(timeout=30)
    with Consumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        got = []
        for _ in range(20):
            got += c.poll(1.0)
            if got:
                break
    assert [(r.offset, r.value) for r in got] == [(meta.offset, b"hello")]


@pytest.mark.broker
def test_a_node_that_cannot_start_says_why(kafka_cluster_factory):
    with pytest.raises(BrokerStartError) as info:
        kafka_cluster_factory(broker_config={"num.network.threads": "not-a-number"})
    message = str(info.value)
    assert "num.network.threads" in message and "not-a-number" in message


@pytest.mark.broker
def test_three_nodes_kill_and_restart_one(kafka_cluster_factory):
    cluster = kafka_cluster_factory(3, min_insync_replicas=2)
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        assert sorted(admin.describe_cluster(timeout=30).brokers) == [1, 2, 3]
    pid = cluster[2].pid
    cluster.kill(2)
    assert cluster.running() == [0, 1] and not cluster[2].running
    cluster.restart(2)
    assert cluster.running() == [0, 1, 2] and cluster[2].pid != pid
    with Admin(bootstrap_servers=cluster[2].bootstrap) as admin:
        assert sorted(admin.describe_cluster(timeout=30).brokers) == [1, 2, 3]


@pytest.mark.broker
def test_the_jvm_unpacks_native_libraries_inside_the_cluster_directory(kafka_broker):
    # lz4-java unpacks its native library into java.io.tmpdir and deletes it only when the
    # JVM exits cleanly; close() kills the nodes, so outside the cluster's directory
    # (deleted by close()) every killed node would leave one behind in /tmp.
    from kafkawire import Producer

    topic = f"fixture-lz4-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=kafka_broker.bootstrap, compression_type="lz4") as p:
        p.send(topic, b"x" * 1000).result(timeout=30)  # the broker decompresses it to validate
    node_tmp = os.path.join(kafka_broker.nodes[0].directory, "tmp")
    assert any(name.startswith("liblz4-java") for name in os.listdir(node_tmp)), os.listdir(node_tmp)
    assert os.path.commonpath([node_tmp, kafka_broker.directory]) == kafka_broker.directory


@pytest.mark.broker
@pytest.mark.kafka  # a KafkaCluster of its own, not a fixture's: the fixtures' marker by hand
def test_a_port_taken_before_its_node_binds_it_is_chosen_again(monkeypatch):
    # Another process (a parallel test run, or a client connection's own port) may take a
    # chosen port before the JVM binds it: the cluster starts again on new ones.
    import socket

    from kafkawire.testing import kafka as kafka_module

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    real, chosen = kafka_module.free_ports, []

    def first_one_taken(count, host="127.0.0.1"):
        ports = real(count, host)
        if not chosen:
            ports[0] = taken  # the PLAINTEXT port
        chosen.append(ports)
        return ports

    monkeypatch.setattr(kafka_module, "free_ports", first_one_taken)
    try:
        with KafkaCluster(1) as cluster:
            assert len(chosen) == 2 and taken not in chosen[1]
            assert all(n.running for n in cluster.nodes)
            with Admin(bootstrap_servers=cluster.bootstrap) as admin:
                assert list(admin.describe_cluster(timeout=30).brokers) == [1]
    finally:
        holder.close()


def test_cluster_ids_never_look_like_an_option(monkeypatch):
    from kafkawire.testing import kafka

    draws = iter([b"\xfb" + bytes(15), bytes(16)])  # urlsafe base64 of 0xfb... starts with '-'
    monkeypatch.setattr(kafka.os, "urandom", lambda n: next(draws))
    assert kafka.cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"
