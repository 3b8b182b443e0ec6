"""The pure-Python twin of kafkawire._compat: the host clients' ConsumerRecords for one
decoded batch, the same names, results and call order of deserializers, aiokafka's batch
builder's per-record append, and aiokafka's send() for a record that goes into its
partition's open batch (see that module for the contract; tests/compat/test_factory.py,
the builder tests and the send tests hold the two to it)."""

from __future__ import annotations

import threading
import time
from array import array
from itertools import accumulate

from kafkawire import codec as _codec
from kafkawire.compat import _hostbytes

_sv = _codec.size_of_varint


def headers_wire_size(headers) -> tuple[int, int]:
    """(encoded size of magic-2 record headers, their keys' UTF-8 plus values' bytes)."""
    size = _sv(len(headers))
    plain = 0
    for h_key, h_value in headers:
        n = len(h_key.encode("utf-8"))
        size += _sv(n) + n
        plain += n
        if h_value is None:
            size += 1
        else:
            n = len(h_value)
            size += _sv(n) + n
            plain += n
    return size, plain


def kafka_python_records(cr_type, topic, partition, leader_epoch, records, base_offset,
                         base_timestamp, raw_timestamps, deserialize=None,
                         key_deserializer=None, value_deserializer=None):
    custom = deserialize is not None and (
        key_deserializer is not None or value_deserializer is not None)
    new = tuple.__new__
    sv = _sv
    out = []
    sizes = []
    for i, r in enumerate(records):
        offset, ts, key, value, h = r.offset, r.timestamp, r.key, r.value, r.headers
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        raw_ts = ts if raw_timestamps is None else raw_timestamps[i]
        size = (1 + sv(offset - base_offset) + sv(raw_ts - base_timestamp)
                + (1 if klen < 0 else sv(klen) + klen) + (1 if vlen < 0 else sv(vlen) + vlen))
        if h:
            headers = list(h)
            size += headers_wire_size(headers)[0]
        else:
            headers = []
            size += 1
        sizes.append(size)
        if custom:
            try:
                key = deserialize(key_deserializer, topic, headers, key)
                value = deserialize(value_deserializer, topic, headers, value)
            except Exception as exc:  # noqa: BLE001 - handed back, raised after the records
                return out, array("q", accumulate(sizes, initial=0)), exc
        hsize = headers_wire_size(headers)[1] if headers else -1
        out.append(new(cr_type, (topic, partition, leader_epoch, offset, ts, r.timestamp_type,
                                 key, value, headers, None, klen, vlen, hsize)))
    return out, array("q", accumulate(sizes, initial=0)), None


def deserialize(records, key_deserializer, value_deserializer):
    for i, r in enumerate(records):
        try:
            if key_deserializer is not None:
                r.key = key_deserializer(r.key)
            if value_deserializer is not None:
                r.value = value_deserializer(r.value)
        except Exception as exc:  # noqa: BLE001 - handed back, raised after the records
            del records[i:]
            return exc
    return None


# ---- aiokafka's magic-2 batch builder: the per-record append --------------------------

_BYTES_TYPES = (bytes, bytearray, memoryview)


class DefaultRecordMetadata:
    """What aiokafka's DefaultRecordBatchBuilder.append returns: offset, size, timestamp
    (crc None: magic 2 has no per-record CRC)."""

    __slots__ = ("offset", "size", "timestamp")

    def __init__(self, offset: int, size: int, timestamp: int) -> None:
        self.offset = offset
        self.size = size
        self.timestamp = timestamp

    @property
    def crc(self) -> None:
        return None

    def __repr__(self) -> str:
        return (f"DefaultRecordMetadata(offset={self.offset!r}, size={self.size!r}, "
                f"timestamp={self.timestamp!r})")


class AiokafkaAppender:
    """See kafkawire._compat.AiokafkaAppender."""

    __slots__ = ("_records", "_headers", "_first_timestamp", "_size", "_batch_size",
                 "_fallback")

    @classmethod
    def estimate_size_in_bytes(cls, key, value, headers):
        bytes_like = _BYTES_TYPES
        if (headers or type(headers) is not list or not (key is None or type(key) in bytes_like)
                or not (value is None or type(value) in bytes_like)):
            return cls._host_estimate(key, value, headers)
        # the batch header (61) and the most a record's own fields take (21)
        size = 61 + 21 + (1 if key is None else _sv(len(key)) + len(key))
        return size + (1 if value is None else _sv(len(value)) + len(value)) + 1

    def append(self, offset, timestamp, key, value, headers, _svi=_sv, _now=time.time,
               _bytes=_BYTES_TYPES, _limit=_hostbytes.TIMESTAMP_LIMIT):
        if self._fallback is not None:
            return self._fallback.append(offset, timestamp, key, value, headers)
        if timestamp is None:
            timestamp = int(_now() * 1000)
        records = self._records
        if (type(offset) is not int or offset != len(records) // 3 or type(timestamp) is not int
                or not -_limit <= timestamp < _limit):
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        if key is None:
            size = 1
        elif type(key) in _bytes:
            n = len(key)
            size = _svi(n) + n
        else:
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        if value is None:
            size += 1
        elif type(value) in _bytes:
            n = len(value)
            size += _svi(n) + n
        else:
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        if not headers and type(headers) is list:
            size += 1
        else:
            h_size = _hostbytes.headers_size(headers)
            if h_size is None:
                return self._to_fallback().append(offset, timestamp, key, value, headers)
            size += h_size
        first = self._first_timestamp
        if first is None:
            size += 2 + _svi(offset)  # attributes, timestamp delta 0
        else:
            size += 1 + _svi(timestamp - first) + _svi(offset)
        size += _svi(size)
        if first is not None and self._size + size > self._batch_size:
            return None
        if first is None:
            self._first_timestamp = timestamp
        self._size += size
        records += (key, value, timestamp)
        if headers:
            self._headers[offset] = headers
        return DefaultRecordMetadata(offset, size, timestamp)


def resolve_aiokafka_futures(msg_futures, md_type, topic, partition, tp, base_offset,
                             timestamp, timestamp_type, log_start_offset):
    """Each not yet done future of ``msg_futures`` resolved with aiokafka's
    RecordMetadata, as MessageBatch.done resolves them (see kafkawire._compat)."""
    make = tuple.__new__
    for future, metadata in msg_futures:
        if future.done():
            continue
        if timestamp == -1:
            timestamp = metadata.timestamp
        future.set_result(make(md_type, (topic, partition, tp, base_offset + metadata.offset,
                                         timestamp, timestamp_type, log_start_offset)))


# ---- aiokafka's producer: send() for a record that goes into its partition's open batch --
# (see kafkawire._compat.aiokafka_send; the same steps, in the same order)

_aio: dict = {}  # aiokafka's own objects, from configure_aiokafka_send


def configure_aiokafka_send(original_send, message_batch, batch_builder, topic_partition,
                            illegal_operation, log, producer_namespace, estimators):
    """See kafkawire._compat.configure_aiokafka_send."""
    import asyncio
    import collections
    import logging

    _aio.update(original_send=original_send, message_batch=message_batch,
                batch_builder=batch_builder, topic_partition=topic_partition,
                illegal_operation=illegal_operation, log=log, ns=producer_namespace,
                estimators=frozenset(estimators), future=asyncio.Future,
                base_loop=asyncio.BaseEventLoop,
                base_create_future=asyncio.BaseEventLoop.create_future,
                get_running_loop=asyncio.get_running_loop, get_ident=threading.get_ident,
                batch_dicts=(dict, collections.defaultdict), logger=logging.Logger)


def _estimate_field(data) -> int:
    if data is None:
        return 1
    if type(data) is bytes:
        n = len(data)
        return _sv(n) + n
    return -1


def _running_loop(producer_loop, host=_aio):
    kind = type(producer_loop)
    if not (isinstance(producer_loop, host["base_loop"])
            and kind.create_future is host["base_create_future"]):
        return host["get_running_loop"]()
    tid = producer_loop._thread_id
    if tid is not None and tid == host["get_ident"]():
        return producer_loop
    return host["get_running_loop"]()


def _new_future(loop, host=_aio):
    if (isinstance(loop, host["base_loop"])
            and type(loop).create_future is host["base_create_future"]):
        return host["future"](loop=loop)
    return loop.create_future()


def _debug_enabled(log, host=_aio) -> bool:
    if type(log) is host["logger"]:
        cache = log._cache
        if type(cache) is dict and cache.get(10, None) is False:
            return False
    return log.isEnabledFor(10)


async def aiokafka_send(self, topic, value=None, key=None, partition=None, timestamp_ms=None,
                        headers=None):
    host = _aio
    parts = self.client.cluster._partitions.get(topic)
    # with debug logging on, aiokafka's own send() writes its line (from its own frame)
    if (parts is None or (value is None and key is None) or _debug_enabled(host["log"])
            or (partition is not None and not (type(partition) is int and partition >= 0
                                               and partition in parts))):
        return await host["original_send"](self, topic, value, key, partition, timestamp_ms,
                                           headers)
    txn_manager = self._txn_manager
    if (txn_manager is not None and txn_manager.transactional_id is not None
            and not txn_manager.is_in_transaction()):
        raise host["illegal_operation"]("Can't send messages while not in transaction")
    headers = headers or []
    if self._key_serializer is None and self._value_serializer is None:
        # AIOKafkaProducer._serialize without serializers: the size check alone
        key_bytes, value_bytes = key, value
        estimator = host["ns"]["DefaultRecordBatchBuilder"]
        k = _estimate_field(key)
        v = _estimate_field(value)
        if (k >= 0 and v >= 0 and type(headers) is list and not headers
                and estimator in host["estimators"]):
            size = 82 + k + v + 1
        else:
            size = estimator.estimate_size_in_bytes(key, value, headers)
        if size > self._max_request_size:
            self._serialize(key, value, headers)  # raises aiokafka's own error
    else:
        key_bytes, value_bytes = self._serialize(key, value, headers)
    if partition is None:
        partition = self._partition(topic, None, key, value, key_bytes, value_bytes)
    accumulator = self._message_accumulator
    if not accumulator._closed and accumulator._exception is None:
        batches = accumulator._batches
        if type(batches) in host["batch_dicts"]:
            # a plain tuple finds the TopicPartition key (same hash, same equality)
            pending = dict.get(batches, (topic, partition))
        else:
            pending = batches.get(tuple.__new__(host["topic_partition"], (topic, partition)))
        if pending:
            batch = pending[-1]
            builder = batch._builder
            # MessageBatch.append -> BatchBuilder.append as they are, inline: a producer's
            # own batch, its builder open and without serializers of its own
            if (type(batch) is host["message_batch"] and type(builder) is host["batch_builder"]
                    and not builder._closed and builder._key_serializer is None
                    and builder._value_serializer is None):
                offset = builder._relative_offset
                metadata = builder._builder.append(offset, timestamp_ms, key_bytes,
                                                   value_bytes, headers)
                if metadata is not None:
                    builder._relative_offset = offset + 1
                    future = _new_future(_running_loop(self._loop))
                    batch._msg_futures.append((future, metadata))
                    return future
                builder.close()  # full: add_message finds it closed, wakes the sender, waits
    tp = tuple.__new__(host["topic_partition"], (topic, partition))
    return await accumulator.add_message(tp, key_bytes, value_bytes,
                                         self._request_timeout_ms / 1000,
                                         timestamp_ms=timestamp_ms, headers=headers)


# ---- kafka-python's producer: a record into its partition's open batch, and its future --
# (see kafkawire._compat.kafka_python_append; the same steps, in the same order)

_kp: dict = {}  # kafka-python's and kafkawire's objects, from configure_kafka_python


def configure_kafka_python(record_future, new_lock, record_metadata, future_log,
                           records_builder, batch_builder, atomic_integer, monotonic):
    """See kafkawire._compat.configure_kafka_python."""
    _kp.update(frm=record_future, new_lock=new_lock, records_builder=records_builder,
               batch_builder=batch_builder, monotonic=monotonic, log=future_log)


class KafkaPythonFutures:
    """See kafkawire._compat.KafkaPythonFutures (here each future's own
    _produce_success resolves it)."""

    __slots__ = ("futures",)

    def __init__(self, futures):
        self.futures = futures

    def __call__(self, result):
        for f in self.futures:
            try:
                f._produce_success(result)
            except Exception:
                _let_out(f, "Error processing callback")

    def failure(self, error):
        for f in self.futures:
            try:
                f.failure(error)
            except Exception:
                _let_out(f, "Error processing errback")


def _let_out(f, what, host=_kp):
    # See kafkawire._compat._kp_let_out (called in an except block).
    if f._produce_future.error_on_callbacks:
        raise
    host["log"].exception(what)


def kafka_python_record_future(produce_future, offset, timestamp, crc, key, value, headers,
                               host=_kp):
    frm = host["frm"]
    f = frm.__new__(frm)
    f.is_done = False
    f.value = None
    f.exception = None
    f._callbacks = []
    f._errbacks = []
    f._lock = host["new_lock"]()
    f._produce_future = produce_future
    f.args = (offset, timestamp, crc,
              -1 if key is None else len(key), -1 if value is None else len(value),
              sum(len(k.encode("utf-8")) + len(v) for k, v in headers) if headers else -1)
    callbacks = produce_future._callbacks
    if type(callbacks) is list and callbacks and type(callbacks[-1]) is KafkaPythonFutures:
        callbacks[-1].futures.append(f)
    else:
        run = KafkaPythonFutures([f])
        produce_future._add_cb_eb(run, run.failure)
    return f


def kafka_python_append(acc, tp, timestamp_ms, key, value, headers, host=_kp):
    if not acc._closed:
        lock = acc._tp_locks.get(tp) or acc._tp_lock(tp)
        in_progress = acc._appends_in_progress
        in_progress.increment()  # abort_incomplete_batches() waits for appends in flight
        try:
            with lock:
                dq = acc._batches[tp]
                if dq:
                    batch = dq[-1]
                    records = batch.records
                    builder = (records._builder if type(records) is host["records_builder"]
                               else None)
                    if builder is not None and type(builder) is host["batch_builder"]:
                        # MemoryRecordsBuilder.append, one frame less (both are kafkawire's)
                        metadata = builder.append(records._next_offset, timestamp_ms, key,
                                                  value, headers)
                        if metadata is not None:
                            records._next_offset += 1
                    else:
                        metadata = records.append(timestamp_ms, key, value, headers)
                    if metadata is not None:
                        if metadata.size > batch.max_record_size:
                            batch.max_record_size = metadata.size
                        batch.last_append = host["monotonic"]()
                        future = kafka_python_record_future(
                            batch.produce_future, metadata.offset, metadata.timestamp,
                            metadata.crc, key, value, headers)
                        batch._record_futures.append(future)
                        return future, len(dq) > 1 or records.is_full(), False
        finally:
            in_progress.decrement()
    return acc.append(tp, timestamp_ms, key, value, headers)[:3]
