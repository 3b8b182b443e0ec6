"""protocol.api.from_generated: an Api built from Kafka's definition (kafkawire.wire)."""

from __future__ import annotations

import pytest

from kafkawire.protocol import apis
from kafkawire.protocol.api import from_generated
from kafkawire.wire import APIS


def test_versions_stop_where_asked_and_fields_beyond_are_left_out():
    produce = from_generated(0, max_version=11)
    assert (produce.min_version, produce.max_version, produce.flexible_from) == (0, 11, 9)
    topic = produce.Request.TopicProduceData
    # Produce v13 names topics by id (KIP-516): not a field of a v0-v11 declaration.
    assert [f.name for f in topic._fields] == ["name", "partition_data"]
    assert from_generated(0).max_version == APIS[0].valid[1]


def test_an_unstable_newest_version_is_not_spoken_by_default():
    spec = APIS[22]  # InitProducerId's newest version is unstable in the newest release
    assert spec.request.unstable_latest
    assert from_generated(22).max_version == spec.valid[1] - 1


def test_a_version_kafka_does_not_define_is_refused():
    with pytest.raises(ValueError, match=r"Fetch v99: Kafka's definition stops at v"):
        from_generated(1, max_version=99)


def test_tagged_fields_and_defaults_come_through():
    fetch = from_generated(1, max_version=17)
    partition = fetch.Response.FetchableTopicResponse.PartitionData
    fields = {f.name: f for f in partition._fields}
    assert (fields["diverging_epoch"].tag, fields["current_leader"].tag, fields["snapshot_id"].tag) == (0, 1, 2)
    assert partition().preferred_read_replica == -1
    assert partition().records is None
    request = fetch.Request()
    assert (request.max_bytes, request.replica_id, request.session_epoch) == (2**31 - 1, -1, -1)


def test_built_apis_round_trip_their_own_bytes():
    # Every generated-built API kafkawire declares decodes what it encodes, in every version.
    for key, api in sorted(apis.BY_KEY.items()):
        for version in range(api.min_version, api.max_version + 1):
            for cls, enc, dec in ((api.Request, api.encode_request, api.decode_request),
                                  (api.Response, api.encode_response, api.decode_response)):
                value = cls()
                data = enc(value, version).getvalue()
                assert dec(data, version) == dec(enc(dec(data, version), version).getvalue(), version), (api.name, version)
