"""Jars resolved by Maven from Maven Central into kafkawire's user cache, once per version.

Both the Apache Kafka broker (:mod:`kafkawire.testing.kafka`) and Spark's JVM Kafka
connector (:mod:`kafkawire.testing.spark`) come this way: ``mvn dependency:copy-dependencies``
on a small pom shipped beside these modules, into a staging directory renamed into place
when complete, one process at a time (the others wait on a lock file).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile

__all__ = ["cache_dir", "cached_dependencies", "is_cached"]

#: Where downloaded jars are kept (default: $XDG_CACHE_HOME/kafkawire or ~/.cache/kafkawire).
CACHE_ENV = "KAFKAWIRE_CACHE"


def cache_dir() -> str:
    """``$KAFKAWIRE_CACHE``, else ``$XDG_CACHE_HOME/kafkawire``, else ``~/.cache/kafkawire``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return override
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kafkawire")


def is_cached(name: str) -> bool:
    """Whether :func:`cached_dependencies` has ``name``'s jars already (no Maven run)."""
    root = os.path.join(cache_dir(), name)
    return os.path.exists(os.path.join(root, "complete")) and os.path.isdir(os.path.join(root, "libs"))


def cached_dependencies(pom: str, name: str, properties: dict[str, str], required_jar: str,
                        what: str, error: type[Exception], *, timeout: float) -> str:
    """The directory ``<cache>/<name>/libs`` holding ``pom``'s runtime dependencies with
    ``properties`` set (-Dkey=value), fetched by Maven on first use; ``error`` names
    ``what`` could not be had (no Maven, a version not on Maven Central, a time-out)."""
    root = os.path.join(cache_dir(), name)
    libs = os.path.join(root, "libs")
    done = os.path.join(root, "complete")
    if is_cached(name):
        return libs
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_cached(name):  # another process fetched them while we waited
            return libs
        mvn = shutil.which("mvn")
        if mvn is None:
            raise error(f"mvn is not on the PATH: {what} is fetched from Maven Central with Maven; "
                        f"install it (apt-get install -y maven; `make kafka` does it)")
        staging = tempfile.mkdtemp(prefix="libs-", dir=root)
        args = [mvn, "-B", "-q", "-f", pom, "dependency:copy-dependencies",
                *[f"-D{k}={v}" for k, v in properties.items()],
                f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
        try:
            result = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True,
                                    timeout=timeout, text=True)
        except subprocess.TimeoutExpired:
            shutil.rmtree(staging, ignore_errors=True)
            raise error(f"Maven did not fetch {what} within {timeout}s; is Maven Central reachable?") from None
        if result.returncode != 0 or required_jar not in os.listdir(staging):
            shutil.rmtree(staging, ignore_errors=True)
            output = (result.stdout + result.stderr).strip()[-3000:]
            raise error(f"Maven could not fetch {what} (exit {result.returncode}); is that release "
                        f"published on Maven Central? Its output ends with:\n{output}")
        shutil.rmtree(libs, ignore_errors=True)
        os.rename(staging, libs)
        with open(done, "w") as f:
            f.write(" ".join(f"{k}={v}" for k, v in properties.items()) + "\n")
    return libs
