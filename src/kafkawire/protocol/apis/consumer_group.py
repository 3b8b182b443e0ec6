"""The consumer group protocol of KIP-848: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69).

One heartbeat replaces JoinGroup, SyncGroup, Heartbeat and LeaveGroup: the member sends
its subscription and the partitions it owns, the group coordinator assigns partitions
itself (server-side assignors) and answers with the member's epoch and, when it changed,
its assignment.  Partitions are named by topic id (KIP-516), never by topic name.

Layouts are those of the Kafka 4.4 broker's own message classes; both APIs are flexible
(KIP-482) from v0.  kafkawire.protocol.consumer_group drives the heartbeat.
"""

from kafkawire.protocol.api import Api, from_generated
from kafkawire.protocol.schema import Field as F

# Authorized-operations bit fields are INT32_MIN when the client did not ask for them.
_NO_OPS = -(2**31)


# KIP-1082 (Kafka 4.0): the client makes up its member_id (a random UUID) and keeps it for
# its lifetime; older brokers hand one out when it is empty.  member_epoch 0 joins, -1 leaves,
# -2 leaves as a static member that will come back.  A null (or -1) field means "unchanged
# since the last heartbeat"; v1 adds subscribed_topic_regex (RE2/J, "" drops the one sent
# before).  The answer's assignment is null when it did not change.
CONSUMER_GROUP_HEARTBEAT = from_generated(68, max_version=1)


def _described_assignment() -> list[F]:
    return [
        F("topic_partitions", array=True, struct_name="TopicPartitions", fields=[
            F("topic_id", "uuid"),
            F("topic_name", "string"),
            F("partitions", "[]int32"),
        ]),
    ]


CONSUMER_GROUP_DESCRIBE = Api(
    69, "ConsumerGroupDescribe", (0, 1), flexible_from=0,
    request=[
        F("group_ids", "[]string"),
        F("include_authorized_operations", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("groups", array=True, struct_name="DescribedGroup", fields=[
            F("error_code", "int16"),
            F("error_message", "string", nullable_since=0, default=None),
            F("group_id", "string"),
            F("group_state", "string"),
            F("group_epoch", "int32"),
            F("assignment_epoch", "int32"),
            F("assignor_name", "string"),
            F("members", array=True, struct_name="Member", fields=[
                F("member_id", "string"),
                F("instance_id", "string", nullable_since=0, default=None),
                F("rack_id", "string", nullable_since=0, default=None),
                F("member_epoch", "int32"),
                F("client_id", "string"),
                F("client_host", "string"),
                F("subscribed_topic_names", "[]string"),
                F("subscribed_topic_regex", "string", nullable_since=0, default=None),
                # Kafka calls both of these Assignment; two names here, one class each.
                F("assignment", struct_name="Assignment", fields=_described_assignment()),
                F("target_assignment", struct_name="TargetAssignment", fields=_described_assignment()),
                # v1 (KIP-1099): -1 unknown, 0 a classic-protocol member, 1 a consumer one.
                F("member_type", "int8", since=1, default=-1),
            ]),
            F("authorized_operations", "int32", default=_NO_OPS),
        ]),
    ],
)
