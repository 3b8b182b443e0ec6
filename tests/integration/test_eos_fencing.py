"""Exactly-once across a rebalance on Apache Kafka 4 (KIP-447): offsets sent with
``send_offsets_to_transaction(offsets, consumer.group_metadata())`` carry the member's
generation (classic) or member epoch (KIP-848), member id and instance id in
TxnOffsetCommit, so a zombie's (a member the group has moved on from) are refused with a
typed error and the transaction can only abort, while the live member's commit.  In both
shells, for classic and KIP-848 groups."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafkawire import errors
from kafkawire.client.admin import Admin, NewTopic
from kafkawire.client.consumer import TopicPartition
from kafkawire.protocol.transactions import ConsumerGroupMetadata
from settle import eventually, until_known
from shells import shell  # noqa: F401 - the fixture
from topics import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.groups]

TIMEOUT = 40.0
PER_PARTITION = 5


def _setup(bootstrap: str, shell: Any) -> tuple[str, str]:
    src, out = unique_name("eos-in"), unique_name("eos-out")
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(src, 2, 1), NewTopic(out, 1, 1)], timeout=TIMEOUT)
        until_known(admin, src, 2)
        until_known(admin, out, 1)
    with shell.Producer(bootstrap_servers=bootstrap) as p:
        for i in range(2 * PER_PARTITION):
            p.send(src, b"%d" % i, partition=i % 2)
        p.flush(TIMEOUT)
    return src, out


def _poll_until(consumers: list[Any], done: Any, what: str) -> dict[TopicPartition, int]:
    """Poll every consumer until ``done()``; the next offset each consumer read up to."""
    read: dict[TopicPartition, int] = {}
    deadline = time.monotonic() + TIMEOUT
    while not done():
        assert time.monotonic() < deadline, f"{what}: " + "; ".join(str(c.group_state()) for c in consumers)
        for c in consumers:
            for r in c.poll(timeout=0.1):
                read[TopicPartition(r.topic, r.partition)] = r.offset + 1
    return read


def _committed(bootstrap: str, group: str) -> dict[Any, int]:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return {tp: om.offset for tp, om in admin.list_group_offsets(group, timeout=TIMEOUT).items()}


# Kafka answers a stale member epoch in TxnOffsetCommit with ILLEGAL_GENERATION too, not
# STALE_MEMBER_EPOCH as in OffsetCommit v9 (KIP-848).
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_zombie_members_offsets_are_refused(kafka_broker, shell, protocol):
    refusal = errors.IllegalGenerationError
    b = kafka_broker.bootstrap
    src, out = _setup(b, shell)
    group = unique_name(f"eos-{protocol}")
    config = dict(bootstrap_servers=b, group_id=group, group_protocol=protocol, enable_auto_commit=False,
                  auto_offset_reset="earliest", isolation_level="read_committed")
    a = shell.Consumer(client_id="member-a", **config)
    members = [a]
    producer = shell.Producer(bootstrap_servers=b, transactional_id=unique_name("eos-txn"))
    try:
        producer.init_transactions(TIMEOUT)
        a.subscribe([src])
        # A owns both partitions and reads everything in them, inside a transaction.
        read: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + TIMEOUT
        while sum(read.values()) < 2 * PER_PARTITION:
            assert time.monotonic() < deadline, (read, a.group_state())
            for r in a.poll(timeout=0.2):
                read[TopicPartition(r.topic, r.partition)] = r.offset + 1
        producer.begin_transaction()
        producer.send(out, b"from A")
        zombie = a.group_metadata()
        state = a.group_state()
        assert isinstance(zombie, ConsumerGroupMetadata)
        assert (zombie.group_id, zombie.member_id, zombie.group_instance_id) == (group, state["member_id"], None)
        assert zombie.generation_id == state["generation"] >= 1

        # B joins: the group moves on to a new generation / epoch, and takes a partition from A.
        bee = shell.Consumer(client_id="member-b", **config)
        members.append(bee)
        bee.subscribe([src])
        _poll_until(members, lambda: len(a.assignment()) == 1 and len(bee.assignment()) == 1
                    and all(c.group_state()["state"] == "stable" for c in members), "B takes a partition")
        assert a.group_metadata().generation_id > zombie.generation_id

        # A's offsets as of before the rebalance are a zombie's: refused, typed, and the
        # transaction can only be aborted.
        with pytest.raises(refusal) as info:
            producer.send_offsets_to_transaction(read, zombie, timeout=TIMEOUT)
        assert "no longer that member" in str(info.value) and zombie.member_id in str(info.value)
        with pytest.raises(errors.KafkaWireError):
            producer.commit_transaction(TIMEOUT)
        producer.abort_transaction(TIMEOUT)
        assert _committed(b, group) == {}

        # A's current place in the group commits the partition it still owns.
        (kept,) = a.assignment()
        producer.begin_transaction()
        producer.send(out, b"from A again")
        producer.send_offsets_to_transaction({kept: read[kept]}, a.group_metadata(), timeout=TIMEOUT)
        producer.commit_transaction(TIMEOUT)
        # The coordinator applies transactional offsets once EndTxn's marker is written.
        eventually(lambda: _committed(b, group), {kept: PER_PARTITION})
    finally:
        producer.close()
        for c in members:
            c.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_id_alone_commits_as_an_outsider(kafka_broker, shell, protocol):
    """Without group metadata the offsets go with generation -1 and no member id: Kafka
    takes them even while the group has members (no fencing, as with the Java client's
    deprecated overload that takes a group id)."""
    b = kafka_broker.bootstrap
    src, out = _setup(b, shell)
    group = unique_name("eos-str")
    c = shell.Consumer(bootstrap_servers=b, group_id=group, group_protocol=protocol, enable_auto_commit=False,
                       auto_offset_reset="earliest")
    producer = shell.Producer(bootstrap_servers=b, transactional_id=unique_name("eos-txn"))
    try:
        producer.init_transactions(TIMEOUT)
        c.subscribe([src])
        _poll_until([c], lambda: len(c.assignment()) == 2 and c.group_state()["state"] == "stable", "joined")
        producer.begin_transaction()
        producer.send(out, b"v")
        producer.send_offsets_to_transaction({(src, 0): 3, (src, 1): 4}, group, timeout=TIMEOUT)
        producer.commit_transaction(TIMEOUT)
    finally:
        producer.close()
        c.close()
    eventually(lambda: _committed(b, group), {TopicPartition(src, 0): 3, TopicPartition(src, 1): 4})


def test_a_replaced_static_members_offsets_are_refused(kafka_broker, shell):
    """A static member (group_instance_id) whose instance a new process took over is a
    zombie: the coordinator gave the instance a new member id, and answers the old one's
    offsets FENCED_INSTANCE_ID (KIP-345, KIP-447)."""
    b = kafka_broker.bootstrap
    src, out = _setup(b, shell)
    group, instance = unique_name("eos-static"), unique_name("instance")
    config = dict(bootstrap_servers=b, group_id=group, group_instance_id=instance, enable_auto_commit=False,
                  auto_offset_reset="earliest", session_timeout_ms=30000)
    old = shell.Consumer(client_id="old-process", **config)
    members = [old]
    producer = shell.Producer(bootstrap_servers=b, transactional_id=unique_name("eos-txn"))
    try:
        producer.init_transactions(TIMEOUT)
        old.subscribe([src])
        read = _poll_until([old], lambda: len(old.assignment()) == 2 and old.group_state()["state"] == "stable",
                           "the old process joins")
        zombie = old.group_metadata()
        assert (zombie.group_instance_id, zombie.member_id) == (instance, old.group_state()["member_id"])

        new = shell.Consumer(client_id="new-process", **config)
        members.append(new)
        new.subscribe([src])
        _poll_until([new], lambda: len(new.assignment()) == 2 and new.group_state()["state"] == "stable",
                    "the new process takes the instance over")
        assert new.group_metadata().member_id != zombie.member_id

        producer.begin_transaction()
        producer.send(out, b"from the old process")
        with pytest.raises(errors.FencedInstanceIdError) as info:
            producer.send_offsets_to_transaction(read or {TopicPartition(src, 0): 1}, zombie, timeout=TIMEOUT)
        assert instance in str(info.value)
        producer.abort_transaction(TIMEOUT)

        producer.begin_transaction()
        producer.send(out, b"from the new process")
        producer.send_offsets_to_transaction({TopicPartition(src, 0): 2}, new.group_metadata(), timeout=TIMEOUT)
        producer.commit_transaction(TIMEOUT)
        eventually(lambda: _committed(b, group), {TopicPartition(src, 0): 2})
    finally:
        producer.close()
        for c in members:
            c.close()
