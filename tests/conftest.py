"""Suite-wide checks, and the real test brokers' fixtures (kafkawire.testing.plugin)."""

from __future__ import annotations

import os

import pytest

# One session-wide Tansu broker and one mock cluster for the whole suite.
pytest_plugins = ["kafkawire.testing.plugin"]

# The libFuzzer harness runs under `make fuzz`, never under pytest (it needs atheris).
collect_ignore_glob = ["fuzz/*"]


# The longest suites first: pytest-xdist's workers take test files in collection order
# (make test: --dist loadfile), so a long file collected last would run with the other
# worker idle.  The order within each suite stays as written.
_LONGEST_FIRST = ("tests/spark/", "tests/testing/", "tests/integration/")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        for i, prefix in enumerate(_LONGEST_FIRST):
            if item.nodeid.startswith(prefix):
                return i
        return len(_LONGEST_FIRST)

    items.sort(key=rank)


def pytest_sessionstart(session: pytest.Session) -> None:
    # CI sets KAFKAWIRE_EXPECT_IMPLEMENTATION so that a missing or broken extension fails the
    # run instead of silently testing the pure-Python twin twice.
    expected = os.environ.get("KAFKAWIRE_EXPECT_IMPLEMENTATION", "")
    if not expected:
        return
    try:
        from kafkawire import codec
    except Exception as exc:  # noqa: BLE001 - any import failure must stop the run
        raise pytest.UsageError(
            f"KAFKAWIRE_EXPECT_IMPLEMENTATION={expected!r} but kafkawire.codec does not "
            f"import: {exc!r}"
        ) from exc
    from kafkawire.protocol import accumulator

    for name, module in (("kafkawire.codec", codec), ("kafkawire.protocol.accumulator", accumulator)):
        if module.IMPLEMENTATION != expected:
            hint = (
                "build the extensions with `python setup.py build_ext --inplace` (or `make build`)"
                if expected == "cython"
                else "unset KAFKAWIRE_PUREPYTHON / check the environment"
            )
            raise pytest.UsageError(
                f"KAFKAWIRE_EXPECT_IMPLEMENTATION={expected!r} but {name} loaded the "
                f"{module.IMPLEMENTATION!r} implementation; {hint}"
            )
