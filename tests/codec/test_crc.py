"""CRC32 (IEEE) and CRC32C (Castagnoli) through kafkawire.codec.

References: zlib.crc32 for IEEE, the ``crc32c`` package for Castagnoli (an independent
implementation).  The portable table path of the compiled extension and its sse4.2 path
without the PCLMULQDQ merge are covered in subprocesses with KAFKAWIRE_CRC32C=table and
=no-clmul, since the path is chosen once at import.
"""

import os
import random
import subprocess
import sys
import textwrap
import zlib

import crc32c as crc32c_ref  # an independent CRC32C implementation (test dependency)
import numpy as np
import pytest

from kafkawire import codec


def compiled():
    """kafkawire._codec itself, whichever implementation kafkawire.codec picked."""
    try:
        from kafkawire import _codec
    except ImportError as exc:
        if (os.environ.get("KAFKAWIRE_EXPECT_IMPLEMENTATION") == "cython"
                or os.environ.get("KAFKAWIRE_REQUIRE_EXTENSION", "") not in ("", "0")):
            pytest.fail(f"kafkawire._codec must be built for this run: {exc!r}")
        pytest.skip("kafkawire._codec is not built; only the pure-Python codec is present")
    return _codec

CHECK = b"123456789"


def ref_c(data, value=0):
    return crc32c_ref.crc32c(bytes(data), value)


def test_check_values():
    # the "check" values from the CRC catalogue for the standard test input
    assert codec.crc32(CHECK) == 0xCBF43926
    assert codec.crc32c(CHECK) == 0xE3069283


def test_empty_input_returns_value():
    assert codec.crc32(b"") == 0
    assert codec.crc32c(b"") == 0
    assert codec.crc32(b"", 0x12345678) == 0x12345678
    assert codec.crc32c(b"", 0x12345678) == 0x12345678


def test_known_crc32c_vectors():
    # RFC 3720 (iSCSI) appendix B.4 test patterns
    assert codec.crc32c(bytes(32)) == 0x8A9136AA
    assert codec.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert codec.crc32c(bytes(range(32))) == 0x46DD794E
    assert codec.crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C


def test_results_are_unsigned_ints():
    for f in (codec.crc32, codec.crc32c):
        v = f(b"\xff" * 7)
        assert isinstance(v, int) and 0 <= v < 2**32


@pytest.mark.parametrize("n", range(0, 301))
def test_every_small_length(n):
    data = random.Random(n).randbytes(n)
    assert codec.crc32(data) == zlib.crc32(data)
    assert codec.crc32c(data) == ref_c(data)


@pytest.mark.parametrize(
    "n",
    [
        95,  # around the shortest three-stream pass (KW_STREAMS_MIN) of the sse4.2 path
        96,
        119,
        120,
        4095,
        4096,
        16 * 1024 - 21,  # the CRC'd part of a 16 KiB record batch
        3 * 8192 - 1,  # the longest three-stream pass; then around the long block (3 x 8 KiB)
        3 * 8192,
        3 * 8192 + 1,
        6 * 8192 - 1,  # one long block, then the longest pass
        65535,  # around the GIL-release threshold
        65536,
        1_000_003,
        (1 << 22) + 13,
    ],
)
def test_large_random_buffers(n):
    data = os.urandom(n)
    assert codec.crc32(data) == zlib.crc32(data)
    assert codec.crc32c(data) == ref_c(data)


def test_every_length_and_alignment_up_to_a_few_kib():
    # the sse4.2 path aligns in 1, 2 and 4-byte steps, splits the rest into three streams of
    # any multiple of 8 bytes and ends in 8, 4, 2 and 1-byte steps: every combination
    base = random.Random(3).randbytes(3000)
    view = memoryview(base)
    for n in range(0, 2990):
        for start in range(0, 8) if n < 400 or n % 8 == 0 else (n % 8,):
            piece = view[start:start + n]
            assert codec.crc32c(piece) == ref_c(piece), (start, n)


def test_chaining_with_value():
    rng = random.Random(7)
    data = rng.randbytes(200_000)
    for cut in (0, 1, 7, 8, 9, 255, 777, 24_576, 100_000, 199_999, 200_000):
        a, b = data[:cut], data[cut:]
        assert codec.crc32(b, codec.crc32(a)) == zlib.crc32(data)
        assert codec.crc32c(b, codec.crc32c(a)) == ref_c(data)
    # chaining from an arbitrary starting value agrees with the references too
    assert codec.crc32(data, 0xDEADBEEF) == zlib.crc32(data, 0xDEADBEEF)
    assert codec.crc32c(data, 0xDEADBEEF) == ref_c(data, 0xDEADBEEF)


def test_unaligned_memoryview_slices():
    base = os.urandom(70_000)
    view = memoryview(base)
    for start in range(0, 9):
        for end in (start, start + 1, start + 13, start + 4096 + 3, len(base) - start):
            piece = view[start:end]
            assert codec.crc32(piece) == zlib.crc32(piece), (start, end)
            assert codec.crc32c(piece) == ref_c(piece), (start, end)


def test_other_buffer_types():
    data = os.urandom(1000)
    expected = ref_c(data)
    assert codec.crc32c(bytearray(data)) == expected
    assert codec.crc32c(memoryview(data)) == expected
    assert codec.crc32c(np.frombuffer(data, dtype=np.uint8)) == expected
    assert codec.crc32(bytearray(data)) == zlib.crc32(data)


def test_single_bit_flip_changes_crc():
    data = bytearray(os.urandom(5000))
    c32, c32c = codec.crc32(data), codec.crc32c(data)
    data[2500] ^= 0x10
    assert codec.crc32(data) != c32
    assert codec.crc32c(data) != c32c


def test_not_a_buffer_raises_type_error():
    with pytest.raises(TypeError):
        codec.crc32c("text is not bytes")
    with pytest.raises(TypeError):
        codec.crc32(12345)


def test_implementation_name():
    name = codec.crc32c_implementation()
    if codec.IMPLEMENTATION == "python":
        assert name == "python"
    else:
        assert name in ("sse4.2", "sse4.2-no-clmul", "armv8", "table")
        if os.environ.get("KAFKAWIRE_CRC32C") == "table":
            assert name == "table"


def _expected_path(mode):
    """The CRC32C path the compiled extension picks under KAFKAWIRE_CRC32C=mode, from the
    CPU's flags; None where /proc/cpuinfo cannot say."""
    if mode == "table":
        return "table"
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(f.read().split())
    except OSError:
        return None
    machine = os.uname().machine
    if machine in ("x86_64", "AMD64") and "sse4_2" in flags:
        return "sse4.2" if mode != "no-clmul" and "pclmulqdq" in flags else "sse4.2-no-clmul"
    if machine in ("aarch64", "arm64") and "crc32" in flags:
        return "armv8"
    return "table"


_CHILD = textwrap.dedent(
    """
    import os, random, sys, zlib
    import crc32c as ref
    from kafkawire import codec
    assert codec.IMPLEMENTATION == "cython", codec.IMPLEMENTATION
    expected = sys.argv[1]
    assert expected in ("", codec.crc32c_implementation()), codec.crc32c_implementation()
    assert codec.crc32c(b"123456789") == 0xE3069283
    assert codec.crc32(b"123456789") == 0xCBF43926
    rng = random.Random(1)
    lengths = list(range(0, 301)) + [4000, 16 * 1024 - 21, 3 * 8192 - 1, 3 * 8192 + 5,
                                     65536, 1_000_003]
    for n in lengths:
        data = rng.randbytes(n)
        for start in (0, 1, 3):
            piece = memoryview(data)[start:]
            assert codec.crc32c(piece) == ref.crc32c(bytes(piece)), (n, start)
            assert codec.crc32(piece) == zlib.crc32(piece), (n, start)
    data = rng.randbytes(100_000)
    assert codec.crc32c(data[777:], codec.crc32c(data[:777])) == ref.crc32c(data)
    print("paths-ok")
    """
)


@pytest.mark.parametrize("mode", ["table", "no-clmul"])
def test_forced_paths_in_subprocess(mode):
    # "no-clmul": the sse4.2 path as a CPU with SSE4.2 but no PCLMULQDQ runs it (one crc32
    # chain where the stream pass would be); elsewhere the machine's own path
    compiled()  # KAFKAWIRE_CRC32C selects a path of the compiled extension
    expected = _expected_path(mode) or ""  # "": the CPU's flags are unknown here
    env = dict(os.environ, KAFKAWIRE_CRC32C=mode)
    env.pop("KAFKAWIRE_PUREPYTHON", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, expected], env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "paths-ok" in out.stdout


def test_default_path_is_hardware_when_the_cpu_has_it():
    # on x86_64 with PCLMULQDQ, also that the sse4.2 path merges its streams with it
    ext = compiled()
    expected = _expected_path(os.environ.get("KAFKAWIRE_CRC32C", ""))
    if expected is None:
        pytest.skip("no /proc/cpuinfo to read the CPU's features from")
    assert ext.crc32c_implementation() == expected
    # whichever path is active, it agrees with the reference
    data = os.urandom(100_000)
    assert ext.crc32c(data) == ref_c(data)
