"""`kafkawire topics ...` and `kafkawire groups ...` against real brokers (Apache Kafka and
Tansu alike through ``modern_broker``, the mock where it has the right answer),
cross-checked with confluent-kafka."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest

from kafkawire.cli import main
from kafkawire.client.admin import Admin
from kafkawire.client.producer import Producer
from kafkawire.testing import KafkaCluster
from settle import eventually, until_known
from topics import unique_name


pytestmark = pytest.mark.broker


def _committed(bootstrap: str, group: str, topic: str, partitions: list[int]) -> list[int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    try:
        got = c.committed([ck.TopicPartition(topic, p) for p in partitions], timeout=10)
    finally:
        c.close()
    return [tp.offset for tp in got]


def _ck_topics(bootstrap: str) -> dict:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "log_level": 3})
    try:
        return c.list_topics(timeout=10).topics
    finally:
        c.close()


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([topic], num_partitions=partitions)
        # Kafka: commits and list_offsets for a topic its metadata lacks yet are refused.
        until_known(admin, topic, partitions)


def test_topics_create_list_delete(modern_broker, capsys):
    b = modern_broker.bootstrap
    topic = unique_name("cli-t")
    assert main(["topics", "create", "-b", b, topic, "--partitions", "3",
                 "--config", "retention.ms=99999"]) == 0
    assert f"created topic {topic} (3 partitions" in capsys.readouterr().out
    eventually(lambda: len(_ck_topics(b)[topic].partitions) if topic in _ck_topics(b) else 0, 3)

    assert main(["topics", "list", "-b", b]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR"] and [topic, "3", "1"] in rows
    assert main(["topics", "list", "-b", b, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["partition"] for p in doc[topic]["partitions"]] == [0, 1, 2]

    assert main(["topics", "create", "-b", b, topic, "--partitions", "1"]) == 2
    err = capsys.readouterr().err
    assert "TOPIC_ALREADY_EXISTS" in err and topic in err

    assert main(["topics", "delete", "-b", b, topic]) == 0
    assert f"deleted topic {topic}" in capsys.readouterr().out
    eventually(lambda: topic in _ck_topics(b), False)


def test_bad_config_argument_is_refused():
    with pytest.raises(SystemExit, match="--config expects name=value"):
        main(["topics", "create", "-b", "127.0.0.1:1", "t", "--config", "novalue"])


@pytest.fixture
def group_with_commits(modern_broker):
    """A topic with 5 records in partition 0 and 3 in 1, and a group (no members) that
    confluent-kafka committed 2 and 1 for."""
    b = modern_broker.bootstrap
    topic, group = unique_name("cli-g"), unique_name("grp")
    _create(b, topic, 2)
    # One record per batch: Tansu's ListOffsets "latest" is the last batch's base offset + 1.
    with Producer(bootstrap_servers=b, linger_ms=0) as p:
        for partition, n in ((0, 5), (1, 3)):
            for i in range(n):
                p.send(topic, b"r%d" % i, partition=partition)
                p.flush(10)
    c = ck.Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False, "log_level": 3})
    c.commit(offsets=[ck.TopicPartition(topic, 0, 2), ck.TopicPartition(topic, 1, 1)], asynchronous=False)
    c.close()
    return b, topic, group, isinstance(modern_broker, KafkaCluster)


def test_groups_list_and_describe(group_with_commits, capsys):
    b, topic, group, kafka = group_with_commits
    assert main(["groups", "list", "-b", b]) == 0
    # A group that only ever had offsets committed has no protocol type on Kafka (it is
    # set by the first member's JoinGroup); Tansu calls it "consumer".
    expected = [group, "-", "Empty"] if kafka else [group, "consumer"]
    assert any(line.split()[:len(expected)] == expected for line in capsys.readouterr().out.splitlines())

    assert main(["groups", "describe", "-b", b, group, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["state"] == "Empty" and doc["members"] == []
    assert [(r["partition"], r["committed"], r["end_offset"], r["lag"]) for r in doc["partitions"]] == [
        (0, 2, 5, 3), (1, 1, 3, 2)]
    assert doc["total_lag"] == 5

    assert main(["groups", "describe", "-b", b, group]) == 0
    out = capsys.readouterr().out
    assert "TOPIC" in out and "LOG-END-OFFSET" in out and "total lag 5" in out
    assert [topic, "0", "2", "5", "3", "-"] in [line.split() for line in out.splitlines()]


def test_describe_flags_a_commit_above_the_log_end(group_with_commits, capsys):
    # Tansu's ListOffsets "latest" can be below a real commit; a commit made by hand can be
    # anywhere.  Either way the lag is unknown, not 0, and stays out of the total.
    b, topic, group, _kafka = group_with_commits
    with Admin(bootstrap_servers=b) as admin:
        admin.alter_group_offsets(group, {(topic, 1): 9})   # partition 1 ends at 3
    assert main(["groups", "describe", "-b", b, group]) == 0
    out = capsys.readouterr().out
    assert [topic, "1", "9", "3", "?", "-"] in [line.split() for line in out.splitlines()]
    assert f"{topic}[1]: committed offset 9 is above the log end offset 3" in out
    assert "total lag 3 (without the 1 partition(s) marked ?)" in out
    assert main(["groups", "describe", "-b", b, group, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(r["partition"], r["lag"], r["committed_above_end"]) for r in doc["partitions"]] == [
        (0, 3, False), (1, None, True)]
    assert doc["total_lag"] == 3


def test_describe_of_an_unknown_group_fails(modern_broker, capsys):
    group = unique_name("no-such-group")
    for extra in ([], ["--json"]):
        assert main(["groups", "describe", "-b", modern_broker.bootstrap, group, *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and f"no group {group!r}" in captured.err


def test_reset_offsets_is_a_dry_run_until_execute(group_with_commits, capsys):
    b, topic, group, _kafka = group_with_commits
    assert main(["groups", "reset-offsets", "-b", b, group, "--topic", topic, "--to-earliest"]) == 0
    captured = capsys.readouterr()
    assert [group, topic, "0", "2", "0"] in [line.split() for line in captured.out.splitlines()]
    assert "dry run" in captured.err and "--execute" in captured.err
    assert _committed(b, group, topic, [0, 1]) == [2, 1]  # nothing changed

    assert main(["groups", "reset-offsets", "-b", b, group, "--topic", topic, "--to-earliest",
                 "--execute"]) == 0
    assert _committed(b, group, topic, [0, 1]) == [0, 0]

    # Out-of-range offsets are clamped into each partition's log, as Kafka's tool does.
    assert main(["groups", "reset-offsets", "-b", b, group, "--topic", f"{topic}:1", "--to-offset", "99",
                 "--execute"]) == 0
    assert _committed(b, group, topic, [0, 1]) == [0, 3]

    # Before every record.  (Tansu looks times up by append time and answers a time after
    # the last record with offset 0, timestamp -1 instead of offset -1: see the mock test.)
    assert main(["groups", "reset-offsets", "-b", b, group, "--topic", f"{topic}:1",
                 "--to-datetime", "2000-01-01T00:00:00", "--execute"]) == 0
    assert _committed(b, group, topic, [0, 1]) == [0, 0]
    capsys.readouterr()


@pytest.mark.parametrize("kind", [pytest.param("kafka", marks=pytest.mark.kafka),
                                  pytest.param("mock", marks=pytest.mark.mock)])
def test_reset_to_datetime_without_a_record_after_it_goes_to_the_end(kind, request, capsys):
    # Kafka answers a time after the last record with offset -1 ("no record at or after
    # it"), and so does the mock (for every lookup); Tansu answers offset 0.
    broker = request.getfixturevalue("kafka_broker" if kind == "kafka" else "mock_cluster")
    b = broker.bootstrap
    topic, group = unique_name("cli-m"), unique_name("grp-m")
    if kind == "mock":
        broker.create_topic(topic, 1, 1)
    else:
        _create(b, topic, 1)
    with Producer(bootstrap_servers=b, linger_ms=20) as p:
        for i in range(4):
            p.send(topic, b"x", partition=0)
        p.flush(10)
    with Admin(bootstrap_servers=b) as admin:
        admin.alter_group_offsets(group, {(topic, 0): 1})
    assert main(["groups", "reset-offsets", "-b", b, group, "--topic", topic,
                 "--to-datetime", "2999-01-01T00:00:00Z", "--execute"]) == 0
    assert [group, topic, "0", "1", "4"] in [line.split() for line in capsys.readouterr().out.splitlines()]
    assert _committed(b, group, topic, [0]) == [4]


def test_reset_offsets_refuses_an_active_group(modern_broker, capsys):
    b = modern_broker.bootstrap
    topic, group = unique_name("cli-a"), unique_name("live")
    _create(b, topic, 1)
    # Tansu completes JoinGroup after half the session timeout: 2 s keeps it near 1 s.
    # Kafka refuses a session timeout under group.min.session.timeout.ms (6 s).
    session_ms = 6000 if isinstance(modern_broker, KafkaCluster) else 2000
    c = ck.Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False,
                     "session.timeout.ms": session_ms, "heartbeat.interval.ms": 300, "log_level": 3})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 10
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.1)
        assert c.assignment()
        assert main(["groups", "describe", "-b", b, group]) == 0
        out = capsys.readouterr().out
        assert "state Stable" in out and "MEMBER-ID" in out
        assert main(["groups", "reset-offsets", "-b", b, group, "--topic", topic, "--to-latest",
                     "--execute"]) == 2
        err = capsys.readouterr().err
        assert "is active (state Stable, 1 members)" in err and "stop its consumers" in err
    finally:
        c.close()


def test_missing_api_is_a_clean_error(mock_cluster, capsys):
    assert main(["groups", "list", "-b", mock_cluster.bootstrap]) == 2
    err = capsys.readouterr().err
    assert "ListGroups (key 16)" in err and "does not list it" in err


def test_module_entry_point(modern_broker):
    topic = unique_name("cli-sub")
    _create(modern_broker.bootstrap, topic, 1)
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.abspath(src), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "kafkawire", "topics", "list", "-b", modern_broker.bootstrap],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert topic in done.stdout.split()


# -- topics describe / config, groups delete, and what the errors say (Apache Kafka) ------------


@pytest.mark.kafka
def test_topics_describe_shows_partitions_leaders_replicas_isr_and_configs(kafka_broker, capsys):
    b = kafka_broker.bootstrap
    topic, plain = unique_name("cli-desc"), unique_name("cli-desc")
    assert main(["topics", "create", "-b", b, topic, "--partitions", "2", "--config", "retention.ms=99999"]) == 0
    assert main(["topics", "create", "-b", b, plain, "--partitions", "1"]) == 0
    assert f"created topic {plain} (1 partition, replication factor 1)" in capsys.readouterr().out
    with Admin(bootstrap_servers=b) as admin:
        until_known(admin, topic, 2)
        until_known(admin, plain, 1)
        node = next(iter(admin.describe_topics([topic])[topic].partitions.values())).leader
    assert main(["topics", "describe", "-b", b, topic, plain]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()]
    assert f"topic {topic}  id " in out and "2 partitions  replication factor 1" in out
    assert "1 partition  replication factor 1" in out  # one, not "1 partitions"
    assert "configs set on the topic: retention.ms=99999" in out
    assert f"configs set on the topic: none (every config is the broker's default; `kafkawire topics " \
           f"config {plain} --all` lists them)" in out
    assert ["PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"] in lines
    assert ["0", str(node), str(node), str(node), "-"] in lines and ["1", str(node), str(node), str(node), "-"] in lines

    assert main(["topics", "describe", "-b", b, topic, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc[topic]["configs"] == {"retention.ms": "99999"}
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in doc[topic]["partitions"]] == [
        (0, node, [node], [node]), (1, node, [node], [node])]

    missing = unique_name("no-such-topic")
    assert main(["topics", "describe", "-b", b, missing]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"kafkawire topics describe: topic {missing!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION, 3)" \
           in captured.err


@pytest.mark.kafka
def test_topics_config_shows_sets_and_resets(kafka_broker, capsys):
    b = kafka_broker.bootstrap
    topic = unique_name("cli-conf")
    _create(b, topic, 1)
    assert main(["topics", "config", "-b", b, topic]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and f"topic {topic} has no configs of its own" in captured.err

    assert main(["topics", "config", "-b", b, topic, "--set", "retention.ms=123456",
                 "--set", "cleanup.policy=compact"]) == 0
    captured = capsys.readouterr()
    assert f"set retention.ms=123456 on topic {topic}" in captured.err
    rows = [line.split() for line in captured.out.splitlines()]
    assert rows[0] == ["CONFIG", "VALUE", "SOURCE"]
    assert ["cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"] in rows
    assert ["retention.ms", "123456", "DYNAMIC_TOPIC_CONFIG"] in rows
    # What another client reads back: the broker has it.
    with Admin(bootstrap_servers=b) as admin:
        entries = admin.describe_configs([("topic", topic)])[("topic", topic)]
    assert entries["retention.ms"].value == "123456" and entries["cleanup.policy"].value == "compact"

    assert main(["topics", "config", "-b", b, topic, "--delete", "cleanup.policy", "--json"]) == 0
    captured = capsys.readouterr()
    assert f"reset cleanup.policy on topic {topic}" in captured.err
    assert json.loads(captured.out) == {"retention.ms": {
        "value": "123456", "source": "DYNAMIC_TOPIC_CONFIG", "default": False, "read_only": False,
        "sensitive": False}}
    assert main(["topics", "config", "-b", b, topic, "--all"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["cleanup.policy", "delete", "DEFAULT_CONFIG"] in rows and len(rows) > 10

    # A config Kafka does not know: the broker's refusal, named, with no Python API advice.
    assert main(["topics", "config", "-b", b, topic, "--set", "retention.mss=1"]) == 2
    err = capsys.readouterr().err
    assert "retention.mss" in err and "raise_on_error" not in err


@pytest.mark.kafka
def test_deleting_a_topic_that_does_not_exist_is_not_called_retriable(kafka_broker, capsys):
    b = kafka_broker.bootstrap
    topic, missing = unique_name("cli-del"), unique_name("no-such-topic")
    _create(b, topic, 1)
    start = time.monotonic()
    assert main(["topics", "delete", "-b", b, missing, topic]) == 2
    assert time.monotonic() - start < 10  # the controller's answer is final: nothing waits
    captured = capsys.readouterr()
    assert f"deleted topic {topic}" in captured.out
    assert captured.err == (f"kafkawire topics delete: topic {missing!r} does not exist "
                            f"(UNKNOWN_TOPIC_OR_PARTITION, 3); `kafkawire topics list` shows the topics\n")
    assert "retriable" not in captured.err and "raise_on_error" not in captured.err


@pytest.mark.kafka
def test_an_admin_error_gives_no_python_api_advice(kafka_broker, capsys):
    b = kafka_broker.bootstrap
    topic = unique_name("cli-twice")
    _create(b, topic, 1)
    assert main(["topics", "create", "-b", b, topic]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kafkawire topics: create_topics: 1 of 1 failed:\n  ")
    assert "TOPIC_ALREADY_EXISTS" in err and topic in err
    assert "raise_on_error" not in err and ".results" not in err


@pytest.mark.kafka
def test_groups_delete(kafka_broker, capsys):
    b = kafka_broker.bootstrap
    topic, group, missing = unique_name("cli-gd"), unique_name("cli-gd"), unique_name("no-such-group")
    _create(b, topic, 1)
    c = ck.Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False, "log_level": 3})
    c.commit(offsets=[ck.TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()
    assert main(["groups", "delete", "-b", b, group, missing]) == 2
    captured = capsys.readouterr()
    assert captured.out == f"deleted group {group}\n"
    assert captured.err == (f"kafkawire groups delete: group {missing!r} does not exist (GROUP_ID_NOT_FOUND, 69); "
                            f"`kafkawire groups list` shows the groups\n")
    assert main(["groups", "list", "-b", b]) == 0
    assert group not in capsys.readouterr().out.split()
    assert _committed(b, group, topic, [0]) == [ck.OFFSET_INVALID]  # its offsets went with it

    # A group with a live member is refused, and named.
    live = unique_name("cli-gd-live")
    member = ck.Consumer({"bootstrap.servers": b, "group.id": live, "log_level": 3, "group.protocol": "classic"})
    try:
        member.subscribe([topic])
        eventually(lambda: bool(member.poll(0.2) or member.assignment()), True, timeout=30)
        assert main(["groups", "delete", "-b", b, live]) == 2
        err = capsys.readouterr().err
        assert "NON_EMPTY_GROUP" in err and repr(live) in err
    finally:
        member.close()


@pytest.mark.kafka
def test_counts_are_singular_for_one(kafka_broker, capsys):
    b = kafka_broker.bootstrap
    topic = unique_name("cli-one")
    _create(b, topic, 1)
    assert main(["produce", "-b", b, topic, "-n", "1", "--size", "10"]) == 0
    assert "produced 1 record of 10 bytes" in capsys.readouterr().err
    assert main(["consume", "-b", b, topic, "-n", "1", "--timeout", "5"]) == 0
    assert "consumed 1 record\n" in capsys.readouterr().err
