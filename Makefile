# kafkawire: `make demo` runs the main job against a local broker it starts itself;
# `make test` runs the whole suite once per codec implementation (Cython, then pure Python).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
export KAFKAWIRE_REQUIRE_EXTENSION := 1

.PHONY: all venv build test test-cython test-python bench demo fuzz dist clean

all: test

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet Cython
	$(PY) -m pip install --quiet --no-build-isolation -e '.[test,bench,arrow,broker,spark]'
	touch $(STAMP)

venv: $(STAMP)

# Rebuild the extension in place whenever _codec.pyx or its C headers change.
build: $(STAMP)
	$(PY) setup.py --quiet build_ext --inplace

test: test-cython test-python

test-cython: build
	KAFKAWIRE_EXPECT_IMPLEMENTATION=cython $(PY) -m pytest -q -p no:cacheprovider tests

# The Spark suite runs once, above: it tests the data source, not the codec beneath it.
test-python: build
	KAFKAWIRE_PUREPYTHON=1 KAFKAWIRE_EXPECT_IMPLEMENTATION=python $(PY) -m pytest -q -p no:cacheprovider -m "not spark and not groups" tests

# Side-by-side benchmarks (kafkawire and its peers interleaved in one process); the
# README's tables are their output. BENCH_ARGS=--quick for a shorter run.
bench: build
	$(PY) bench/compare_codec.py $(BENCH_ARGS) --markdown bench/results/codec.md
	$(PY) bench/compare_protocol.py $(BENCH_ARGS) --markdown bench/results/protocol.md
	$(PY) bench/compare_e2e.py $(BENCH_ARGS) --markdown bench/results/e2e.md
	$(PY) bench/compare_spark.py $(BENCH_ARGS) --markdown bench/results/spark.md
	$(PY) bench/compare_groups.py $(BENCH_ARGS) --markdown bench/results/groups.md
	$(PY) bench/compare_compat.py $(BENCH_ARGS) --markdown bench/results/compat.md
	$(PY) bench/compare_compat_aiokafka.py $(BENCH_ARGS) --markdown bench/results/compat_aiokafka.md
	$(PY) bench/readme_tables.py

demo: build
	$(PY) -m kafkawire demo

fuzz: build
	$(PY) -m pip install --quiet atheris
	$(PY) tests/fuzz/atheris_codec.py -max_total_time=$${FUZZ_SECONDS:-300}

dist: $(STAMP)
	$(PY) -m pip install --quiet build
	$(PY) -m build

clean:
	rm -rf build dist src/kafkawire/_codec.c src/kafkawire/*.so
