"""The hosts' own tests, run once without and once with kafkawire's drop-in installed:
each host's record-layer tests, and its consumer/producer tests that need no broker,
for the oldest and newest host release they are run on (each installed into its own
cached directory, kafkawire.testing.hosts).  A test that passes without the drop-in must
pass with it; both counts go to the run's summary (tests/compat/conftest.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from kafkawire.testing import hosts

# (host, release): the oldest and the newest of each host's TESTED_VERSIONS whose own
# tests are at hand (kafka-python 3.0.12's tag was not: 3.0.11's stand for the newest).
SUITES = [("kafka-python", "3.0.0"), ("kafka-python", "3.0.11"), ("aiokafka", "0.14.0")]
KINDS = ["record", "client"]


def counts(outcomes: dict[str, str]) -> str:
    c = Counter(outcomes.values())
    return ", ".join(f"{c[k]} {k}" for k in ("passed", "failed", "error", "skipped") if c[k])


@pytest.mark.hosts
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("host, version", SUITES, ids=[f"{h}-{v}" for h, v in SUITES])
def test_host_suite_passes_with_the_dropin(host, version, kind, record_property):
    spec = hosts.HOSTS[host]
    paths = spec.record_tests if kind == "record" else spec.client_tests
    try:
        hosts.host_tests(host, version)
    except hosts.HostTestsMissing as exc:
        pytest.skip(str(exc))
    own, _ = hosts.run_host_tests(host, version, paths, dropin=False)
    with_dropin, output = hosts.run_host_tests(host, version, paths, dropin=True)
    record_property("host_suite", f"{host} {version} {kind} tests ({' '.join(paths)}): "
                                  f"without the drop-in {counts(own)}; "
                                  f"with it {counts(with_dropin)}")
    assert f"on {host} {version}: installed=True" in output
    assert sum(o == "passed" for o in own.values()) >= 10, own  # they ran
    assert set(with_dropin) == set(own)
    worse = sorted(node for node, outcome in own.items()
                   if outcome == "passed" and with_dropin[node] != "passed")
    assert not worse, f"pass without the drop-in, not with it: {worse}\n{output[-4000:]}"
