"""kafkawire's PySpark data source and sink: ``format("kafkawire")``.

    import kafkawire.spark
    kafkawire.spark.register(spark)
    df = (spark.read.format("kafkawire")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

The read schema, the options and the offsets JSON are the JVM Kafka connector's
(spark-sql-kafka-0-10), so a query moves between the two by changing the format name; no
jar is needed.  Executors read Arrow batches straight from kafkawire's columnar decode.
Needs ``pip install 'kafkawire[spark]'`` (PySpark 4.0+ with pyarrow).
"""

from __future__ import annotations

import os
import sys
from typing import Any

try:
    from kafkawire.spark.source import (
        KAFKA_SCHEMA,
        KAFKA_SCHEMA_WITH_HEADERS,
        KafkaRange,
        KafkawireDataSource,
    )
except ImportError as exc:  # pragma: no cover - depends on the installation
    if exc.name and exc.name.split(".")[0] in ("pyspark", "pyarrow", "pandas"):
        raise ImportError(
            f"kafkawire.spark needs PySpark 4.0+ with pyarrow ({exc}); install them with: "
            f"pip install 'kafkawire[spark]'"
        ) from exc
    raise
from kafkawire.spark._io import KafkawireDataLossError, WriteError
from kafkawire.spark._options import KafkawireOptionError
from kafkawire.spark._typed import KafkawireDecodeError

__all__ = [
    "register",
    "local_session",
    "KafkawireDataSource",
    "KafkaRange",
    "KafkawireOptionError",
    "KafkawireDataLossError",
    "KafkawireDecodeError",
    "WriteError",
    "KAFKA_SCHEMA",
    "KAFKA_SCHEMA_WITH_HEADERS",
]


def register(spark: Any) -> None:
    """Make ``format("kafkawire")`` available in ``spark`` (a SparkSession).

    The data source runs in Spark's Python workers, which must import kafkawire.  In a
    local session whose workers would run PySpark's default ``python3`` (``PYSPARK_PYTHON``
    unset), the data source's workers run this interpreter instead, the one kafkawire is
    installed in.  A worker interpreter set explicitly that cannot import kafkawire is an
    error naming the setting to change.  (On a cluster, the executors' interpreter is
    ``PYSPARK_PYTHON`` as the driver saw it at session start, and cannot be checked here.)"""
    sc = getattr(spark, "sparkContext", None) if not _is_connect(spark) else None
    if sc is None or not str(sc.master).startswith("local"):
        spark.dataSource.register(KafkawireDataSource)
        return
    chosen = sc.pythonExec
    if os.environ.get("PYSPARK_PYTHON") is None and chosen == "python3" and not _same_python(chosen):
        # PySpark wraps the class with sc.pythonExec at registration: changed for this
        # call only, it applies to format("kafkawire")'s workers and to no other code.
        sc.pythonExec = sys.executable
        try:
            spark.dataSource.register(KafkawireDataSource)
        finally:
            sc.pythonExec = chosen
        return
    problem = _cannot_import_kafkawire(chosen)
    if problem:
        raise RuntimeError(
            f"Spark's Python workers run {chosen!r} (PYSPARK_PYTHON), which cannot import kafkawire "
            f"({problem}); set PYSPARK_PYTHON={sys.executable} before the SparkSession starts, or "
            f"install kafkawire for {chosen!r}")
    spark.dataSource.register(KafkawireDataSource)


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _same_python(executable: str) -> bool:
    import shutil

    found = shutil.which(executable)
    return found is not None and os.path.realpath(found) == os.path.realpath(sys.executable)


def _cannot_import_kafkawire(executable: str) -> str | None:
    """None when ``executable`` imports kafkawire, else what went wrong (one line)."""
    import subprocess

    if _same_python(executable):
        return None
    try:
        done = subprocess.run([executable, "-c", "import kafkawire"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def local_session(app_name: str = "kafkawire", master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession on this machine with ``format("kafkawire")`` registered: bound to
    loopback, no UI or progress bars, UTC, ERROR logs, Python workers running this
    interpreter (the one kafkawire is installed in) unless ``PYSPARK_PYTHON`` says
    otherwise.  ``conf`` adds Spark settings."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
