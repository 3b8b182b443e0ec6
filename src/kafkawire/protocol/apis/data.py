"""Produce (0), Fetch (1) and ListOffsets (2): the APIs that move record data.

Record data is declared with the ``records`` type: a Fetch response hands it out as a
zero-copy memoryview of the response buffer, and a Produce request sends the caller's
encoded batch as its own chunk, never copied into the request buffer.

All three come from Kafka's own definitions (kafkawire.wire), up to the versions
kafkawire's producer, fetcher and admin speak.
"""

from kafkawire.protocol.api import from_generated

# v0-v2 send MessageSet magic 0/1; v3+ RecordBatch magic 2 (KIP-98); v7 allows zstd (KIP-110);
# v11 allows TRANSACTION_ABORTABLE (KIP-890).  Kafka 4.0 brokers reject v0-v2 (KAFKA-18659).
PRODUCE = from_generated(0, max_version=11)

# v4 read_committed and aborted transactions (KIP-98); v7 fetch sessions (KIP-227); v11 a
# preferred read replica (KIP-392); v12 flexible, with diverging epochs (KIP-595); v13 topic
# ids (KIP-516); v15 the replica's state (KIP-903); v16 leader hints (KIP-951); v17 the
# replica's directory id (KIP-853).
FETCH = from_generated(1, max_version=17)


# Timestamps -1 (latest) and -2 (earliest) are special; v7 adds -3 (max timestamp, KIP-734),
# v8 -4 (earliest local, KIP-405), v9 -5 (last tiered, KIP-1005).
# replica_id is -1 for a client (Kafka's definition defaults it to 0, a broker's id): every
# caller sets it.
LIST_OFFSETS = from_generated(2, max_version=9)
