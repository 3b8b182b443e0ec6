"""format("kafkawire") on a Spark standalone cluster: a master and two workers on loopback.

Local mode runs every task in one JVM; here the read and write tasks run in two executor
JVMs that the workers start, with pickled reader/writer objects and their own Python
workers, as in production.  The driver is a subprocess (cluster_job.py): this pytest
process may already hold the suite's local SparkSession, and a process has one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Iterator

import pytest
import sparkavro

from sparkkafka import new_topic, read_back

from kafkawire import Producer
from kafkawire.testing.spark import SparkStandaloneCluster

JOB = os.path.join(os.path.dirname(__file__), "cluster_job.py")
WORKERS = 2
PARTITIONS = 4  # one read task per partition, spread over both executors
PER_PARTITION = 250


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.timeout(600)
def test_read_and_write_across_two_executors(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    in_topic = new_topic(bootstrap, PARTITIONS, prefix="cluster-in")
    out_topic = f"cluster-out-{uuid.uuid4().hex[:8]}"  # auto-created by the executors' writes
    produced = {}
    with Producer(bootstrap_servers=bootstrap) as p:
        for part in range(PARTITIONS):
            records = [(b"k-%d-%04d" % (part, i), b"value-%d-%04d" % (part, i))
                       for i in range(PER_PARTITION)]
            p.send_batch(in_topic, part, records).result(30)
            produced.update({k.decode(): v.decode() for k, v in records})

    with SparkStandaloneCluster(workers=WORKERS) as cluster:
        try:
            job = subprocess.run(
                [sys.executable, JOB, cluster.master_url, bootstrap, in_topic, out_topic,
                 str(WORKERS)],
                capture_output=True, text=True, timeout=240, env=cluster.driver_env(),
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the job did not finish in 240 s; cluster logs:\n{cluster.output()}\n"
                        f"job stderr:\n{(exc.stderr or b'')[-4000:]!r}")
        assert job.returncode == 0, (
            f"the job failed ({job.returncode}):\n{job.stderr[-6000:]}\n"
            f"cluster logs:\n{cluster.output(2000)}"
        )
    summary = json.loads(job.stdout.strip().splitlines()[-1])

    # Every record, once, with the connector's columns.
    rows = summary["rows"]
    assert {r["key"]: r["value"] for r in rows} == produced
    assert len(rows) == len(produced)
    for part in range(PARTITIONS):
        offsets = sorted(r["offset"] for r in rows if r["partition"] == part)
        assert offsets == list(range(PER_PARTITION))

    # The read tasks ran in both executors, none in the driver.
    tasks = summary["read_tasks"]
    assert sum(t["rows"] for t in tasks) == len(produced)
    executors = {(t["executor_id"], t["executor_pid"]) for t in tasks}
    assert len(executors) == WORKERS, tasks
    assert summary["driver_jvm_pid"] not in {pid for _, pid in executors}
    assert summary["driver_python_pid"] not in {t["python_pid"] for t in tasks}
    assert len(summary["block_managers"]) == WORKERS + 1  # the executors' and the driver's

    # The executors' writes reached the broker, upper-cased.
    got = read_back(bootstrap, out_topic, len(produced))
    assert sorted((r.key.decode(), r.value.decode()) for r in got) == sorted(
        (k, v.upper()) for k, v in produced.items()
    )


@pytest.fixture(scope="module")
def registry_url() -> Iterator[str]:
    from kafkawire.testing.registry import ApicurioRegistry

    with ApicurioRegistry() as registry:
        yield registry.url


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.registry
@pytest.mark.timeout(600)
def test_avro_typed_columns_across_two_executors(kafka_broker, registry_url):
    """value.format=avro on the cluster: the driver resolves the reader schema, and each
    executor's Python workers fetch the writer schema by id and decode their partitions."""
    bootstrap = kafka_broker.bootstrap
    topic = new_topic(bootstrap, PARTITIONS, prefix="cluster-avro")
    per_partition = 50
    values = sparkavro.produce(bootstrap, registry_url, topic, PARTITIONS, per_partition)

    with SparkStandaloneCluster(workers=WORKERS) as cluster:
        try:
            job = subprocess.run(
                [sys.executable, JOB, cluster.master_url, bootstrap, topic, "avro", str(WORKERS), registry_url],
                capture_output=True, text=True, timeout=240, env=cluster.driver_env(),
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the job did not finish in 240 s; cluster logs:\n{cluster.output()}\n"
                        f"job stderr:\n{(exc.stderr or b'')[-4000:]!r}")
        assert job.returncode == 0, (
            f"the job failed ({job.returncode}):\n{job.stderr[-6000:]}\n"
            f"cluster logs:\n{cluster.output(2000)}"
        )
    summary = json.loads(job.stdout.strip().splitlines()[-1])
    assert summary["type"] == sparkavro.SPARK_TYPE
    rows = sorted(summary["rows"], key=lambda r: r["value"]["id"])
    assert [r["value"] for r in rows] == [sparkavro.expected(v) for v in values]
    assert [(r["key"], r["partition"], r["offset"]) for r in rows] == [
        (f"k{i}", i % PARTITIONS, i // PARTITIONS) for i in range(len(values))]
    # The decoding tasks ran in both executors, none in the driver.
    tasks = summary["read_tasks"]
    assert sum(t["rows"] for t in tasks) == len(values)
    executors = {(t["executor_id"], t["executor_pid"]) for t in tasks}
    assert len(executors) == WORKERS, tasks
    assert summary["driver_jvm_pid"] not in {pid for _, pid in executors}
