"""What a new user meets first (issue 25): Python workers that can import kafkawire without
setting PYSPARK_PYTHON, and an option error whose message is the line they read."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from sparkkafka import load, new_topic, produce, records

from kafkawire.spark import register

pytestmark = pytest.mark.spark


def _python_without_kafkawire() -> str:
    found = shutil.which("python3")
    if found is None or subprocess.run([found, "-c", "import kafkawire"], capture_output=True).returncode == 0:
        pytest.skip("no python3 on PATH that lacks kafkawire")
    return found


def test_register_runs_the_source_in_this_interpreter_when_pyspark_python_is_unset(spark, kafka_broker,
                                                                                  monkeypatch):
    _python_without_kafkawire()
    sc = spark.sparkContext
    # A session made without PYSPARK_PYTHON: PySpark's workers would run 'python3'.
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setattr(sc, "pythonExec", "python3")
    t = new_topic(kafka_broker.bootstrap, 1, prefix="setup")
    produce(kafka_broker.bootstrap, t, {0: records(0, 12)})
    try:
        register(spark)
        assert sc.pythonExec == "python3"  # only format("kafkawire") runs elsewhere
        assert load(spark, kafka_broker.bootstrap, subscribe=t).count() == 12
    finally:
        monkeypatch.undo()
        register(spark)


def test_register_names_the_setting_when_the_workers_cannot_import_kafkawire(spark, monkeypatch):
    python = _python_without_kafkawire()
    monkeypatch.setenv("PYSPARK_PYTHON", python)
    monkeypatch.setattr(spark.sparkContext, "pythonExec", python)
    with pytest.raises(RuntimeError) as info:
        register(spark)
    assert f"Spark's Python workers run {python!r} (PYSPARK_PYTHON), which cannot import kafkawire" in str(info.value)
    assert f"set PYSPARK_PYTHON={sys.executable} before the SparkSession starts" in str(info.value)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0]


def test_an_option_error_is_the_first_line_the_user_reads(spark, kafka_broker):
    def reader():  # a DataFrameReader keeps every option set on it: a fresh one each time
        return (spark.read.format("kafkawire").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
                .option("subscribe", "setup-no-such-topic"))
    # At load(): a misspelt option.
    with pytest.raises(Exception) as info:  # noqa: PT011 - PySpark's captured AnalysisException
        reader().option("startingoffset", "earliest").load()
    assert ("kafkawire.spark.KafkawireOptionError: unknown option 'startingoffset' to reading format('kafkawire'); "
            "did you mean 'startingOffsets'?") in _first_line(info.value)
    # At the first action: a topic that does not exist (a batch read fails, naming it).
    with pytest.raises(Exception) as info:  # noqa: PT011
        reader().load().collect()
    assert ("KafkawireOptionError: option 'subscribe' names topics that do not exist: ['setup-no-such-topic']"
            in _first_line(info.value))


def test_a_streams_option_error_is_its_first_line_too(spark, kafka_broker, tmp_path):
    q = (spark.readStream.format("kafkawire").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
         .option("subscribe", "setup-any").option("endingOffsets", "latest").load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path)).trigger(availableNow=True).start())
    with pytest.raises(Exception) as info:  # noqa: PT011 - PySpark's StreamingQueryException
        q.awaitTermination(120)
    assert ("kafkawire.spark.KafkawireOptionError: option 'endingOffsets' is for batch queries only"
            in _first_line(info.value))
