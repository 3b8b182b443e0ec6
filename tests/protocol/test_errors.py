"""The broker error table in kafkawire.errors: complete, consistent, and usable."""

from __future__ import annotations

import re

import pytest

from kafkawire import errors

TABLE = errors.all_broker_errors()


def test_every_code_from_minus_one_to_133_has_a_class():
    codes = [cls.code for cls in TABLE]
    assert codes == sorted(codes)
    assert set(codes) == {-1} | set(range(1, 134))


def test_codes_names_and_class_names_are_unique():
    assert len({cls.code for cls in TABLE}) == len(TABLE)
    assert len({cls.name for cls in TABLE}) == len(TABLE)
    assert len({cls.__name__ for cls in TABLE}) == len(TABLE)


@pytest.mark.parametrize("cls", TABLE, ids=lambda c: c.__name__)
def test_each_entry_is_complete(cls):
    assert issubclass(cls, errors.BrokerError)
    assert errors.for_code(cls.code) is cls
    assert re.fullmatch(r"[A-Z][A-Z0-9_]*", cls.name)
    assert cls.__name__.endswith("Error")
    assert isinstance(cls.retriable, bool)
    assert cls.meaning and "\n" not in cls.meaning
    assert cls.__name__ in errors.__all__
    assert getattr(errors, cls.__name__) is cls
    assert errors.class_name_for_code(cls.code) == cls.__name__
    assert errors.name_for_code(cls.code) == cls.name
    # The default message names the error and its code.
    assert str(cls()).startswith(f"{cls.name} ({cls.code})") or cls is errors.CorruptRecordError


@pytest.mark.parametrize(
    "name,class_name",
    [
        ("NOT_LEADER_OR_FOLLOWER", "NotLeaderOrFollowerError"),
        ("UNKNOWN_SERVER_ERROR", "UnknownServerError"),
        ("KAFKA_STORAGE_ERROR", "KafkaStorageError"),
        ("NETWORK_EXCEPTION", "NetworkError"),
        ("INVALID_TOPIC_EXCEPTION", "InvalidTopicError"),
        ("MEMBER_ID_REQUIRED", "MemberIdRequiredError"),
        ("SHARE_SESSION_LIMIT_REACHED", "ShareSessionLimitReachedError"),
    ],
)
def test_class_names_follow_kafka_names(name, class_name):
    assert errors.for_name(name).__name__ == class_name


def test_code_2_is_still_the_codecs_corrupt_record_error():
    assert errors.for_code(2) is errors.CorruptRecordError
    assert errors.CorruptMessageError is errors.CorruptRecordError
    assert issubclass(errors.CorruptRecordError, errors.CodecError)
    assert errors.CorruptRecordError.name == "CORRUPT_MESSAGE"


@pytest.mark.parametrize(
    "code,retriable",
    [
        (-1, False), (1, False), (2, True), (3, True), (5, True), (6, True), (7, True),
        (10, False), (13, True), (14, True), (15, True), (16, True), (22, False),
        (25, False), (27, False), (35, False), (41, True), (47, False), (51, True),
        (56, True), (74, True), (79, False), (88, True), (89, True), (90, False),
        (100, True), (110, False), (133, True),
    ],
)
def test_retriable_flags_of_well_known_codes(code, retriable):
    assert errors.for_code(code).retriable is retriable


# spec/002's table: (spec name, code, modern Kafka name)
SPEC_TABLE = [
    ("Unknown", -1, "UNKNOWN_SERVER_ERROR"),
    ("OffsetOutOfRange", 1, "OFFSET_OUT_OF_RANGE"),
    ("InvalidMessage", 2, "CORRUPT_MESSAGE"),
    ("UnknownTopicOrPartition", 3, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("InvalidMessageSize", 4, "INVALID_FETCH_SIZE"),
    ("LeaderNotAvailable", 5, "LEADER_NOT_AVAILABLE"),
    ("NotLeaderForPartition", 6, "NOT_LEADER_OR_FOLLOWER"),
    ("RequestTimedOut", 7, "REQUEST_TIMED_OUT"),
    ("BrokerNotAvailable", 8, "BROKER_NOT_AVAILABLE"),
    ("Unused", 9, "REPLICA_NOT_AVAILABLE"),
    ("MessageSizeTooLarge", 10, "MESSAGE_TOO_LARGE"),
    ("StaleControllerEpochCode", 11, "STALE_CONTROLLER_EPOCH"),
    ("OffsetMetadataTooLargeCode", 12, "OFFSET_METADATA_TOO_LARGE"),
    ("OffsetsLoadInProgressCode", 14, "COORDINATOR_LOAD_IN_PROGRESS"),
    ("ConsumerCoordinatorNotAvailableCode", 15, "COORDINATOR_NOT_AVAILABLE"),
    ("NotCoordinatorForConsumerCode", 16, "NOT_COORDINATOR"),
]


@pytest.mark.parametrize("spec_name,code,kafka_name", SPEC_TABLE)
def test_spec_table_codes_present_under_modern_names(spec_name, code, kafka_name):
    assert errors.SPEC_NAMES[spec_name] == code
    cls = errors.for_code(code)
    assert cls.name == kafka_name
    assert errors.for_name(spec_name) is cls
    assert errors.for_name(kafka_name) is cls


def test_spec_meanings_are_kept():
    assert "does not exist on this broker" in errors.for_code(3).meaning
    assert "out of date" in errors.for_code(6).meaning
    assert "offsets topic has not yet been created" in errors.for_code(15).meaning
    assert "still loading offsets" in errors.for_code(14).meaning
    assert errors.SPEC_NAMES["NoError"] == 0


def test_former_kafka_names():
    assert errors.for_name("NOT_LEADER_FOR_PARTITION") is errors.NotLeaderOrFollowerError
    assert errors.for_name("GROUP_COORDINATOR_NOT_AVAILABLE") is errors.CoordinatorNotAvailableError
    assert errors.for_name("NOT_COORDINATOR_FOR_GROUP") is errors.NotCoordinatorError
    with pytest.raises(KeyError, match="NO_SUCH_ERROR"):
        errors.for_name("NO_SUCH_ERROR")
    with pytest.raises(KeyError):
        errors.for_name("NoError")


def test_raise_for_code():
    assert errors.raise_for_code(0) is None
    assert errors.raise_for_code(0, "anything") is None
    with pytest.raises(errors.NotCoordinatorError) as info:
        errors.raise_for_code(16, "OffsetCommit of group 'g'")
    exc = info.value
    assert exc.code == 16 and exc.retriable is True
    assert str(exc).startswith("OffsetCommit of group 'g': NOT_COORDINATOR (16): ")
    assert "retry" in str(exc)
    with pytest.raises(errors.UnknownMemberIdError, match=r"^UNKNOWN_MEMBER_ID \(25\)") as info:
        errors.raise_for_code(25)
    assert "retry" not in str(info.value)
    with pytest.raises(errors.CorruptRecordError, match="CORRUPT_MESSAGE"):
        errors.raise_for_code(2, "Produce")


def test_unknown_codes():
    assert errors.for_code(30000) is errors.UnknownBrokerError
    assert errors.class_name_for_code(30000) == "UnknownBrokerError"
    assert errors.name_for_code(30000) == "UNKNOWN_ERROR_CODE_30000"
    assert errors.name_for_code(0) == "NONE" and errors.class_name_for_code(0) is None
    with pytest.raises(errors.UnknownBrokerError, match="code 30000 is unknown") as info:
        errors.raise_for_code(30000, "Fetch")
    assert info.value.code == 30000
    assert errors.UnknownBrokerError.code == -1  # the class itself is unchanged


def test_broker_errors_are_catchable_as_kafkawire_errors():
    with pytest.raises(errors.KafkaWireError):
        errors.raise_for_code(27)
