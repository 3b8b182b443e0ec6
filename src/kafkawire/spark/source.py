"""``format("kafkawire")``: the PySpark data source and sink (Spark 4's Python Data Source API).

The driver side (options, partitions, offsets, micro-batch planning) runs in Spark's
long-lived Python process; ``read`` and ``write`` run in executors on pickled copies of
the reader and writer, so those carry plain data only (options, schema, pushdown).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkawire.errors import KafkaWireError
from kafkawire.spark import _io, _options, _typed
from kafkawire.spark._options import KafkawireOptionError, SinkOptions, SourceOptions
from kafkawire.spark._plan import Pushdown, offsets_from_json, offsets_to_json, rate_limit, split_ranges

__all__ = ["KafkawireDataSource", "KafkaRange", "KAFKA_SCHEMA", "KAFKA_SCHEMA_WITH_HEADERS"]

log = logging.getLogger("kafkawire.spark")

# The errors whose message says all a user needs (see _option_error_first).
_DESCRIBED = (KafkawireOptionError, KafkaWireError, _io.KafkawireDataLossError)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
KAFKA_SCHEMA_WITH_HEADERS = StructType(KAFKA_SCHEMA.fields + [StructField("headers", HEADERS_TYPE)])
# What the fetched records are, before typed key/value columns are decoded from them.
_RAW_ARROW = to_arrow_schema(KAFKA_SCHEMA, timezone="UTC")
_RAW_ARROW_WITH_HEADERS = to_arrow_schema(KAFKA_SCHEMA_WITH_HEADERS, timezone="UTC")


def _option_error_first(method: Any) -> Any:
    """Spark shows a driver-side error of a Python data source as the worker's traceback,
    frames first, under its own wrapper line, so kafkawire's message would sit at the
    bottom of a long text.  For an option error, or another of kafkawire's typed errors
    (a broker nobody listens on, a refused login, data lost: each fully described by its
    message), the worker is told to send the message alone (SPARK_HIDE_TRACEBACK, read
    when the worker reports the error): it then follows Spark's wrapper on the first
    line.  Only in Spark's own worker processes, each of which exits after reporting a
    driver-side error, so no later error of the user's loses its traceback; an error
    that is not kafkawire's typed one (a bug) keeps its frames.  (Giving the error a
    frameless copy of itself as context does not survive: the worker's simplified
    traceback sets __cause__, which suppresses the context.)"""
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except _DESCRIBED:
            if _in_spark_worker():
                os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise
    return call


def _in_spark_worker() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", "").startswith("pyspark.")


class KafkaRange(InputPartition):
    """One Spark task: ``value`` is ``(topic, partition, start, end)``, offsets [start, end)."""

    def __init__(self, topic: str, partition: int, start: int, end: int):
        super().__init__((topic, partition, start, end))

    def __repr__(self) -> str:
        return "KafkaRange(%r, %d, %d, %d)" % self.value


class KafkawireDataSource(DataSource):
    """Kafka topics as a DataFrame, and DataFrames into Kafka, through kafkawire.

    Options are the JVM Kafka connector's (``kafka.bootstrap.servers``, ``subscribe``,
    ``startingOffsets``, ...): see the README's Spark section."""

    @classmethod
    def name(cls) -> str:
        return "kafkawire"

    @_option_error_first
    def schema(self) -> StructType:
        # Spark asks for the schema at load(), the reader only at the first action: an
        # option wrong for batch and stream alike fails here, at load(), where the JVM
        # connector fails too.  One wrong for one kind only waits for reader() or
        # streamReader(), which know the kind.  (Writes never call schema().)
        _check_either_kind(self.options)
        headers = _options.parse_bool("includeHeaders", str(self.options.get("includeHeaders", "false")))
        base = KAFKA_SCHEMA_WITH_HEADERS if headers else KAFKA_SCHEMA
        opts = _options._lower(self.options)
        typed = _typed.parse(opts)
        if typed is None:
            return base
        return _typed.spark_schema(base, _typed.resolve(typed, opts))

    @_option_error_first
    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkawireReader(_with_reader_schemas(self.options, False, schema), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        try:
            opts = _with_reader_schemas(self.options, True, schema)
        except KafkawireOptionError as exc:
            # PySpark 4.3's stream runner stops the reader in a `finally` even when making
            # it failed, and the UnboundLocalError that raises replaces the option error:
            # the error is raised by the reader's first call instead.
            return _RefusedStreamReader(exc)
        return KafkawireStreamReader(opts, schema)

    @_option_error_first
    def writer(self, schema: StructType, overwrite: bool) -> KafkawireWriter:
        return KafkawireWriter(_sink_options(self.options, schema, overwrite))

    @_option_error_first
    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkawireStreamWriter:
        return KafkawireStreamWriter(_sink_options(self.options, schema, overwrite))


def _with_reader_schemas(options: Any, streaming: bool, schema: StructType) -> SourceOptions:
    """The parsed options, typed columns' reader schemas fixed for every task.  A subject's
    latest version is asked again here (schema() ran in another process), and must still
    give the schema Spark planned with."""
    opts = SourceOptions.parse(options, streaming=streaming)
    if opts.typed is not None:
        _typed.resolve(opts.typed, _options._lower(options))
        base = StructType(schema.fields[:len(KAFKA_SCHEMA_WITH_HEADERS.fields if opts.include_headers
                                             else KAFKA_SCHEMA.fields)])
        if _typed.spark_schema(base, opts.typed) != schema:
            raise KafkawireOptionError(
                "the reader schema changed between load() and this query (a new latest version of the "
                "subject?): load() the DataFrame again")
    return opts


def _check_either_kind(options: Any) -> None:
    """Raise the option error that a batch and a streaming read of ``options`` share."""
    try:
        SourceOptions.parse(options, streaming=False)
    except KafkawireOptionError as batch:
        try:
            SourceOptions.parse(options, streaming=True)
        except KafkawireOptionError as stream:
            if str(stream) == str(batch):
                raise batch from None


class _RangeReading:
    """What batch and stream readers share: reading one KafkaRange in an executor."""

    opts: SourceOptions
    arrow_schema: Any
    pushdown: Pushdown | None = None

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # Spark hands back a plain InputPartition around the same value (with filter
        # pushdown on), and InputPartition(None) when partitions() planned none.
        if partition.value is None:
            return iter(())
        topic, part, start, end = partition.value
        o = self.opts
        if o.typed is None:
            return _io.read_range(o.client, topic, part, start, end, self.arrow_schema, o.include_headers,
                                  o.poll_timeout_ms, o.fail_on_data_loss, self.pushdown)
        raw = _RAW_ARROW_WITH_HEADERS if o.include_headers else _RAW_ARROW
        batches = _io.read_range(o.client, topic, part, start, end, raw, o.include_headers,
                                 o.poll_timeout_ms, o.fail_on_data_loss, self.pushdown)
        return (_typed.decode_batch(rb, topic, part, o.typed, self.arrow_schema) for rb in batches)


def _ranges(start: dict, end: dict, opts: SourceOptions) -> list[KafkaRange]:
    planned = [(tp[0], tp[1], start.get(tp, end[tp]), end[tp]) for tp in sorted(end)]
    return [KafkaRange(*r) for r in split_ranges(planned, opts.min_partitions, opts.max_records_per_partition)]


def _data_loss(problems: dict[tuple[str, int], tuple[int, int, str]], fail: bool, what: str) -> None:
    """Raise (failOnDataLoss) or log lost offsets: {(topic, partition): (expected, found, why)}."""
    if not problems:
        return
    detail = "; ".join(f"{t}[{p}] {why}" for (t, p), (_o, _f, why) in sorted(problems.items()))
    if fail:
        raise _io.KafkawireDataLossError(f"{what}: {detail}", {tp: (o, f) for tp, (o, f, _w) in problems.items()})
    log.warning("%s: %s; reading what exists (failOnDataLoss=false)", what, detail)


def _check_loss(start: dict, earliest: dict, latest: dict, fail: bool, what: str) -> dict:
    """Start offsets outside the log: an error, or moved to the nearest existing offset."""
    problems = {}
    for tp, o in start.items():
        if o < earliest[tp]:
            problems[tp] = (o, earliest[tp], f"starts at {o} but the earliest offset is {earliest[tp]}")
        elif o > latest[tp]:
            problems[tp] = (o, latest[tp], f"starts at {o} but the latest offset is {latest[tp]} "
                                           f"(recreated or truncated?)")
    _data_loss(problems, fail, what)
    return {**start, **{tp: found for tp, (_o, found, _w) in problems.items()}}


def _check_end(end: dict, latest: dict, fail: bool) -> dict:
    """End offsets past the log's end (endingOffsets JSON naming records that do not
    exist): an error, as the JVM connector's tasks fail, or the latest offset."""
    problems = {tp: (e, latest[tp], f"ends at {e} but the latest offset is {latest[tp]}")
                for tp, e in end.items() if e > latest[tp]}
    _data_loss(problems, fail, "batch read")
    return {**end, **{tp: latest[tp] for tp in problems}}


def _offset_options(o: SourceOptions) -> tuple[str, str]:
    """The options the start and end offsets of a batch read came from, for messages."""
    first = ("startingTimestamp" if isinstance(o.starting_by_timestamp, int) else "startingOffsetsByTimestamp"
             if o.starting_by_timestamp is not None else "startingOffsets")
    last = ("endingTimestamp" if isinstance(o.ending_by_timestamp, int) else "endingOffsetsByTimestamp"
            if o.ending_by_timestamp is not None else "endingOffsets")
    return first, last


def _push_filters(reader: KafkawireReader, filters: list) -> Iterator[Any]:
    for f in filters:
        if not reader.pushdown.accept(f):
            yield f


class _OptionalPushdown:
    """``pushFilters`` for a reader that works with filter pushdown on or off.

    Spark refuses to plan a reader that overrides pushFilters while
    spark.sql.python.filterPushdown.enabled is false (the default), to not ignore
    filters silently.  Here ignoring them costs speed only (Spark applies them itself),
    so the method shows that check DataSourceReader's own function, and Spark calls
    it only when pushdown is on."""

    def __get__(self, reader: Any, owner: Any = None) -> Any:
        if reader is None:
            return self
        bound = functools.partial(_push_filters, reader)
        bound.__func__ = DataSourceReader.pushFilters  # type: ignore[attr-defined]
        return bound


class KafkawireReader(_RangeReading, DataSourceReader):
    """Batch read: startingOffsets (default earliest) to endingOffsets (default latest)."""

    pushFilters = _OptionalPushdown()

    def __init__(self, opts: SourceOptions, schema: StructType):
        self.opts = opts
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.pushdown = Pushdown()

    @_option_error_first
    def partitions(self) -> Sequence[KafkaRange]:
        o, pd = self.opts, self.pushdown
        c = _io.consumer(o.client)
        tps = [tp for tp in _io.list_partitions(c, o) if pd.keeps_topic(tp.topic) and pd.keeps_partition(tp.partition)]
        if not tps:
            return []
        bounds = earliest, latest = _io.log_bounds(c, tps)
        start = _io.resolve_offsets(c, tps, bounds, o.starting, o.starting_by_timestamp, "startingOffsets",
                                    "startingOffsetsByTimestamp", o.timestamp_strategy)
        end = _io.resolve_offsets(c, tps, bounds, o.ending, o.ending_by_timestamp, "endingOffsets",
                                  "endingOffsetsByTimestamp")
        start = _check_loss(start, earliest, latest, o.fail_on_data_loss, "batch read")
        end = _check_end(end, latest, o.fail_on_data_loss)
        for tp in tps:
            if start[tp] > end[tp]:
                first, last = _offset_options(o)
                raise KafkawireOptionError(
                    f"{tp.topic}[{tp.partition}]: the start offset {start[tp]} (from {first}) is after the "
                    f"end offset {end[tp]} (from {last}); give a start at or before the end")
        if pd.ts_min_ms is not None:
            # Records before Kafka's answer for the lowest timestamp asked for are older.
            found = c.offsets_for_times({tp: pd.ts_min_ms for tp in tps}, _io._timeout(c))
            start = {tp: max(start[tp], latest[tp] if found[tp] is None else found[tp].offset) for tp in tps}
        bounded = {tp: pd.narrow(start[tp], end[tp]) for tp in tps}
        return _ranges({tp: s for tp, (s, _e) in bounded.items()}, {tp: e for tp, (_s, e) in bounded.items()}, o)


class KafkawireStreamReader(_RangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches between offsets written as the JVM connector writes them.

    New partitions start at their earliest offset; offsets never move backwards (a
    partition whose log now ends before the last end is data loss, per failOnDataLoss)."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        self.opts = opts
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self._ceiling: dict | None = None  # Trigger.AvailableNow's target, once prepared
        self._last_trigger = time.monotonic()

    def _consumer(self) -> Any:
        return _io.consumer(self.opts.client)

    @_option_error_first
    def initialOffset(self) -> dict:
        o = self.opts
        c = self._consumer()
        # A topic that does not exist fails the query on the driver, naming it, as the
        # JVM connector's stream fails (UnknownTopicOrPartitionException).
        tps = _io.list_partitions(c, o)
        start = _io.resolve_offsets(c, tps, _io.log_bounds(c, tps), o.starting, o.starting_by_timestamp,
                                    "startingOffsets", "startingOffsetsByTimestamp", o.timestamp_strategy)
        return offsets_to_json(start)

    def _latest(self, begin: dict) -> tuple[dict, dict]:
        """(latest offsets, start offsets) of every partition read now; partitions new
        since ``begin`` start at their earliest offset."""
        start = dict(begin)
        c = self._consumer()
        tps = _io.list_partitions(c, self.opts, must_exist=False)
        earliest, latest = _io.log_bounds(c, tps)
        _data_loss({tp: (o, -1, f"no longer exists (it was at offset {o})")
                    for tp, o in start.items() if tp not in latest},
                   self.opts.fail_on_data_loss, "micro-batch planning")
        for tp in latest:
            if tp not in start:
                start[tp] = earliest[tp]  # a new partition: read it from its beginning
        start.update(_check_loss({tp: start[tp] for tp in latest}, earliest, latest, self.opts.fail_on_data_loss,
                                 "micro-batch planning"))
        return {tp: max(latest[tp], start[tp]) for tp in latest}, start

    def getDefaultReadLimit(self) -> Any:
        # With both set, the maximum is Spark's limit and the minimum is kept here.
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    @_option_error_first
    def latestOffset(self, start: dict, limit: Any) -> dict:
        begin = offsets_from_json(start)
        # The data-loss checks run for every micro-batch, Trigger.AvailableNow's included.
        latest, begin_all = self._latest(begin)
        if self._ceiling is not None:
            # Trigger.AvailableNow: what existed when the query was prepared, no more
            # (partitions added since wait for the next run).
            latest = {tp: min(v, max(self._ceiling[tp], begin_all[tp])) for tp, v in latest.items()
                      if tp in self._ceiling}
        o = self.opts
        if o.min_offsets_per_trigger and not isinstance(limit, ReadAllAvailable) and self._ceiling is None:
            waiting = sum(latest[tp] - begin_all[tp] for tp in latest)
            delay = (time.monotonic() - self._last_trigger) * 1000
            if waiting < o.min_offsets_per_trigger and delay < o.max_trigger_delay_ms:
                return start  # not enough yet (minOffsetsPerTrigger), and maxTriggerDelay not over
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin_all, latest, limit.max_rows)
        end = {tp: max(v, begin.get(tp, v)) for tp, v in latest.items()}  # never backwards
        for tp, v in begin.items():
            end.setdefault(tp, v)  # a vanished partition (failOnDataLoss=false) stays where it was
        if end != begin:
            self._last_trigger = time.monotonic()
        return offsets_to_json(end)

    def _with_new_partitions(self, begin: dict, end: dict) -> dict:
        """``begin`` for every partition of ``end``: the new ones from their earliest offset."""
        new = [tp for tp in end if tp not in begin]
        c = self._consumer()
        return {**begin, **(c.beginning_offsets(new, _io._timeout(c)) if new else {})}

    @_option_error_first
    def prepareForTriggerAvailableNow(self) -> None:
        self._ceiling = self._latest({})[0]

    def partitions(self, start: dict, end: dict) -> Sequence[KafkaRange]:
        stop = offsets_from_json(end)
        return _ranges(self._with_new_partitions(offsets_from_json(start), stop), stop, self.opts)

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint; nothing is committed to Kafka

    def stop(self) -> None:
        pass  # the cached consumer is shared by every query of this process


class _RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream whose options were refused: every driver-side call raises the error."""

    def __init__(self, error: KafkawireOptionError):
        self.error = error

    @_option_error_first
    def _refuse(self, *args: Any) -> Any:
        raise self.error

    initialOffset = latestOffset = partitions = prepareForTriggerAvailableNow = _refuse

    def read(self, partition: InputPartition) -> Iterator[Any]:
        raise self.error

    def stop(self) -> None:
        pass


# -- the sink -----------------------------------------------------------------------------

def _sink_options(options: Any, schema: StructType, overwrite: bool) -> SinkOptions:
    if overwrite:
        raise KafkawireOptionError("format('kafkawire') only appends to topics; use .mode('append')")
    opts = SinkOptions.parse(options)
    fields = {f.name: f.dataType for f in schema.fields}
    if opts.typed is not None:
        # Columns written as Avro may be of any type the schema takes; they are binary once encoded.
        fields = {k: (BinaryType() if k in opts.typed.formats else v) for k, v in fields.items()}
    if "value" not in fields:
        raise KafkawireOptionError(f"the sink needs a 'value' column (binary or string); the DataFrame has {sorted(fields)}")
    if opts.topic is None and "topic" not in fields:
        raise KafkawireOptionError("the sink needs a 'topic' column or the 'topic' option")
    expected = {"key": (BinaryType, StringType), "value": (BinaryType, StringType), "topic": (StringType,),
                "partition": (IntegerType,), "timestamp": (TimestampType,)}
    for name, types in expected.items():
        if name in fields and not isinstance(fields[name], types):
            raise KafkawireOptionError(
                f"the sink's {name!r} column must be {' or '.join(t.typeName() for t in types)}, "
                f"not {fields[name].simpleString()}")
    if "headers" in fields and fields["headers"] != HEADERS_TYPE:
        raise KafkawireOptionError(
            f"the sink's 'headers' column must be {HEADERS_TYPE.simpleString()}, not {fields['headers'].simpleString()}")
    return opts


class KafkawireCommitMessage(WriterCommitMessage):
    """Records written by one task, per (topic, partition)."""

    def __init__(self, counts: dict[tuple[str, int], int]):
        self.counts = counts


class _Writing:
    def __init__(self, opts: SinkOptions):
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> KafkawireCommitMessage:
        o = self.opts
        if o.typed is not None:
            iterator = (_typed.encode_batch(rb, o.typed) for rb in iterator)
        return KafkawireCommitMessage(_io.write_batches(o.client, o.topic, iterator, o.delivery_timeout_s))


class KafkawireWriter(_Writing, DataSourceArrowWriter):
    """Batch writes: at-least-once; a task whose records are not all acknowledged fails."""

    def commit(self, messages: list) -> None:
        total = sum(sum(m.counts.values()) for m in messages if m is not None)
        log.info("kafkawire sink wrote %d records", total)

    def abort(self, messages: list) -> None:
        pass  # what reached Kafka stays there (at-least-once): Kafka has no rollback here


class KafkawireStreamWriter(_Writing, DataSourceStreamArrowWriter):
    def commit(self, messages: list, batchId: int) -> None:
        pass

    def abort(self, messages: list, batchId: int) -> None:
        pass
