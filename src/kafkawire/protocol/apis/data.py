"""Produce (0), Fetch (1) and ListOffsets (2): the APIs that move record data.

Record data is declared with the ``records`` type: a Fetch response hands it out as a
zero-copy memoryview of the response buffer, and a Produce request sends the caller's
encoded batch as its own chunk, never copied into the request buffer.

v0 layouts follow the 0.8 protocol guide; later versions follow the
Kafka protocol guide and the KIPs named beside each field.
"""

from kafkawire.protocol.api import Api
from kafkawire.protocol.schema import Field as F

_INT32_MAX = 2**31 - 1


def _leader_id_and_epoch(since: int, tag: int) -> F:
    # KIP-951: the partition's current leader, so a client can skip a Metadata round trip.
    return F("current_leader", since=since, tag=tag, struct_name="LeaderIdAndEpoch", fields=[
        F("leader_id", "int32", since=since, default=-1),
        F("leader_epoch", "int32", since=since, default=-1),
    ])


def _node_endpoints(since: int) -> F:
    # KIP-951: host/port of every leader named in current_leader fields above.
    return F("node_endpoints", array=True, since=since, tag=0, struct_name="NodeEndpoint", fields=[
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", nullable_since=0, default=None),
    ])


# v0-v2 send MessageSet magic 0/1; v3+ RecordBatch magic 2 (KIP-98); v7 allows zstd (KIP-110);
# v11 allows TRANSACTION_ABORTABLE (KIP-890).  Kafka 4.0 brokers reject v0-v2 (KAFKA-18659).
PRODUCE = Api(
    0, "Produce", (0, 11), flexible_from=9,
    request=[
        F("transactional_id", "string", since=3, nullable_since=3, default=None),
        F("acks", "int16"),
        F("timeout_ms", "int32"),
        F("topic_data", array=True, struct_name="TopicProduceData", fields=[
            F("name", "string"),
            F("partition_data", array=True, struct_name="PartitionProduceData", fields=[
                F("index", "int32"),
                F("records", "records", nullable_since=0),
            ]),
        ]),
    ],
    response=[
        F("responses", array=True, struct_name="TopicProduceResponse", fields=[
            F("name", "string"),
            F("partition_responses", array=True, struct_name="PartitionProduceResponse", fields=[
                F("index", "int32"),
                F("error_code", "int16"),
                F("base_offset", "int64"),
                F("log_append_time_ms", "int64", since=2, default=-1),
                F("log_start_offset", "int64", since=5, default=-1),
                # KIP-467: which records made the broker drop the whole batch.
                F("record_errors", array=True, since=8, struct_name="BatchIndexAndErrorMessage", fields=[
                    F("batch_index", "int32"),
                    F("batch_index_error_message", "string", nullable_since=8, default=None),
                ]),
                F("error_message", "string", since=8, nullable_since=8, default=None),
                _leader_id_and_epoch(10, tag=0),
            ]),
        ]),
        F("throttle_time_ms", "int32", since=1),
        _node_endpoints(10),
    ],
)


FETCH = Api(
    1, "Fetch", (0, 17), flexible_from=12,
    request=[
        F("cluster_id", "string", since=12, nullable_since=12, default=None, tag=0),
        # v15 moves the follower's id into replica_state (KIP-903); consumers send -1.
        F("replica_id", "int32", until=14, default=-1),
        F("replica_state", since=15, tag=1, struct_name="ReplicaState", fields=[
            F("replica_id", "int32", default=-1),
            F("replica_epoch", "int64", default=-1),
        ]),
        F("max_wait_ms", "int32"),
        F("min_bytes", "int32"),
        F("max_bytes", "int32", since=3, default=_INT32_MAX),  # KIP-74
        F("isolation_level", "int8", since=4, default=0),  # KIP-98: 1 = read_committed
        F("session_id", "int32", since=7, default=0),  # KIP-227 incremental fetch sessions
        F("session_epoch", "int32", since=7, default=-1),
        F("topics", array=True, struct_name="FetchTopic", fields=[
            F("topic", "string", until=12),
            F("topic_id", "uuid", since=13),  # KIP-516: ids replace names from v13
            F("partitions", array=True, struct_name="FetchPartition", fields=[
                F("partition", "int32"),
                F("current_leader_epoch", "int32", since=9, default=-1),  # KIP-320
                F("fetch_offset", "int64"),
                F("last_fetched_epoch", "int32", since=12, default=-1),  # KIP-595
                F("log_start_offset", "int64", since=5, default=-1),
                F("partition_max_bytes", "int32"),
                F("replica_directory_id", "uuid", since=17, tag=0),  # KIP-853
            ]),
        ]),
        F("forgotten_topics_data", array=True, since=7, struct_name="ForgottenTopic", fields=[
            F("topic", "string", until=12),
            F("topic_id", "uuid", since=13),
            F("partitions", "[]int32"),
        ]),
        F("rack_id", "string", since=11, default=""),  # KIP-392 fetch from follower
    ],
    response=[
        F("throttle_time_ms", "int32", since=1),
        F("error_code", "int16", since=7),
        F("session_id", "int32", since=7, default=0),
        F("responses", array=True, struct_name="FetchableTopicResponse", fields=[
            F("topic", "string", until=12),
            F("topic_id", "uuid", since=13),
            F("partitions", array=True, struct_name="PartitionData", fields=[
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("high_watermark", "int64"),
                F("last_stable_offset", "int64", since=4, default=-1),
                F("log_start_offset", "int64", since=5, default=-1),
                F("diverging_epoch", since=12, tag=0, struct_name="EpochEndOffset", fields=[
                    F("epoch", "int32", default=-1),
                    F("end_offset", "int64", default=-1),
                ]),
                _leader_id_and_epoch(12, tag=1),
                F("snapshot_id", since=12, tag=2, struct_name="SnapshotId", fields=[
                    F("end_offset", "int64", default=-1),
                    F("epoch", "int32", default=-1),
                ]),
                F("aborted_transactions", array=True, since=4, nullable_since=4,
                  struct_name="AbortedTransaction", fields=[
                      F("producer_id", "int64"),
                      F("first_offset", "int64"),
                  ]),
                F("preferred_read_replica", "int32", since=11, default=-1),  # KIP-392
                F("records", "records", nullable_since=0),
            ]),
        ]),
        _node_endpoints(16),
    ],
)


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
