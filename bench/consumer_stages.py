"""Where kafkawire's sync consumer spends a record's time after its Fetch answer is readable.

confluent-kafka writes records at a fixed rate from a child process (compare_latency's
producer, each value carrying its due time); a kafkawire Consumer in this process polls
them, with stamps at the poller's wake-up, around the connection's read of the answer
(``BrokerConnection._on_event``), the sans-IO decode (``Connection.receive_data``), the
fetcher's bookkeeping (``Fetcher.on_response``) and the records' decode (``Fetcher.drain``),
and at poll()'s return.  Each stamp's wrapper costs about 0.1 µs.

It ends with the same decode timed again on the last answer, warm, in a loop: the
difference is what a wake-up from an idle wait costs the same code (cold caches).

    .venv/bin/python bench/consumer_stages.py [--broker kafka | --bootstrap HOST:PORT] [--rate 1000]
        [--records 3000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
import timeit

import compare_latency as cl

STAGES = ("wake-up -> read", "read (recv, sans-IO read, fetcher)", "  of which the sans-IO read",
          "  of which the fetcher's bookkeeping",
          "read -> drain", "drain (records' decode)", "drain -> poll() returns", "wake-up -> poll() returns",
          "due -> poll() returns")
MAX_PASSES = 6
KEPT_UP_NS = 2_000_000  # a pass's p50 due -> poll() below 2 ms: the broker kept up


def _stamp(owner, name: str, stamps: dict, key: str, keep: list | None = None) -> None:
    """Wrap ``owner.name`` to set stamps[key + "0"] and [key + "1"] around each call (and
    keep its arguments in ``keep``)."""
    inner = getattr(owner, name)
    perf = time.perf_counter_ns

    def wrapped(*args, **kwargs):
        stamps[key + "0"] = perf()
        out = inner(*args, **kwargs)
        stamps[key + "1"] = perf()
        if keep is not None:
            keep[:] = [args]
        return out

    setattr(owner, name, wrapped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", default="kafka", choices=("kafka", "tansu"))
    parser.add_argument("--rate", default="1000", help="records/s (1000)")
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="a broker already running (default: start --broker)")
    args = parser.parse_args()
    from kafkawire import Admin
    from kafkawire.client import conn as sync_conn
    from kafkawire.protocol import connection as sans_io

    started = time.monotonic()
    st: dict = {}
    last_answer: list = []
    # Stamps on the classes: every consumer of the run, the warm-up's too.
    _stamp(sync_conn.BrokerConnection, "_on_event", st, "ev")
    _stamp(sans_io.Connection, "receive_data", st, "rd", last_answer)
    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(cl.start_broker(args.broker)).bootstrap
        admin = Admin(bootstrap_servers=bootstrap)
        stack.callback(admin.close)
        # A fresh Kafka broker falls behind 1,000/s for a while (its JIT compiles): the
        # consumer then gets records late, several an answer.  Passes until it keeps up.
        for passes in range(1, MAX_PASSES + 1):
            rows, frame = _one_pass(admin, bootstrap, args.rate, args.records, st, last_answer)
            rows = rows[len(rows) // 10:]  # the consumer's own warm-up
            kept_up = bool(rows) and statistics.median(r[-1] for r in rows) < KEPT_UP_NS
            if kept_up:
                break
    if not rows:
        raise SystemExit("no record came alone in its answer")
    warm = _warm_decode(*frame)
    lines = [f"# kafkawire's consumer after the answer: {args.bootstrap or args.broker}, {cl.rate_label(args.rate)}", "",
             f"{len(rows):,} records, each alone in its Fetch answer, of pass {passes} ({args.records:,} records a pass)"
             f"{'' if kept_up else ' (the broker never kept up: read with care)'}; µs.", "",
             "| stage | p50 | p90 |", "|---|---|---|"]
    for i, name in enumerate(STAGES):
        xs = [r[i] / 1000 for r in rows]
        lines.append(f"| {name} | {statistics.median(xs):.1f} | {statistics.quantiles(xs, n=10)[-1]:.1f} |")
    lines += ["", f"The last answer's compiled decode (fetch_answer, within the sans-IO read) timed "
              f"again, warm, in a loop: {warm:.1f} µs." if warm == warm else
              "The last answer was one the compiled decode leaves to the general reader: not timed warm."]
    print("\n".join(lines))
    print(f"(took {time.monotonic() - started:.0f}s)", file=sys.stderr)


def _one_pass(admin, bootstrap: str, rate: str, n: int, st: dict, last_answer: list
              ) -> tuple[list[tuple[int, ...]], tuple | None]:
    """One run of ``n`` records at ``rate`` to a new topic: each lone record's stages (ns),
    and the sans-IO connection and frame of the last one's answer."""
    from kafkawire import Consumer

    topic = cl.new_topic(admin)
    c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    try:
        c.assign([(topic, 0)])
        c.poll(0.5)  # connected, positioned and fetching before the producer starts
        selector = c.cluster.poller.selector
        select = selector.select

        def stamped_select(timeout=None):
            events = select(timeout)
            if events:
                st["wake"] = time.perf_counter_ns()
            return events

        selector.select = stamped_select
        _stamp(c._fetcher, "on_response", st, "or")
        _stamp(c._fetcher, "drain", st, "dr")
        producer = subprocess.Popen(
            [sys.executable, "-c", "import sys, compare_latency as cl; "
             "cl.PRODUCERS['confluent-kafka'](sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))",
             bootstrap, topic, rate, str(n)],
            cwd=os.path.dirname(os.path.abspath(__file__)))
        rows: list[tuple[int, ...]] = []
        frame = None
        deadline = time.monotonic() + 60 + n / int(rate)
        while producer.poll() is None or c.metrics()["buffered_records"]:
            if time.monotonic() > deadline:
                producer.kill()
                raise SystemExit("the records did not all come within the deadline")
            got = c.poll(0.2)
            now = time.perf_counter_ns()
            if len(got) != 1 or len(got[0].value) != cl.VALUE_SIZE:
                continue  # more than one answer's worth: no single wake-up
            due = cl._VALUE.unpack_from(got[0].value)[0]
            if not due:
                continue  # the producer's warm-up records carry no due time
            rows.append((st["ev0"] - st["wake"], st["ev1"] - st["ev0"], st["rd1"] - st["rd0"],
                         st["or1"] - st["or0"], st["dr0"] - st["ev1"], st["dr1"] - st["dr0"],
                         now - st["dr1"], now - st["wake"], now - int(due * 1e9)))
            frame = last_answer[0]
        if producer.returncode:
            raise SystemExit(f"the producer failed ({producer.returncode})")
        return rows, frame
    finally:
        c.close()
        cl.drop_topic(admin, topic)


def _warm_decode(proto, data: bytes) -> float:
    """µs per call of the compiled Fetch answer decode that receive_data ran on ``data``,
    repeated back to back."""
    from kafkawire.protocol import connection as sans_io

    expected, version = int.from_bytes(data[4:8], "big", signed=True), proto.version_for(sans_io._FETCH_API)
    if sans_io.fetch_answer(data, expected, version) is None:
        return float("nan")  # one the general reader takes (tagged fields, say)
    n = 20000
    return min(timeit.repeat(lambda: sans_io.fetch_answer(data, expected, version), number=n, repeat=5)) / n * 1e6


if __name__ == "__main__":
    main()
