"""Transactions (KIP-98): AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26) and
TxnOffsetCommit (28).

A transactional producer sends the first three to its transaction coordinator (found with
FindCoordinator key_type 1) and TxnOffsetCommit to its consumer group's coordinator.
InitProducerId (22) is declared with the admin APIs.  WriteTxnMarkers (27) travels only
between brokers and is not declared.

Layouts follow the Kafka protocol guide and the KIPs named beside the fields.
"""

from kafkawire.protocol.api import Api, from_generated
from kafkawire.protocol.schema import Field as F


# v2 may answer PRODUCER_FENCED (KIP-588); v3 is flexible.  v4+ is the brokers' batched
# form (KIP-890): a partition leader asks the coordinator whether partitions are already in
# several transactions at once (verify_only).  Clients send v3 and below, where one
# transactional id's partitions travel in the v3_and_below_* fields.  v5 may answer
# TRANSACTION_ABORTABLE (KIP-890).
ADD_PARTITIONS_TO_TXN = from_generated(24, max_version=5)

# Adds the group's __consumer_offsets partition to the transaction, before TxnOffsetCommit.
# v2 PRODUCER_FENCED, v3 flexible, v4 TRANSACTION_ABORTABLE (KIP-890).
ADD_OFFSETS_TO_TXN = from_generated(25, max_version=4)

# committed=False aborts: the coordinator writes ABORT markers into every partition of the
# transaction.  v2 PRODUCER_FENCED, v3 flexible, v4 TRANSACTION_ABORTABLE; v5 bumps the
# epoch after every transaction and returns the producer id and epoch to use next (KIP-890
# part 2).
END_TXN = from_generated(26, max_version=5)

# Sent to the group coordinator; the offsets become visible when the transaction commits.
# v2 adds the leader epoch (KIP-320); v3 the member's identity, so a zombie from an older
# generation is fenced (KIP-447); v4 TRANSACTION_ABORTABLE (KIP-890); v5 is v4, and tells
# the coordinator that the producer uses transactions V2, where TxnOffsetCommit also does
# AddOffsetsToTxn's work (KIP-890 part 2).
TXN_OFFSET_COMMIT = Api(
    28, "TxnOffsetCommit", (0, 5), flexible_from=3,
    request=[
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id", "int32", since=3, default=-1),
        F("member_id", "string", since=3, default=""),
        F("group_instance_id", "string", since=3, nullable_since=3, default=None),
        F("topics", array=True, struct_name="TxnOffsetCommitRequestTopic", fields=[
            F("name", "string"),
            F("partitions", array=True, struct_name="TxnOffsetCommitRequestPartition", fields=[
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", since=2, default=-1),
                F("committed_metadata", "string", nullable_since=0, default=""),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", array=True, struct_name="TxnOffsetCommitResponseTopic", fields=[
            F("name", "string"),
            F("partitions", array=True, struct_name="TxnOffsetCommitResponsePartition", fields=[
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)
