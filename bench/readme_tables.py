"""Copy the tables `make bench` wrote (bench/results/*.md) into bench/README.md.

Each table goes between its markers, ``<!-- BENCH-NAME:start -->`` and
``<!-- BENCH-NAME:end -->``, with its headings moved two levels down (under the page's
``## Section`` headings).
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SECTIONS = {"CODEC": "codec.md", "PROTOCOL": "protocol.md", "E2E": "e2e.md", "SPARK": "spark.md",
            "GROUPS": "groups.md", "COMPAT": "compat.md", "COMPAT-AIOKAFKA": "compat_aiokafka.md", "AIO": "aio.md",
            "LATENCY": "latency.md", "PARTITIONS": "partitions.md"}


def main() -> int:
    readme = ROOT / "bench" / "README.md"
    text = readme.read_text()
    for name, filename in SECTIONS.items():
        path = ROOT / "bench" / "results" / filename
        if not path.exists():
            print(f"{path} is missing: run `make bench` first", file=sys.stderr)
            continue
        table = re.sub(r"^(#+) ", r"\1## ", path.read_text().strip(), flags=re.M)
        start, end = f"<!-- BENCH-{name}:start -->", f"<!-- BENCH-{name}:end -->"
        if start not in text or end not in text:
            print(f"bench/README.md has no {start} ... {end} markers", file=sys.stderr)
            return 1
        head, rest = text.split(start, 1)
        _old, tail = rest.split(end, 1)
        text = f"{head}{start}\n{table}\n{end}{tail}"
    readme.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
