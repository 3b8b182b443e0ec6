"""kafkawire's protocol layer side by side with aiokafka's and kafka-python's.

Same method as bench/compare_codec.py: one process, every (benchmark, implementation)
pair runs once per round in the same order, and the table shows medians over the rounds.

    .venv/bin/python bench/compare_protocol.py [--quick] [--markdown PATH]

Workloads (records as in compare_codec.py: 16-byte keys, 100-byte values, magic 2):
- Fetch response decode: one topic, 4 partitions, each carrying 10,000 records in batches
  of 1,000, framed with its response header; v4 (non-flexible) and v13 (flexible, topic ids).
- Produce request encode: v3 and v9, 4 partitions each carrying one pre-encoded batch of
  10,000 records, framed (size prefix + request header) as a connection sends it.
- Metadata v12: a request naming 50 topics, and the response describing them (3 brokers,
  6 partitions per topic, 3 replicas each).
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import struct
import sys
import tracemalloc
import uuid
import warnings

from report import write_json, write_markdown

from kafkawire import codec
from kafkawire.protocol import apis
from kafkawire.protocol.headers import (
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from kafkawire.protocol.schema import Writer

from aiokafka.protocol.api import ResponseHeader_v0 as AioResponseHeaderV0
from aiokafka.protocol.fetch import FetchResponse_v4 as AioFetchResponseV4
from aiokafka.protocol.produce import ProduceRequest_v3 as AioProduceRequestV3
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder

with warnings.catch_warnings():
    # kafka-python 3.0 loads its schemas with importlib.resources calls Python deprecates.
    warnings.simplefilter("ignore", DeprecationWarning)
    from compare_codec import (KEY_SIZE, N_RECORDS, VALUE_SIZE, Bench, aio_read_records,
                               kp_read_records, make_records)
    from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse
    from kafka.protocol.metadata.metadata import MetadataRequest as KpMetadataRequest
    from kafka.protocol.metadata.metadata import MetadataResponse as KpMetadataResponse
    from kafka.protocol.producer.produce import ProduceRequest as KpProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

FETCH = apis.get("Fetch")
PRODUCE = apis.get("Produce")
METADATA = apis.get("Metadata")

TOPIC = "bench-events"
TOPIC_ID = uuid.UUID("5f0c6e1a-3b2d-4c8e-9a71-0d4b2e6f8a13")
PARTITIONS = 4
BATCH_RECORDS = 1_000  # records per batch in the Fetch responses
FETCH_VERSIONS = (4, 13)
PRODUCE_VERSIONS = (3, 9)
METADATA_VERSION = 12
META_TOPICS, META_PARTITIONS, META_BROKERS = 50, 6, 3
CODECS = {0: "none", 3: "lz4"}
CLIENT_ID = "bench-client"
CORRELATION_ID = 7
BIG = 1 << 30  # peers' builders: batch_size never reached
_I32 = struct.Struct(">i")

# aiokafka 0.14 declares Fetch v0-v11, Produce v0-v8 and Metadata v0-v5 only.
AIO_FETCH = {4: AioFetchResponseV4}
AIO_PRODUCE = {3: AioProduceRequestV3}


# ---------------------------------------------------------------------------------------
# Workload construction (kafkawire encodes the responses; every client decodes the same
# bytes, and setup checks that all three read the same records from them).
# ---------------------------------------------------------------------------------------


def partition_records(records, partition: int):
    # Every partition gets its own records so no decoder can benefit from repeated input.
    shift = partition * 997
    return records[shift:] + records[:shift]


def fetch_record_data(records, compression: int) -> list[bytes]:
    out = []
    for p in range(PARTITIONS):
        recs = partition_records(records, p)
        out.append(b"".join(
            codec.encode_record_batch(recs[i : i + BATCH_RECORDS], base_offset=i,
                                      compression=compression)
            for i in range(0, N_RECORDS, BATCH_RECORDS)))
    return out


def fetch_frame(version: int, record_data: list[bytes]) -> bytes:
    """A Fetch response as the connection receives it: header + body, no size prefix."""
    R = FETCH.Response
    resp = R(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[R.FetchableTopicResponse(
            topic=TOPIC,
            topic_id=TOPIC_ID,
            partitions=[R.FetchableTopicResponse.PartitionData(
                partition_index=p,
                error_code=0,
                high_watermark=N_RECORDS,
                last_stable_offset=N_RECORDS,
                log_start_offset=0,
                aborted_transactions=[],
                records=data,
            ) for p, data in enumerate(record_data)],
        )],
    )
    head = encode_response_header(CORRELATION_ID, FETCH.response_header_version(version))
    return head + FETCH.encode_response(resp, version).getvalue()


def produce_batches(records) -> list[bytes]:
    return [codec.encode_record_batch(partition_records(records, p)) for p in range(PARTITIONS)]


def metadata_response_frame(version: int) -> bytes:
    R = METADATA.Response
    T = R.MetadataResponseTopic
    brokers = [R.MetadataResponseBroker(node_id=n, host=f"broker-{n}.kafka.internal",
                                        port=9092, rack=f"rack-{n}")
               for n in range(META_BROKERS)]
    topics = []
    for t in range(META_TOPICS):
        parts = []
        for p in range(META_PARTITIONS):
            replicas = [(p + k) % META_BROKERS for k in range(3)]
            parts.append(T.MetadataResponsePartition(
                error_code=0, partition_index=p, leader_id=replicas[0], leader_epoch=5,
                replica_nodes=replicas, isr_nodes=replicas, offline_replicas=[]))
        topics.append(T(error_code=0, name=f"service.events.topic-{t:03d}",
                        topic_id=uuid.UUID(int=t + 1), is_internal=False, partitions=parts,
                        topic_authorized_operations=-(2**31)))
    resp = R(throttle_time_ms=0, brokers=brokers, cluster_id="bench-cluster-0001",
             controller_id=1, topics=topics, error_code=0)
    head = encode_response_header(CORRELATION_ID, METADATA.response_header_version(version))
    return head + METADATA.encode_response(resp, version).getvalue()


def metadata_topic_names() -> list[str]:
    return [f"service.events.topic-{t:03d}" for t in range(META_TOPICS)]


def count_fields(obj, version: int) -> int:
    """Wire fields in ``obj`` at ``version``: each scalar and each scalar-array element."""
    n = 0
    for f in obj._fields:
        if not f.exists(version) or f.tag is not None:
            continue
        value = getattr(obj, f.name)
        if f.type == "struct":
            items = value if f.array else [value]
            n += sum(count_fields(x, version) for x in items or ())
        elif f.array:
            n += len(value or ())
        else:
            n += 1
    return n


# ---------------------------------------------------------------------------------------
# kafkawire
# ---------------------------------------------------------------------------------------


def kw_frame_request(api, request, version: int) -> list:
    """Frame a request as kafkawire.protocol.connection.Connection.send does."""
    w = Writer()
    w.buf += b"\0\0\0\0"
    w.buf += encode_request_header(api.key, version, CORRELATION_ID, CLIENT_ID,
                                   api.request_header_version(version))
    api.encode_request(request, version, w)
    if not w.chunks:
        _I32.pack_into(w.buf, 0, len(w.buf) - 4)
        return [bytes(w.buf)]
    chunks = w.parts()
    size = sum(memoryview(c).nbytes for c in chunks) - 4
    chunks[0] = _I32.pack(size) + bytes(chunks[0])[4:]
    return chunks


def kw_fetch_protocol(frame: bytes, version: int):
    hv = FETCH.response_header_version(version)

    def run():
        buf = memoryview(frame).toreadonly()
        _cid, pos = decode_response_header(buf, hv)
        return FETCH.decode_response(buf[pos:], version)
    return run


def kw_fetch_full(frame: bytes, version: int, columnar: bool):
    hv = FETCH.response_header_version(version)
    decode = codec.decode_columnar if columnar else codec.decode_records

    def run():
        buf = memoryview(frame).toreadonly()
        _cid, pos = decode_response_header(buf, hv)
        resp = FETCH.decode_response(buf[pos:], version)
        return [decode(p.records, check_crcs=True)
                for t in resp.responses for p in t.partitions]
    return run


def kw_codec_only(views: list, columnar: bool):
    decode = codec.decode_columnar if columnar else codec.decode_records
    return lambda: [decode(v, check_crcs=True) for v in views]


def kw_produce_request(batches: list, version: int):
    R = PRODUCE.Request

    def run():
        req = R(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
            R.TopicProduceData(name=TOPIC, partition_data=[
                R.TopicProduceData.PartitionProduceData(index=p, records=b)
                for p, b in enumerate(batches)])])
        return kw_frame_request(PRODUCE, req, version)
    return run


def kw_produce_e2e(records, version: int):
    inputs = [partition_records(records, p) for p in range(PARTITIONS)]

    def run():
        return kw_produce_request([codec.encode_record_batch(r) for r in inputs], version)()
    return run


def metadata_request():
    R = METADATA.Request
    return R(topics=[R.MetadataRequestTopic(name=n) for n in metadata_topic_names()],
             allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def kw_metadata_request(version: int):
    return lambda: kw_frame_request(METADATA, metadata_request(), version)


def kw_metadata_response(frame: bytes, version: int):
    hv = METADATA.response_header_version(version)

    def run():
        buf = memoryview(frame).toreadonly()
        _cid, pos = decode_response_header(buf, hv)
        return METADATA.decode_response(buf[pos:], version)
    return run


# ---------------------------------------------------------------------------------------
# aiokafka 0.14: conn._handle_frame (BytesIO, header, response class decode), then the
# fetcher: MemoryRecords over each partition's message_set, validate_crc() per batch.
# conn.send: header.encode() + struct.encode(), size prefix concatenated in front.
# ---------------------------------------------------------------------------------------


def aio_fetch(frame: bytes, version: int, with_records: bool):
    cls = AIO_FETCH[version]

    def run():
        bio = io.BytesIO(frame)
        AioResponseHeaderV0.decode(bio)
        resp = cls.decode(bio)
        if not with_records:
            return resp
        out: list = []
        for _topic, partitions in resp.topics:
            for _partition, *part_data in partitions:
                aio_read_records(part_data[-1], out)
        return out
    return run


def aio_produce_request(batches: list, version: int):
    cls = AIO_PRODUCE[version]

    def run():
        req = cls(None, -1, 30_000, [(TOPIC, list(enumerate(batches)))])
        header = req.build_request_header(correlation_id=CORRELATION_ID, client_id=CLIENT_ID)
        message = header.encode() + req.encode()
        return _I32.pack(len(message)) + message
    return run


def aio_produce_e2e(records, version: int):
    inputs = [partition_records(records, p) for p in range(PARTITIONS)]

    def run():
        batches = []
        for recs in inputs:
            b = AioBuilder(2, 0, 0, -1, -1, -1, BIG)
            for i, (k, v, ts) in enumerate(recs):
                b.append(i, ts, k, v, [])
            batches.append(b.build())
        return aio_produce_request(batches, version)()
    return run


# ---------------------------------------------------------------------------------------
# kafka-python 3.0: parser._process_response (parse_header and decode over the BytesIO),
# then the fetcher: MemoryRecords over each partition's records, validate_crc() per batch
# and per record.  Requests: with_header() + encode(framed=True, header=True).
# ---------------------------------------------------------------------------------------


def kp_fetch(frame: bytes, version: int, with_records: bool):
    cls = KpFetchResponse[version]

    def run():
        bio = io.BytesIO(frame)
        cls.parse_header(bio)
        resp = cls.decode(bio)
        if not with_records:
            return resp
        out: list = []
        for t in resp.responses:
            for p in t.partitions:
                kp_read_records(p.records, out)
        return out
    return run


def kp_produce_request(batches: list, version: int):
    R = KpProduceRequest

    def run():
        req = R(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
            R.TopicProduceData(name=TOPIC, partition_data=[
                R.TopicProduceData.PartitionProduceData(index=p, records=b)
                for p, b in enumerate(batches)])], version=version)
        req.with_header(correlation_id=CORRELATION_ID, client_id=CLIENT_ID)
        return req.encode(framed=True, header=True)
    return run


def kp_produce_e2e(records, version: int):
    inputs = [partition_records(records, p) for p in range(PARTITIONS)]

    def run():
        batches = []
        for recs in inputs:
            b = KpBuilder(2, 0, 0, -1, -1, -1, BIG)
            for i, (k, v, ts) in enumerate(recs):
                b.append(i, ts, k, v, [])
            batches.append(bytes(b.build()))
        return kp_produce_request(batches, version)()
    return run


def kp_metadata_request(version: int):
    R = KpMetadataRequest
    names = metadata_topic_names()

    def run():
        req = R(topics=[R.MetadataRequestTopic(name=n) for n in names],
                allow_auto_topic_creation=False, include_topic_authorized_operations=False,
                version=version)
        req.with_header(correlation_id=CORRELATION_ID, client_id=CLIENT_ID)
        return req.encode(framed=True, header=True)
    return run


def kp_metadata_response(frame: bytes, version: int):
    cls = KpMetadataResponse[version]

    def run():
        bio = io.BytesIO(frame)
        cls.parse_header(bio)
        return cls.decode(bio)
    return run


# ---------------------------------------------------------------------------------------
# Checks made once before timing: a benchmark of wrong output is worthless.
# ---------------------------------------------------------------------------------------


def check_fetch(frame: bytes, version: int, record_data: list[bytes]) -> list[memoryview]:
    resp = kw_fetch_protocol(frame, version)()
    views = [p.records for t in resp.responses for p in t.partitions]
    for view, data in zip(views, record_data, strict=True):
        # Zero copy: the records are a view of the frame itself, byte-identical to the input.
        assert isinstance(view, memoryview) and view.obj is frame and view == data
    kw_out = kw_fetch_full(frame, version, columnar=False)()
    keys = [r.key for part in kw_out for r in part]
    assert len(keys) == PARTITIONS * N_RECORDS
    cols = kw_fetch_full(frame, version, columnar=True)()
    assert sum(len(c) for c in cols) == PARTITIONS * N_RECORDS
    if version in AIO_FETCH:
        assert [r.key for r in aio_fetch(frame, version, True)()] == keys
    assert [r.key for r in kp_fetch(frame, version, True)()] == keys
    return views


def check_produce(batches: list[bytes], version: int) -> dict:
    chunks = kw_produce_request(batches, version)()
    wire = b"".join(bytes(c) for c in chunks)
    # Identical bytes from every client, so the encoders do the same work.
    assert wire == kp_produce_request(batches, version)()
    if version in AIO_PRODUCE:
        assert wire == aio_produce_request(batches, version)()
    record_chunks = [c for c in chunks if any(c is b for b in batches)]
    assert len(record_chunks) == PARTITIONS, "batches were copied into the request buffer"
    other = [c for c in chunks if not any(c is b for b in batches)]
    return {
        "chunks": len(chunks),
        "record_bytes": sum(len(b) for b in batches),
        "copied": sum(len(c) for c in other),
        "wire": len(wire),
    }


def check_metadata(frame: bytes, version: int) -> int:
    kw_wire = b"".join(kw_metadata_request(version)())
    assert kw_wire == kp_metadata_request(version)(), "Metadata request bytes differ"
    kw_resp = kw_metadata_response(frame, version)()
    kp_resp = kp_metadata_response(frame, version)()
    assert [t.name for t in kw_resp.topics] == [t.name for t in kp_resp.topics]
    assert [len(t.partitions) for t in kw_resp.topics] == [META_PARTITIONS] * META_TOPICS
    return count_fields(kw_resp, version)


def peak_alloc(fn) -> int:
    """Peak bytes allocated by one call (the result included), traced outside the timing."""
    fn()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
        del result
    finally:
        tracemalloc.stop()
    return peak


# ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds, shorter measurements")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    parser.add_argument("--json", metavar="PATH",
                        help="also write {case: ratio} (peer time / kafkawire time) to PATH")
    args = parser.parse_args()
    if codec.IMPLEMENTATION != "cython":
        sys.exit("kafkawire is running its pure-Python codec; run `make build` first")
    rounds = args.rounds or (3 if args.quick else 7)
    bench = Bench(budget=0.05 if args.quick else 0.2)
    records = make_records()
    info: dict = {}

    print("preparing (checks, warm-up and calibration)...", file=sys.stderr, flush=True)
    for comp, cname in CODECS.items():
        record_data = fetch_record_data(records, comp)
        for v in FETCH_VERSIONS:
            frame = fetch_frame(v, record_data)
            views = check_fetch(frame, v, record_data)
            info[f"fetch-bytes/v{v}/{cname}"] = len(frame)
            tag = f"v{v}/{cname}"
            bench.add(f"fetch-proto/kw/{tag}", kw_fetch_protocol(frame, v))
            bench.add(f"fetch-obj/kw/{tag}", kw_fetch_full(frame, v, columnar=False))
            bench.add(f"fetch-obj/codec/{tag}", kw_codec_only(views, columnar=False))
            bench.add(f"fetch-col/kw/{tag}", kw_fetch_full(frame, v, columnar=True))
            bench.add(f"fetch-col/codec/{tag}", kw_codec_only(views, columnar=True))
            if v in AIO_FETCH:
                bench.add(f"fetch-proto/aio/{tag}", aio_fetch(frame, v, with_records=False))
                bench.add(f"fetch-obj/aio/{tag}", aio_fetch(frame, v, with_records=True))
            bench.add(f"fetch-proto/kp/{tag}", kp_fetch(frame, v, with_records=False))
            bench.add(f"fetch-obj/kp/{tag}", kp_fetch(frame, v, with_records=True))

    batches = produce_batches(records)
    for v in PRODUCE_VERSIONS:
        info[f"produce/v{v}"] = check_produce(batches, v)
        impls = [("kw", kw_produce_request, kw_produce_e2e),
                 ("kp", kp_produce_request, kp_produce_e2e)]
        if v in AIO_PRODUCE:
            impls.insert(1, ("aio", aio_produce_request, aio_produce_e2e))
        for impl, request, e2e in impls:
            bench.add(f"produce-req/{impl}/v{v}", request(batches, v))
            bench.add(f"produce-e2e/{impl}/v{v}", e2e(records, v))
            info[f"peak/{impl}/v{v}"] = peak_alloc(request(batches, v))

    meta_frame = metadata_response_frame(METADATA_VERSION)
    info["meta-fields"] = check_metadata(meta_frame, METADATA_VERSION)
    info["meta-bytes"] = len(meta_frame)
    info["meta-req-bytes"] = sum(len(c) for c in kw_metadata_request(METADATA_VERSION)())
    info["meta-req-fields"] = count_fields(metadata_request(), METADATA_VERSION)
    bench.add("meta-req/kw", kw_metadata_request(METADATA_VERSION))
    bench.add("meta-req/kp", kp_metadata_request(METADATA_VERSION))
    bench.add("meta-resp/kw", kw_metadata_response(meta_frame, METADATA_VERSION))
    bench.add("meta-resp/kp", kp_metadata_response(meta_frame, METADATA_VERSION))

    bench.run(rounds)
    text = "\n".join(report(bench, info, rounds)) + "\n"
    print(text)
    write_markdown(args.markdown, text)
    if args.json:
        write_json(args.json, ratios(bench))


def ratios(bench: Bench) -> dict[str, float]:
    """The table's peer ratios, machine-readable (bench/check.py reads them): peer median
    time / kafkawire median time, so higher is better for kafkawire."""
    m = bench.median
    peers = (("aio", "aiokafka"), ("kp", "kafka-python"))
    out: dict[str, float] = {}

    def put(name, peer, ours):
        if peer is not None and ours is not None and ours > 0:
            out[name] = peer / ours

    for cname in CODECS.values():
        for v in FETCH_VERSIONS:
            tag = f"v{v}/{cname}"
            for impl, peer in peers:
                put(f"fetch/{tag}/protocol/vs-{peer}", m(f"fetch-proto/{impl}/{tag}"),
                    m(f"fetch-proto/kw/{tag}"))
                put(f"fetch/{tag}/objects/vs-{peer}", m(f"fetch-obj/{impl}/{tag}"),
                    m(f"fetch-obj/kw/{tag}"))
                put(f"fetch/{tag}/columnar/vs-{peer}", m(f"fetch-obj/{impl}/{tag}"),
                    m(f"fetch-col/kw/{tag}"))
    for v in PRODUCE_VERSIONS:
        for kind, label in (("req", "request"), ("e2e", "end-to-end")):
            for impl, peer in peers:
                put(f"produce/v{v}/{label}/vs-{peer}", m(f"produce-{kind}/{impl}/v{v}"),
                    m(f"produce-{kind}/kw/v{v}"))
    put(f"metadata/v{METADATA_VERSION}/request/vs-kafka-python", m("meta-req/kp"), m("meta-req/kw"))
    put(f"metadata/v{METADATA_VERSION}/response/vs-kafka-python", m("meta-resp/kp"),
        m("meta-resp/kw"))
    return out


def fmt_t(t: float | None, n: int | None = None) -> str:
    if t is None:
        return "n/a"
    text = f"{t * 1e3:.2f} ms" if t >= 1e-3 else f"{t * 1e6:.1f} µs"
    if n:
        text += f" ({n / t / 1e6:.2f} M rec/s)"
    return text


def fmt_bytes(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def ratio(peer: float | None, ours: float | None) -> str:
    return "n/a" if peer is None or ours is None else f"{peer / ours:.1f}x"


def report(bench: Bench, info: dict, rounds: int) -> list[str]:
    m = bench.median
    total = PARTITIONS * N_RECORDS
    out = [
        "# kafkawire protocol-layer benchmark",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} CPUs; median of {rounds} interleaved rounds; "
        f"records of {KEY_SIZE}-byte keys and {VALUE_SIZE}-byte values, magic 2. "
        "Peers: aiokafka 0.14 (pure-Python protocol classes, Cython records) and "
        "kafka-python 3.0 (generated protocol coders, pure-Python records). "
        "ratio = peer time / kafkawire time (higher is better for kafkawire); n/a = the "
        "peer has no class for that version (aiokafka: Fetch v0-11, Produce v0-8, "
        "Metadata v0-5).",
        "",
        f"## Fetch response decode: {PARTITIONS} partitions x {N_RECORDS:,} records "
        f"(batches of {BATCH_RECORDS:,}), header included",
        "",
        "- **protocol only**: response header + body to objects, records left undecoded. "
        "kafkawire: `decode_response_header` + `FETCH.decode_response` (records are "
        "memoryviews of the frame, no copy); aiokafka: `ResponseHeader_v0.decode` + "
        "`FetchResponse_v4.decode` over a BytesIO; kafka-python: `parse_header` + "
        "`FetchResponse[v].decode` over a BytesIO (both copy each partition's records).",
        "- **full, objects**: protocol, then each partition's records to record objects with "
        "CRC checks, as each consumer does it. kafkawire: `decode_records(view, "
        "check_crcs=True)` on each records view; aiokafka: `MemoryRecords`, "
        "`validate_crc()` per batch, iterate; kafka-python: the same plus `validate_crc()` "
        "per record.",
        "- **full, columnar**: kafkawire with `decode_columnar(view, check_crcs=True)` "
        "instead; peers' column = their object path (they have no columnar decode).",
        "- **codec only**: the same kafkawire codec calls over the same record views, "
        "without the protocol. **protocol part**: kafkawire's protocol-only time and its "
        "share of the full path (full - codec only is the same quantity, but smaller than "
        "the run-to-run noise of the full path).",
        "",
        "| case | kafkawire | kafkawire codec only | kafkawire protocol part | aiokafka | "
        "kafka-python | vs aiokafka | vs kafka-python |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for comp, cname in CODECS.items():
        for v in FETCH_VERSIONS:
            tag = f"v{v}/{cname}"
            size = info[f"fetch-bytes/v{v}/{cname}"] / 1e6
            label = f"Fetch v{v}, {cname} ({size:.1f} MB)"
            kw, aio, kp = (m(f"fetch-proto/{i}/{tag}") for i in ("kw", "aio", "kp"))
            out.append(f"| {label}: protocol only | {fmt_t(kw)} | | | {fmt_t(aio)} | "
                       f"{fmt_t(kp)} | {ratio(aio, kw)} | {ratio(kp, kw)} |")
            proto = kw
            aio, kp = m(f"fetch-obj/aio/{tag}"), m(f"fetch-obj/kp/{tag}")
            for kind, what in (("obj", "full, objects"), ("col", "full, columnar")):
                full, only = m(f"fetch-{kind}/kw/{tag}"), m(f"fetch-{kind}/codec/{tag}")
                out.append(
                    f"| {label}: {what} | {fmt_t(full, total)} | {fmt_t(only, total)} | "
                    f"{fmt_t(proto)} ({proto / full:.1%}) | {fmt_t(aio, total)} | "
                    f"{fmt_t(kp, total)} | {ratio(aio, full)} | {ratio(kp, full)} |")

    out += [
        "",
        f"## Produce request encode: {PARTITIONS} partitions x one {N_RECORDS:,}-record batch",
        "",
        "- **request**: build the request object around the already-encoded batches and "
        "frame it (size prefix + request header + body). kafkawire: "
        "`PRODUCE.encode_request` into a `Writer`, as `Connection.send` does; aiokafka: "
        "`ProduceRequest_v3(...)`, `header.encode() + req.encode()`, size prefix; "
        "kafka-python: `ProduceRequest(..., version=v)`, `with_header()`, "
        "`encode(framed=True, header=True)`. All three produce byte-identical frames "
        "(checked).",
        "- **end-to-end**: the same, plus encoding the 4 batches from record tuples "
        "(kafkawire `encode_record_batch`; peers: their `DefaultRecordBatchBuilder`, "
        "`append` per record, `build()`).",
        "- **record bytes copied**: record data copied into the request (kafkawire keeps "
        "each batch as its own chunk, checked by identity; peers return one `bytes`). "
        "**peak alloc**: peak memory allocated by one request encode (tracemalloc).",
        "",
        "| case | kafkawire | aiokafka | kafka-python | vs aiokafka | vs kafka-python | "
        "kafkawire output | peak alloc: kafkawire / aiokafka / kafka-python |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in PRODUCE_VERSIONS:
        p = info[f"produce/v{v}"]
        peaks = " / ".join(
            "n/a" if f"peak/{i}/v{v}" not in info else fmt_bytes(info[f"peak/{i}/v{v}"])
            for i in ("kw", "aio", "kp"))
        for kind, what in (("req", "request encode"), ("e2e", "end-to-end")):
            kw, aio, kp = (m(f"produce-{kind}/{i}/v{v}") for i in ("kw", "aio", "kp"))
            n = total if kind == "e2e" else None
            extra = (f"{p['chunks']} chunks, {p['wire'] / 1e6:.2f} MB; record bytes copied: "
                     f"0 of {p['record_bytes']:,}; other bytes: {p['copied']}"
                     if kind == "req" else "")
            out.append(f"| Produce v{v}: {what} | {fmt_t(kw, n)} | {fmt_t(aio, n)} | "
                       f"{fmt_t(kp, n)} | {ratio(aio, kw)} | {ratio(kp, kw)} | {extra} | "
                       f"{peaks if kind == 'req' else ''} |")

    fields = info["meta-fields"]
    out += [
        "",
        f"## Small messages: Metadata v{METADATA_VERSION}",
        "",
        f"Request: {META_TOPICS} topics by name ({info['meta-req-bytes']} bytes framed, "
        "byte-identical between the two clients). Response: "
        f"{META_BROKERS} brokers, {META_TOPICS} topics x {META_PARTITIONS} partitions x 3 "
        f"replicas, {info['meta-bytes']:,} bytes, {fields:,} wire fields (scalars and array "
        "elements). kafkawire: `METADATA.encode_request` framed as above / "
        "`decode_response_header` + `METADATA.decode_response`; kafka-python: "
        "`encode(framed=True, header=True)` / `parse_header` + `decode` over a BytesIO.",
        "",
        "| case | kafkawire | kafka-python | vs kafka-python | kafkawire per field |",
        "|---|---|---|---|---|",
    ]
    kw, kp = m("meta-req/kw"), m("meta-req/kp")
    out.append(f"| Metadata v{METADATA_VERSION} request encode | {fmt_t(kw)} | {fmt_t(kp)} | "
               f"{ratio(kp, kw)} | {kw / info['meta-req-fields'] * 1e9:.0f} ns |")
    kw, kp = m("meta-resp/kw"), m("meta-resp/kp")
    out.append(f"| Metadata v{METADATA_VERSION} response decode | {fmt_t(kw)} | {fmt_t(kp)} | "
               f"{ratio(kp, kw)} | {kw / fields * 1e9:.0f} ns |")
    return out


if __name__ == "__main__":
    main()
