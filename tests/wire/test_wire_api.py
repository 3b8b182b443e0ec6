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


def _structs(cls: type, path: str = "") -> dict[str, type]:
    out = {path or cls.__name__: cls}
    for f in cls._fields:
        if f.type == "struct":
            out.update(_structs(getattr(cls, "_sub_" + f.name), f"{path or cls.__name__}.{f.name}"))
    return out


def test_every_api_kafkawire_speaks_is_kafkas_definition():
    # No declaration by hand: each API's per-version code is what from_generated makes of
    # Kafka's definition, up to the version kafkawire speaks.
    from kafkawire.protocol.schema import _gen_decoder, _gen_encoder

    for key, api in sorted(apis.BY_KEY.items()):
        fresh = from_generated(key, max_version=api.max_version)
        assert (api.name, api.min_version, api.flexible_from) == (fresh.name, fresh.min_version, fresh.flexible_from)
        for side in ("Request", "Response"):
            mine, theirs = _structs(getattr(api, side)), _structs(getattr(fresh, side))
            assert list(mine) == list(theirs), (api.name, side)
            for path, cls in mine.items():
                other = theirs[path]
                assert [f.name for f in cls._fields] == [f.name for f in other._fields], path
                # repr: a default struct is an instance of each declaration's own class.
                assert [repr(cls.__dict__["_default_" + f.name]()) for f in cls._fields] == [
                    repr(other.__dict__["_default_" + f.name]()) for f in other._fields], path
                for version in range(api.min_version, api.max_version + 1):
                    for gen in (_gen_encoder, _gen_decoder):
                        assert gen(cls, version).__source__ == gen(other, version).__source__, (path, version)
