"""kafkawire.codec.decode_records_with and the FIELD_* placeholders: a caller's own record
type made straight from the bytes, public on whichever codec is loaded (run this file with
and without KAFKAWIRE_PUREPYTHON=1), and the same on the extension and the twin."""

from __future__ import annotations

import collections

import pytest

from kafkawire import _pycodec, _pycodec_decode, codec, errors

try:
    from kafkawire import _codec
except ImportError:  # the twin-only build
    _codec = None

FIELDS = ("OFFSET", "TIMESTAMP", "TIMESTAMP_TYPE", "KEY", "VALUE", "KEY_SIZE", "VALUE_SIZE",
          "HEADERS", "CRC")
IMPLS = [pytest.param(_pycodec, id="python")] + (
    [pytest.param(_codec, id="cython")] if _codec is not None else [])
Row = collections.namedtuple("Row", "topic offset key value headers")


def data() -> bytes:
    """Magic 0, 1 (gzip) and 2 (one plain batch, one lz4 with headers), offsets 0-8."""
    return b"".join([
        codec.encode_message_set([(b"k0", b"v0", 0), (None, b"v1", 0)], magic=0),
        codec.encode_message_set([(b"k2", None, 1_000), (b"k3", b"v3", 1_001)], magic=1,
                                 base_offset=2, compression=codec.CODEC_GZIP),
        codec.encode_record_batch([(b"k4", b"v4", 2_000, [])], base_offset=4),
        codec.encode_record_batch(
            [(b"k%d" % i, b"v%d" % i, 3_000 + i, [("h", b"%d" % i), ("n", None)])
             for i in range(5, 9)], base_offset=5, compression=codec.CODEC_LZ4),
    ])


def loaded():
    return _codec if codec.IMPLEMENTATION == "cython" else _pycodec


def test_the_public_names_are_the_loaded_codecs():
    impl = loaded()
    for name in FIELDS:
        assert getattr(codec, f"FIELD_{name}") is getattr(impl, f"_FIELD_{name}")
        assert f"FIELD_{name}" in codec.__all__
    assert "decode_records_with" in codec.__all__
    assert "FIELD_OFFSET" in codec.decode_records_with.__doc__


def test_the_twin_re_exports_what_the_extension_has():
    names = ["decode_records_with", "_RecordField"] + [f"_FIELD_{f}" for f in FIELDS]
    for name in names:
        assert getattr(_pycodec, name) is getattr(_pycodec_decode, name)
        if _codec is not None:
            assert hasattr(_codec, name)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("start", [0, 3, 6, 9])
def test_records_as_decode_records_reads_them(impl, start):
    layout = ("t", impl._FIELD_OFFSET, impl._FIELD_KEY, impl._FIELD_VALUE, impl._FIELD_HEADERS)
    got = impl.decode_records_with(data(), Row, layout, start_offset=start)
    want = [Row("t", r.offset, r.key, r.value, tuple(r.headers))
            for r in impl.decode_records(data()) if r.offset >= start]
    assert got == want
    assert [r.offset for r in got] == list(range(start, 9))
    if impl is loaded():  # the public function is the loaded codec's
        public = ("t", codec.FIELD_OFFSET, codec.FIELD_KEY, codec.FIELD_VALUE,
                  codec.FIELD_HEADERS)
        assert codec.decode_records_with(data(), Row, public, start_offset=start) == got


@pytest.mark.parametrize("impl", IMPLS)
def test_every_field(impl):
    layout = tuple(getattr(impl, f"_FIELD_{f}") for f in FIELDS)
    got = impl.decode_records_with(data(), lambda *a: a, layout)
    assert got[0][:8] == (0, -1, -1, b"k0", b"v0", 2, 2, ())  # magic 0: no timestamp
    assert got[2][:8] == (2, 1_000, 0, b"k2", None, 2, -1, ())
    assert got[8] == (8, 3_008, 0, b"k8", b"v8", 2, 2, (("h", b"8"), ("n", None)), None)
    assert [type(r[8]) for r in got[:4]] == [int] * 4  # each message's own CRC
    assert len({r[8] for r in got[:4]}) == 4


@pytest.mark.parametrize("impl", IMPLS)
def test_init_makes_records_as_calling_the_class(impl):
    class Made:
        def __init__(self, offset, value):
            self.offset, self.value = offset, value

    layout = (impl._FIELD_OFFSET, impl._FIELD_VALUE)
    made = impl.decode_records_with(data(), Made, layout, init=Made.__init__)
    assert [(m.offset, m.value) for m in made] == [
        (m.offset, m.value) for m in impl.decode_records_with(data(), Made, layout)]
    assert all(type(m) is Made for m in made)


def test_refusals_are_the_same_on_both():
    def outcome(impl, *args, **kw):
        try:
            return impl.decode_records_with(*args, **kw)
        except Exception as exc:  # noqa: BLE001 - the class and words are compared
            return type(exc), str(exc)

    corrupt = bytearray(data())
    corrupt[-5] ^= 0xFF  # inside the last batch: its CRC no longer holds
    cases = [((data(), tuple, [_pycodec._FIELD_KEY]), {}),
             ((data(), None, ()), {}),
             ((data(), lambda *a: 1 / 0, ()), {}),
             ((bytes(corrupt), lambda *a: a, ()), {}),
             ((bytes(corrupt), lambda *a: a, ()), {"check_crcs": False})]
    for args, kw in cases:
        twin = outcome(_pycodec, *args, **kw)
        if _codec is not None:
            # each implementation's own placeholders
            compiled = tuple(_codec._FIELD_KEY if a is _pycodec._FIELD_KEY else a
                             for a in args[2]) if type(args[2]) is tuple else args[2]
            assert outcome(_codec, args[0], args[1], compiled, **kw) == twin
    assert outcome(_pycodec, *cases[0][0]) == (errors.CodecError,
                                               "layout must be a tuple, not list")
    assert outcome(_pycodec, *cases[2][0])[0] is ZeroDivisionError
    assert issubclass(outcome(_pycodec, *cases[3][0])[0], errors.CodecError)
