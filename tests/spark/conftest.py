"""One SparkSession (local[2]) for the whole Spark suite, with format("kafkawire") registered.

A session costs seconds to start and a JVM per process, so every Spark test shares it;
a test that needs a cluster starts one in a subprocess (test_standalone_cluster.py).
"""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Everything here is the Spark suite: `-m "not spark"` (the twin's run) leaves it out.
    for item in items:
        if str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Workers must run this interpreter: it is the one with kafkawire installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kafkawire.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkawire-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    kafkawire.spark.register(session)
    yield session
    session.stop()
