"""The schema decoder's shortcuts for what answers usually leave out: structs at their
defaults made without ``__init__`` (``_new_default``), an empty tag section read as one
byte, and topic ids shared between answers.  Each must give what the long way gives."""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

from kafkawire.protocol import apis, schema
from kafkawire.protocol.schema import Struct, decode, encode


def _structs(cls: type[Struct]) -> Iterator[type[Struct]]:
    yield cls
    for f in cls._fields:
        if f.type == "struct":
            yield from _structs(getattr(cls, "_sub_" + f.name))


ALL_STRUCTS = sorted({c for api in apis.BY_KEY.values() for top in (api.Request, api.Response)
                      for c in _structs(top)}, key=lambda c: c.__qualname__)


def test_every_api_struct_is_covered() -> None:
    assert len(ALL_STRUCTS) > 150  # requests, responses and their nested structs


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=lambda c: c.__qualname__)
def test_new_default_equals_the_constructor(cls: type[Struct]) -> None:
    made, other = cls._new_default(), cls._new_default()
    assert type(made) is cls
    assert made == cls()
    # Nothing mutable is shared between two of them: lists and nested structs are new.
    for f in cls._fields:
        a, b = getattr(made, f.name), getattr(other, f.name)
        if isinstance(a, (list, Struct)):
            assert a is not b, f.name


FETCH = apis.get("Fetch")
_Topic = FETCH.Response.FetchableTopicResponse
_Partition = _Topic.PartitionData


def _fetch_answer(topic_id: uuid.UUID, **partition: Any) -> Any:
    p = _Partition(partition_index=0, high_watermark=5, last_stable_offset=5, records=b"", **partition)
    return FETCH.Response(session_id=7, responses=[_Topic(topic_id=topic_id, partitions=[p])])


@pytest.mark.parametrize("tagged", [
    {},
    {"current_leader": _Partition.LeaderIdAndEpoch(leader_id=2, leader_epoch=9)},
    {"diverging_epoch": _Partition.EpochEndOffset(epoch=3, end_offset=40),
     "snapshot_id": _Partition.SnapshotId(end_offset=12, epoch=1)},
])
def test_fetch_partition_tags_read_whether_present_or_not(tagged: dict[str, Any]) -> None:
    sent = _fetch_answer(uuid.uuid4(), **tagged)
    got, pos = decode(FETCH.Response, encode(sent, 17).getvalue(), 17)
    p = got.responses[0].partitions[0]
    for name in ("diverging_epoch", "current_leader", "snapshot_id"):
        assert getattr(p, name) == tagged.get(name, getattr(_Partition, "_default_" + name)())
    assert bytes(p.records) == b""
    assert got.session_id == 7


def test_topic_ids_decode_to_equal_uuids_and_the_cache_stays_bounded() -> None:
    tid = uuid.uuid4()
    wire = encode(_fetch_answer(tid), 17).getvalue()
    first = decode(FETCH.Response, wire, 17)[0].responses[0].topic_id
    again = decode(FETCH.Response, wire, 17)[0].responses[0].topic_id
    assert first == again == tid and isinstance(first, uuid.UUID)
    for i in range(schema._UUIDS_KEPT + 10):
        value, pos = schema._read_uuid(memoryview(i.to_bytes(16, "big")), 0, 16)
        assert value == uuid.UUID(int=i) and pos == 16
    assert len(schema._UUIDS) <= schema._UUIDS_KEPT


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=lambda c: c.__qualname__)
def test_generated_init_equals_the_generic_one(cls: type[Struct]) -> None:
    # Every field given, or none: the generated __init__ sets what Struct.__init__ sets.
    given = {f.name: getattr(cls, "_default_" + f.name)() for f in cls._fields}
    for kwargs in ({}, given):
        made = cls(**kwargs)
        generic = cls.__new__(cls)
        Struct.__init__(generic, **kwargs)
        assert made == generic
    if cls._fields:
        first = cls._fields[0].name
        assert getattr(cls(**{first: "x"}), first) == "x"  # kept as given, unchecked
        assert getattr(cls(**{first: None}), first) is None
    with pytest.raises(TypeError, match=f"{cls.__name__} has no field\\(s\\) nope, zz"):
        cls(zz=1, nope=2)
