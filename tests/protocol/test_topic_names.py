"""The I/O-free rules both producers apply before a record is queued (topic names, the
partition range) and how ClusterMetadata hands out a topic's permanent Metadata error:
at once when it came in an answer the caller waited for, never from an older answer, and
once per answer to a polling consumer.  (On Apache Kafka: tests/integration/test_kafka_errors.py.)"""

from __future__ import annotations

import uuid

import pytest

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.metadata import (
    MAX_TOPIC_NAME_LENGTH,
    ClusterMetadata,
    check_partition_in_range,
    check_topic_name,
)

METADATA = apis.get("Metadata")
R = METADATA.Response
T = R.MetadataResponseTopic
P = T.MetadataResponsePartition


@pytest.mark.parametrize("name", ["t", "a.b_c-D9", "." * 3, "x" * MAX_TOPIC_NAME_LENGTH])
def test_legal_names_pass(name):
    assert check_topic_name(name) == name


@pytest.mark.parametrize("name, problem", [
    ("", "it is empty"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("bad topic!", "it contains ' ', '!'"),
    ("caf\u00e9", "it contains '\u00e9'"),
    ("a/b", "it contains '/'"),
    ("x" * (MAX_TOPIC_NAME_LENGTH + 1), "it has 250 characters, more than 249"),
])
def test_illegal_names_are_refused_saying_why(name, problem):
    with pytest.raises(errors.InvalidTopicError) as info:
        check_topic_name(name)
    assert problem in str(info.value)
    assert info.value.code == 17 and not info.value.retriable


def test_a_name_that_is_not_a_str_is_refused():
    with pytest.raises(errors.InvalidTopicError, match="must be a str, got bytes"):
        check_topic_name(b"t")


def test_a_partition_outside_the_count_is_refused():
    check_partition_in_range("t", 3, 4)
    with pytest.raises(errors.UnknownPartitionError, match=r"'t' has 4 partitions \(0-3\), so partition 99") as info:
        check_partition_in_range("t", 99, 4)
    assert (info.value.topic, info.value.partition, info.value.count) == ("t", 99, 4)
    assert not info.value.retriable
    with pytest.raises(errors.UnknownPartitionError, match=r"has 1 partition \(0-0\)"):
        check_partition_in_range("t", 1, 1)


def answer(code: int, name: str = "t"):
    parts = [] if code else [P(error_code=0, partition_index=0, leader_id=1, leader_epoch=0,
                                replica_nodes=[1], isr_nodes=[1], offline_replicas=[])]
    return R(brokers=[], cluster_id="c", controller_id=1,
             topics=[T(error_code=code, name=name, topic_id=uuid.UUID(int=0), is_internal=False, partitions=parts)])


def test_a_permanent_topic_error_raises_only_from_an_answer_asked_for():
    meta = ClusterMetadata(300000, 100)
    meta.apply(answer(29), 1.0)
    with pytest.raises(errors.TopicAuthorizationFailedError, match="grant this client's principal"):
        meta.partitions("t", since=1.0)
    assert meta.partitions("t", since=2.0) is None  # older than the call: ask again first
    meta.apply(answer(0), 3.0)  # an ACL granted since
    assert meta.partitions("t", since=2.0) == [0]


@pytest.mark.parametrize("code", [3, 5])
def test_retriable_topic_errors_wait(code):
    meta = ClusterMetadata(300000, 100)
    meta.apply(answer(code), 1.0)
    assert meta.partitions("t", since=0.0) is None
    assert meta.topic_error("t") is None and meta.take_topic_error(["t"]) is None


def test_a_poll_takes_each_answers_error_once():
    meta = ClusterMetadata(300000, 100)
    meta.apply(answer(17), 1.0)
    assert isinstance(meta.take_topic_error(["t"]), errors.InvalidTopicError)
    assert meta.take_topic_error(["t"]) is None  # the same answer: the next poll waits
    meta.apply(answer(17), 2.0)
    assert isinstance(meta.take_topic_error(["t"]), errors.InvalidTopicError)


def test_broker_errors_say_what_to_do():
    assert "message.max.bytes" in str(errors.broker_error(10, "produce"))
    assert "ACL on the group id" in str(errors.broker_error(30, "join"))


def test_a_poll_loop_looks_once_per_answer():
    meta = ClusterMetadata(300000, 100)
    meta.raise_new_topic_error(None)  # not subscribed
    meta.apply(answer(29), 1.0)
    with pytest.raises(errors.TopicAuthorizationFailedError):
        meta.raise_new_topic_error({"t"})
    meta.raise_new_topic_error({"t"})  # no new answer: nothing
    meta.apply(answer(29), 2.0)
    with pytest.raises(errors.TopicAuthorizationFailedError):
        meta.raise_new_topic_error({"t"})
