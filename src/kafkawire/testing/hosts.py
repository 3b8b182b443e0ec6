"""The drop-in codecs' hosts (kafka-python, aiokafka) at a given release, with their own
tests, for running those tests without and with kafkawire's drop-in installed.

* :func:`host_site`: the host release installed with ``pip install --no-deps --target``
  into kafkawire's user cache (``<cache>/hosts/site/<host>-<version>``; see
  :func:`kafkawire.testing._maven.cache_dir`), put first on ``PYTHONPATH`` by
  :func:`run_host_tests` (the venv is left as it is).
* :func:`host_tests`: the release's own test files, in ``<cache>/hosts/src/<host>-<version>``
  (only the tests: the host's package comes from :func:`host_site`).  Taken from the
  release's sdist (``pip download --no-binary :all:``) when it ships them; neither
  kafka-python's sdists (3.x: none of test/record, test/consumer, test/producer) nor
  aiokafka's (all of tests/ left out) do, so they are put there from a checkout of the
  release's tag, e.g. ``git -C kafka-python archive 3.0.11 test | tar x -C <that dir>``.
  :class:`HostTestsMissing` says where when they are not there.
* :func:`run_host_tests`: pytest in a child process on some of those tests, with the
  drop-in installed by the ``kafkawire.testing._host_dropin`` plugin or not; each test's
  outcome by its node id.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from kafkawire.testing._maven import cache_dir

__all__ = ["HOSTS", "Host", "HostTestsMissing", "host_site", "host_tests", "run_host_tests"]


@dataclass(frozen=True)
class Host:
    name: str  # the distribution's name on PyPI
    dropin: str  # kafkawire's drop-in module for it
    tests: str  # the host repository's test directory
    #: its record-layer tests, and its consumer/producer tests that need no broker (paths
    #: under ``tests``'s parent), run each without and with the drop-in
    record_tests: tuple[str, ...]
    client_tests: tuple[str, ...]
    #: pytest arguments its tests need here
    pytest_args: tuple[str, ...] = ()
    #: what its tests import beyond the host and pytest (installed beside the host)
    test_requires: tuple[str, ...] = ()


HOSTS = {
    "kafka-python": Host(
        "kafka-python", "kafkawire.compat.kafka_python", "test",
        record_tests=("test/record",),
        client_tests=("test/consumer/test_fetcher.py", "test/producer/test_producer_batch.py",
                      "test/producer/test_record_accumulator.py",
                      "test/producer/test_sender.py"),
        test_requires=("pytest-mock>=3.10",)),
    "aiokafka": Host(
        "aiokafka", "kafkawire.compat.aiokafka", "tests",
        record_tests=("tests/record",),
        client_tests=("tests/test_fetcher.py", "tests/test_message_accumulator.py"),
        # its conftest.py imports docker (its broker fixtures, unused by these tests)
        test_requires=("docker>=7",)),
}


class HostTestsMissing(RuntimeError):
    """A host release's own tests are not in the cache and its sdist does not ship them."""


def _root() -> str:
    return os.path.join(cache_dir(), "hosts")


def _pip(*args: str, timeout: float) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


class _Locked:
    """One process at a time fills a cache entry (the others wait, then find it)."""

    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._file = open(path + ".lock", "w")  # noqa: SIM115 - held until __exit__

    def __enter__(self) -> None:
        fcntl.flock(self._file, fcntl.LOCK_EX)

    def __exit__(self, *exc) -> None:
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()


def host_site(host: str, version: str, *, timeout: float = 600) -> str:
    """A directory holding ``host`` ``version`` (its wheel; compiled parts, where the
    release has them, included) and what its tests need beyond this environment's
    packages, installed once into the cache."""
    site = os.path.join(_root(), "site", f"{host}-{version}")
    with _Locked(site):
        if not os.path.exists(os.path.join(site, ".complete")):
            staging = tempfile.mkdtemp(prefix=f".{host}-{version}-", dir=os.path.dirname(site))
            try:
                _pip("install", "--quiet", "--no-deps", "--target", staging,
                     f"{host}=={version}", *HOSTS[host].test_requires, timeout=timeout)
                open(os.path.join(staging, ".complete"), "w").close()
                shutil.rmtree(site, ignore_errors=True)
                os.rename(staging, site)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return site


def host_tests(host: str, version: str, *, timeout: float = 600) -> str:
    """The directory holding ``host`` ``version``'s own tests (see the module's notes);
    HostTestsMissing when neither the cache nor the release's sdist has them."""
    spec = HOSTS[host]
    src = os.path.join(_root(), "src", f"{host}-{version}")
    wanted = spec.record_tests + spec.client_tests

    def complete() -> bool:
        return all(os.path.exists(os.path.join(src, path)) for path in wanted)

    with _Locked(src):
        if complete():
            return src
        sdists = os.path.join(_root(), "sdist")
        os.makedirs(sdists, exist_ok=True)
        # no build isolation: pip then reads the sdist's metadata without building a
        # fresh environment (minutes for aiokafka's)
        _pip("download", "--quiet", "--no-deps", "--no-binary", ":all:",
             "--no-build-isolation", "--dest", sdists, f"{host}=={version}", timeout=timeout)
        prefix = f"{host.replace('-', '_')}-{version}"
        archive = next((os.path.join(sdists, f) for f in sorted(os.listdir(sdists))
                        if f.startswith(prefix) and f.endswith(".tar.gz")), None)
        if archive is not None:
            with tarfile.open(archive) as tar:
                members = [m for m in tar.getmembers()
                           if m.name.split("/")[1:2] == [spec.tests] and (m.isfile() or m.isdir())]
                staging = tempfile.mkdtemp(dir=os.path.dirname(src))
                try:
                    tar.extractall(staging, members=members, filter="data")
                    extracted = os.path.join(staging, archive.rsplit("/", 1)[1][:-7], spec.tests)
                    if os.path.isdir(extracted):
                        os.makedirs(src, exist_ok=True)
                        shutil.copytree(extracted, os.path.join(src, spec.tests),
                                        dirs_exist_ok=True)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
        if complete():
            return src
    missing = [path for path in wanted if not os.path.exists(os.path.join(src, path))]
    raise HostTestsMissing(
        f"{host} {version}'s own tests {', '.join(missing)} are not in {src}, and its sdist "
        f"on PyPI does not ship them: put the {spec.tests}/ directory of {host}'s release "
        f"{version} there (from a checkout of its tag: git archive <tag> {spec.tests} | "
        f"tar x -C {src})")


def run_host_tests(host: str, version: str, paths, *, dropin: bool,
                   extra_env: dict[str, str] | None = None,
                   timeout: float = 600) -> tuple[dict[str, str], str]:
    """pytest on ``paths`` (under :func:`host_tests`) against :func:`host_site`, with the
    drop-in installed (``dropin``) or not: ({node id: "passed" | "failed" | "error" |
    "skipped"}, pytest's output)."""
    spec = HOSTS[host]
    site = host_site(host, version, timeout=timeout)
    src = host_tests(host, version, timeout=timeout)
    env = dict(os.environ, **(extra_env or {}))
    env["PYTHONPATH"] = os.pathsep.join([site] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("KAFKAWIRE_PATCH_KAFKA_PYTHON", None)
    env.pop("KAFKAWIRE_PATCH_AIOKAFKA", None)
    plugin = []
    if dropin:
        env["KAFKAWIRE_HOST_DROPIN"] = spec.dropin
        env["KAFKAWIRE_HOST_VERSION"] = version
        plugin = ["-p", "kafkawire.testing._host_dropin"]
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.xml")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
             "-p", "no:randomly", "--rootdir", src, f"--junitxml={report}", "-o",
             "junit_family=xunit1", *spec.pytest_args, *plugin, *paths],
            cwd=src, env=env, capture_output=True, text=True, timeout=timeout)
        output = proc.stdout + proc.stderr
        if not os.path.exists(report):
            raise RuntimeError(f"{host} {version}'s tests did not run:\n{output[-3000:]}")
        outcomes: dict[str, str] = {}
        for case in ElementTree.parse(report).getroot().iter("testcase"):
            node = f"{case.get('classname')}::{case.get('name')}"
            kinds = {child.tag for child in case}
            outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                       else "skipped" if "skipped" in kinds else "passed")
            if outcomes.get(node) in ("failed", "error"):
                continue  # a failing test whose teardown errs too: counted once, failed
            outcomes[node] = outcome
    return outcomes, output
