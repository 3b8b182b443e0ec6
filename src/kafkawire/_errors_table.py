"""The broker error table: one :class:`~kafkawire.errors.BrokerError` subclass per error
code Kafka defines, each with ``code``, ``name``, ``retriable`` and a one-line ``meaning``,
and the look-ups over it (:func:`for_code`, :func:`for_name`, :func:`raise_for_code`,
:func:`broker_error`).  Codes and names follow the error table of Kafka's protocol guide
(https://kafka.apache.org/protocol#protocol_error_codes).  Import from
:mod:`kafkawire.errors`; this module does no I/O.
"""

from __future__ import annotations

from kafkawire._errors_base import BrokerError
from kafkawire._errors_codec import CorruptRecordError

__all__ = [
    "UnknownBrokerError",
    "register_broker_error",
    "for_code",
    "UnknownServerError",
    "OffsetOutOfRangeError",
    "UnknownTopicOrPartitionError",
    "InvalidFetchSizeError",
    "LeaderNotAvailableError",
    "NotLeaderOrFollowerError",
    "RequestTimedOutError",
    "BrokerNotAvailableError",
    "ReplicaNotAvailableError",
    "MessageTooLargeError",
    "StaleControllerEpochError",
    "OffsetMetadataTooLargeError",
    "NetworkError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "NotCoordinatorError",
    "InvalidTopicError",
    "RecordListTooLargeError",
    "NotEnoughReplicasError",
    "NotEnoughReplicasAfterAppendError",
    "InvalidRequiredAcksError",
    "IllegalGenerationError",
    "InconsistentGroupProtocolError",
    "InvalidGroupIdError",
    "UnknownMemberIdError",
    "InvalidSessionTimeoutError",
    "RebalanceInProgressError",
    "InvalidCommitOffsetSizeError",
    "TopicAuthorizationFailedError",
    "GroupAuthorizationFailedError",
    "ClusterAuthorizationFailedError",
    "InvalidTimestampError",
    "UnsupportedSaslMechanismError",
    "IllegalSaslStateError",
    "UnsupportedVersionError",
    "TopicAlreadyExistsError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "InvalidReplicaAssignmentError",
    "InvalidConfigError",
    "NotControllerError",
    "InvalidRequestError",
    "UnsupportedForMessageFormatError",
    "PolicyViolationError",
    "OutOfOrderSequenceNumberError",
    "DuplicateSequenceNumberError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "InvalidProducerIdMappingError",
    "InvalidTransactionTimeoutError",
    "ConcurrentTransactionsError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "SecurityDisabledError",
    "OperationNotAttemptedError",
    "KafkaStorageError",
    "LogDirNotFoundError",
    "SaslAuthenticationFailedError",
    "UnknownProducerIdError",
    "ReassignmentInProgressError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "InvalidPrincipalTypeError",
    "NonEmptyGroupError",
    "GroupIdNotFoundError",
    "FetchSessionIdNotFoundError",
    "InvalidFetchSessionEpochError",
    "ListenerNotFoundError",
    "TopicDeletionDisabledError",
    "FencedLeaderEpochError",
    "UnknownLeaderEpochError",
    "UnsupportedCompressionTypeError",
    "StaleBrokerEpochError",
    "OffsetNotAvailableError",
    "MemberIdRequiredError",
    "PreferredLeaderNotAvailableError",
    "GroupMaxSizeReachedError",
    "FencedInstanceIdError",
    "EligibleLeadersNotAvailableError",
    "ElectionNotNeededError",
    "NoReassignmentInProgressError",
    "GroupSubscribedToTopicError",
    "InvalidRecordError",
    "UnstableOffsetCommitError",
    "ThrottlingQuotaExceededError",
    "ProducerFencedError",
    "ResourceNotFoundError",
    "DuplicateResourceError",
    "UnacceptableCredentialError",
    "InconsistentVoterSetError",
    "InvalidUpdateVersionError",
    "FeatureUpdateFailedError",
    "PrincipalDeserializationFailureError",
    "SnapshotNotFoundError",
    "PositionOutOfRangeError",
    "UnknownTopicIdError",
    "DuplicateBrokerRegistrationError",
    "BrokerIdNotRegisteredError",
    "InconsistentTopicIdError",
    "InconsistentClusterIdError",
    "TransactionalIdNotFoundError",
    "FetchSessionTopicIdError",
    "IneligibleReplicaError",
    "NewLeaderElectedError",
    "OffsetMovedToTieredStorageError",
    "FencedMemberEpochError",
    "UnreleasedInstanceIdError",
    "UnsupportedAssignorError",
    "StaleMemberEpochError",
    "MismatchedEndpointTypeError",
    "UnsupportedEndpointTypeError",
    "UnknownControllerIdError",
    "UnknownSubscriptionIdError",
    "TelemetryTooLargeError",
    "InvalidRegistrationError",
    "TransactionAbortableError",
    "InvalidRecordStateError",
    "ShareSessionNotFoundError",
    "InvalidShareSessionEpochError",
    "FencedStateEpochError",
    "InvalidVoterKeyError",
    "DuplicateVoterError",
    "VoterNotFoundError",
    "InvalidRegularExpressionError",
    "RebootstrapRequiredError",
    "StreamsInvalidTopologyError",
    "StreamsInvalidTopologyEpochError",
    "StreamsTopologyFencedError",
    "ShareSessionLimitReachedError",
    "CorruptMessageError",
    "SPEC_NAMES",
    "FORMER_NAMES",
    "all_broker_errors",
    "name_for_code",
    "class_name_for_code",
    "for_name",
    "raise_for_code",
    "broker_error",
]


class UnknownBrokerError(BrokerError):
    """A broker error code this version of kafkawire does not know."""


# Per-code classes are registered here by the table below (or by register_broker_error);
# for_code() falls back to UnknownBrokerError.
_BY_CODE: dict[int, type[BrokerError]] = {2: CorruptRecordError}


def register_broker_error(cls: type[BrokerError]) -> type[BrokerError]:
    """Register ``cls`` as the exception for its ``code`` (used as a class decorator)."""
    _BY_CODE[cls.code] = cls
    return cls


def for_code(code: int) -> type[BrokerError]:
    """The exception class for a Kafka error code (UnknownBrokerError if unknown)."""
    return _BY_CODE.get(code, UnknownBrokerError)


# ---------------------------------------------------------------------------------------
# The error table: one class per error code Kafka defines (-1 and 1 to 133; 0 is NONE, and
# 2 is the codec's CorruptRecordError).  Codes, names and retriable flags follow the
# protocol guide's error table; the meanings of -1 to 16 follow its 0.8.2 edition.
# ---------------------------------------------------------------------------------------


def _table_entry(cls: type[BrokerError]) -> type[BrokerError]:
    kind = "retriable" if cls.retriable else "not retriable"
    cls.__doc__ = f"{cls.name} ({cls.code}, {kind}): {cls.meaning}"
    return register_broker_error(cls)


@_table_entry
class UnknownServerError(BrokerError):
    code, name, retriable = -1, "UNKNOWN_SERVER_ERROR", False
    meaning = "An unexpected server error."


@_table_entry
class OffsetOutOfRangeError(BrokerError):
    """Also what a consumer raises when a position is outside the log and
    auto_offset_reset is "none": then ``partitions`` is {(topic, partition): offset}."""

    code, name, retriable = 1, "OFFSET_OUT_OF_RANGE", False
    meaning = (
        "The requested offset is outside the range of offsets maintained by the server for "
        "the given topic/partition."
    )

    def __init__(self, message: str | None = None, partitions: dict | None = None):
        super().__init__(message)
        self.partitions = partitions or {}


@_table_entry
class UnknownTopicOrPartitionError(BrokerError):
    code, name, retriable = 3, "UNKNOWN_TOPIC_OR_PARTITION", True
    meaning = "This request is for a topic or partition that does not exist on this broker."


@_table_entry
class InvalidFetchSizeError(BrokerError):
    code, name, retriable = 4, "INVALID_FETCH_SIZE", False
    meaning = (
        "The message has a negative size; newer brokers use this code for a fetch size they "
        "cannot accept."
    )


@_table_entry
class LeaderNotAvailableError(BrokerError):
    code, name, retriable = 5, "LEADER_NOT_AVAILABLE", True
    meaning = (
        "There is currently no leader for this partition, typically during a leadership "
        "election, so it is unavailable for writes."
    )


@_table_entry
class NotLeaderOrFollowerError(BrokerError):
    code, name, retriable = 6, "NOT_LEADER_OR_FOLLOWER", True
    meaning = (
        "The request went to a replica that is not the leader (or not a follower) for the "
        "partition: the client's metadata is out of date."
    )


@_table_entry
class RequestTimedOutError(BrokerError):
    code, name, retriable = 7, "REQUEST_TIMED_OUT", True
    meaning = "The request exceeded the user-specified time limit in the request."


@_table_entry
class BrokerNotAvailableError(BrokerError):
    code, name, retriable = 8, "BROKER_NOT_AVAILABLE", False
    meaning = (
        "Not a client-facing error; used only internally by intra-cluster broker "
        "communication."
    )


@_table_entry
class ReplicaNotAvailableError(BrokerError):
    code, name, retriable = 9, "REPLICA_NOT_AVAILABLE", True
    meaning = (
        "A replica of the partition is not available on the broker (unused in the 0.8 "
        "protocol)."
    )


@_table_entry
class MessageTooLargeError(BrokerError):
    code, name, retriable = 10, "MESSAGE_TOO_LARGE", False
    meaning = (
        "The client tried to produce a message larger than the server's configured maximum "
        "message size."
    )
    fix = (
        "the batch is larger than the broker's message.max.bytes (or the topic's "
        "max.message.bytes): send smaller records, lower batch_size, or raise that limit"
    )


@_table_entry
class StaleControllerEpochError(BrokerError):
    code, name, retriable = 11, "STALE_CONTROLLER_EPOCH", False
    meaning = "Internal error code for broker-to-broker communication (the controller moved)."


@_table_entry
class OffsetMetadataTooLargeError(BrokerError):
    code, name, retriable = 12, "OFFSET_METADATA_TOO_LARGE", False
    meaning = (
        "The offset metadata string is larger than the configured maximum for offset "
        "metadata."
    )


@_table_entry
class NetworkError(BrokerError):
    code, name, retriable = 13, "NETWORK_EXCEPTION", True
    meaning = "The connection to the broker was lost before a response arrived."


@_table_entry
class CoordinatorLoadInProgressError(BrokerError):
    code, name, retriable = 14, "COORDINATOR_LOAD_IN_PROGRESS", True
    meaning = (
        "The coordinator is still loading offsets (after a leader change for that offsets "
        "topic partition)."
    )


@_table_entry
class CoordinatorNotAvailableError(BrokerError):
    code, name, retriable = 15, "COORDINATOR_NOT_AVAILABLE", True
    meaning = (
        "The coordinator is not available, for example because the offsets topic has not "
        "yet been created."
    )


@_table_entry
class NotCoordinatorError(BrokerError):
    code, name, retriable = 16, "NOT_COORDINATOR", True
    meaning = "The broker is not the coordinator for this consumer group (or transactional id)."


@_table_entry
class InvalidTopicError(BrokerError):
    code, name, retriable = 17, "INVALID_TOPIC_EXCEPTION", False
    meaning = "The topic name is invalid or the topic cannot be used for this operation."
    fix = (
        "check the topic name (1-249 of a-z A-Z 0-9 . _ -); internal topics (such as "
        "__consumer_offsets) take no records from clients"
    )


@_table_entry
class RecordListTooLargeError(BrokerError):
    code, name, retriable = 18, "RECORD_LIST_TOO_LARGE", False
    meaning = "The produced batch is larger than the segment size configured on the broker."


@_table_entry
class NotEnoughReplicasError(BrokerError):
    code, name, retriable = 19, "NOT_ENOUGH_REPLICAS", True
    meaning = "Too few in-sync replicas to accept the write with the requested acks."


@_table_entry
class NotEnoughReplicasAfterAppendError(BrokerError):
    code, name, retriable = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True
    meaning = "The write reached the log but fewer in-sync replicas than required acknowledged it."


@_table_entry
class InvalidRequiredAcksError(BrokerError):
    code, name, retriable = 21, "INVALID_REQUIRED_ACKS", False
    meaning = "The produce request carried an acks value the broker does not accept."


@_table_entry
class IllegalGenerationError(BrokerError):
    code, name, retriable = 22, "ILLEGAL_GENERATION", False
    meaning = "The group generation id in the request is not the group's current one."


@_table_entry
class InconsistentGroupProtocolError(BrokerError):
    code, name, retriable = 23, "INCONSISTENT_GROUP_PROTOCOL", False
    meaning = (
        "The member's protocol type or protocols do not match those of the group's current "
        "members."
    )


@_table_entry
class InvalidGroupIdError(BrokerError):
    code, name, retriable = 24, "INVALID_GROUP_ID", False
    meaning = "The group id is empty or otherwise invalid."


@_table_entry
class UnknownMemberIdError(BrokerError):
    code, name, retriable = 25, "UNKNOWN_MEMBER_ID", False
    meaning = "The coordinator does not know this member id."


@_table_entry
class InvalidSessionTimeoutError(BrokerError):
    code, name, retriable = 26, "INVALID_SESSION_TIMEOUT", False
    meaning = "The session timeout is outside the broker's group.min/max.session.timeout.ms range."


@_table_entry
class RebalanceInProgressError(BrokerError):
    code, name, retriable = 27, "REBALANCE_IN_PROGRESS", False
    meaning = "The group is rebalancing; the member must rejoin."


@_table_entry
class InvalidCommitOffsetSizeError(BrokerError):
    code, name, retriable = 28, "INVALID_COMMIT_OFFSET_SIZE", False
    meaning = "The offset commit carried data of an invalid size."


@_table_entry
class TopicAuthorizationFailedError(BrokerError):
    code, name, retriable = 29, "TOPIC_AUTHORIZATION_FAILED", False
    meaning = "The client is not authorized to access the topic."
    fix = (
        "grant this client's principal an ACL on the topic (Describe, plus Write to "
        "produce or Read to consume)"
    )


@_table_entry
class GroupAuthorizationFailedError(BrokerError):
    code, name, retriable = 30, "GROUP_AUTHORIZATION_FAILED", False
    meaning = "The client is not authorized to access the group."
    fix = (
        "grant this client's principal an ACL on the group id (Read to join and commit, "
        "Describe to describe)"
    )


@_table_entry
class ClusterAuthorizationFailedError(BrokerError):
    code, name, retriable = 31, "CLUSTER_AUTHORIZATION_FAILED", False
    meaning = "The client is not authorized for this cluster-level operation."
    fix = (
        "this call needs an ACL on the cluster resource for this client's principal"
    )


@_table_entry
class InvalidTimestampError(BrokerError):
    code, name, retriable = 32, "INVALID_TIMESTAMP", False
    meaning = "A record timestamp is outside the range the broker accepts."


@_table_entry
class UnsupportedSaslMechanismError(BrokerError):
    code, name, retriable = 33, "UNSUPPORTED_SASL_MECHANISM", False
    meaning = "The broker does not offer the requested SASL mechanism."


@_table_entry
class IllegalSaslStateError(BrokerError):
    code, name, retriable = 34, "ILLEGAL_SASL_STATE", False
    meaning = "The request is not allowed in the connection's current SASL state."


@_table_entry
class UnsupportedVersionError(BrokerError):
    code, name, retriable = 35, "UNSUPPORTED_VERSION", False
    meaning = "The broker does not support this version of the API."


@_table_entry
class TopicAlreadyExistsError(BrokerError):
    code, name, retriable = 36, "TOPIC_ALREADY_EXISTS", False
    meaning = "A topic with this name already exists."


@_table_entry
class InvalidPartitionsError(BrokerError):
    code, name, retriable = 37, "INVALID_PARTITIONS", False
    meaning = "The requested number of partitions is invalid."


@_table_entry
class InvalidReplicationFactorError(BrokerError):
    code, name, retriable = 38, "INVALID_REPLICATION_FACTOR", False
    meaning = "The requested replication factor is invalid."


@_table_entry
class InvalidReplicaAssignmentError(BrokerError):
    code, name, retriable = 39, "INVALID_REPLICA_ASSIGNMENT", False
    meaning = "The requested replica assignment is invalid."


@_table_entry
class InvalidConfigError(BrokerError):
    code, name, retriable = 40, "INVALID_CONFIG", False
    meaning = "The requested configuration is invalid."


@_table_entry
class NotControllerError(BrokerError):
    code, name, retriable = 41, "NOT_CONTROLLER", True
    meaning = "The request went to a broker that is not the cluster's active controller."


@_table_entry
class InvalidRequestError(BrokerError):
    code, name, retriable = 42, "INVALID_REQUEST", False
    meaning = (
        "The broker could not make sense of the request (malformed, or sent to an "
        "incompatible broker); its log has details."
    )


@_table_entry
class UnsupportedForMessageFormatError(BrokerError):
    code, name, retriable = 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False
    meaning = "The topic's message format version does not support this request."


@_table_entry
class PolicyViolationError(BrokerError):
    code, name, retriable = 44, "POLICY_VIOLATION", False
    meaning = "The request breaks a policy configured on the broker."


@_table_entry
class OutOfOrderSequenceNumberError(BrokerError):
    code, name, retriable = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False
    meaning = "The broker received a producer sequence number out of order."


@_table_entry
class DuplicateSequenceNumberError(BrokerError):
    code, name, retriable = 46, "DUPLICATE_SEQUENCE_NUMBER", False
    meaning = "The broker received a producer sequence number it has already seen."


@_table_entry
class InvalidProducerEpochError(BrokerError):
    code, name, retriable = 47, "INVALID_PRODUCER_EPOCH", False
    meaning = (
        "The producer's epoch is stale: a newer producer took over its transactional id, or "
        "its transaction expired."
    )


@_table_entry
class InvalidTxnStateError(BrokerError):
    code, name, retriable = 48, "INVALID_TXN_STATE", False
    meaning = "The transactional operation is not valid in the transaction's current state."


@_table_entry
class InvalidProducerIdMappingError(BrokerError):
    code, name, retriable = 49, "INVALID_PRODUCER_ID_MAPPING", False
    meaning = "The producer id is not the one currently assigned to this transactional id."


@_table_entry
class InvalidTransactionTimeoutError(BrokerError):
    code, name, retriable = 50, "INVALID_TRANSACTION_TIMEOUT", False
    meaning = "The transaction timeout exceeds the broker's max.transaction.timeout.ms."


@_table_entry
class ConcurrentTransactionsError(BrokerError):
    code, name, retriable = 51, "CONCURRENT_TRANSACTIONS", True
    meaning = "Another operation on the same transaction is still in progress."


@_table_entry
class TransactionCoordinatorFencedError(BrokerError):
    code, name, retriable = 52, "TRANSACTION_COORDINATOR_FENCED", False
    meaning = "The transaction coordinator that sent the markers is no longer the current one."


@_table_entry
class TransactionalIdAuthorizationFailedError(BrokerError):
    code, name, retriable = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False
    meaning = "The client is not authorized to use this transactional id."
    fix = (
        "grant this client's principal Write (and Describe) on the transactional id"
    )


@_table_entry
class SecurityDisabledError(BrokerError):
    code, name, retriable = 54, "SECURITY_DISABLED", False
    meaning = "Security features are disabled on the broker."


@_table_entry
class OperationNotAttemptedError(BrokerError):
    code, name, retriable = 55, "OPERATION_NOT_ATTEMPTED", False
    meaning = "The broker skipped this item of a batched request because another item failed."


@_table_entry
class KafkaStorageError(BrokerError):
    code, name, retriable = 56, "KAFKA_STORAGE_ERROR", True
    meaning = "The broker hit a disk error reading or writing the log."


@_table_entry
class LogDirNotFoundError(BrokerError):
    code, name, retriable = 57, "LOG_DIR_NOT_FOUND", False
    meaning = "The log directory named in the request is not configured on the broker."


@_table_entry
class SaslAuthenticationFailedError(BrokerError):
    code, name, retriable = 58, "SASL_AUTHENTICATION_FAILED", False
    meaning = "SASL authentication failed."


@_table_entry
class UnknownProducerIdError(BrokerError):
    code, name, retriable = 59, "UNKNOWN_PRODUCER_ID", False
    meaning = "The broker has no state for this producer id (it may have expired)."


@_table_entry
class ReassignmentInProgressError(BrokerError):
    code, name, retriable = 60, "REASSIGNMENT_IN_PROGRESS", False
    meaning = "A partition reassignment is already in progress."


@_table_entry
class DelegationTokenAuthDisabledError(BrokerError):
    code, name, retriable = 61, "DELEGATION_TOKEN_AUTH_DISABLED", False
    meaning = "Delegation token authentication is not enabled."


@_table_entry
class DelegationTokenNotFoundError(BrokerError):
    code, name, retriable = 62, "DELEGATION_TOKEN_NOT_FOUND", False
    meaning = "The delegation token does not exist on the server."


@_table_entry
class DelegationTokenOwnerMismatchError(BrokerError):
    code, name, retriable = 63, "DELEGATION_TOKEN_OWNER_MISMATCH", False
    meaning = "The principal is neither the token's owner nor an allowed renewer."


@_table_entry
class DelegationTokenRequestNotAllowedError(BrokerError):
    code, name, retriable = 64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False
    meaning = (
        "Delegation token requests are refused on plaintext, one-way TLS or "
        "token-authenticated connections."
    )


@_table_entry
class DelegationTokenAuthorizationFailedError(BrokerError):
    code, name, retriable = 65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False
    meaning = "The client is not authorized for this delegation token operation."


@_table_entry
class DelegationTokenExpiredError(BrokerError):
    code, name, retriable = 66, "DELEGATION_TOKEN_EXPIRED", False
    meaning = "The delegation token has expired."


@_table_entry
class InvalidPrincipalTypeError(BrokerError):
    code, name, retriable = 67, "INVALID_PRINCIPAL_TYPE", False
    meaning = "The principal type in the request is not supported."


@_table_entry
class NonEmptyGroupError(BrokerError):
    code, name, retriable = 68, "NON_EMPTY_GROUP", False
    meaning = "The group still has members, so it cannot be deleted."


@_table_entry
class GroupIdNotFoundError(BrokerError):
    code, name, retriable = 69, "GROUP_ID_NOT_FOUND", False
    meaning = "No group with this id exists."


@_table_entry
class FetchSessionIdNotFoundError(BrokerError):
    code, name, retriable = 70, "FETCH_SESSION_ID_NOT_FOUND", True
    meaning = "The incremental fetch session id is unknown to the broker."


@_table_entry
class InvalidFetchSessionEpochError(BrokerError):
    code, name, retriable = 71, "INVALID_FETCH_SESSION_EPOCH", True
    meaning = "The incremental fetch session epoch is not the expected one."


@_table_entry
class ListenerNotFoundError(BrokerError):
    code, name, retriable = 72, "LISTENER_NOT_FOUND", True
    meaning = "The leader has no listener matching the one the request arrived on."


@_table_entry
class TopicDeletionDisabledError(BrokerError):
    code, name, retriable = 73, "TOPIC_DELETION_DISABLED", False
    meaning = "Topic deletion is disabled on the broker."


@_table_entry
class FencedLeaderEpochError(BrokerError):
    code, name, retriable = 74, "FENCED_LEADER_EPOCH", True
    meaning = (
        "The leader epoch in the request is older than the broker's: refresh metadata and "
        "retry."
    )


@_table_entry
class UnknownLeaderEpochError(BrokerError):
    code, name, retriable = 75, "UNKNOWN_LEADER_EPOCH", True
    meaning = (
        "The leader epoch in the request is newer than the broker's: it has not caught up "
        "yet."
    )


@_table_entry
class UnsupportedCompressionTypeError(BrokerError):
    code, name, retriable = 76, "UNSUPPORTED_COMPRESSION_TYPE", False
    meaning = (
        "The client cannot read the compression type used for this partition (zstd needs "
        "newer fetch versions)."
    )


@_table_entry
class StaleBrokerEpochError(BrokerError):
    code, name, retriable = 77, "STALE_BROKER_EPOCH", False
    meaning = "The broker epoch in the request is out of date."


@_table_entry
class OffsetNotAvailableError(BrokerError):
    code, name, retriable = 78, "OFFSET_NOT_AVAILABLE", True
    meaning = "The leader's high watermark has not caught up yet, so the offset cannot be served."


@_table_entry
class MemberIdRequiredError(BrokerError):
    code, name, retriable = 79, "MEMBER_ID_REQUIRED", False
    meaning = "The group needs a member id: join again with the id returned in this response."


@_table_entry
class PreferredLeaderNotAvailableError(BrokerError):
    code, name, retriable = 80, "PREFERRED_LEADER_NOT_AVAILABLE", True
    meaning = "The preferred replica is not available to become leader."


@_table_entry
class GroupMaxSizeReachedError(BrokerError):
    code, name, retriable = 81, "GROUP_MAX_SIZE_REACHED", False
    meaning = "The group already has as many members as the broker allows."


@_table_entry
class FencedInstanceIdError(BrokerError):
    code, name, retriable = 82, "FENCED_INSTANCE_ID", False
    meaning = "Another member with the same group.instance.id has taken this member's place."


@_table_entry
class EligibleLeadersNotAvailableError(BrokerError):
    code, name, retriable = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True
    meaning = "No replica eligible to lead the partition is available."


@_table_entry
class ElectionNotNeededError(BrokerError):
    code, name, retriable = 84, "ELECTION_NOT_NEEDED", True
    meaning = "No leader election is needed for the partition."


@_table_entry
class NoReassignmentInProgressError(BrokerError):
    code, name, retriable = 85, "NO_REASSIGNMENT_IN_PROGRESS", False
    meaning = "There is no partition reassignment in progress to act on."


@_table_entry
class GroupSubscribedToTopicError(BrokerError):
    code, name, retriable = 86, "GROUP_SUBSCRIBED_TO_TOPIC", False
    meaning = "The group is still subscribed to the topic, so its offsets for it cannot be deleted."


@_table_entry
class InvalidRecordError(BrokerError):
    code, name, retriable = 87, "INVALID_RECORD", False
    meaning = "The broker rejected a record as invalid."


@_table_entry
class UnstableOffsetCommitError(BrokerError):
    code, name, retriable = 88, "UNSTABLE_OFFSET_COMMIT", True
    meaning = "A transactional offset commit for the partition is still pending."


@_table_entry
class ThrottlingQuotaExceededError(BrokerError):
    code, name, retriable = 89, "THROTTLING_QUOTA_EXCEEDED", True
    meaning = "The request would exceed the client's throttling quota."


@_table_entry
class ProducerFencedError(BrokerError):
    code, name, retriable = 90, "PRODUCER_FENCED", False
    meaning = "A newer producer with the same transactional id has fenced this one."


@_table_entry
class ResourceNotFoundError(BrokerError):
    code, name, retriable = 91, "RESOURCE_NOT_FOUND", False
    meaning = "The request refers to a resource that does not exist."


@_table_entry
class DuplicateResourceError(BrokerError):
    code, name, retriable = 92, "DUPLICATE_RESOURCE", False
    meaning = "The request names the same resource more than once."


@_table_entry
class UnacceptableCredentialError(BrokerError):
    code, name, retriable = 93, "UNACCEPTABLE_CREDENTIAL", False
    meaning = "The credential does not meet the broker's acceptance criteria."


@_table_entry
class InconsistentVoterSetError(BrokerError):
    code, name, retriable = 94, "INCONSISTENT_VOTER_SET", False
    meaning = "A quorum request came from or went to a node outside the expected voter set."


@_table_entry
class InvalidUpdateVersionError(BrokerError):
    code, name, retriable = 95, "INVALID_UPDATE_VERSION", False
    meaning = "The feature update version is invalid."


@_table_entry
class FeatureUpdateFailedError(BrokerError):
    code, name, retriable = 96, "FEATURE_UPDATE_FAILED", False
    meaning = "The finalized features could not be updated because of a server error."


@_table_entry
class PrincipalDeserializationFailureError(BrokerError):
    code, name, retriable = 97, "PRINCIPAL_DESERIALIZATION_FAILURE", False
    meaning = "The forwarded request's principal could not be deserialized."


@_table_entry
class SnapshotNotFoundError(BrokerError):
    code, name, retriable = 98, "SNAPSHOT_NOT_FOUND", False
    meaning = "The requested metadata snapshot does not exist."


@_table_entry
class PositionOutOfRangeError(BrokerError):
    code, name, retriable = 99, "POSITION_OUT_OF_RANGE", False
    meaning = "The requested position is outside the snapshot."


@_table_entry
class UnknownTopicIdError(BrokerError):
    code, name, retriable = 100, "UNKNOWN_TOPIC_ID", True
    meaning = "The broker does not host a topic with this topic id."


@_table_entry
class DuplicateBrokerRegistrationError(BrokerError):
    code, name, retriable = 101, "DUPLICATE_BROKER_REGISTRATION", False
    meaning = "Another broker already registered with this broker id."


@_table_entry
class BrokerIdNotRegisteredError(BrokerError):
    code, name, retriable = 102, "BROKER_ID_NOT_REGISTERED", False
    meaning = "The broker id is not registered with the controller."


@_table_entry
class InconsistentTopicIdError(BrokerError):
    code, name, retriable = 103, "INCONSISTENT_TOPIC_ID", True
    meaning = "The topic id in the request does not match the topic id of the log."


@_table_entry
class InconsistentClusterIdError(BrokerError):
    code, name, retriable = 104, "INCONSISTENT_CLUSTER_ID", False
    meaning = "The cluster id in the request does not match the server's."


@_table_entry
class TransactionalIdNotFoundError(BrokerError):
    code, name, retriable = 105, "TRANSACTIONAL_ID_NOT_FOUND", False
    meaning = "No transaction with this transactional id exists."


@_table_entry
class FetchSessionTopicIdError(BrokerError):
    code, name, retriable = 106, "FETCH_SESSION_TOPIC_ID_ERROR", True
    meaning = "The fetch session mixed topic ids inconsistently."


@_table_entry
class IneligibleReplicaError(BrokerError):
    code, name, retriable = 107, "INELIGIBLE_REPLICA", False
    meaning = "The proposed ISR contains a replica that is not eligible to join it."


@_table_entry
class NewLeaderElectedError(BrokerError):
    code, name, retriable = 108, "NEW_LEADER_ELECTED", False
    meaning = "The partition state was updated, but the leader changed in the meantime."


@_table_entry
class OffsetMovedToTieredStorageError(BrokerError):
    code, name, retriable = 109, "OFFSET_MOVED_TO_TIERED_STORAGE", False
    meaning = "The requested offset now lives only in tiered storage."


@_table_entry
class FencedMemberEpochError(BrokerError):
    code, name, retriable = 110, "FENCED_MEMBER_EPOCH", False
    meaning = "The group coordinator fenced this member's epoch; the member must rejoin."


@_table_entry
class UnreleasedInstanceIdError(BrokerError):
    code, name, retriable = 111, "UNRELEASED_INSTANCE_ID", False
    meaning = "The group.instance.id is still held by another member of the group."


@_table_entry
class UnsupportedAssignorError(BrokerError):
    code, name, retriable = 112, "UNSUPPORTED_ASSIGNOR", False
    meaning = "The group does not support the requested assignor or its version range."


@_table_entry
class StaleMemberEpochError(BrokerError):
    code, name, retriable = 113, "STALE_MEMBER_EPOCH", False
    meaning = "The member epoch in the request is older than the member's current one."


@_table_entry
class MismatchedEndpointTypeError(BrokerError):
    code, name, retriable = 114, "MISMATCHED_ENDPOINT_TYPE", False
    meaning = "The request was sent to an endpoint of the wrong kind (broker versus controller)."


@_table_entry
class UnsupportedEndpointTypeError(BrokerError):
    code, name, retriable = 115, "UNSUPPORTED_ENDPOINT_TYPE", False
    meaning = "This kind of endpoint is not supported yet."


@_table_entry
class UnknownControllerIdError(BrokerError):
    code, name, retriable = 116, "UNKNOWN_CONTROLLER_ID", False
    meaning = "No controller with this id is known."


@_table_entry
class UnknownSubscriptionIdError(BrokerError):
    code, name, retriable = 117, "UNKNOWN_SUBSCRIPTION_ID", False
    meaning = "The client telemetry subscription id is invalid or out of date."


@_table_entry
class TelemetryTooLargeError(BrokerError):
    code, name, retriable = 118, "TELEMETRY_TOO_LARGE", False
    meaning = "The pushed client telemetry is larger than the broker accepts."


@_table_entry
class InvalidRegistrationError(BrokerError):
    code, name, retriable = 119, "INVALID_REGISTRATION", False
    meaning = "The controller found the broker registration invalid."


@_table_entry
class TransactionAbortableError(BrokerError):
    code, name, retriable = 120, "TRANSACTION_ABORTABLE", False
    meaning = "The transaction hit an error and the producer must abort it."


@_table_entry
class InvalidRecordStateError(BrokerError):
    code, name, retriable = 121, "INVALID_RECORD_STATE", False
    meaning = "The share-group record is not in a state that allows this acknowledgement."


@_table_entry
class ShareSessionNotFoundError(BrokerError):
    code, name, retriable = 122, "SHARE_SESSION_NOT_FOUND", True
    meaning = "The share session is unknown to the broker."


@_table_entry
class InvalidShareSessionEpochError(BrokerError):
    code, name, retriable = 123, "INVALID_SHARE_SESSION_EPOCH", True
    meaning = "The share session epoch is not the expected one."


@_table_entry
class FencedStateEpochError(BrokerError):
    code, name, retriable = 124, "FENCED_STATE_EPOCH", False
    meaning = "The share-group state epoch is out of date."


@_table_entry
class InvalidVoterKeyError(BrokerError):
    code, name, retriable = 125, "INVALID_VOTER_KEY", False
    meaning = "The voter key does not match the receiving replica's key."


@_table_entry
class DuplicateVoterError(BrokerError):
    code, name, retriable = 126, "DUPLICATE_VOTER", False
    meaning = "The voter is already part of the voter set."


@_table_entry
class VoterNotFoundError(BrokerError):
    code, name, retriable = 127, "VOTER_NOT_FOUND", False
    meaning = "The voter is not part of the voter set."


@_table_entry
class InvalidRegularExpressionError(BrokerError):
    code, name, retriable = 128, "INVALID_REGULAR_EXPRESSION", False
    meaning = "The subscription's regular expression is not valid."


@_table_entry
class RebootstrapRequiredError(BrokerError):
    code, name, retriable = 129, "REBOOTSTRAP_REQUIRED", False
    meaning = "The client must rebootstrap to get fresh cluster metadata."


@_table_entry
class StreamsInvalidTopologyError(BrokerError):
    code, name, retriable = 130, "STREAMS_INVALID_TOPOLOGY", False
    meaning = "The streams topology in the request is invalid."


@_table_entry
class StreamsInvalidTopologyEpochError(BrokerError):
    code, name, retriable = 131, "STREAMS_INVALID_TOPOLOGY_EPOCH", False
    meaning = "The streams topology epoch in the request is invalid."


@_table_entry
class StreamsTopologyFencedError(BrokerError):
    code, name, retriable = 132, "STREAMS_TOPOLOGY_FENCED", False
    meaning = "The streams topology epoch in the request is out of date."


@_table_entry
class ShareSessionLimitReachedError(BrokerError):
    code, name, retriable = 133, "SHARE_SESSION_LIMIT_REACHED", True
    meaning = "The broker has reached its limit of share sessions."


#: Kafka's name for code 2 (the codec calls it CorruptRecordError).
CorruptMessageError = CorruptRecordError

#: The names "A Guide To The Kafka Protocol" (the wiki's 0.8.2 protocol guide) gives codes
#: -1 to 16, mapped to the codes; Kafka renamed several since (e.g. NotLeaderForPartition
#: is NOT_LEADER_OR_FOLLOWER).
SPEC_NAMES: dict[str, int] = {
    "NoError": 0,
    "Unknown": -1,
    "OffsetOutOfRange": 1,
    "InvalidMessage": 2,
    "UnknownTopicOrPartition": 3,
    "InvalidMessageSize": 4,
    "LeaderNotAvailable": 5,
    "NotLeaderForPartition": 6,
    "RequestTimedOut": 7,
    "BrokerNotAvailable": 8,
    "Unused": 9,
    "MessageSizeTooLarge": 10,
    "StaleControllerEpochCode": 11,
    "OffsetMetadataTooLargeCode": 12,
    "OffsetsLoadInProgressCode": 14,
    "ConsumerCoordinatorNotAvailableCode": 15,
    "NotCoordinatorForConsumerCode": 16,
}

#: Names Kafka itself used for a code before renaming it.
FORMER_NAMES: dict[str, int] = {
    "UNKNOWN": -1,
    "NOT_LEADER_FOR_PARTITION": 6,  # KIP-392 widened it to followers
    "GROUP_LOAD_IN_PROGRESS": 14,
    "GROUP_COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR_FOR_GROUP": 16,
}


def all_broker_errors() -> list[type[BrokerError]]:
    """Every registered per-code exception class, ordered by code."""
    return [_BY_CODE[code] for code in sorted(_BY_CODE)]


def name_for_code(code: int) -> str:
    """Kafka's name for an error code: "NONE" for 0, "UNKNOWN_ERROR_CODE_<n>" if unknown."""
    if code == 0:
        return "NONE"
    cls = _BY_CODE.get(code)
    return cls.name if cls is not None else f"UNKNOWN_ERROR_CODE_{code}"


def class_name_for_code(code: int) -> str | None:
    """The name of kafkawire's exception class for a code (None for 0, which is no error)."""
    if code == 0:
        return None
    return for_code(code).__name__


def for_name(name: str) -> type[BrokerError]:
    """The exception class for a Kafka error name, a former Kafka name or a name
    of the 0.8.2 protocol guide (:data:`SPEC_NAMES`).

    Raises KeyError for names kafkawire does not know and for the no-error names.
    """
    code = FORMER_NAMES.get(name, SPEC_NAMES.get(name))
    if code is None:
        for cls in _BY_CODE.values():
            if cls.name == name:
                return cls
    elif code != 0:
        return _BY_CODE[code]
    raise KeyError(f"{name!r} is not the name of a Kafka error kafkawire knows")


def raise_for_code(code: int, context: str = "") -> None:
    """Raise the exception for a broker error code; do nothing for 0 (no error).

    ``context`` says what failed (e.g. "OffsetCommit of group 'g' topic 't' partition 3")
    and starts the message.
    """
    if code == 0:
        return
    cls = _BY_CODE.get(code)
    prefix = f"{context}: " if context else ""
    if cls is None:
        exc: BrokerError = UnknownBrokerError(
            f"{prefix}broker error code {code} is unknown to this version of kafkawire; "
            f"see the Kafka protocol guide's error table, or upgrade kafkawire"
        )
        exc.code = code
        raise exc
    hint = " (retriable: retry after a backoff)" if cls.retriable else ""
    meaning, fix = (cls.meaning.rstrip("."), f"; {cls.fix}") if cls.fix else (cls.meaning, "")
    raise cls(f"{prefix}{cls.name} ({code}): {meaning}{hint}{fix}")


def broker_error(code: int, context: str, detail: str | None = None) -> BrokerError:
    """The exception :func:`raise_for_code` raises for ``code``, to be stored or raised
    later; ``detail`` (the broker's error_message) ends its message."""
    try:
        raise_for_code(code, context)
    except BrokerError as exc:
        if detail:
            exc.args = (f"{exc.args[0]} ({detail})",)
        return exc.with_traceback(None)
    raise ValueError("broker_error() needs a non-zero error code")
