"""describe_topic_partitions (DescribeTopicPartitions, KIP-966) through kafkawire's Admin and
AsyncAdmin on Apache Kafka: pages smaller than the topics still give every partition, as
Metadata (describe_topics) describes them."""

from __future__ import annotations

import dataclasses

import pytest
from settle import until_known
from shells import make_admin  # noqa: F401 - the fixture
from topics import unique_name

from kafkawire import errors
from kafkawire.client.admin import NewTopic

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

TIMEOUT = 30.0


@pytest.fixture
def admin(kafka_broker, make_admin):
    with make_admin(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms=15000) as a:
        yield a


@pytest.mark.parametrize("page_size", [1, 3, 2000])
def test_every_partition_comes_back_whatever_the_page_size(admin, page_size):
    big, small = unique_name("dtp-b"), unique_name("dtp-s")
    admin.create_topics([NewTopic(big, 7, 1), NewTopic(small, 2, 1)], timeout=TIMEOUT)
    until_known(admin, big, 7)
    until_known(admin, small, 2)
    missing = unique_name("dtp-none")
    got = admin.describe_topic_partitions([small, big, missing], page_size=page_size, timeout=TIMEOUT,
                                          raise_on_error=False)
    assert list(got) == [small, big, missing]
    assert isinstance(got[missing], errors.UnknownTopicOrPartitionError)
    via_metadata = admin.describe_topics([big, small], timeout=TIMEOUT)
    for name, count in ((big, 7), (small, 2)):
        t = got[name]
        assert list(t.partitions) == list(range(count))
        assert (t.name, t.topic_id, t.is_internal) == (name, via_metadata[name].topic_id, False)
        for p in t.partitions.values():
            # The eligible leader replicas come with this API only (empty: none needed).
            assert p.eligible_leader_replicas in ([], None)
            plain = dataclasses.replace(p, eligible_leader_replicas=None, last_known_elr=None)
            assert plain == via_metadata[name].partitions[p.partition]
