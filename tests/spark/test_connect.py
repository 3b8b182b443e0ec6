"""format("kafkawire") from a Spark Connect session (pyspark.sql.connect), against a local
Connect server that the installed PySpark starts itself.

The Connect client needs PySpark's `connect` extra (grpcio, grpcio-status,
googleapis-common-protos, zstandard), which kafkawire's test extra installs; without them
the test fails, naming what to install.
The job runs in its own process (connect_job.py): this one holds the suite's classic session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import uuid
from typing import Iterator

import pytest
import sparkavro
from sparkkafka import new_topic, read_back

from kafkawire import Producer

JOB = os.path.join(os.path.dirname(__file__), "connect_job.py")
CONNECT_MODULES = ("grpc", "grpc_status", "google.rpc", "zstandard")
PARTITIONS = 2
PER_PARTITION = 200


def _missing() -> list[str]:
    missing = []
    for name in CONNECT_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except ModuleNotFoundError:
            missing.append(name)
    return missing


def _pairs(records: list) -> list[tuple[str, str]]:
    return sorted((r.key.decode(), r.value.decode()) for r in records)


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.timeout(600)
def test_batch_and_stream_through_spark_connect(kafka_broker):
    missing = _missing()
    if missing:
        pytest.fail(f"PySpark's Spark Connect client needs {', '.join(missing)} (pip install 'pyspark[connect]')")
    b = kafka_broker.bootstrap
    in_topic = new_topic(b, PARTITIONS, prefix="connect-in")
    out_topic, stream_topic = new_topic(b, PARTITIONS, prefix="connect-out"), new_topic(b, PARTITIONS, prefix="connect-st")
    produced = {}
    with Producer(bootstrap_servers=b) as p:
        for part in range(PARTITIONS):
            records = [(b"k-%d-%04d" % (part, i), b"value-%d-%04d" % (part, i)) for i in range(PER_PARTITION)]
            p.send_batch(in_topic, part, records).result(30)
            produced.update({k.decode(): v.decode() for k, v in records})
    with tempfile.TemporaryDirectory() as checkpoint:
        try:
            job = subprocess.run([sys.executable, JOB, b, in_topic, out_topic, stream_topic,
                                  os.path.join(checkpoint, uuid.uuid4().hex)],
                                 capture_output=True, text=True, timeout=420)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the Connect job did not finish in 420 s:\n{(exc.stderr or b'')[-4000:]!r}")
    assert job.returncode == 0, f"the Connect job failed ({job.returncode}):\n{job.stderr[-6000:]}"
    summary = json.loads(job.stdout.strip().splitlines()[-1])
    assert summary["session"].startswith("pyspark.sql.connect")
    rows = summary["rows"]
    assert {r["key"]: r["value"] for r in rows} == produced and len(rows) == len(produced)
    for part in range(PARTITIONS):
        assert sorted(r["offset"] for r in rows if r["partition"] == part) == list(range(PER_PARTITION))
    # maxOffsetsPerTrigger=150 over 400 records: micro-batches of at most 150, every record once.
    assert sum(summary["stream_rows"]) == len(produced)
    assert max(summary["stream_rows"]) <= 150
    assert _pairs(read_back(b, out_topic, len(produced))) == sorted((k, v.upper()) for k, v in produced.items())
    assert _pairs(read_back(b, stream_topic, len(produced))) == sorted(produced.items())


@pytest.fixture(scope="module")
def registry_url() -> Iterator[str]:
    from kafkawire.testing.registry import ApicurioRegistry

    with ApicurioRegistry() as registry:
        yield registry.url


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.registry
@pytest.mark.timeout(600)
def test_avro_typed_columns_through_spark_connect(kafka_broker, registry_url):
    """value.format=avro from a Connect session: the reader schema is resolved and the
    writer schemas fetched in the Connect server's Python workers, not in this client."""
    missing = _missing()
    if missing:
        pytest.fail(f"PySpark's Spark Connect client needs {', '.join(missing)} (pip install 'pyspark[connect]')")
    b = kafka_broker.bootstrap
    topic = new_topic(b, PARTITIONS, prefix="connect-avro")
    values = sparkavro.produce(b, registry_url, topic, PARTITIONS, 60)
    try:
        job = subprocess.run([sys.executable, JOB, "avro", b, topic, registry_url],
                             capture_output=True, text=True, timeout=420)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the Connect job did not finish in 420 s:\n{(exc.stderr or b'')[-4000:]!r}")
    assert job.returncode == 0, f"the Connect job failed ({job.returncode}):\n{job.stderr[-6000:]}"
    summary = json.loads(job.stdout.strip().splitlines()[-1])
    assert summary["session"].startswith("pyspark.sql.connect")
    assert summary["type"] == sparkavro.SPARK_TYPE
    rows = sorted(summary["rows"], key=lambda r: r["value"]["id"])
    assert [r["value"] for r in rows] == [sparkavro.expected(v) for v in values]
    assert [(r["key"], r["partition"], r["offset"]) for r in rows] == [
        (f"k{i}", i % PARTITIONS, i // PARTITIONS) for i in range(len(values))]
