"""Transactions (KIP-98): AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26) and
TxnOffsetCommit (28).

A transactional producer sends the first three to its transaction coordinator (found with
FindCoordinator key_type 1) and TxnOffsetCommit to its consumer group's coordinator.
InitProducerId (22) is declared with the admin APIs.  WriteTxnMarkers (27) travels only
between brokers and is not declared.

All four come from Kafka's own definitions (kafkawire.wire); the KIPs beside them say what
each version added.
"""

from kafkawire.protocol.api import from_generated


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
# Kafka 4 names the member's generation generation_id_or_member_epoch: a KIP-848 member sends
# its epoch there.  committed_metadata defaults to null; the producer sends "" as Kafka's does.
TXN_OFFSET_COMMIT = from_generated(28, max_version=5)
