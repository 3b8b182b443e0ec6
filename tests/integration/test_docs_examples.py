"""Every code block in README.md and docs/*.md runs here, so an example cannot go stale.

Conventions the pages follow (README.md, "Working on kafkawire", says so too):

* A fenced block's info string is ``python``, ``sh`` or ``text`` (output, synopses: not run).
* Blocks address the broker as ``localhost:9092`` (where ``kafkawire broker`` listens); here
  that is replaced by the session's Apache Kafka broker (``kafka_broker``).
* A block that cannot run says why in its info string: ```` ```python no-run: needs a TLS
  listener ````. They are counted (:data:`NO_RUN`), so they cannot grow unnoticed.
* Blocks run in page order (README.md first, then docs/ by name), each in a fresh
  interpreter, so a page may build on its earlier blocks (create a topic, then use it).
  Blocks using Spark run together in one interpreter (one Spark JVM), after the others.

The README's performance figures ("2.56x", "68%") must each be in the bench/README.md
section its link points at, and every relative link must reach an existing file and heading.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ADDRESS = "localhost:9092"
#: Blocks marked no-run, all pages together: change only with the reason in the block.
NO_RUN = 8

_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclasses.dataclass
class Block:
    page: pathlib.Path
    line: int
    lang: str
    body: str
    no_run: str | None  # the reason, for a block that is not run

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def spark(self) -> bool:
        return "kafkawire.spark" in self.body or "pyspark" in self.body


def _blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for m in _FENCE.finditer(text):
            info, body = m.group(1).strip(), m.group(2)
            lang, _, rest = info.partition(" ")
            rest = rest.strip()
            no_run = rest[len("no-run"):].lstrip(":").strip() if rest.startswith("no-run") else None
            found.append(Block(page, text.count("\n", 0, m.start()) + 1, lang, body, no_run))
    return found


BLOCKS = _blocks()
RUNNABLE = [b for b in BLOCKS if b.lang in ("python", "sh") and b.no_run is None]


def test_every_block_says_what_it_is_and_why_it_does_not_run():
    for b in BLOCKS:
        assert b.lang in ("python", "sh", "text"), f"{b.where}: fenced block of kind {b.lang!r}: use python, sh or text"
        if b.no_run is not None:
            assert b.lang != "text" and len(b.no_run) > 10, f"{b.where}: a no-run block says why it cannot run"
    no_run = [f"{b.where}: {b.no_run}" for b in BLOCKS if b.no_run is not None]
    assert len(no_run) == NO_RUN, (
        f"{len(no_run)} blocks are not run (expected {NO_RUN}): make the new one runnable, or raise "
        "NO_RUN here with its reason in the block:\n" + "\n".join(no_run))
    assert len(RUNNABLE) >= 15


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # `kafkawire ...` in sh blocks is this interpreter's console script.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def _run(where: str, command: list[str], cwd: pathlib.Path, timeout: float) -> None:
    result = subprocess.run(command, cwd=cwd, env=_environment(), stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"the block at {where} failed (exit {result.returncode}):\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-5000:]}")


def _command(block: Block, bootstrap: str) -> list[str]:
    body = block.body.replace(ADDRESS, bootstrap)
    if block.lang == "sh":
        return ["bash", "-euo", "pipefail", "-c", body]
    return [sys.executable, "-c", body]


@pytest.mark.parametrize("block", [b for b in RUNNABLE if not b.spark], ids=lambda b: b.where)
def test_block_runs(block, kafka_broker, tmp_path):
    _run(block.where, _command(block, kafka_broker.bootstrap), tmp_path, timeout=120)


@pytest.mark.spark
def test_spark_blocks_run(kafka_broker, tmp_path):
    from kafkawire import Producer

    # The pages' Spark blocks read "events", which the quickstart made before them; run
    # alone, this test makes it itself.
    with Producer(bootstrap_servers=kafka_broker.bootstrap) as producer:
        producer.send("events", b"for the Spark blocks", key=b"user-0").result(30)
    spark = [b for b in RUNNABLE if b.spark]
    assert spark, "no Spark blocks found"
    script = "\n".join(f"print('--- {b.where}', flush=True)\n{b.body.replace(ADDRESS, kafka_broker.bootstrap)}"
                       for b in spark)
    _run(", ".join(b.where for b in spark), [sys.executable, "-c", script], tmp_path, timeout=600)


# -- figures and links ---------------------------------------------------------------------

_FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:x|%)(?!\w)")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _sections(page: pathlib.Path) -> dict[str, str]:
    """Each heading's anchor -> its text up to the next heading of the same or a higher level."""
    lines = page.read_text().splitlines()
    heads = [(i, len(m.group(1)), _slug(m.group(2))) for i, line in enumerate(lines)
             if (m := re.match(r"(#+) (.*)", line))]
    out = {}
    for n, (i, level, slug) in enumerate(heads):
        end = next((j for j, lvl, _ in heads[n + 1:] if lvl <= level), len(lines))
        out[slug] = "\n".join(lines[i:end])
    return out


def _prose(page: pathlib.Path) -> str:
    return _FENCE.sub("", page.read_text())


def test_every_figure_the_readme_quotes_is_in_its_table():
    readme = _prose(ROOT / "README.md")
    perf = readme[readme.index("## Performance"):]
    perf = perf[:perf.index("\n## ", 1)]
    outside = _FIGURE.findall(readme.replace(perf, ""))
    assert not outside, f"figures quoted outside the Performance section, with no table: {outside}"
    bench = _sections(ROOT / "bench" / "README.md")
    checked = 0
    for item in re.split(r"\n(?=- )", perf):
        # Each figure belongs to the first bench/README.md link after it.
        rest = item
        for m in _LINK.finditer(item):
            target = m.group(1)
            before, rest = rest.split(m.group(0), 1)
            if not target.startswith("bench/README.md#"):
                continue
            anchor = target.split("#", 1)[1]
            assert anchor in bench, f"README links to bench/README.md#{anchor}, which has no such heading"
            for figure in _FIGURE.findall(before):
                assert figure in bench[anchor], (
                    f"README quotes {figure} for bench/README.md#{anchor}, whose tables do not have it")
                checked += 1
        assert not _FIGURE.findall(rest), f"figures with no bench/README.md link after them: {rest!r}"
    assert checked >= 10


@pytest.mark.parametrize("page", [*PAGES, ROOT / "bench" / "README.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_heading(page):
    for target in _LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        goal = (page.parent / path).resolve()
        assert goal.exists(), f"{page.relative_to(ROOT)} links to {target}: no such file"
        if anchor:
            assert anchor in _sections(goal), f"{page.relative_to(ROOT)} links to {target}: no such heading"
