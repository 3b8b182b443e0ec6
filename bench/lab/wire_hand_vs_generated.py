"""The hand-written Produce/Fetch readers and writers of the client's path beside the
schema code built from Kafka's definitions (protocol.apis, from_generated), on the same
bytes: Fetch answers (4 partitions x 10,000 records as bench/compare_protocol.py's, and one
partition holding one record: the latency case), a one-partition Produce answer, and a
one-record Produce request.  Interleaved: each implementation once per round; median and
min of the rounds (their number the first argument, default 15), microseconds per call.

    .venv/bin/python bench/lab/wire_hand_vs_generated.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import compare_protocol as wl  # noqa: E402

from kafkawire import _frames, codec  # noqa: E402
from kafkawire.protocol import apis  # noqa: E402
from kafkawire.protocol.fetch_response import decode_fetch_response  # noqa: E402
from kafkawire.protocol.producer import decode_produce_response, encode_produce, produce_request  # noqa: E402

FETCH, PRODUCE = apis.get("Fetch"), apis.get("Produce")


def _generated_encode(request: Any, version: int) -> list[Any]:
    return PRODUCE.encode_request(request, version).parts()


def cases() -> dict[str, dict[str, tuple[Any, Any, int]]]:
    records = wl.make_records()
    one = codec.encode_record_batch(records[:1], base_offset=0)
    out: dict[str, dict[str, tuple[Any, Any, int]]] = {}
    for v in wl.FETCH_VERSIONS:
        frame = wl.fetch_frame(v, wl.fetch_record_data(records, 0))
        big = memoryview(frame).toreadonly()[4 if FETCH.response_header_version(v) == 0 else 5:]
        resp = FETCH.decode_response(big, v)
        resp.responses[0].partitions = resp.responses[0].partitions[:1]
        resp.responses[0].partitions[0].records = one
        small = memoryview(FETCH.encode_response(resp, v).getvalue()).toreadonly()
        for name, body in (("4 partitions x 10k records", big), ("1 partition, 1 record", small)):
            assert repr(decode_fetch_response(body, v)) == repr(FETCH.decode_response(body, v))
            out[f"Fetch answer v{v}, {name}"] = {
                "hand Python (fetch_response)": (decode_fetch_response, body, v),
                "hand Cython (_frames.fetch_body)": (_frames.fetch_body, body, v),
                "generated (FETCH.decode_response)": (FETCH.decode_response, body, v),
            }
    P = PRODUCE.Response
    T = P.TopicProduceResponse
    answer = P(responses=[T(name=wl.TOPIC, partition_responses=[T.PartitionProduceResponse(index=2, base_offset=1234)])])
    request = produce_request(None, 1, 30000, {wl.TOPIC: [(2, one)]})
    for v in (3, 9, 11):
        body = memoryview(PRODUCE.encode_response(answer, v).getvalue())
        assert repr(decode_produce_response(body, v)) == repr(PRODUCE.decode_response(body, v))
        out[f"Produce answer v{v}, 1 partition"] = {
            "hand Python (producer.decode_produce_response)": (decode_produce_response, body, v),
            "generated (PRODUCE.decode_response)": (PRODUCE.decode_response, body, v),
        }
        assert b"".join(bytes(c) for c in encode_produce(request, v)) == PRODUCE.encode_request(request, v).getvalue()
        out[f"Produce request v{v}, 1 record"] = {
            "hand Python (producer.encode_produce)": (encode_produce, request, v),
            "generated (PRODUCE.encode_request)": (_generated_encode, request, v),
        }
    return out


def per_call(fn: Any, arg: Any, version: int) -> float:
    n, t0 = 0, time.perf_counter()
    while True:
        for _ in range(50):
            fn(arg, version)
        n += 50
        elapsed = time.perf_counter() - t0
        if elapsed > 0.02:
            return elapsed / n * 1e6


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    for case, impls in cases().items():
        times: dict[str, list[float]] = {k: [] for k in impls}
        for _ in range(rounds):
            for k, (fn, arg, v) in impls.items():
                times[k].append(per_call(fn, arg, v))
        print(case)
        for k, ts in times.items():
            print(f"  {k:50s} median {statistics.median(ts):8.2f} us   min {min(ts):8.2f} us")


if __name__ == "__main__":
    main()
