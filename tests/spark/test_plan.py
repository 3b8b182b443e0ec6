"""Offset planning without Spark or a broker: splitting, rate limits, pushdown, offsets JSON."""

from __future__ import annotations

import datetime as dt

from pyspark.sql.datasource import EqualTo, GreaterThan, In, LessThanOrEqual, StringStartsWith

from kafkawire.spark._plan import Pushdown, offsets_from_json, offsets_to_json, rate_limit, split_ranges


def test_offsets_json_is_the_jvm_connectors():
    offsets = {("b", 1): 7, ("a", 10): 3, ("a", 2): 5}
    assert offsets_to_json(offsets) == {"a": {"2": 5, "10": 3}, "b": {"1": 7}}
    assert offsets_from_json(offsets_to_json(offsets)) == offsets


def test_max_records_per_partition_splits_each_range():
    got = split_ranges([("t", 0, 0, 250), ("t", 1, 10, 10), ("t", 2, 5, 105)], None, 100)
    assert got == [("t", 0, 0, 83), ("t", 0, 83, 166), ("t", 0, 166, 250), ("t", 2, 5, 105)]


def test_min_partitions_splits_in_proportion_to_size():
    got = split_ranges([("t", 0, 0, 900), ("t", 1, 0, 100)], 10, None)
    assert [r for r in got if r[1] == 1] == [("t", 1, 0, 100)]
    assert len([r for r in got if r[1] == 0]) == 9
    assert sum(r[3] - r[2] for r in got) == 1000
    # Never more parts than records.
    assert split_ranges([("t", 0, 0, 2)], 8, None) == [("t", 0, 0, 1), ("t", 0, 1, 2)]


def test_rate_limit_shares_by_lag_and_starves_no_partition():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 0}
    latest = {("t", 0): 1000, ("t", 1): 101, ("t", 2): 9000}
    got = rate_limit(start, latest, 100)
    assert got[("t", 1)] == 101  # a share under one record still gets one
    assert got[("t", 0)] == 9 and got[("t", 2)] == 89  # 1000:9000 of the limit
    assert rate_limit(start, latest, 10**6) == latest


def test_pushdown_narrows_exactly():
    pd = Pushdown()
    assert pd.accept(GreaterThan(("offset",), 9))
    assert pd.accept(LessThanOrEqual(("offset",), 20))
    assert pd.accept(In(("partition",), (1, 3)))
    assert pd.accept(EqualTo(("topic",), "a"))
    assert not pd.accept(StringStartsWith(("topic",), "a"))
    assert not pd.accept(EqualTo(("key",), b"k"))
    assert pd.narrow(0, 100) == (10, 21) and pd.narrow(15, 18) == (15, 18) and pd.narrow(30, 40) == (30, 30)
    assert [p for p in range(5) if pd.keeps_partition(p)] == [1, 3]
    assert pd.keeps_topic("a") and not pd.keeps_topic("b")
    assert not pd.row_checks


def test_pushdown_timestamps_move_the_start_and_check_rows():
    pd = Pushdown()
    when = dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.timezone.utc)
    assert pd.accept(GreaterThan(("timestamp",), when))
    assert pd.ts_min_ms == int(when.timestamp() * 1000)
    assert pd.row_checks and pd.ts_checks == [(">", int(when.timestamp() * 1_000_000))]
