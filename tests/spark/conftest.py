"""One SparkSession (local[2]) for the whole Spark suite, with format("kafkawire") registered
and Spark's own JVM connector, format("kafka"), on its classpath.

A session costs seconds to start and a JVM per process, so every Spark test shares it;
a test that needs a cluster starts one in a subprocess (test_standalone_cluster.py).  A
process has one SparkContext, whose jars are fixed when it starts, so the conformance
suite's connector jars are given to this one session (four small jars: no measurable
start-up cost) rather than to a second one.
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
    from kafkawire.testing.spark import kafka_connector_jars

    session = local_session("kafkawire-tests", conf={
        "spark.jars": ",".join(kafka_connector_jars()),
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g",
        "spark.sql.python.filterPushdown.enabled": "true",
        # A Python worker starting on a loaded 2-core machine can take longer than the
        # 15 s default to connect back ("Python worker failed to connect back").
        "spark.python.authenticate.socketTimeout": "120s",
    })
    yield session
    session.stop()
