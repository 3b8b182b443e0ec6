"""CreateTopics (19), DeleteTopics (20), DeleteRecords (21), InitProducerId (22), DescribeConfigs
(32), AlterConfigs (33), CreatePartitions (37), IncrementalAlterConfigs (44),
DescribeUserScramCredentials (50) and AlterUserScramCredentials (51)."""

from kafkawire.protocol.api import from_generated

# v4 lets num_partitions / replication_factor be -1 for the broker defaults (KIP-464);
# v5 returns the created topic's configs (KIP-525); v6 may answer THROTTLING_QUOTA_EXCEEDED
# (KIP-599); v7 returns topic ids (KIP-516).
CREATE_TOPICS = from_generated(19, max_version=7)

# v6 names topics by name or by id, a null name meaning "by id" (KIP-516).
DELETE_TOPICS = from_generated(20, max_version=6)

# resource_type: 2 topic, 4 broker, 8 broker logger.  config_source and synonyms from v1
# (KIP-226); config_type and documentation from v3 (KIP-569).
# configuration_keys null asks for every config of the resource (Kafka's definition defaults
# it to []: callers say which they mean).
DESCRIBE_CONFIGS = from_generated(32, max_version=4)

# v3 lets a producer bump its epoch instead of getting a new id (KIP-360); v5 may answer
# TRANSACTION_ABORTABLE (KIP-890).
INIT_PRODUCER_ID = from_generated(22, max_version=5)


# v1 answers after throttling (KIP-219); v2 is flexible.  A topic's assignments null lets
# the broker place the new partitions' replicas (Kafka's definition defaults them to []).
CREATE_PARTITIONS = from_generated(37, max_version=3)

# offset -1 deletes up to the high watermark.
DELETE_RECORDS = from_generated(21, max_version=2)

# Replaces every dynamic config of the resource with the ones sent.
ALTER_CONFIGS = from_generated(33, max_version=2)

# KIP-339: per-key operations (0 set, 1 delete, 2 append, 3 subtract).
INCREMENTAL_ALTER_CONFIGS = from_generated(44, max_version=1)

# KIP-554: SCRAM credentials over the wire instead of in ZooKeeper.  ``mechanism`` is 1 for
# SCRAM-SHA-256 and 2 for SCRAM-SHA-512 (0: unknown); the client salts the password itself
# (RFC 5802 Hi()), so the password never travels.  Both are flexible from v0.
# users null (or empty) describes every user with a credential; Kafka's definition defaults
# it to [], so callers say null.
DESCRIBE_USER_SCRAM_CREDENTIALS = from_generated(50, max_version=0)

ALTER_USER_SCRAM_CREDENTIALS = from_generated(51, max_version=0)
