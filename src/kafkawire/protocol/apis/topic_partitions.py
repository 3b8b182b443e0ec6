"""DescribeTopicPartitions (75), from Kafka's own definition: topics' partitions a page at a
time, with the eligible leader replicas of KIP-966."""

from kafkawire.protocol.api import from_generated

DESCRIBE_TOPIC_PARTITIONS = from_generated(75, max_version=0)
