"""Produce (0), Fetch (1) and ListOffsets (2): the APIs that move record data.

Record data is declared with the ``records`` type: a Fetch response hands it out as a
zero-copy memoryview of the response buffer, and a Produce request sends the caller's
encoded batch as its own chunk, never copied into the request buffer.

Produce and Fetch come from Kafka's own definitions (kafkawire.wire), up to the versions
kafkawire's producer and fetcher speak; ListOffsets stays declared here, its client
defaults differing from Kafka's (see tests/wire/test_wire_crosscheck.py).
"""

from kafkawire.protocol.api import Api, from_generated
from kafkawire.protocol.schema import Field as F

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
LIST_OFFSETS = Api(
    2, "ListOffsets", (0, 9), flexible_from=6,
    request=[
        F("replica_id", "int32", default=-1),  # -1: a client, not a follower
        F("isolation_level", "int8", since=2),
        F("topics", array=True, struct_name="ListOffsetsTopic", fields=[
            F("name", "string"),
            F("partitions", array=True, struct_name="ListOffsetsPartition", fields=[
                F("partition_index", "int32"),
                F("current_leader_epoch", "int32", since=4, default=-1),
                F("timestamp", "int64"),
                F("max_num_offsets", "int32", until=0, default=1),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", since=2),
        F("topics", array=True, struct_name="ListOffsetsTopicResponse", fields=[
            F("name", "string"),
            F("partitions", array=True, struct_name="ListOffsetsPartitionResponse", fields=[
                F("partition_index", "int32"),
                F("error_code", "int16"),
                # v0 answers with a descending list of offsets; v1+ with one (KIP-79).
                F("old_style_offsets", "[]int64", until=0),
                F("timestamp", "int64", since=1, default=-1),
                F("offset", "int64", since=1, default=-1),
                F("leader_epoch", "int32", since=4, default=-1),
            ]),
        ]),
    ],
)
