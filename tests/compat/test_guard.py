"""The drop-ins' version guards: install() on a host version outside TESTED_VERSIONS
refuses (UntestedHostError naming the tested versions) and replaces nothing; force=True
installs with one warning; the environment opt-in warns and leaves the host's own record
layer; a failure part-way through install() leaves everything as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import aiokafka
import aiokafka.consumer.fetcher as aio_fetcher
import aiokafka.producer.producer as aio_producer
import aiokafka.record.memory_records as aio_memory
import kafka
import kafka.record.memory_records as k_memory
import pytest

import kafkawire.compat.aiokafka as kwaio
import kafkawire.compat.kafka_python as kwkp
from kafkawire.compat import UntestedHostError, UntestedHostWarning, _guard

KP_TARGETS = list(kwkp._TARGETS)
HOSTS = [(kwkp, kafka, "kafka-python"), (kwaio, aiokafka, "aiokafka")]
IDS = ["kafka-python", "aiokafka"]


def host_state():
    """Every name either drop-in replaces, as it is now."""
    return ([module.__dict__[name] for module, name, _ in KP_TARGETS]
            + [aio_memory.MemoryRecords, aio_fetcher.PartitionRecords,
               aio_fetcher.FetchResult.getall, aio_producer.AIOKafkaProducer.send])


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    before = host_state()
    monkeypatch.setattr(_guard, "_warned", set())
    yield
    kwkp.uninstall()
    kwaio.uninstall()
    assert host_state() == before


@pytest.mark.parametrize("version, tested", [
    ("3.0.0", True), ("3.0.12", True), ("3.0.5", True), ("3.0", True),
    ("3.0.13", False), ("3.1.0", False), ("2.3.3", False), ("3.0.12.dev0", False),
    ("3.0.12rc1", False), ("3.0.12+local", False), ("", False)])
def test_is_tested(version, tested):
    assert _guard.is_tested(version, ("3.0.0", "3.0.12")) is tested


def test_the_installed_hosts_are_tested_versions():
    # the venv's hosts are what the extras pin: install() works without force
    for dropin, host, _name in HOSTS:
        assert _guard.is_tested(host.__version__, dropin.TESTED_VERSIONS), host.__version__
        assert dropin.host_version() == host.__version__


def test_the_extras_pin_the_tested_versions():
    # UntestedHostError tells users to install kafkawire[<host>]: that extra must pin
    # exactly the range install() accepts
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    for dropin, _host, name in HOSTS:
        low, high = dropin.TESTED_VERSIONS
        assert extras[name] == ([f"{name}=={low}"] if low == high
                                else [f"{name}>={low},<={high}"]), name


@pytest.mark.parametrize("dropin, host, name", HOSTS, ids=IDS)
@pytest.mark.parametrize("version", ["99.0.0", "0.0.1", "3.0.99rc1"])
def test_untested_version_refuses_and_replaces_nothing(monkeypatch, dropin, host, name, version):
    monkeypatch.setattr(host, "__version__", version)
    before = host_state()
    with pytest.raises(UntestedHostError) as info:
        dropin.install()
    assert not dropin.installed() and host_state() == before
    low, high = dropin.TESTED_VERSIONS
    message = str(info.value)
    assert f"{name} {version} is not a version" in message
    assert (f"({name} {low} to {high})" if low != high else f"({name} {low})") in message
    assert "force=True" in message and f"kafkawire[{name}]" in message
    assert (info.value.host, info.value.version, info.value.tested) == (
        name, version, dropin.TESTED_VERSIONS)
    assert info.value.retriable is False


@pytest.mark.parametrize("dropin, host, name", HOSTS, ids=IDS)
def test_force_installs_with_one_warning(monkeypatch, dropin, host, name):
    monkeypatch.setattr(host, "__version__", "99.0.0")
    with pytest.warns(UntestedHostWarning, match=f"{name} 99.0.0 is not a version") as seen:
        dropin.install(force=True)
    assert dropin.installed() and len(seen) == 1
    dropin.uninstall()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second install in the process says nothing
        dropin.install(force=True)
    assert dropin.installed()


def test_tested_version_installs_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kwkp.install()
        kwaio.install()
    assert kwkp.installed() and kwaio.installed()


def test_kafka_python_never_half_installs(monkeypatch):
    # a replacement that fails part-way (int's attributes cannot be set): the ones made
    # before it are undone and the error is raised
    targets = list(kwkp._TARGETS)
    monkeypatch.setattr(kwkp, "_TARGETS", targets[:6] + [(int, "real", None)] + targets[6:])
    before = host_state()
    with pytest.raises(TypeError):
        kwkp.install()
    assert host_state() == before and k_memory.MemoryRecords is before[0]


def test_aiokafka_never_half_installs(monkeypatch):
    monkeypatch.setattr(kwaio, "_MessageBatch", int)  # its done cannot be set: the last step
    before = host_state()
    with pytest.raises(TypeError):
        kwaio.install()
    assert not kwaio.installed() and host_state() == before


ENV_PROBE = """
import warnings, sys
import {host}
{host}.__version__ = {version!r}
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    import kafkawire.compat.{module} as dropin
print(repr((dropin.installed(),
            [str(w.message) for w in seen if w.category.__name__ == "UntestedHostWarning"])))
"""


@pytest.mark.parametrize("dropin, host, name", HOSTS, ids=IDS)
@pytest.mark.parametrize("value, version, expect", [
    ("1", "99.0.0", False), ("force", "99.0.0", True), ("1", None, True)])
def test_environment_opt_in(dropin, host, name, value, version, expect):
    # untested: a warning and the host's own record layer (an exception would stop the
    # user's program); "force" installs, with the warning
    version = version or host.__version__
    code = ENV_PROBE.format(host=host.__name__, version=version,
                            module=dropin.__name__.rsplit(".", 1)[1])
    env = dict(os.environ, **{dropin.ENV_VAR: value})
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    installed, warned = eval(proc.stdout.strip().splitlines()[-1])  # noqa: S307 - our print
    assert installed is expect
    if version == host.__version__:
        assert warned == []
    else:
        assert len(warned) == 1 and f"{name} 99.0.0 is not a version" in warned[0]
        assert ("not installed" in warned[0]) is (value != "force")
