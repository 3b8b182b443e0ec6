"""Kafka access for the data source, through kafkawire's own client.

On the driver: which partitions a query reads and where its offset ranges start and end.
In the executors: one offset range read into Arrow RecordBatches straight from the codec's
columnar decode (no Python object per record), and Arrow batches written through the
producer's bulk path.  Spark reuses its Python workers across tasks, so one consumer and
one producer per client configuration are kept per process (``_clients``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Iterator

import numpy as np

from kafkawire.client.consumer import Consumer, TopicPartition
from kafkawire.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from kafkawire.core.partitioner import murmur2_many
from kafkawire.client.producer import Producer
from kafkawire.protocol import apis
from kafkawire.spark._options import EARLIEST, LATEST, KafkawireOptionError, SourceOptions
from kafkawire.spark._plan import Pushdown
from kafkawire.spark._security import translate

__all__ = ["KafkawireDataLossError", "WriteError", "consumer", "producer", "list_partitions",
           "resolve_offsets", "log_bounds", "read_range", "write_batches"]

log = logging.getLogger("kafkawire.spark")

METADATA = apis.get("Metadata")

# Source consumers read ranges known to exist: a long poll only delays a task's last
# fetch, and bigger fetches make bigger Arrow batches.  kafka.* options override both.
_SOURCE_DEFAULTS = {"fetch_max_wait_ms": 50, "max_partition_fetch_bytes": 8 << 20}

_lock = threading.Lock()
_clients: dict[tuple, Any] = {}


class KafkawireDataLossError(RuntimeError):
    """Offsets a query was to read no longer exist (retention, a deleted or recreated
    topic).  ``partitions`` maps each (topic, partition) to its (expected, found) offsets.
    Set ``failOnDataLoss`` to false to log this and go on with what exists."""

    def __init__(self, message: str, partitions: dict | None = None):
        super().__init__(message + "; if losing these records is acceptable, set the option failOnDataLoss=false")
        self.partitions = partitions or {}


def _cached(kind: str, config: dict[str, Any]) -> Any:
    key = (kind,) + tuple(sorted((k, repr(v)) for k, v in config.items()))
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = Consumer(**config) if kind == "consumer" else Producer(**config)
            _clients[key] = client
        return client


def _drop(client: Any) -> None:
    """Forget a client after a failure: the next task starts from a fresh one."""
    with _lock:
        for key, c in list(_clients.items()):
            if c is client:
                del _clients[key]
    try:
        client.close()
    except Exception:  # noqa: BLE001 - already failing; the first error is the one to report
        pass


def consumer(client_options: dict[str, Any]) -> Consumer:
    config = dict(_SOURCE_DEFAULTS)
    config.update(translate(client_options))
    # Positions outside the log are data loss, decided by failOnDataLoss, never reset.
    config["auto_offset_reset"] = "none"
    return _cached("consumer", config)


def producer(client_options: dict[str, Any]) -> Producer:
    return _cached("producer", translate(client_options))


# -- the driver: partitions and offsets ----------------------------------------------------

def _timeout(c: Consumer) -> float:
    return c.config.request_timeout_ms / 1000.0


def list_partitions(c: Consumer, opts: SourceOptions, *, must_exist: bool = True) -> list[TopicPartition]:
    """The partitions ``assign``, ``subscribe`` or ``subscribePattern`` name, now.

    Reading never creates a topic: the metadata is asked for without auto-creation (the
    consumer's own requests allow it, as the Java consumer's do, and Kafka would create a
    misspelt name).  With ``must_exist``, a topic or partition that ``subscribe`` or
    ``assign`` names and the cluster lacks is a KafkawireOptionError naming the option;
    without it (a running stream) it is left out, for the data-loss checks to judge.
    """
    if opts.pattern is not None:
        found = _partitions_by_topic(c, None)
        return sorted(TopicPartition(t, p) for t, ps in found.items() if opts.pattern.fullmatch(t) for p in ps)
    if opts.assign is not None:
        found = _partitions_by_topic(c, sorted(opts.assign))
        wanted = [TopicPartition(t, p) for t, ps in opts.assign.items() for p in ps]
        absent = [tp for tp in wanted if tp.partition not in found.get(tp.topic, ())]
        if absent and must_exist:
            what = "; ".join(f"{tp.topic}[{tp.partition}] ("
                             + (f"{tp.topic} has partitions 0-{max(found[tp.topic])})" if found.get(tp.topic)
                                else f"there is no topic {tp.topic!r})") for tp in absent)
            raise KafkawireOptionError(f"option 'assign' names partitions that do not exist: {what}; "
                                       f"assign only existing partitions, or add them first")
        return sorted(tp for tp in wanted if tp not in absent)
    topics = opts.subscribe or []
    found = _partitions_by_topic(c, topics)
    absent = [t for t in topics if t not in found]
    if absent and must_exist:
        raise KafkawireOptionError(
            f"option 'subscribe' names topics that do not exist: {absent}; check the names, or create "
            f"the topics first (reading never creates them)")
    return sorted(TopicPartition(t, p) for t in topics if t in found for p in found[t])


def _partitions_by_topic(c: Consumer, topics: list[str] | None) -> dict[str, list[int]]:
    """{topic: partition ids} of ``topics`` that exist (None: every topic but the
    internal ones, as the Java consumer's pattern subscription leaves them out)."""
    req_topics = None if topics is None else [METADATA.Request.MetadataRequestTopic(name=t) for t in topics]
    resp = c.cluster.request(None, METADATA, METADATA.Request(topics=req_topics, allow_auto_topic_creation=False),
                             _timeout(c))
    out: dict[str, list[int]] = {}
    for t in resp.topics:
        if not t.name or t.error_code == UnknownTopicOrPartitionError.code:
            continue
        if topics is None and (getattr(t, "is_internal", False) or t.name.startswith("__")):
            continue
        if t.error_code or not t.partitions:
            # Created a moment ago (LEADER_NOT_AVAILABLE): the consumer waits for it to settle.
            out[t.name] = c.cluster.partitions_for(t.name, _timeout(c))
        else:
            out[t.name] = sorted(p.partition_index for p in t.partitions)
    return out


def _per_partition(spec: Any, tps: list[TopicPartition], name: str, sentinel: dict[str, int]) -> dict[TopicPartition, int]:
    if isinstance(spec, str):
        return {tp: sentinel[spec] for tp in tps}
    if isinstance(spec, int):
        return {tp: spec for tp in tps}
    given = {TopicPartition(t, p): v for t, parts in spec.items() for p, v in parts.items()}
    if set(given) != set(tps):
        missing = sorted(set(tps) - set(given))
        extra = sorted(set(given) - set(tps))
        raise KafkawireOptionError(
            f"option {name!r} must give every partition the query reads, and only those "
            f"(-2 for earliest, -1 for latest): missing {missing}, not read {extra}")
    return given


_ONE_TIMESTAMP = {"startingOffsetsByTimestamp": "startingTimestamp", "endingOffsetsByTimestamp": "endingTimestamp"}


def resolve_offsets(c: Consumer, tps: list[TopicPartition], bounds: tuple[dict, dict], offsets: Any,
                    by_timestamp: Any, name: str, ts_name: str, strategy: str = "latest") -> dict[TopicPartition, int]:
    """Concrete offsets for an offsets spec (keywords, JSON, -2/-1) or, when given, a
    timestamp spec (which wins).  ``bounds`` is :func:`log_bounds` of ``tps``, which the
    sentinels resolve to.  ``strategy`` says what a timestamp after every record gives:
    "latest" (the end offset) or "error"."""
    if not tps:
        return {}
    earliest, latest = bounds
    if by_timestamp is not None:
        if isinstance(by_timestamp, int):  # one time for every partition: the option the user set
            ts_name = _ONE_TIMESTAMP[ts_name]
        stamps = _per_partition(by_timestamp, tps, ts_name, {})
        found = c.offsets_for_times(stamps, _timeout(c))
        missing = [tp for tp, v in found.items() if v is None]
        if missing and strategy == "error":
            raise KafkawireOptionError(
                f"option {ts_name!r}: no record at or after the given timestamp in {sorted(missing)}; "
                f"set startingOffsetsByTimestampStrategy=latest to start those at the latest offset")
        return {tp: latest[tp] if v is None else v.offset for tp, v in found.items()}
    want = _per_partition(offsets, tps, name, {"earliest": EARLIEST, "latest": LATEST})
    return {tp: earliest[tp] if v == EARLIEST else latest[tp] if v == LATEST else v for tp, v in want.items()}


def log_bounds(c: Consumer, tps: list[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(earliest, latest) offsets of ``tps``; latest is the Fetch watermark, which Tansu
    reports right where its ListOffsets answer is low."""
    return c.beginning_offsets(tps, _timeout(c)), c.high_watermarks(tps, _timeout(c))


# -- the executors: reading ----------------------------------------------------------------

def _spark_batch(cols: Any, topic: str, partition: int, keep: int, schema: Any, headers: bool,
                 pushdown: Pushdown | None) -> Any:
    """One Arrow batch in Spark's Kafka schema over the first ``keep`` decoded records."""
    import pyarrow as pa

    rb = cols.to_arrow(topic, partition)
    n = rb.num_rows
    # Spark's timestamps are microseconds; the codec's are Kafka's milliseconds.
    ts = pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(cols.timestamps * 1000)])
    arrays = rb.columns[:5] + [ts, rb.column(6)]
    if headers:
        hi = cols.header_index
        has = np.diff(hi) > 0
        validity = None if bool(has.all()) else pa.py_buffer(np.packbits(has, bitorder="little"))
        # A record without headers has null headers, as in the JVM connector.
        arrays.append(pa.Array.from_buffers(schema.field("headers").type, n, [validity, pa.py_buffer(hi)],
                                            children=[rb.column(7).values]))
    out = pa.RecordBatch.from_arrays(arrays, schema=schema)
    if keep < n:
        out = out.slice(0, keep)
    if pushdown is not None and pushdown.row_checks:
        out = out.filter(pa.array(_row_mask(cols, keep, pushdown)))
    return out


def _row_mask(cols: Any, keep: int, pd: Pushdown) -> Any:
    mask = np.ones(keep, dtype=bool)
    if pd.offset_in is not None:
        mask &= np.isin(cols.offsets[:keep], np.fromiter(pd.offset_in, dtype=np.int64))
    us = cols.timestamps[:keep] * 1000 if pd.ts_checks else None
    for op, v in pd.ts_checks:
        if op == "in":
            mask &= np.isin(us, np.asarray(v, dtype=np.int64))
        else:
            mask &= {"==": us == v, ">": us > v, ">=": us >= v, "<": us < v, "<=": us <= v}[op]
    return mask


def read_range(client_options: dict[str, Any], topic: str, partition: int, start: int, end: int,
               schema: Any, headers: bool, poll_timeout_ms: int, fail_on_data_loss: bool,
               pushdown: Pushdown | None = None) -> Iterator[Any]:
    """Offsets ``[start, end)`` of one partition as Arrow RecordBatches in ``schema``.

    Gaps (compaction, transaction markers) are skipped; offsets that no longer exist are
    data loss: an error, or with ``fail_on_data_loss`` false a warning and a skip.
    Fetching and decoding run in the task's own thread: a read-ahead thread measured no
    faster (bench/compare_spark.py, local[2] and standalone) and cost CPU and memory.
    """
    c = consumer(client_options)
    tp = TopicPartition(topic, partition)
    try:
        c.assign([tp])
        c.seek(tp, start)
        pos = start
        patience = poll_timeout_ms / 1000.0
        deadline = time.monotonic() + patience
        while pos < end:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pos = _lost(c, tp, pos, end, fail_on_data_loss,
                            f"no records arrived within kafkaConsumer.pollTimeoutMs={poll_timeout_ms}")
                continue
            try:
                fetched = c.poll_batch(min(remaining, 1.0))
            except OffsetOutOfRangeError:
                pos = _lost(c, tp, pos, end, fail_on_data_loss, "the position is outside the log")
                continue
            for fb in fetched:
                cols = fb.columns
                keep = int(np.searchsorted(cols.offsets, end))
                if keep:
                    out = _spark_batch(cols, topic, partition, keep, schema, headers, pushdown)
                    if out.num_rows:
                        yield out
            now = c.position(tp)
            if now > pos:
                deadline = time.monotonic() + patience
            elif not fetched:
                earliest, latest = bounds = log_bounds(c, [tp])
                if latest[tp] <= pos or earliest[tp] > pos:
                    pos = _lost(c, tp, pos, end, fail_on_data_loss, "the records are gone", bounds)
                    continue
            pos = now
    except GeneratorExit:
        raise  # Spark stopped reading early: the consumer is fine, the next assign() resets it
    except BaseException:
        _drop(c)
        raise


def _lost(c: Consumer, tp: TopicPartition, pos: int, end: int, fail: bool, why: str,
          bounds: tuple[dict, dict] | None = None) -> int:
    """Data loss at ``pos`` of a range ending at ``end``: raise, or move on to what exists.
    ``bounds``: the partition's log_bounds when the caller has them."""
    earliest, latest = bounds or log_bounds(c, [tp])
    lo, hi = earliest[tp], latest[tp]
    message = (f"{tp.topic}[{tp.partition}]: offsets [{pos}, {end}) were to be read but cannot be "
               f"({why}; the log holds [{lo}, {hi})")
    if fail:
        raise KafkawireDataLossError(message + ")", {tp: (pos, lo)})
    log.warning("%s); skipping the missing records (failOnDataLoss=false)", message)
    nxt = lo if pos < lo else end
    if nxt < end:
        c.seek(tp, nxt)
    return nxt


# -- the executors: writing ----------------------------------------------------------------

# Produce requests are kept under this share of max_request_size: per-record framing
# is estimated, not measured, before encoding.
_REQUEST_SHARE = 0.8
_RECORD_OVERHEAD = 24


class WriteError(RuntimeError):
    """A record the sink could not write; the task fails and Spark retries it."""


def _binary(col: Any) -> Any:
    import pyarrow as pa

    if pa.types.is_binary(col.type):
        return col
    return col.cast(pa.binary())


def write_batches(client_options: dict[str, Any], default_topic: str | None, batches: Iterator[Any],
                  timeout: float) -> dict[tuple[str, int], int]:
    """Write Arrow batches with the sink's columns (value; key, topic, partition, headers,
    timestamp optional) and wait for every acknowledgement; returns records written per
    (topic, partition).  The first failure is raised with the broker's error."""
    import pyarrow as pa
    import pyarrow.compute as pc

    p = producer(client_options)
    limit = int(p.config.max_request_size * _REQUEST_SHARE)
    futures: list[tuple[str, int | None, int, Any]] = []
    counts: dict[tuple[str, int], int] = {}
    try:
        for rb in batches:
            if rb.num_rows == 0:
                continue
            names = rb.schema.names
            now_ms = int(time.time() * 1000)
            n = rb.num_rows
            cols = {"value": _binary(rb.column("value"))}
            cols["key"] = _binary(rb.column("key")) if "key" in names else pa.nulls(n, pa.binary())
            if "timestamp" in names:
                # Spark hands timestamps over in microseconds; a null one means "now".
                us = rb.column("timestamp").cast(pa.int64())
                cols["timestamp"] = pc.divide(us, 1000).fill_null(now_ms)
            else:
                cols["timestamp"] = pa.array(np.full(n, now_ms, dtype=np.int64))
            for name in ("headers", "partition"):  # partition routes rows; send_batch ignores it
                if name in names:
                    cols[name] = rb.column(name)
            body = pa.RecordBatch.from_pydict(cols)
            for topic, rows in _by_topic(rb, default_topic):
                sub = body if rows is None else body.take(rows)
                for partition, piece in _by_partition(p, sub, topic, timeout):
                    for chunk in _pieces(piece, limit):
                        futures.append((topic, partition, chunk.num_rows, p.send_batch(topic, partition, chunk)))
        deadline = time.monotonic() + timeout
        for topic, partition, rows, fut in futures:
            result = fut.result(max(0.0, deadline - time.monotonic()))
            real = result[0].partition if result else partition
            counts[(topic, real)] = counts.get((topic, real), 0) + rows
        return counts
    except BaseException as exc:
        _drop(p)
        if isinstance(exc, (KafkawireOptionError, WriteError)):
            raise
        raise WriteError(f"kafkawire sink: writing failed: {type(exc).__name__}: {exc}") from exc


def _by_topic(rb: Any, default_topic: str | None) -> Iterator[tuple[str, Any]]:
    """(topic, row indices or None for all rows) groups; the ``topic`` option wins over
    the column, as in the JVM connector."""
    import pyarrow.compute as pc

    if default_topic is not None:
        yield default_topic, None
        return
    col = rb.column("topic")
    if col.null_count:
        raise WriteError("kafkawire sink: a row has a null topic; set the 'topic' option or fill the topic column")
    topics = pc.unique(col).to_pylist()
    if len(topics) == 1:
        yield topics[0], None
        return
    for topic in topics:
        yield topic, pc.indices_nonzero(pc.equal(col, topic))


def _by_partition(p: Producer, rb: Any, topic: str, timeout: float) -> Iterator[tuple[int | None, Any]]:
    """``rb`` (one topic's rows, sink columns) cut into one slice per partition: the
    ``partition`` column where set, else murmur2 of the key (the Java producer's
    default), else one sticky partition (None) for the unkeyed rows.  Rows are put in
    partition order with one stable sort and one take, so each slice keeps their order."""
    import pyarrow as pa

    n = rb.num_rows
    part = np.full(n, -1, dtype=np.int64)
    if "partition" in rb.schema.names:
        part = rb.column("partition").fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    todo = part < 0
    keys = rb.column("key")
    if bool(todo.any()) and keys.null_count < n:
        count = len(p.partitions_for(topic, timeout))
        data = keys.buffers()[2] or b""
        hashed = (murmur2_many(memoryview(data), _offsets(keys)).astype(np.int64) & 0x7FFFFFFF) % count
        keyed = todo if keys.null_count == 0 else todo & ~keys.is_null().to_numpy(zero_copy_only=False)
        part[keyed] = hashed[keyed]
    first = part[0]
    if bool((part == first).all()):
        yield (None if first < 0 else int(first)), rb
        return
    # When the partition numbers fit 16 bits (nearly always), numpy's stable sort is a
    # radix sort, linear in rows.
    small = part.astype(np.int16) if int(part.max()) < (1 << 15) else part
    order = np.argsort(small, kind="stable")
    ordered = rb.take(pa.array(order))
    ranked = small[order]
    cuts = [0, *(np.flatnonzero(ranked[1:] != ranked[:-1]) + 1).tolist(), n]
    for lo, hi in zip(cuts, cuts[1:]):
        value = int(ranked[lo])
        yield (None if value < 0 else value), ordered.slice(lo, hi - lo)


def _pieces(rb: Any, limit: int) -> Iterator[Any]:
    """Slices of ``rb`` whose records fit one Produce request of ``limit`` bytes."""
    n = rb.num_rows
    key_offs, value_offs = _offsets(rb.column("key")), _offsets(rb.column("value"))
    if (int(key_offs[-1] - key_offs[0]) + int(value_offs[-1] - value_offs[0]) + _RECORD_OVERHEAD * n) <= limit:
        yield rb  # the usual case: no per-record sizes needed
        return
    sizes = np.diff(key_offs).astype(np.int64) + np.diff(value_offs) + _RECORD_OVERHEAD  # a null's span is empty
    ends = np.cumsum(sizes)
    start = 0
    base = 0
    while start < n:
        stop = int(np.searchsorted(ends, base + limit, side="right"))
        stop = max(stop, start + 1)  # one oversized record: the broker's error reaches the task
        yield rb.slice(start, stop - start)
        base = int(ends[stop - 1])
        start = stop


def _offsets(col: Any) -> Any:
    """The int32 value offsets of an Arrow binary column (slices included)."""
    return np.frombuffer(col.buffers()[1], dtype=np.int32)[col.offset: col.offset + len(col) + 1]

