"""The Spark stage of ``kafkawire demo`` (kafkawire.spark.demo) on a small topic."""

from __future__ import annotations

import io
import time
import uuid

import pytest

from kafkawire.client.producer import Producer
from kafkawire.spark.demo import WINDOW_MS, compare, run_pipeline

KEYS = (b"a", b"bb", b"ccc", None)  # a null key is a group of its own, as in Spark
WINDOWS = 5
COUNT = 4000  # 800 records a window, 200 per key


@pytest.fixture(scope="module")
def demo_topic(kafka_broker):
    """A topic of COUNT records over WINDOWS one-minute windows, key k's values 10 * (k + 1)
    bytes long.  Returns the topic, [(key, timestamp ms, value length)] as produced, and the
    totals per (window start, key) worked out by hand."""
    topic = f"demo-in-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    base = now - now % WINDOW_MS - WINDOWS * WINDOW_MS
    produced = []
    with Producer(bootstrap_servers=kafka_broker.bootstrap) as p:
        for i in range(COUNT):
            k = i % len(KEYS)
            ts = base + i * WINDOWS * WINDOW_MS // COUNT
            value = b"v" * (10 * (k + 1))
            p.send(topic, value, key=KEYS[k], timestamp=ts)
            produced.append((KEYS[k], ts, len(value)))
        p.flush(30)
    expected = {(base + w * WINDOW_MS, key): (200, 200 * 10 * (k + 1))
                for w in range(WINDOWS) for k, key in enumerate(KEYS)}
    return topic, produced, expected


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.parametrize("reference", ["produced", "consumer"])
def test_pipeline_totals_match(spark, kafka_broker, demo_topic, reference):
    topic, produced, expected = demo_topic
    out = f"demo-out-{uuid.uuid4().hex[:8]}"
    log = io.StringIO()
    stats = run_pipeline(kafka_broker.bootstrap, topic, out,
                         produced if reference == "produced" else None, stream=log, spark=spark)
    assert stats["errors"] == []
    assert stats["read_rows"] == COUNT
    assert stats["windows"] == stats["back_rows"] == WINDOWS * len(KEYS)
    assert stats["result"] == expected  # the closed form, not just run_pipeline's own check
    assert min(stats["read_s"], stats["write_s"], stats["back_s"]) > 0
    assert "read 4,000 records" in log.getvalue()
    # The session has Spark's JVM connector (conftest): the demo shows its read beside kafkawire's.
    assert stats["jvm_read_rows"] == COUNT and "the same read through Spark's JVM connector" in log.getvalue()
    assert spark.range(3).count() == 3  # a session it was given is left running


def test_compare_names_each_difference():
    want = {(0, b"a"): (2, 20), (60_000, b"a"): (1, 10), (60_000, None): (1, 5)}
    got = {(0, b"a"): (2, 20), (60_000, b"a"): (1, 11), (120_000, b"b"): (1, 1)}
    assert compare(want, want) == []
    assert compare(want, got) == [
        "window 1970-01-01 00:01:00 key None: expected 1 records / 5 bytes, Spark wrote nothing",
        "window 1970-01-01 00:01:00 key b'a': expected 1 records / 10 bytes, Spark wrote 1 records / 11 bytes",
        "window 1970-01-01 00:02:00 key b'b': expected nothing, Spark wrote 1 records / 1 bytes",
    ]


def test_demo_records_fill_ten_windows_per_key():
    from kafkawire.cli import _DemoRecords
    from kafkawire.spark.demo import window_totals

    r = _DemoRecords(10_000, 100, now_ms=1_700_000_123_456)
    summary = list(r.summary())
    assert summary == [(r.key(i), r.timestamp(i), len(r.value(i))) for i in range(10_000)]
    totals = window_totals(summary)
    assert len(totals) == 10 * 16
    assert sum(n for n, _ in totals.values()) == 10_000
    assert {len(r.value(i)) for i in range(9)} == set(range(96, 105))


@pytest.mark.broker
def test_demo_without_spark(capsys):
    from kafkawire.cli import main

    assert main(["demo", "-n", "3000", "--no-spark"]) == 0
    out = capsys.readouterr().out
    assert "verified: all 3,000 records" in out and "spark" not in out
