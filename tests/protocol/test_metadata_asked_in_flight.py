"""A topic wanted while a Metadata request is in flight (a send() right after the
producer was made, while its sender thread's first Metadata exchange is under way) gets
a refresh of its own once that answer is in, no I/O: the answer does not name it, so
without one whoever waits for it would wait for metadata_max_age_ms (the send() for
max_block_ms, then fail saying the topic does not exist)."""

from __future__ import annotations

from kafkawire.protocol import apis
from kafkawire.protocol.metadata import ClusterMetadata

METADATA = apis.get("Metadata")
R = METADATA.Response
T = R.MetadataResponseTopic
P = T.MetadataResponsePartition
B = R.MetadataResponseBroker
VERSION = 12


def answer(*topics: str):
    return R(brokers=[B(node_id=1, host="127.0.0.1", port=9001)], cluster_id="c", controller_id=1,
             topics=[T(error_code=0, name=t, is_internal=False, partitions=[
                 P(error_code=0, partition_index=0, leader_id=1, leader_epoch=0, replica_nodes=[1],
                   isr_nodes=[1], offline_replicas=[])]) for t in topics])


def test_a_topic_wanted_while_the_request_was_in_flight_is_asked_for_next():
    meta = ClusterMetadata(300000, 100)
    _request, asked = meta.request(VERSION)  # the bootstrap: no topic yet
    meta.interest.add("events")  # send("events") meanwhile
    meta.need_refresh = True
    meta.apply(answer(), 1.0)
    meta.answered(asked)
    assert meta.need_refresh and meta.refresh_due(1.0)  # not metadata_max_age_ms from now
    assert not meta.refresh_allowed(1.05) and meta.refresh_allowed(1.1)  # after retry_backoff_ms
    request, asked = meta.request(VERSION)
    assert asked == {"events"} and [t.name for t in request.topics] == ["events"]
    meta.apply(answer("events"), 1.2)
    meta.answered(asked)
    assert not meta.need_refresh and meta.partition_counts == {"events": 1}


def test_an_answer_to_every_topic_or_to_all_wanted_needs_no_other():
    meta = ClusterMetadata(300000, 100)
    meta.interest.add("events")
    _request, asked = meta.request(VERSION)
    meta.apply(answer("events"), 1.0)
    meta.answered(asked)
    assert not meta.need_refresh
    meta.all_topics = True
    _request, asked = meta.request(VERSION)
    meta.interest.add("later")
    meta.apply(answer("events", "later"), 2.0)
    meta.answered(asked)
    assert not meta.need_refresh
