"""Share groups (KIP-932, "queues for Kafka"): ShareGroupHeartbeat (76), ShareGroupDescribe
(77), ShareFetch (78), ShareAcknowledge (79), and the admin calls on a share group's start
offsets: DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92).

All from Kafka's own definitions (kafkawire.wire).  v0 of the first four was the preview
of Kafka 4.0 and is gone from the definitions; v1 is the form Kafka 4.1+ speaks.  The
share coordinator's own APIs (83 to 87) travel only between brokers and are not declared.
"""

from kafkawire.protocol.api import from_generated

# Membership: join with epoch 0 and a member id the client made (KIP-1082), leave with -1.
SHARE_GROUP_HEARTBEAT = from_generated(76)
SHARE_GROUP_DESCRIBE = from_generated(77)
# v2 adds the record-limit acquire mode and RENEW acknowledgements (KIP-1222).
SHARE_FETCH = from_generated(78)
SHARE_ACKNOWLEDGE = from_generated(79)
# v1 adds each partition's lag.
DESCRIBE_SHARE_GROUP_OFFSETS = from_generated(90)
ALTER_SHARE_GROUP_OFFSETS = from_generated(91)
DELETE_SHARE_GROUP_OFFSETS = from_generated(92)
