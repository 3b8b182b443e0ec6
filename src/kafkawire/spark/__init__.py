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

__all__ = [
    "register",
    "local_session",
    "KafkawireDataSource",
    "KafkaRange",
    "KafkawireOptionError",
    "KafkawireDataLossError",
    "WriteError",
    "KAFKA_SCHEMA",
    "KAFKA_SCHEMA_WITH_HEADERS",
]


def register(spark: Any) -> None:
    """Make ``format("kafkawire")`` available in ``spark`` (a SparkSession)."""
    spark.dataSource.register(KafkawireDataSource)


def local_session(app_name: str = "kafkawire", master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession on this machine with ``format("kafkawire")`` registered: bound to
    loopback, no UI or progress bars, UTC, ERROR logs, Python workers running this
    interpreter (the one kafkawire is installed in).  ``conf`` adds Spark settings."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
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
