"""Where a benchmark script writes what it measured: the --markdown table and the --json
ratios that bench/check.py and bench/readme_tables.py read.  One writer, so every script
creates missing directories and formats its JSON the same way."""

from __future__ import annotations

import json
import os
import sys
import time


def _open(path: str):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "w")


def write_markdown(path: str | None, text: str) -> None:
    """Write ``text`` to ``path``; nothing when ``path`` is None (the option not given)."""
    if path:
        with _open(path) as fh:
            fh.write(text)


def write_json(path: str | None, data: dict) -> None:
    """Write ``data`` (ratios by name) to ``path`` as sorted, indented JSON; nothing when
    ``path`` is None."""
    if path:
        with _open(path) as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.write("\n")


def finish(text: str, started: float, markdown: str | None, json_path: str | None = None,
           ratios: dict | None = None) -> None:
    """The end of a comparison run: print its tables and, to stderr, how long it took
    since ``started`` (time.monotonic()), then write them to ``markdown`` and the
    ``ratios`` to ``json_path`` (each only when given)."""
    print(text)
    print(f"(took {time.monotonic() - started:.0f}s)", file=sys.stderr)
    write_markdown(markdown, text)
    if ratios is not None:
        write_json(json_path, ratios)


def soak_verdict(name: str, title: str, rows: list[tuple[str, object]], problems: list[str],
                 promise: str) -> int:
    """Print a soak run's result (``rows`` of label and value under ``title``) and its
    verdict: FAIL with ``problems`` (the exit status 1), else PASS with ``promise`` (0)."""
    print(f"\n{title}")
    for label, value in rows:
        print(f"  {label:<23} {value}")
    if problems:
        print(f"{name}: FAIL: " + "; ".join(problems), flush=True)
        return 1
    print(f"{name}: PASS: {promise}", flush=True)
    return 0
