"""docs/options.md is generated from the option declarations; it must say what the code does."""

from __future__ import annotations

import pathlib

from kafkawire.core import config

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "options.md"


def test_docs_options_md_is_current():
    assert PAGE.read_text() == config.reference_markdown(), (
        "docs/options.md differs from the option declarations: regenerate it with "
        "`python -m kafkawire.core.config --markdown > docs/options.md`")


def test_every_option_is_described_with_what_it_accepts():
    page = config.reference_markdown()
    for table in (config._COMMON, config._PRODUCER, config._CONSUMER):
        for name, (_default, check) in table.items():
            assert f"| `{name}` |" in page
            assert hasattr(check, "accepts"), f"{name}'s checker says nothing about what it accepts"


def test_the_java_names_shown_are_accepted():
    # The page promises that the dotted Java name works: each shown, with its default.
    for kind, own in (("producer", config._PRODUCER), ("consumer", config._CONSUMER)):
        for name, (default, _check) in {**config._COMMON, **own}.items():
            if name in config._NOT_JAVA or default is None:
                continue
            made = config.Config(kind, {"bootstrap.servers": "localhost:9092", name.replace("_", "."): default})
            assert name in made._given
