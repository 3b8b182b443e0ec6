"""DescribeCluster (60), from Kafka's own definition: v1 chooses brokers' or controllers'
endpoints (KIP-919), v2 lists fenced brokers too (KIP-1073)."""

from kafkawire.protocol.api import from_generated

DESCRIBE_CLUSTER = from_generated(60, max_version=2)
