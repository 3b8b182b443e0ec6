"""The codec is written in parts, each compiled part beside its twin of the same name.

_codec.pyx pulls its parts in with ``include`` (one extension module); _pycodec.py
re-exports the names of its twin parts.  These tests keep the pairs whole and the two
modules' names the same.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

import kafkawire
from kafkawire import _pycodec as py

PACKAGE_DIR = Path(kafkawire.__file__).resolve().parent


def _included_parts() -> list[str]:
    pyx = PACKAGE_DIR / "_codec.pyx"
    if not pyx.exists():
        pytest.skip("the Cython source is not beside the package (an installed wheel)")
    return re.findall(r'^include "_codec_(\w+)\.pxi"$', pyx.read_text(encoding="utf-8"), re.M)


def test_every_compiled_part_has_its_twin_and_the_other_way_round() -> None:
    parts = _included_parts()
    assert parts, "_codec.pyx includes no _codec_<part>.pxi"
    compiled = {p.stem.removeprefix("_codec_") for p in PACKAGE_DIR.glob("_codec_*.pxi")}
    twins = {p.stem.removeprefix("_pycodec_") for p in PACKAGE_DIR.glob("_pycodec_*.py")}
    assert sorted(parts) == sorted(compiled), "a .pxi that _codec.pyx does not include, or the reverse"
    assert compiled == twins, f"parts without a twin: {sorted(compiled ^ twins)}"
    facade = (PACKAGE_DIR / "_pycodec.py").read_text(encoding="utf-8")
    for part in parts:
        assert f"from kafkawire._pycodec_{part} import" in facade, f"_pycodec.py skips _pycodec_{part}"


def test_the_twin_has_every_public_name_of_the_extension() -> None:
    cy = pytest.importorskip("kafkawire._codec")
    missing = sorted(n for n in dir(cy) if not n.startswith("_") and not hasattr(py, n))
    assert not missing, f"the twin lacks {missing}"


@pytest.mark.parametrize(
    "obj",
    [
        py.Record(3, 4, 0, b"k", b"v", (("h", b"x"),)),
        py.Batch(0, 2, 1, 0, 0, 0, False, False, -1, 0, 4, 4, -1, -1, -1, []),
        py.ConsumerRecord("t", 1, 3, 4, 0, b"k", b"v"),
    ],
    ids=["Record", "Batch", "ConsumerRecord"],
)
def test_twin_classes_keep_their_public_module(obj) -> None:
    # Pickles name the class by its module: kafkawire._pycodec, as before the split.
    assert type(obj).__module__ == "kafkawire._pycodec"
    data = pickle.dumps(obj)
    assert b"kafkawire._pycodec_" not in data
    assert type(pickle.loads(data)) is type(obj)
