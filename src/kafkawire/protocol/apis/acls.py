"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), from Kafka's own definitions.

v1 adds the resource pattern type (KIP-290: LITERAL, PREFIXED, and MATCH / ANY in filters);
v2 is flexible; v3 adds the USER resource type (KIP-554's ACLs on users).
"""

from kafkawire.protocol.api import from_generated

DESCRIBE_ACLS = from_generated(29, max_version=3)
CREATE_ACLS = from_generated(30, max_version=3)
DELETE_ACLS = from_generated(31, max_version=3)
