"""AlterReplicaLogDirs (34) and DescribeLogDirs (35), from Kafka's own definitions.

DescribeLogDirs v3 adds a top-level error, v4 each directory's total and usable bytes
(KIP-827); v5, with a directory's cordoned flag, is left out until kafkawire reads it.
"""

from kafkawire.protocol.api import from_generated

ALTER_REPLICA_LOG_DIRS = from_generated(34, max_version=2)
DESCRIBE_LOG_DIRS = from_generated(35, max_version=4)
