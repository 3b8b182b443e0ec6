"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46),
DescribeClientQuotas (48) and AlterClientQuotas (49), from Kafka's own definitions.

ElectLeaders v1 chooses preferred or unclean election (KIP-460); AlterPartitionReassignments
v1 may refuse a change of replication factor (KIP-860), asked at v0 here, which allows it.
"""

from kafkawire.protocol.api import from_generated

ELECT_LEADERS = from_generated(43, max_version=2)
ALTER_PARTITION_REASSIGNMENTS = from_generated(45, max_version=0)
LIST_PARTITION_REASSIGNMENTS = from_generated(46, max_version=0)
DESCRIBE_CLIENT_QUOTAS = from_generated(48, max_version=1)
ALTER_CLIENT_QUOTAS = from_generated(49, max_version=1)
