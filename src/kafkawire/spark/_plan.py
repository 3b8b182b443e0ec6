"""Offset planning for the data source: pure functions, no Spark, no I/O.

A plan is a list of offset ranges ``(topic, partition, start, end)`` (``end`` excluded),
one Spark task each.  Offsets cross the Spark boundary as the JVM connector writes them,
``{"topic": {"0": 123}}`` with the next offset to read, so checkpoints and ``startingOffsets``
values move between the two connectors.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = [
    "offsets_to_json", "offsets_from_json", "split_ranges", "rate_limit", "Pushdown",
]

TP = tuple  # (topic, partition)


def offsets_to_json(offsets: dict[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(value: Any) -> dict[TP, int]:
    if not isinstance(value, dict):
        raise ValueError(f"offsets must be a JSON object like {{\"topic\": {{\"0\": 12}}}}, got {value!r}")
    return {(topic, int(p)): int(o) for topic, parts in value.items() for p, o in parts.items()}


def split_ranges(ranges: list[tuple[str, int, int, int]], min_partitions: int | None,
                 max_records: int | None) -> list[tuple[str, int, int, int]]:
    """Split big ranges into more tasks: each into pieces of at most ``max_records``
    (maxRecordsPerPartition), then, while there are fewer than ``min_partitions`` tasks,
    each range into parts in proportion to its share of all the records (minPartitions;
    empty ranges are dropped)."""
    ranges = [r for r in ranges if r[3] > r[2]]
    if max_records:
        ranges = [piece for r in ranges for piece in _even(r, math.ceil((r[3] - r[2]) / max_records))]
    if min_partitions and len(ranges) < min_partitions:
        total = sum(r[3] - r[2] for r in ranges)
        if total:
            ranges = [piece for r in ranges
                      for piece in _even(r, max(1, round((r[3] - r[2]) / total * min_partitions)))]
    return ranges


def _even(r: tuple[str, int, int, int], parts: int) -> list[tuple[str, int, int, int]]:
    topic, partition, start, end = r
    parts = max(1, min(parts, end - start))
    bounds = [start + (end - start) * i // parts for i in range(parts + 1)]
    return [(topic, partition, bounds[i], bounds[i + 1]) for i in range(parts)]


def rate_limit(start: dict[TP, int], latest: dict[TP, int], limit: int) -> dict[TP, int]:
    """The end offsets of a micro-batch of at most about ``limit`` records
    (maxOffsetsPerTrigger), shared among partitions in proportion to their lag; a
    partition whose share is under one record still gets one, so none starves."""
    lags = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = limit * lags[tp] / total
        out[tp] = min(end, begin + (math.ceil(share) if share < 1 else math.floor(share)))
    return out


def _micros(value: Any) -> int | None:
    """A filter literal on the timestamp column as microseconds since the epoch."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            # PySpark hands TimestampType literals over as naive local wall-clock time.
            value = value.astimezone()
        delta = value - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1_000_000)
    return None


@dataclass
class Pushdown:
    """What filters on ``topic``, ``partition``, ``offset`` and ``timestamp`` let the
    source skip.  ``topic``/``partition``/``offset`` comparisons narrow the ranges read
    exactly; ``IN`` on offsets and every timestamp predicate are also applied to the rows
    read (``row_checks``), because a timestamp lower bound only moves the start (Kafka's
    time index finds the first record at or after a time; later records may be older)."""

    topics: set[str] | None = None
    partitions: set[int] | None = None
    partition_min: int = 0
    partition_max: int | None = None  # excluded
    offset_min: int = 0
    offset_max: int | None = None  # excluded
    offset_in: frozenset[int] | None = None
    ts_min_us: int | None = None
    ts_checks: list[tuple[str, int]] = field(default_factory=list)  # (op, micros)

    def accept(self, flt: Any) -> bool:
        """Take ``flt`` (a pyspark.sql.datasource Filter) if it can be pushed; True if taken."""
        kind = type(flt).__name__
        attr = getattr(flt, "attribute", None)
        if not isinstance(attr, tuple) or len(attr) != 1:
            return False
        col, value = attr[0], getattr(flt, "value", None)
        if kind not in ("EqualTo", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual", "In"):
            return False
        values = tuple(value) if kind == "In" else (value,)
        if col == "topic" and kind in ("EqualTo", "In") and all(isinstance(v, str) for v in values):
            self.topics = set(values) if self.topics is None else self.topics & set(values)
            return True
        if col in ("partition", "offset"):
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                return False
            lo, hi = _int_bounds(kind, values)
            if col == "partition":
                if kind in ("EqualTo", "In"):
                    keep = set(values)
                    self.partitions = keep if self.partitions is None else self.partitions & keep
                self.partition_min = max(self.partition_min, lo)
                self.partition_max = _min(self.partition_max, hi)
                return True
            self.offset_min = max(self.offset_min, lo)
            self.offset_max = _min(self.offset_max, hi)
            if kind == "In":
                vs = frozenset(values)
                self.offset_in = vs if self.offset_in is None else self.offset_in & vs
            return True
        if col == "timestamp":
            micros = [_micros(v) for v in values]
            if not values or any(m is None for m in micros):
                return False
            if kind == "In":
                self.ts_checks.append(("in", tuple(micros)))  # type: ignore[arg-type]
                low = min(micros)  # type: ignore[type-var]
            else:
                op = {"EqualTo": "==", "GreaterThan": ">", "GreaterThanOrEqual": ">=",
                      "LessThan": "<", "LessThanOrEqual": "<="}[kind]
                self.ts_checks.append((op, micros[0]))  # type: ignore[arg-type]
                low = micros[0] if op in ("==", ">", ">=") else None
            if low is not None:
                self.ts_min_us = low if self.ts_min_us is None else max(self.ts_min_us, low)
            return True
        return False

    @property
    def ts_min_ms(self) -> int | None:
        """The timestamp (ms) to look offsets up by: no record before the offset Kafka
        returns for it can pass the timestamp predicates."""
        return None if self.ts_min_us is None else self.ts_min_us // 1000

    def keeps_topic(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics

    def keeps_partition(self, partition: int) -> bool:
        if self.partitions is not None and partition not in self.partitions:
            return False
        return partition >= self.partition_min and (self.partition_max is None or partition < self.partition_max)

    def narrow(self, start: int, end: int) -> tuple[int, int]:
        start = max(start, self.offset_min)
        if self.offset_max is not None:
            end = min(end, self.offset_max)
        if self.offset_in is not None:
            inside = [o for o in self.offset_in if start <= o < end]
            if not inside:
                return start, start
            start, end = min(inside), max(inside) + 1
        return start, max(start, end)

    @property
    def row_checks(self) -> bool:
        return bool(self.ts_checks) or self.offset_in is not None


def _int_bounds(kind: str, values: Iterable[int]) -> tuple[int, int | None]:
    values = list(values)
    if kind in ("EqualTo", "In"):
        return (min(values), max(values) + 1) if values else (0, 0)
    v = values[0]
    return {"GreaterThan": (v + 1, None), "GreaterThanOrEqual": (v, None),
            "LessThan": (0, v), "LessThanOrEqual": (0, v + 1)}[kind]


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
