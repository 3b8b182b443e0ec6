"""`kafkawire acls`, `quotas`, `transactions` and `reassign` on Apache Kafka (with
StandardAuthorizer, PLAINTEXT clients being super users): each command's table and --json
output checked against the cluster's state read back through the Admin API, and the exit
codes (0 done, 2 a refusal by the broker, 1 a usage error, each with one line on stderr)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from settle import eventually
from topics import create_topic, unique_name

from kafkawire.cli import main
from kafkawire.client.admin import AclBinding, AclBindingFilter, Admin, ClientQuotaEntity, TopicPartition
from kafkawire.client.producer import Producer
from kafkawire.testing.kafka import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def kafka():
    with KafkaCluster(1, listeners=["SASL_PLAINTEXT"], users={"admin": "admin-secret"},
                      super_users=["admin"]) as cluster:
        yield cluster


@pytest.fixture
def admin(kafka):
    with Admin(bootstrap_servers=kafka.bootstrap, request_timeout_ms=15000) as a:
        yield a


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse and the commands' usage errors
        code = exc.code if isinstance(exc.code, int) else 1
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    out, err = capsys.readouterr()
    return code, out, err


def test_acls_add_list_remove(kafka, admin, capsys):
    b = kafka.bootstrap
    user, topic = f"User:{unique_name('cli')}", unique_name("cli-acl")
    code, out, err = run(capsys, "acls", "add", "-b", b, "--resource-type", "topic", "--name", topic,
                         "--principal", user, "--operation", "read", "--operation", "describe")
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"added TOPIC {topic} LITERAL {user} * READ ALLOW",
                                f"added TOPIC {topic} LITERAL {user} * DESCRIBE ALLOW"]
    code, out, err = run(capsys, "acls", "add", "-b", b, "--resource-type", "group", "--name", "g-",
                         "--pattern-type", "prefixed", "--principal", user, "--operation", "read", "--deny", "--json")
    assert code == 0 and json.loads(out) == [{
        "resource_type": "GROUP", "name": "g-", "principal": user, "operation": "READ",
        "permission_type": "DENY", "host": "*", "pattern_type": "PREFIXED", "error": None}]
    want = {AclBinding("topic", topic, user, "read"), AclBinding("topic", topic, user, "describe"),
            AclBinding("group", "g-", user, "read", "deny", pattern_type="prefixed")}
    eventually(lambda: set(admin.describe_acls(AclBindingFilter(principal=user))), want, TIMEOUT)

    code, out, _ = run(capsys, "acls", "list", "-b", b, "--principal", user, "--json")
    assert code == 0 and {AclBinding(**x) for x in json.loads(out)} == want
    code, out, _ = run(capsys, "acls", "list", "-b", b, "--principal", user, "--resource-type", "topic")
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
    assert sorted(rows[1:]) == sorted([["TOPIC", topic, "LITERAL", user, "*", "READ", "ALLOW"],
                                       ["TOPIC", topic, "LITERAL", user, "*", "DESCRIBE", "ALLOW"]])

    code, out, err = run(capsys, "acls", "remove", "-b", b)
    assert code == 1 and "pass --all" in err
    code, out, _ = run(capsys, "acls", "remove", "-b", b, "--principal", user, "--operation", "read", "--json")
    assert code == 0 and {AclBinding(**x) for x in json.loads(out)} == {
        AclBinding("topic", topic, user, "read"), AclBinding("group", "g-", user, "read", "deny", pattern_type="prefixed")}
    eventually(lambda: set(admin.describe_acls(AclBindingFilter(principal=user))),
               {AclBinding("topic", topic, user, "describe")}, TIMEOUT)
    # The broker's refusal: exit 2 and the binding's error on stderr.
    code, out, err = run(capsys, "acls", "add", "-b", b, "--resource-type", "topic", "--name", topic,
                         "--principal", "nocolon", "--operation", "read")
    assert code == 2 and out == "" and "INVALID_REQUEST" in err and len(err.splitlines()) == 1
    admin.delete_acls([AclBindingFilter(principal=user)])


def test_a_usage_error_exits_non_zero_with_one_line(kafka):
    out = subprocess.run([sys.executable, "-m", "kafkawire", "acls", "add", "-b", kafka.bootstrap,
                          "--resource-type", "topic", "--name", "t", "--principal", "User:x", "--operation", "fly"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.splitlines() == [out.stderr.strip()] and "operation must be one of" in out.stderr


def test_quotas_set_and_list(kafka, admin, capsys):
    b, user = kafka.bootstrap, unique_name("qcli")
    code, out, err = run(capsys, "quotas", "set", "-b", b, "--user", user, "--set", "producer_byte_rate=1024",
                         "--set", "consumer_byte_rate=2048")
    assert (code, out.strip(), err) == (0, f"altered quotas of user {user!r}", "")
    entity = ClientQuotaEntity(user=user)
    eventually(lambda: admin.describe_client_quotas({"user": user}),
               {entity: {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0}}, TIMEOUT)
    code, out, _ = run(capsys, "quotas", "list", "-b", b, "--user", user, "--json")
    assert code == 0 and json.loads(out) == [{"entity": {"user": user},
                                              "quotas": {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0}}]
    code, out, _ = run(capsys, "quotas", "set", "-b", b, "--user", user, "--delete", "producer_byte_rate")
    assert code == 0
    eventually(lambda: admin.describe_client_quotas({"user": user}), {entity: {"consumer_byte_rate": 2048.0}}, TIMEOUT)
    code, out, _ = run(capsys, "quotas", "list", "-b", b, "--user", user)
    assert [line.split() for line in out.splitlines()][1:] == [["user", repr(user), "consumer_byte_rate", "2048.0"]]
    code, _, err = run(capsys, "quotas", "set", "-b", b, "--user", user, "--set", "no_such_quota=1")
    assert code == 2 and "no_such_quota" in err
    code, _, err = run(capsys, "quotas", "set", "-b", b, "--user", user, "--set", "producer_byte_rate=fast")
    assert code == 1 and "expects a number" in err
    admin.alter_client_quotas({entity: {"consumer_byte_rate": None}})


def test_transactions_list_describe_producers_abort(kafka, admin, capsys):
    b = kafka.bootstrap
    topic = create_topic(b, unique_name("txcli"), partitions=1)
    tid = unique_name("tid")
    p = Producer(bootstrap_servers=b, transactional_id=tid, transaction_timeout_ms=600_000)
    try:
        p.init_transactions(TIMEOUT)
        p.begin_transaction()
        p.send(topic, b"a", partition=0).result(TIMEOUT)
        p.send(topic, b"b", partition=0).result(TIMEOUT)
        pid = admin.list_transactions()[tid].producer_id

        code, out, _ = run(capsys, "transactions", "list", "-b", b, "--state", "Ongoing", "--json")
        assert code == 0 and json.loads(out)[tid] == {"transactional_id": tid, "producer_id": pid, "state": "Ongoing"}
        code, out, _ = run(capsys, "transactions", "list", "-b", b, "--producer-id", str(pid))
        assert [line.split() for line in out.splitlines()][1:] == [[tid, str(pid), "Ongoing"]]
        code, _, err = run(capsys, "transactions", "list", "-b", b, "--state", "Bogus")
        assert code == 1 and "Bogus" in err and len(err.splitlines()) == 1
        code, out, _ = run(capsys, "transactions", "describe", "-b", b, tid, "--json")
        got = json.loads(out)[tid]
        assert code == 0 and (got["state"], got["partitions"]) == ("Ongoing", [[topic, 0]])
        missing = unique_name("none")
        code, out, err = run(capsys, "transactions", "describe", "-b", b, tid, missing)
        assert code == 2 and "TRANSACTIONAL_ID_NOT_FOUND" in err and tid in out

        code, out, _ = run(capsys, "transactions", "producers", "-b", b, f"{topic}:0", "--json")
        [state] = json.loads(out)
        assert code == 0 and (state["producer_id"], state["current_txn_start_offset"]) == (pid, 0)
        code, _, err = run(capsys, "transactions", "abort", "-b", b, f"{topic}:0", "--start-offset", "1")
        assert code == 2 and "no open transaction" in err
        code, out, _ = run(capsys, "transactions", "abort", "-b", b, f"{topic}:0", "--start-offset", "0")
        assert code == 0 and f"aborted producer {pid}'s transaction" in out
        tp = TopicPartition(topic, 0)
        assert admin.describe_producers([tp])[tp][0].current_txn_start_offset is None
    finally:
        p.close(5)


def test_reassign_list_elect_move_on_one_node(kafka, admin, capsys):
    b = kafka.bootstrap
    topic = create_topic(b, unique_name("recli"), partitions=1)
    code, out, _ = run(capsys, "reassign", "list", "-b", b, "--json")
    assert (code, json.loads(out)) == (0, {})
    code, out, err = run(capsys, "reassign", "elect", "-b", b, f"{topic}:0")
    assert code == 2 and "ELECTION_NOT_NEEDED" in err
    code, out, err = run(capsys, "reassign", "move", "-b", b, f"{topic}:0=1", "--json")
    assert (code, json.loads(out)) == (0, {f"{topic}:0": None})  # where it is already: accepted
    code, out, err = run(capsys, "reassign", "move", "-b", b, f"{topic}:0=9")
    assert code == 2 and f"{topic}[0]" in err
    code, out, err = run(capsys, "reassign", "cancel", "-b", b, f"{topic}:0")
    assert code == 2 and "NO_REASSIGNMENT_IN_PROGRESS" in err
    code, _, err = run(capsys, "reassign", "move", "-b", b, f"{topic}:0")
    assert code == 1 and "expected TOPIC:PARTITION=NODE" in err
