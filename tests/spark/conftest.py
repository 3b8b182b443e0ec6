"""One SparkSession (local[2]) for the whole Spark suite, with format("kafkawire") registered.

A session costs seconds to start and a JVM per process, so every Spark test shares it;
a test that needs a cluster starts one in a subprocess (test_standalone_cluster.py).
"""

from __future__ import annotations

import os
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
    from kafkawire.spark import local_session

    session = local_session("kafkawire-tests", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g",
        "spark.sql.python.filterPushdown.enabled": "true",
    })
    yield session
    session.stop()
