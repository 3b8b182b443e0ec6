"""The operator calls' argument types, without a broker: Kafka's enum codes, names accepted in
any case, what only a filter may say, and quota entities as hashable keys."""

from __future__ import annotations

import pytest

from kafkawire.protocol.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                      ClientQuotaEntity, PatternType, ResourceType, TopicPartitionReplica)


def test_the_enums_carry_kafkas_codes():
    assert [ResourceType[n] for n in ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER")] == \
        [2, 3, 4, 5, 6, 7]
    assert (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == (1, 2, 3, 4)
    assert (AclOperation.ALL, AclOperation.IDEMPOTENT_WRITE, AclOperation.TWO_PHASE_COMMIT) == (2, 12, 15)
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)


def test_a_binding_takes_names_or_codes_and_is_a_key():
    a = AclBinding("Topic", "t", "User:x", "describe-configs", "DENY", pattern_type="prefixed")
    b = AclBinding(ResourceType.TOPIC, "t", "User:x", 10, AclPermissionType.DENY, "*", 4)
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert (a.operation, a.pattern_type) == (AclOperation.DESCRIBE_CONFIGS, PatternType.PREFIXED)
    with pytest.raises(ValueError, match="resource_type must be one of"):
        AclBinding("table", "t", "User:x", "read")
    with pytest.raises(ValueError, match="operation must be one of"):
        AclBinding("topic", "t", "User:x", 99)


def test_a_filter_matches_everything_by_default_and_exactly_one_binding_of_it():
    everything = AclBindingFilter()
    assert (everything.resource_type, everything.pattern_type, everything.operation,
            everything.permission_type) == (ResourceType.ANY, PatternType.ANY, AclOperation.ANY, AclPermissionType.ANY)
    assert (everything.name, everything.principal, everything.host) == (None, None, None)
    b = AclBinding("group", "g", "User:y", "read", host="10.0.0.1")
    exact = AclBindingFilter.of(b)
    assert (exact.resource_type, exact.name, exact.pattern_type, exact.principal, exact.host, exact.operation,
            exact.permission_type) == (ResourceType.GROUP, "g", PatternType.LITERAL, "User:y", "10.0.0.1",
                                       AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(ValueError, match="use ANY"):
        AclBindingFilter(operation="unknown")


def test_quota_entities_are_keys_whatever_the_spelling():
    e = ClientQuotaEntity(user="alice", client_id=None)
    assert e == ClientQuotaEntity({"client-id": None, "user": "alice"})
    assert hash(e) == hash(ClientQuotaEntity({"user": "alice", "client-id": None}))
    assert dict(e) == {"client-id": None, "user": "alice"}
    assert repr(e) == "ClientQuotaEntity({'client-id': None, 'user': 'alice'})"
    assert repr(ClientQuotaEntity.ANY) == "ClientQuotaEntity.ANY"
    with pytest.raises(ValueError, match="at least one"):
        ClientQuotaEntity()
    assert TopicPartitionReplica("t", 0, 1) == ("t", 0, 1)
