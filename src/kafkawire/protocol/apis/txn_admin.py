"""WriteTxnMarkers (27), DescribeProducers (61), DescribeTransactions (65) and
ListTransactions (66), from Kafka's own definitions: the transaction tooling of KIP-664.

ListTransactions v1 adds the duration filter (KIP-994).  WriteTxnMarkers v2 adds the
transaction version (KIP-890); the admin's abort needs none, so v1 is the newest spoken.
"""

from kafkawire.protocol.api import from_generated

WRITE_TXN_MARKERS = from_generated(27, max_version=1)
DESCRIBE_PRODUCERS = from_generated(61, max_version=0)
DESCRIBE_TRANSACTIONS = from_generated(65, max_version=0)
LIST_TRANSACTIONS = from_generated(66, max_version=1)
