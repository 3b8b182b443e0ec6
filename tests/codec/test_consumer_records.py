"""decode_consumer_records and ConsumerRecord: what Consumer.poll() hands out.

Both implementations are checked against decode_batches (the records of the non-control
batches, the offset after the last batch) and against each other, on the parity corpus,
on damaged inputs, and with deserializers.
"""

from __future__ import annotations

import copy
import gc
import pickle
import random

import pytest
from test_parity import _corpus, _fuzz_input, outcome

from kafkawire import _codec as cy
from kafkawire import _pycodec as py
from kafkawire import codec, errors

IMPLS = [pytest.param(py, id="python"), pytest.param(cy, id="cython")]
FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")


def fields(r) -> tuple:
    return tuple(getattr(r, f) for f in FIELDS)


def expected(impl, data, topic, partition, **kwargs):
    """What decode_consumer_records must give, from decode_batches of the same codec."""
    batches = impl.decode_batches(data, **kwargs)
    recs = [(topic, partition, r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
             tuple(r.headers)) for b in batches if not b.is_control for r in b.records]
    end = batches[-1].base_offset + batches[-1].last_offset_delta + 1 if batches else None
    return recs, end


def got(impl, data, topic, partition, **kwargs):
    recs, end = impl.decode_consumer_records(data, topic, partition, **kwargs)
    assert all(type(r) is impl.ConsumerRecord for r in recs)
    return [fields(r) for r in recs], end


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("start", [0, 11, 13, 15, 21, 10**6])
def test_corpus_matches_decode_batches(impl, start) -> None:
    corpus = _corpus()
    for data in corpus + [b"".join(corpus[:6]), b"".join(corpus[6:14])]:
        for check in (True, False):
            want = outcome(expected, impl, data, "t", 7, start_offset=start, check_crcs=check)
            have = outcome(got, impl, data, "t", 7, start_offset=start, check_crcs=check)
            assert have == want
            assert want[0] == "returned"


def test_control_batch_moves_the_end_but_gives_no_record() -> None:
    data = py.encode_record_batch([(b"k", b"v")], base_offset=5) + py.encode_record_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x02")], base_offset=6, is_control=True,
        is_transactional=True, producer_id=3, producer_epoch=0)
    for impl in (py, cy):
        recs, end = impl.decode_consumer_records(data, "t", 0)
        assert [r.offset for r in recs] == [5] and end == 7
        assert impl.decode_consumer_records(data, "t", 0, start_offset=6) == ([], 7)
        assert impl.decode_consumer_records(data, "t", 0, start_offset=7) == ([], None)
        # The marker cut off (a partial batch at the end of a fetch): the end stops before it.
        recs, end = impl.decode_consumer_records(data[:-1], "t", 0)
        assert [r.offset for r in recs] == [5] and end == 6


def test_end_is_the_batch_end_past_compacted_records() -> None:
    # last_offset_delta says where the batch ends even when its last records were
    # compacted away: the position moves past them.
    data = bytearray(py.encode_record_batch([(b"k", b"a"), (b"k", b"b")], base_offset=100))
    data[23:27] = (9).to_bytes(4, "big")  # last offset delta 9, not 1
    data[17:21] = py.crc32c(bytes(data[21:])).to_bytes(4, "big")
    for impl in (py, cy):
        recs, end = impl.decode_consumer_records(bytes(data), "t", 0)
        assert [r.offset for r in recs] == [100, 101] and end == 110


def test_fuzzed_inputs_agree_with_decode_batches_in_both() -> None:
    rng = random.Random(0xF0CA)
    corpus = _corpus()
    kinds: dict[str, int] = {}
    for _ in range(400):
        data = _fuzz_input(rng, corpus)
        start = rng.choice([0, 11, 12, 22])
        for check in (True, False):
            want = outcome(expected, py, data, "t", 1, start_offset=start, check_crcs=check,
                           max_decompressed_size=300)
            for impl in (py, cy):
                have = outcome(got, impl, data, "t", 1, start_offset=start, check_crcs=check,
                               max_decompressed_size=300)
                assert have == want, (impl.IMPLEMENTATION, data, start, check)
            kind = "returned" if want[0] == "returned" else want[1].__name__
            kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds.get("returned", 0) > 80 and kinds.get("CorruptRecordError", 0) > 80, kinds


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_arguments_are_the_codecs_errors(impl) -> None:
    with pytest.raises(errors.CodecError, match="start_offset must be an int"):
        impl.decode_consumer_records(b"", "t", 0, start_offset=1.5)
    with pytest.raises(TypeError):
        impl.decode_consumer_records([1, 2], "t", 0)
    assert impl.decode_consumer_records(b"", "t", 0) == ([], None)


@pytest.mark.parametrize("impl", IMPLS)
def test_deserializers_replace_keys_and_values_in_order(impl) -> None:
    data = py.encode_record_batch([(b"a", b"1"), (None, b"2", 5, [("h", b"x")])], base_offset=3)
    calls = []

    def kd(k):
        calls.append(("k", k))
        return None if k is None else k.decode()

    def vd(v):
        calls.append(("v", v))
        return int(v)

    recs, end = impl.decode_consumer_records(data, "t", 2, key_deserializer=kd,
                                             value_deserializer=vd)
    assert [fields(r) for r in recs] == [
        ("t", 2, 3, recs[0].timestamp, 0, "a", 1, ()),
        ("t", 2, 4, 5, 0, None, 2, (("h", b"x"),)),
    ] and end == 5
    assert calls == [("k", b"a"), ("v", b"1"), ("k", None), ("v", b"2")]
    only_value, _ = impl.decode_consumer_records(data, "t", 2, value_deserializer=vd)
    assert [(r.key, r.value) for r in only_value] == [(b"a", 1), (None, 2)]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_failing_deserializer_raises_its_error(impl) -> None:
    data = py.encode_record_batch([(b"a", b"1"), (b"b", b"x")])
    with pytest.raises(ValueError, match="invalid literal"):
        impl.decode_consumer_records(data, "t", 0, value_deserializer=int)


def test_gc_tracking_follows_what_the_fields_can_hold() -> None:
    # Records of bytes and str cannot be in a cycle: untracked, as CPython does for tuples
    # of atomic objects.  Deserialized fields may be anything: tracked, and collected.
    data = py.encode_record_batch([(b"a", b"1"), (b"b", b"2")])
    plain, _ = cy.decode_consumer_records(data, "t", 0)
    assert not any(gc.is_tracked(r) for r in plain)
    boxed, _ = cy.decode_consumer_records(data, "t", 0, value_deserializer=lambda v: [v])
    assert all(gc.is_tracked(r) for r in boxed)
    boxed[0].value.append(boxed[0])  # a cycle through a deserialized value
    probe = []
    boxed[0].value.append(type("P", (), {"__del__": lambda self: probe.append(1)})())
    del boxed
    gc.collect()
    assert probe == [1]  # the cycle was found and freed


@pytest.mark.parametrize("impl", IMPLS)
def test_constructor_repr_pickle_and_read_only_fields(impl) -> None:
    r = impl.ConsumerRecord("t", 1, 5, 1000, 0, b"k", b"v", [("h", b"x")])
    assert fields(r) == ("t", 1, 5, 1000, 0, b"k", b"v", (("h", b"x"),))
    assert repr(r) == ("ConsumerRecord(topic='t', partition=1, offset=5, timestamp=1000, "
                       "key=b'k', value=b'v')")
    assert impl.ConsumerRecord("t", 0, 1, -1, -1, None, None).headers == ()
    for again in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
        assert type(again) is impl.ConsumerRecord and fields(again) == fields(r)
    for name in FIELDS:
        with pytest.raises(AttributeError):
            setattr(r, name, 1)
        with pytest.raises(AttributeError):
            delattr(r, name)
    assert fields(r) == ("t", 1, 5, 1000, 0, b"k", b"v", (("h", b"x"),))
    # Identity semantics, as before: hashable, equal only to itself.
    assert r == r and r != impl.ConsumerRecord(*fields(r)) and hash(r) == hash(r)


def test_both_implementations_make_equal_records() -> None:
    data = b"".join(_corpus()[:6])
    a, ea = py.decode_consumer_records(data, "topic", 3, start_offset=11)
    b, eb = cy.decode_consumer_records(data, "topic", 3, start_offset=11)
    assert [fields(r) for r in a] == [fields(r) for r in b] and ea == eb and len(a) > 10
    assert [repr(r) for r in a] == [repr(r) for r in b]


def test_codec_selects_the_loaded_implementation() -> None:
    impl = cy if codec.IMPLEMENTATION == "cython" else py
    assert codec._ConsumerRecord is impl.ConsumerRecord
    assert codec._decode_consumer_records is impl.decode_consumer_records


# ---- decode_records_with: a client's own records made straight from the bytes ------------

from kafkawire import _pycodec as py_decode  # noqa: E402 - the twin

MADE_IMPLS = [pytest.param(py_decode, id="python"), pytest.param(cy, id="cython")]


def _layout(impl) -> tuple:
    # constants around and between the fields, as a client's record type takes them
    return ("c", impl._FIELD_OFFSET, impl._FIELD_TIMESTAMP, impl._FIELD_TIMESTAMP_TYPE,
            impl._FIELD_KEY, impl._FIELD_VALUE, None, impl._FIELD_KEY_SIZE,
            impl._FIELD_VALUE_SIZE, impl._FIELD_HEADERS, ())


def _crc_layout(impl) -> tuple:
    return (impl._FIELD_OFFSET, impl._FIELD_CRC)


def made_expected(impl, data, start_offset=0, include_control=False, **kwargs):
    """decode_records' records, read as a consumer at start_offset reads them."""
    out, pos = [], start_offset
    for r in impl.decode_records(data, start_offset=start_offset,
                                 include_control=include_control, **kwargs):
        if r.offset < pos:
            continue
        pos = r.offset + 1
        out.append(("c", r.offset, r.timestamp, r.timestamp_type, r.key, r.value, None,
                    -1 if r.key is None else len(r.key), -1 if r.value is None else len(r.value),
                    tuple(r.headers), ()))
    return out


def made(impl, data, **kwargs):
    return impl.decode_records_with(data, lambda *a: a, _layout(impl), **kwargs)


@pytest.mark.parametrize("impl", MADE_IMPLS)
@pytest.mark.parametrize("start", [0, 11, 13, 15, 21, 10**6])
def test_made_records_match_decode_records(impl, start) -> None:
    corpus = _corpus()
    for data in corpus + [b"".join(corpus[:6]), b"".join(corpus[6:14])]:
        for check in (True, False):
            for control in (False, True):
                kw = dict(start_offset=start, check_crcs=check, include_control=control)
                want = outcome(made_expected, cy, data, **kw)
                assert outcome(made, impl, data, **kw) == want
                assert want[0] == "returned"


def test_made_records_of_fuzzed_inputs_agree() -> None:
    rng = random.Random(0xFAC7)
    corpus = _corpus()
    kinds: dict[str, int] = {}
    for _ in range(300):
        data = _fuzz_input(rng, corpus)
        kw = dict(start_offset=rng.choice([0, 11, 12, 22]), check_crcs=rng.random() < 0.5,
                  max_decompressed_size=300)
        want = outcome(made_expected, py, data, **kw)
        for impl in (py_decode, cy):
            assert outcome(made, impl, data, **kw) == want, (impl.__name__, data, kw)
        crcs = [outcome(impl.decode_records_with, data, lambda *a: a, _crc_layout(impl), **kw)
                for impl in (py_decode, cy)]
        assert crcs[0] == crcs[1], (data, kw)
        kind = "returned" if want[0] == "returned" else want[1].__name__
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds.get("returned", 0) > 60 and kinds.get("CorruptRecordError", 0) > 60, kinds


@pytest.mark.parametrize("impl", MADE_IMPLS)
def test_made_records_skip_offsets_below_the_position(impl) -> None:
    # a batch that overlaps the one before it (offsets 10-14, then 12-16): a consumer at
    # the position after 14 reads 15 and 16 only; so do records out of offset order
    first = cy.encode_record_batch([(b"k", b"a%d" % i) for i in range(5)], base_offset=10)
    second = cy.encode_record_batch([(b"k", b"b%d" % i) for i in range(5)], base_offset=12)
    got = [r[1] for r in made(impl, first + second, start_offset=11)]
    assert got == [11, 12, 13, 14, 15, 16]
    last = cy.encode_record_batch([(b"k", b"z")], base_offset=2**63 - 1)
    assert [r[1] for r in made(impl, last + first)] == [2**63 - 1]


class _Made:
    def __init__(self, offset, key, size, headers):
        self.fields = (offset, key, size, headers)


@pytest.mark.parametrize("impl", MADE_IMPLS)
def test_made_records_with_init_are_what_calling_the_class_makes(impl) -> None:
    data = cy.encode_record_batch([(b"k1", b"v", 7, [("h", b"x")]), (None, b"w", 8)],
                                  base_offset=3)
    layout = (impl._FIELD_OFFSET, impl._FIELD_KEY, impl._FIELD_KEY_SIZE, impl._FIELD_HEADERS)
    for kw in ({}, {"init": _Made.__init__}):
        got = impl.decode_records_with(data, _Made, layout, **kw)
        assert [type(r) for r in got] == [_Made, _Made]
        assert [r.fields for r in got] == [(3, b"k1", 2, (("h", b"x"),)), (4, None, -1, ())]
    with pytest.raises(TypeError, match="should return None, not 'int'"):
        impl.decode_records_with(data, _Made, layout, init=lambda self, *a: 1)
    with pytest.raises(ZeroDivisionError):
        impl.decode_records_with(data, lambda *a: 1 / 0, layout)
    assert repr(impl._FIELD_KEY_SIZE) == "_RecordField('key_size')"


@pytest.mark.parametrize("impl", MADE_IMPLS)
def test_made_records_bad_arguments_are_the_codecs_errors(impl) -> None:
    data = cy.encode_record_batch([(b"k", b"v")])
    for args, kw, message in [
        ((tuple, [impl._FIELD_KEY]), {}, "layout must be a tuple, not list"),
        ((tuple, (None,) * 33), {}, "layout has 33 items; a factory takes at most 32"),
        ((None, ()), {}, "factory must be callable, not NoneType"),
        ((len, ()), {"init": len}, "init needs a class as factory and a callable init"),
        ((tuple, ()), {"start_offset": "0"}, "start_offset must be an int"),
    ]:
        with pytest.raises(errors.CodecError, match=message):
            impl.decode_records_with(data, *args, **kw)
    assert impl.decode_records_with(data, lambda *a: a, (None,) * 32) == [(None,) * 32]


@pytest.mark.parametrize("impl", MADE_IMPLS)
def test_made_records_crc_is_each_legacy_messages_own(impl) -> None:
    from kafkawire import compression

    recs = [(b"k%d" % i, b"v%d" % i, 1_000 + i) for i in range(4)]
    plain = cy.encode_message_set(recs, magic=1, base_offset=20)
    packed = cy.encode_message_set([(k, v + b"!", t) for k, v, t in recs], magic=1,
                                   base_offset=30, compression=1)
    v2 = cy.encode_record_batch(recs, base_offset=40)
    # an uncompressed message's CRC is its own; a wrapper's records carry the inner ones
    inner = compression.decompress(1, packed[34:], 1 << 20)  # after a null wrapper key
    want = ([(20 + i, b.crc) for i, b in enumerate(cy.decode_batches(plain))]
            + [(30 + i, b.crc) for i, b in enumerate(cy.decode_batches(inner))]
            + [(40 + i, None) for i in range(4)])
    got = impl.decode_records_with(plain + packed + v2, lambda *a: a, _crc_layout(impl))
    assert got == want and len({c for _o, c in got[:8]}) == 8
