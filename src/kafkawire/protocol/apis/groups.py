"""Offsets and consumer groups: OffsetCommit (8), OffsetFetch (9), FindCoordinator (10),
JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15),
ListGroups (16), DeleteGroups (42) and OffsetDelete (47).

All come from Kafka's own definitions (kafkawire.wire), which still describe v0 (0.8.2's
layouts for the offset APIs and FindCoordinator, 0.9's for group membership); the KIPs
beside each say what its versions added.

The member metadata inside JoinGroup and the assignments inside SyncGroup are opaque
bytes here; kafkawire.protocol.consumer encodes and decodes the consumer protocol's.
"""

from kafkawire.protocol.api import from_generated

# v1 member identity and (v1 only, 0.8.2's TimeStamp) commit_timestamp, -1 asking the broker
# to stamp the receive time; v2-v4 retention_time_ms, which v5 leaves to the broker's
# offsets.retention.minutes (KIP-211); v6 committed_leader_epoch (KIP-320); v7
# group_instance_id (KIP-345); v8 flexible; v9 a KIP-848 member's epoch in
# generation_id_or_member_epoch.  committed_metadata defaults to null; callers always set it.
OFFSET_COMMIT = from_generated(8, max_version=9)

# v2+: null topics ask for every topic the group has committed offsets for; v5
# committed_leader_epoch (KIP-320); v6 flexible; v7 require_stable (KIP-447); v8+ several
# groups in one request (KIP-709); v9 a KIP-848 member's id and epoch.  A committed_offset of
# -1 with error 0: the group has no offset for the partition.
OFFSET_FETCH = from_generated(9, max_version=9)

# key_type: 0 group, 1 transaction (KIP-98), 2 share group (KIP-932, v6).  v0 is 0.8.2's
# ConsumerMetadata; v3 flexible; v4+ looks several coordinator_keys up at once (KIP-699).
# A v0 answer has no error_message: it reads "" (Kafka's default), which errors take as no detail.
FIND_COORDINATOR = from_generated(10, max_version=6)

# v1 rebalance_timeout_ms; v4+ brokers answer a first join (empty member_id) with MEMBER_ID_REQUIRED
# and an id to join again with (KIP-394); v5 group_instance_id (KIP-345); v6 flexible; v7
# protocol_type in the answer (KIP-559); v8 reason (KIP-800); v9 skip_assignment (KIP-814).
JOIN_GROUP = from_generated(11, max_version=9)

# v3 group_instance_id (KIP-345); v4 flexible.
HEARTBEAT = from_generated(12, max_version=4)

# v3+: several members leave at once, static members by group_instance_id (KIP-345); v4
# flexible; v5 a reason per member (KIP-800).
LEAVE_GROUP = from_generated(13, max_version=5)

# v3 group_instance_id (KIP-345); v4 flexible; v5 protocol_type and protocol_name (KIP-559).
# Only the leader fills assignments; followers send an empty array.
SYNC_GROUP = from_generated(14, max_version=5)

# From Kafka's own definition (kafkawire.wire).  v3 adds authorized_operations (KIP-430),
# v4 group_instance_id, v5 is flexible; v6 (KIP-1043): an unknown group, or one that is not
# a classic group, is GROUP_ID_NOT_FOUND with an error_message instead of a "Dead" group.
DESCRIBE_GROUPS = from_generated(15, max_version=6)

# v4 states_filter (KIP-518); v5 types_filter (KIP-848).
LIST_GROUPS = from_generated(16, max_version=5)

# v1 answers after throttling (KIP-219); v2 flexible.
DELETE_GROUPS = from_generated(42, max_version=2)


# KIP-496: the group-wide error_code comes before throttle_time_ms.
OFFSET_DELETE = from_generated(47, max_version=0)
