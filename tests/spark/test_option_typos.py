"""Mistakes a new user makes with format("kafkawire"), and the first line they read: a
misspelt ``kafka.bootstrap.server`` or sink ``topik`` is named with what was meant, and a
broker nobody listens on is kafkawire's one-line NoBrokersAvailableError, without the
Python worker's traceback frames above it."""

from __future__ import annotations

import pytest

from kafkawire.spark import KafkawireOptionError
from kafkawire.spark._options import SinkOptions, SourceOptions
from kafkawire.testing._process import free_port

pytestmark = pytest.mark.spark

BOOTSTRAP_TYPO = "unknown option 'kafka.bootstrap.server'; did you mean 'kafka.bootstrap.servers'?"
TOPIC_TYPO = "unknown option 'topik' to writing format('kafkawire')"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0]


@pytest.mark.parametrize("key", ["kafka.bootstrap.server", "kafka.bootstrap.Servers ", "kafka.bootstrapservers"])
def test_a_misspelt_bootstrap_option_is_named(key):
    for parse in (lambda o: SourceOptions.parse({**o, "subscribe": "a"}, streaming=False),
                  lambda o: SinkOptions.parse({**o, "topic": "a"})):
        with pytest.raises(KafkawireOptionError) as info:
            parse({key: "127.0.0.1:9092"})
        assert f"unknown option {key.lower()!r}; did you mean 'kafka.bootstrap.servers'?" in str(info.value)
    # Nothing like it given: the plain "required" message.
    with pytest.raises(KafkawireOptionError, match="^option 'kafka.bootstrap.servers' is required"):
        SourceOptions.parse({"subscribe": "a", "kafka.client.id": "x"}, streaming=False)


def test_a_misspelt_sink_option_is_named():
    with pytest.raises(KafkawireOptionError) as info:
        SinkOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:9092", "topik": "events"})
    assert str(info.value) == (f"{TOPIC_TYPO}: the sink takes 'topic' and kafka.* options; did you mean 'topic'?")
    # The source's own short names too, and a name Spark adds is still let through.
    with pytest.raises(KafkawireOptionError, match="did you mean 'assign'"):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "asign": '{"a":[0]}'}, streaming=False)
    assert SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t", "path": "x"}).topic == "t"


def test_the_typos_are_the_first_line_spark_shows(spark):
    with pytest.raises(Exception) as info:  # noqa: PT011 - PySpark's captured AnalysisException
        (spark.read.format("kafkawire").option("kafka.bootstrap.server", "127.0.0.1:9")
         .option("subscribe", "t").load())
    assert f"kafkawire.spark.KafkawireOptionError: {BOOTSTRAP_TYPO}" in _first_line(info.value)
    with pytest.raises(Exception) as info:  # noqa: PT011
        (spark.createDataFrame([(b"v",)], "value binary").write.format("kafkawire").mode("append")
         .option("kafka.bootstrap.servers", "127.0.0.1:9").option("topik", "t").save())
    assert f"kafkawire.spark.KafkawireOptionError: {TOPIC_TYPO}" in _first_line(info.value)
    assert "did you mean 'topic'?" in _first_line(info.value)


def test_a_wrong_port_is_one_line_without_the_workers_frames(spark):
    wrong = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(Exception) as info:  # noqa: PT011 - PySpark's captured AnalysisException
        (spark.read.format("kafkawire").option("kafka.bootstrap.servers", wrong)
         .option("kafka.request.timeout.ms", "3000").option("subscribe", "t").load().collect())
    text = str(info.value)
    assert "kafkawire.errors.NoBrokersAvailableError: " in _first_line(info.value), text
    assert wrong in text
    assert "Traceback" not in text and 'File "' not in text, text
