"""ACLs through kafkawire's own Admin and AsyncAdmin (CreateAcls, DescribeAcls, DeleteAcls)
on Apache Kafka with StandardAuthorizer, each state checked against what Kafka's own
``kafka-acls`` tool (kafka.admin.AclCommand, run with java from the cached jars) lists for
it, and through what the ACLs let a SASL user without super-user rights do.

One single-node cluster serves the module: PLAINTEXT clients and the SASL user ``admin``
are super users; ``bob`` has only the ACLs a test grants him.  Every test works on names
and principals of its own, so the tests do not see each other's ACLs.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import time

import pytest
from settle import eventually
from shells import make_admin  # noqa: F401 - the fixture
from topics import create_topic, unique_name

from kafkawire import errors
from kafkawire.client.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, Admin,
                                    AdminError, PatternType, ResourceType)
from kafkawire.client.producer import Producer
from kafkawire.testing.kafka import KafkaCluster, java_binary

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

SASL_USERS = {"admin": "admin-secret", "bob": "bob-secret"}
TIMEOUT = 30.0
# A permanent refusal comes back at once, not after retries up to the deadline.
PROMPT = 3.0
# kafka.admin.AclCommand is in Kafka 3.9's core jar (4.x moved it to the tools jar, which
# the broker's cache does not hold); it speaks the same ACL APIs to any broker.
TOOL_LIBS = os.path.expanduser("~/.cache/kafkawire/kafka-3.9.1/libs")


@pytest.fixture(scope="module")
def kafka():
    with KafkaCluster(1, listeners=["SASL_PLAINTEXT"], users=SASL_USERS, super_users=["admin"]) as cluster:
        yield cluster


@pytest.fixture
def admin(kafka, make_admin):
    """Admin, then AsyncAdmin behind the same interface."""
    with make_admin(bootstrap_servers=kafka.bootstrap, request_timeout_ms=15000) as a:
        yield a


def kafka_acls(kafka, *args: str) -> set[AclBinding]:
    """The ACLs ``kafka-acls --list`` prints for ``args``, parsed back into bindings."""
    if not glob.glob(os.path.join(TOOL_LIBS, "kafka_2.13-*.jar")):
        pytest.fail(f"Kafka's tool jars are not in {TOOL_LIBS}: run `make kafka` first")
    out = subprocess.run(
        [java_binary(), "-cp", os.path.join(TOOL_LIBS, "*"), "kafka.admin.AclCommand",
         "--bootstrap-server", kafka.bootstrap, "--list", *args],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    found: set[AclBinding] = set()
    resource = None
    for line in out.stdout.splitlines():
        m = re.match(r"Current ACLs for resource `ResourcePattern\(resourceType=(\w+), name=(.*), "
                     r"patternType=(\w+)\)`:", line)
        if m:
            resource = m.groups()
            continue
        m = re.match(r"\s*\(principal=(.*), host=(.*), operation=(\w+), permissionType=(\w+)\)", line)
        if m:
            assert resource is not None, out.stdout
            principal, host, operation, permission = m.groups()
            found.add(AclBinding(resource[0], resource[1], principal, operation, permission, host, resource[2]))
    return found


def described(admin, acl_filter: AclBindingFilter | None = None) -> set[AclBinding]:
    got = admin.describe_acls(acl_filter, timeout=TIMEOUT)
    assert got == sorted(got, key=lambda b: (b.resource_type, b.name, b.pattern_type, b.principal,
                                             b.host, b.operation, b.permission_type))
    return set(got)


def test_create_describe_every_resource_and_pattern_type_as_kafka_acls_lists_them(kafka, admin):
    user = f"User:{unique_name('u')}"
    topic, prefix, group = unique_name("acl-t"), unique_name("acl-p") + "-", unique_name("acl-g")
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, user, AclOperation.READ),
        AclBinding("topic", topic, user, "write", "deny", host="10.1.2.3"),
        AclBinding("topic", prefix, user, "describe", pattern_type=PatternType.PREFIXED),
        AclBinding("topic", "*", user, "describe_configs"),
        AclBinding("group", group, user, "read"),
        AclBinding("group", prefix, user, "delete", pattern_type="prefixed"),
        AclBinding("cluster", "kafka-cluster", user, "idempotent_write"),
        AclBinding("cluster", "kafka-cluster", user, "alter_configs", "deny"),
        AclBinding("transactional_id", prefix, user, "write", pattern_type="prefixed"),
        AclBinding("delegation_token", "token-1", user, "describe"),
        AclBinding("user", "alice", user, "create_tokens"),
        AclBinding("user", "*", user, "describe_tokens"),
    ]
    assert admin.create_acls(bindings, timeout=TIMEOUT) == dict.fromkeys(bindings)
    mine = AclBindingFilter(principal=user)
    eventually(lambda: described(admin, mine), set(bindings), TIMEOUT)
    assert kafka_acls(kafka, "--principal", user) == set(bindings)

    # Filters by resource type, pattern type, operation and permission, each as Kafka
    # applies them and kafka-acls shows them.
    assert described(admin, AclBindingFilter("topic", principal=user)) == {
        b for b in bindings if b.resource_type is ResourceType.TOPIC}
    assert described(admin, AclBindingFilter("topic", pattern_type="literal", principal=user)) == {
        b for b in bindings if b.resource_type is ResourceType.TOPIC and b.pattern_type is PatternType.LITERAL}
    assert described(admin, AclBindingFilter(pattern_type="prefixed", principal=user)) == {
        b for b in bindings if b.pattern_type is PatternType.PREFIXED}
    assert described(admin, AclBindingFilter(permission_type="deny", principal=user)) == {
        b for b in bindings if b.permission_type is AclPermissionType.DENY}
    assert described(admin, AclBindingFilter(operation="describe", principal=user)) == {
        bindings[2], bindings[9]}
    assert described(admin, AclBindingFilter(host="10.1.2.3", principal=user)) == {bindings[1]}
    # MATCH: every binding that applies to the named topic: literal, wildcard and prefix.
    inside = prefix + "x"
    want = {bindings[2], bindings[3]}
    assert described(admin, AclBindingFilter("topic", inside, "match", principal=user)) == want
    assert {b for b in kafka_acls(kafka, "--topic", inside, "--resource-pattern-type", "match")
            if b.principal == user} == want
    assert described(admin, AclBindingFilter("topic", topic, "literal", principal=user)) == {
        bindings[0], bindings[1]}
    assert {b for b in kafka_acls(kafka, "--topic", topic) if b.principal == user} == {bindings[0], bindings[1]}

    # Making one again is no error and changes nothing.
    assert admin.create_acls(bindings[:1], timeout=TIMEOUT) == {bindings[0]: None}
    assert described(admin, mine) == set(bindings)
    admin.delete_acls([mine], timeout=TIMEOUT)


def test_delete_acls_by_filters_returns_what_each_deleted(kafka, admin):
    user, other = f"User:{unique_name('u')}", f"User:{unique_name('v')}"
    prefix = unique_name("del") + "-"
    b = [
        AclBinding("topic", prefix + "a", user, "read"),
        AclBinding("topic", prefix, user, "write", pattern_type="prefixed"),
        AclBinding("group", prefix + "g", user, "read"),
        AclBinding("cluster", "kafka-cluster", user, "describe"),
        AclBinding("topic", prefix + "a", other, "read"),
    ]
    admin.create_acls(b, timeout=TIMEOUT)
    everyone = AclBindingFilter(resource_type="any")
    eventually(lambda: {x for x in described(admin, everyone) if x.principal in (user, other)}, set(b), TIMEOUT)

    by_pattern = AclBindingFilter("topic", pattern_type="prefixed", principal=user)
    by_match = AclBindingFilter("topic", prefix + "a", "match", principal=other)
    nothing = AclBindingFilter("transactional_id", principal=user)
    got = admin.delete_acls([by_pattern, by_match, nothing], timeout=TIMEOUT)
    assert got == {by_pattern: [b[1]], by_match: [b[4]], nothing: []}
    eventually(lambda: {x for x in described(admin, everyone) if x.principal in (user, other)},
               {b[0], b[2], b[3]}, TIMEOUT)
    assert {x for x in kafka_acls(kafka) if x.principal in (user, other)} == {b[0], b[2], b[3]}

    # ANY everywhere else: the rest of the user's ACLs, whatever their type and pattern.
    rest = AclBindingFilter(principal=user)
    assert admin.delete_acls([rest], timeout=TIMEOUT) == {rest: [b[0], b[2], b[3]]}
    eventually(lambda: described(admin, rest), set(), TIMEOUT)
    assert {x for x in kafka_acls(kafka) if x.principal in (user, other)} == set()


def test_a_binding_the_broker_refuses_fails_alone(kafka, admin):
    user = f"User:{unique_name('u')}"
    good = AclBinding("topic", unique_name("t"), user, "read")
    bad = AclBinding("topic", unique_name("t"), "no-colon", "read")  # not a principal
    with pytest.raises(AdminError) as info:
        admin.create_acls([good, bad], timeout=TIMEOUT)
    assert info.value.results[good] is None
    assert isinstance(info.value.results[bad], errors.InvalidRequestError)
    assert "Could not parse principal" in str(info.value.results[bad])
    assert list(info.value.errors) == [bad]
    eventually(lambda: described(admin, AclBindingFilter(principal=user)), {good}, TIMEOUT)
    admin.delete_acls([AclBindingFilter(principal=user)], timeout=TIMEOUT)


def test_what_only_a_filter_may_say_is_refused_before_sending(admin):
    with pytest.raises(ValueError, match="LITERAL or PREFIXED"):
        admin.create_acls([AclBinding("topic", "t", "User:x", "read", pattern_type="match")])
    with pytest.raises(ValueError, match="needs a resource type"):
        admin.create_acls([AclBinding("any", "t", "User:x", "read")])
    with pytest.raises(ValueError, match="needs an operation"):
        admin.create_acls([AclBinding("topic", "t", "User:x", "any")])
    with pytest.raises(ValueError, match="ALLOW or DENY"):
        admin.create_acls([AclBinding("topic", "t", "User:x", "read", "any")])
    with pytest.raises(ValueError, match="operation must be one of"):
        AclBinding("topic", "t", "User:x", "fly")
    with pytest.raises(ValueError, match="use ANY"):
        AclBindingFilter(resource_type="unknown")


def test_granted_through_kafkawire_bob_sees_the_topic_and_reads_nothing_more(kafka, admin):
    topic = create_topic(kafka.bootstrap, unique_name("bob"), partitions=1)
    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        p.send(topic, b"v", partition=0).result(TIMEOUT)
    bob = kafka.client_config("SASL_PLAINTEXT", mechanism="PLAIN", user="bob")
    with Admin(bob, request_timeout_ms=15000) as as_bob:
        started = time.monotonic()
        refused = as_bob.describe_topics([topic], timeout=TIMEOUT, raise_on_error=False)[topic]
        assert isinstance(refused, errors.TopicAuthorizationFailedError)
        # Describing ACLs needs Describe on the cluster, which bob lacks: refused at once.
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            as_bob.describe_acls(timeout=TIMEOUT)
        with pytest.raises(AdminError) as info:
            as_bob.create_acls([AclBinding("topic", topic, "User:bob", "all")], timeout=TIMEOUT)
        assert info.value.code == errors.ClusterAuthorizationFailedError.code
        assert time.monotonic() - started < PROMPT

        grant = AclBinding("topic", topic, "User:bob", "describe")
        admin.create_acls([grant], timeout=TIMEOUT)

        def sees() -> bool:
            got = as_bob.describe_topics([topic], timeout=TIMEOUT, raise_on_error=False)[topic]
            return not isinstance(got, Exception)

        eventually(sees, True, TIMEOUT)
        assert list(as_bob.describe_topics([topic], timeout=TIMEOUT)[topic].partitions) == [0]
        admin.delete_acls([AclBindingFilter.of(grant)], timeout=TIMEOUT)
        eventually(sees, False, TIMEOUT)


def test_without_an_authorizer_every_acl_call_says_security_is_disabled(kafka_broker, make_admin):
    with make_admin(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms=15000) as admin:
        started = time.monotonic()
        with pytest.raises(errors.SecurityDisabledError):
            admin.describe_acls(timeout=TIMEOUT)
        binding = AclBinding("topic", "t", "User:x", "read")
        got = admin.create_acls([binding], timeout=TIMEOUT, raise_on_error=False)
        assert isinstance(got[binding], errors.SecurityDisabledError)
        f = AclBindingFilter()
        got = admin.delete_acls([f], timeout=TIMEOUT, raise_on_error=False)
        assert isinstance(got[f], errors.SecurityDisabledError)
        assert time.monotonic() - started < PROMPT
