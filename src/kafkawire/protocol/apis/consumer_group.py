"""The consumer group protocol of KIP-848: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69).

One heartbeat replaces JoinGroup, SyncGroup, Heartbeat and LeaveGroup: the member sends
its subscription and the partitions it owns, the group coordinator assigns partitions
itself (server-side assignors) and answers with the member's epoch and, when it changed,
its assignment.  Partitions are named by topic id (KIP-516), never by topic name.

Both come from Kafka's own definitions (kafkawire.wire) and are flexible (KIP-482) from
v0.  kafkawire.protocol.consumer_group drives the heartbeat.
"""

from kafkawire.protocol.api import from_generated

# KIP-1082 (Kafka 4.0): the client makes up its member_id (a random UUID) and keeps it for
# its lifetime; older brokers hand one out when it is empty.  member_epoch 0 joins, -1 leaves,
# -2 leaves as a static member that will come back.  A null (or -1) field means "unchanged
# since the last heartbeat"; v1 adds subscribed_topic_regex (RE2/J, "" drops the one sent
# before).  The answer's assignment is null when it did not change.
CONSUMER_GROUP_HEARTBEAT = from_generated(68, max_version=1)


# A member's assignment and target_assignment are both Kafka's Assignment struct: each field
# has its own class (Member._sub_assignment, Member._sub_target_assignment), and
# Member.Assignment names the second.  v1 adds member_type (KIP-1099): -1 unknown, 0 a
# classic-protocol member, 1 a consumer one.  authorized_operations is INT32_MIN when the
# client did not ask for them.
CONSUMER_GROUP_DESCRIBE = from_generated(69, max_version=1)
