"""kafkawire.testing.registry: finding a Java 21+ for Apicurio Registry, and the server's
lifecycle (started on free loopback ports, stopped by its pid)."""

from __future__ import annotations

import os
import urllib.request

import pytest

from kafkawire.testing import registry as reg
from kafkawire.testing.registry import ApicurioRegistry, find_java, java_version


def test_a_java_21_or_newer_is_found() -> None:
    java = find_java()
    assert java is not None and os.access(java, os.X_OK)
    assert java_version(java) >= 21
    assert find_java(1000) is None


def test_the_registry_java_variable_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    java = find_java()
    assert java is not None
    home = os.path.dirname(os.path.dirname(java))
    monkeypatch.setenv(reg.JAVA_ENV, home)  # a JDK home or a java executable
    assert reg._java_candidates()[0] == os.path.realpath(java)
    monkeypatch.setenv(reg.JAVA_ENV, "/no/such/java")
    assert find_java() is not None  # a wrong setting falls through to the others


def test_java_version_reads_what_java_says() -> None:
    assert java_version("/no/such/java") is None
    for java in reg._java_candidates():
        version = java_version(java)
        assert version is None or version >= 8


def test_the_registry_starts_serves_and_stops_by_its_pid(apicurio_registry: ApicurioRegistry) -> None:
    assert apicurio_registry.running and apicurio_registry.url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(apicurio_registry.url + "/schemas/types", timeout=10) as answer:
        assert answer.status == 200
    with ApicurioRegistry() as own:
        pid = own.pid
        assert pid and own.port not in (apicurio_registry.port, apicurio_registry.management_port)
    assert not own.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
