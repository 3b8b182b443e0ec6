"""Build the compiled extensions: kafkawire._codec (the codec), kafkawire._accumulate
(the producer's per-record append), kafkawire._frames (the per-record requests and
answers framed and read), kafkawire._compat (the drop-in's record factory) and
kafkawire._avro (Avro payloads into Arrow columns).

If Cython or a compiler is missing the package still installs: kafkawire.codec then
falls back to the pure-Python twin (kafkawire._pycodec), the producer's accumulator
to kafkawire.protocol._accumulate_py, the frames to kafkawire.protocol._frames_py, the
record factory to kafkawire.compat._factory_py and the Avro column decoder to
kafkawire._pyavro; each gives the same results.
Set KAFKAWIRE_REQUIRE_EXTENSION=1 to make a failed build an error (CI and wheels do).
Set KAFKAWIRE_NO_EXTENSION=1 to build no extension at all: the pure-Python
`py3-none-any` wheel (`make dist` builds and tests one); it wins over REQUIRE.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

REQUIRE = os.environ.get("KAFKAWIRE_REQUIRE_EXTENSION", "") not in ("", "0")
NO_EXTENSION = os.environ.get("KAFKAWIRE_NO_EXTENSION", "") not in ("", "0")


def extensions():
    if NO_EXTENSION:
        # No ext_modules, so setuptools tags the wheel py3-none-any (a pure distribution).
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        if REQUIRE:
            raise
        return []
    if sys.platform == "win32":
        args = ["/O2"]
    else:
        args = ["-O3", "-fno-strict-aliasing"]
    exts = [
        Extension(
            f"kafkawire.{name}",
            [f"src/kafkawire/{name}.pyx"],
            include_dirs=["src/kafkawire"],
            extra_compile_args=args,
        )
        for name in ("_codec", "_accumulate", "_frames", "_compat", "_avro")
    ]
    return cythonize(
        exts,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
        },
    )


class OptionalBuildExt(build_ext):
    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means "use the twin"
            if REQUIRE:
                raise
            print(f"kafkawire: extension not built ({exc}); using the pure-Python codec")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            if REQUIRE:
                raise
            print(f"kafkawire: extension not built ({exc}); using the pure-Python codec")


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
