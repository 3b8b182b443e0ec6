"""One consumer assigned 1,000 partitions and one producer writing to 1,000 partitions:
kafkawire's sync clients against confluent-kafka on one Apache Kafka node.

Cases (each client runs in a child process of its own, so its memory is its own; R
interleaved rounds, the order alternating; the table shows medians):

* ``consume-all``: a 1,000-partition topic holding N records (100-byte values, spread
  evenly), read from offset 0 by an assign()ed consumer: records/s, peak RSS growth.
* ``idle``: 1,000 partitions assigned, new records arriving in only 10 of them (another
  process writes RATE records/s): the consumer's CPU per wall second, Fetch requests per
  second, bytes per Fetch request (what a request costs when 990 partitions have
  nothing), and RSS growth per assigned partition.
* ``produce-rr`` / ``produce-keyed``: N records sent to the 1,000 partitions in turn, or by
  key (the default partitioner): records/s, CPU per record and peak RSS growth.  Each case
  has one topic, warmed up before the rounds and written by every client in every round
  (the records each run added are counted from the topic's end offsets).  Warmed up, because
  on a fresh topic Kafka's first index entry in each partition (written once a segment holds
  ``log.index.interval.bytes``, 4,096) costs the broker about 4 ms a partition on disk: a
  request that reaches that point in 900 partitions waited 4.4 s, its handler thread in
  LogSegment.append, and whichever client wrote first paid it (100,000 records took 2-34 s
  on fresh topics, 0.1-1.1 s on warmed ones).  The warm-up, from a short-lived producer of
  its own, writes each partition a record larger than that interval and then a small one,
  whose append writes the entry; both acknowledged.

The broker keeps its logs in memory (a directory on /dev/shm; ``--logs-on-disk`` for the
machine's disk): there, even on warmed topics, the first produce runs after the consumed
topic was filled took 4.6-6.0 s instead of 0.1-0.6 s in both full runs, one Produce request
waiting 4.4 s on the broker, always on the client that goes first in round 1 (not seen
without the fill: warmed topics left 40 s, then written, took 0.2-1.1 s).  In memory, even
fresh topics take 0.2-0.8 s from the first run.

Run with:

    .venv/bin/python bench/compare_partitions.py [--quick] [--partitions 1000] [--records N]
        [--rounds R] [--idle-seconds S] [--rate RATE] [--baseline SRC] [--logs-on-disk]
        [--markdown PATH] [--json PATH]

``--baseline SRC`` adds a third client, "kafkawire-base": kafkawire imported from the
source directory SRC (another checkout's ``src``, its extensions built), for a before/after.

(``--markdown`` defaults to bench/results/partitions.md.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from report import finish  # noqa: E402

BASELINE = ""  # --baseline
HERE = os.path.dirname(os.path.abspath(__file__))
VALUE = b"v" * 100
FETCH_MAX_BYTES = 50 * 1024 * 1024
PARTITION_FETCH_BYTES = 1024 * 1024
CLIENTS = ["kafkawire", "confluent"]
BASE = "kafkawire-base"


# -- what a child process measures about itself ------------------------------------------


def rss_kb(field: str = "VmRSS") -> int:
    """This process's resident set (VmHWM: its peak) in KiB.  (ru_maxrss is no use in a
    child: Linux carries the parent's peak across exec.)"""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class KwConsumer:
    def __init__(self, bootstrap: str, tps: list[tuple[str, int]], earliest: bool):
        from kafkawire import Consumer
        from kafkawire.protocol.fetcher import Fetcher

        self.fetches = 0
        self.sample: list = []  # every 16th Fetch request, encoded after the timing
        orig = Fetcher.request

        def counted(fetcher, *a, **k):
            self.fetches += 1
            req, positions = orig(fetcher, *a, **k)
            if self.fetches % 16 == 0:
                self.sample.append(req)
            return req, positions

        Fetcher.request = counted
        self.c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest" if earliest else "latest",
                          fetch_max_bytes=FETCH_MAX_BYTES, max_partition_fetch_bytes=PARTITION_FETCH_BYTES,
                          send_buffer_bytes=-1, receive_buffer_bytes=-1)
        self.c.assign(tps)

    def poll(self) -> int:
        return len(self.c.poll(0.2, max_records=10_000))

    def tx_bytes(self) -> int:
        return 0  # see request_bytes

    def request_bytes(self) -> float | None:
        """The mean size of the sampled Fetch requests as sent: size prefix, header
        (api key, version, correlation id, client id, tags) and body."""
        from kafkawire.protocol import apis

        fetch = apis.get("Fetch")
        conns = [c for c in map(self.c.cluster.ready_connection, self.c.cluster.meta.brokers) if c is not None]
        if not self.sample or not conns:
            return None
        version = conns[0].version_for(fetch)
        header = 4 + 8 + 2 + len(self.c.config.client_id or "") + (1 if fetch.is_flexible(version) else 0)
        return header + statistics.mean(len(fetch.encode_request(r, version).getvalue()) for r in self.sample)

    def close(self) -> None:
        self.c.close()


class CkConsumer:
    def __init__(self, bootstrap: str, tps: list[tuple[str, int]], earliest: bool):
        import confluent_kafka

        self.fetches = self.tx = 0

        def stats(text: str) -> None:
            brokers = json.loads(text).get("brokers", {}).values()
            self.fetches = sum(b.get("req", {}).get("Fetch", 0) for b in brokers)
            self.tx = sum(b.get("txbytes", 0) for b in brokers)

        self.c = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest" if earliest else "latest",
            "fetch.max.bytes": FETCH_MAX_BYTES, "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
            "enable.partition.eof": False, "log_level": 3,
            "statistics.interval.ms": 500, "stats_cb": stats,
        })
        offset = confluent_kafka.OFFSET_BEGINNING if earliest else confluent_kafka.OFFSET_END
        self.c.assign([confluent_kafka.TopicPartition(t, p, offset) for t, p in tps])

    def poll(self) -> int:
        msgs = self.c.consume(10_000, 0.2)
        for m in msgs:
            if m.error():
                raise RuntimeError(str(m.error()))
        return len(msgs)

    def tx_bytes(self) -> int:
        return self.tx

    def request_bytes(self) -> float | None:
        return None  # tx_bytes over the Fetch count

    def close(self) -> None:
        self.c.close()


CONSUMERS = {"kafkawire": KwConsumer, BASE: KwConsumer, "confluent": CkConsumer}


def child_consume_all(client: str, bootstrap: str, topic: str, partitions: int, records: int) -> dict:
    base = rss_kb()
    c = CONSUMERS[client](bootstrap, [(topic, p) for p in range(partitions)], True)
    got = 0
    start = time.perf_counter()
    cpu0 = cpu()
    deadline = time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        got += c.poll()
    seconds = time.perf_counter() - start
    out = {"seconds": seconds, "records": got, "cpu": cpu() - cpu0,
           "peak_rss_kb": rss_kb("VmHWM") - base}
    c.close()
    if got != records:
        out["problem"] = f"{got} of {records} records"
    return out


def child_idle(client: str, bootstrap: str, topic: str, partitions: int, seconds: float) -> dict:
    base = rss_kb()
    c = CONSUMERS[client](bootstrap, [(topic, p) for p in range(partitions)], False)
    # Warm up: positions looked up, connections and (kafkawire) the fetch session open.
    warm = time.monotonic() + 3
    while time.monotonic() < warm:
        c.poll()
    got = 0
    fetches0, tx0, cpu0 = c.fetches, c.tx_bytes(), cpu()
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        got += c.poll()
    wall = time.monotonic() - start
    used = cpu() - cpu0
    rss = rss_kb() - base
    # librdkafka's counters come with its statistics, every 500 ms: one more, untimed.
    end = time.monotonic() + 0.6
    while isinstance(c, CkConsumer) and time.monotonic() < end:
        c.poll()
    fetches, tx = c.fetches - fetches0, c.tx_bytes() - tx0
    size = c.request_bytes() or (tx / fetches if fetches else None)
    c.close()
    return {"seconds": wall, "records": got, "cpu_per_s": used / wall, "fetches_per_s": fetches / wall,
            "bytes_per_fetch": size, "rss_kb": rss, "rss_per_partition": rss * 1024 / partitions}


def child_produce(client: str, bootstrap: str, topic: str, partitions: int, records: int, keyed: bool) -> dict:
    base = rss_kb()
    keys = [str(i).encode() for i in range(10_000)]
    if client != "confluent":
        from kafkawire import Producer

        p = Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=5,
                     send_buffer_bytes=-1, receive_buffer_bytes=-1)
        p.partitions_for(topic)
        send = p.send
        start = time.perf_counter()
        cpu0 = cpu()
        if keyed:
            for i in range(records):
                send(topic, VALUE, key=keys[i % 10_000])
        else:
            for i in range(records):
                send(topic, VALUE, partition=i % partitions)
        p.flush(300)
        seconds = time.perf_counter() - start
        p.close()
    else:
        import confluent_kafka

        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                                      "queue.buffering.max.messages": 1_000_000, "log_level": 3})
        p.list_topics(topic, timeout=15)
        produce, poll = p.produce, p.poll
        start = time.perf_counter()
        cpu0 = cpu()
        for i in range(records):
            while True:
                try:
                    if keyed:
                        produce(topic, VALUE, keys[i % 10_000])
                    else:
                        produce(topic, VALUE, partition=i % partitions)
                    break
                except BufferError:
                    poll(0.005)
        left = p.flush(300)
        seconds = time.perf_counter() - start
        if left:
            return {"problem": f"{left} unflushed"}
    return {"seconds": seconds, "records": records, "cpu": cpu() - cpu0,
            "peak_rss_kb": rss_kb("VmHWM") - base}


def child_feed(bootstrap: str, topic: str, partitions: int, rate: float, seconds: float) -> dict:
    """Write ``rate`` records/s to the first ``partitions`` partitions for ``seconds``."""
    from kafkawire import Producer

    p = Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=1)
    p.partitions_for(topic)
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        due = int((time.monotonic() - start) * rate)
        while i < due:
            p.send(topic, VALUE, partition=i % partitions)
            i += 1
        time.sleep(0.002)
    p.flush(30)
    p.close()
    return {"records": i}


def child_main(argv: list[str]) -> None:
    case, client, bootstrap, topic = argv[:4]
    # Both libraries loaded before the baseline, so what is measured is the client's work.
    import confluent_kafka  # noqa: F401
    import kafkawire.client.consumer  # noqa: F401
    import kafkawire.client.producer  # noqa: F401

    partitions = int(argv[4])
    if case == "consume-all":
        out = child_consume_all(client, bootstrap, topic, partitions, int(argv[5]))
    elif case == "idle":
        out = child_idle(client, bootstrap, topic, partitions, float(argv[5]))
    elif case == "feed":
        out = child_feed(bootstrap, topic, partitions, float(argv[5]), float(argv[6]))
    else:
        out = child_produce(client, bootstrap, topic, partitions, int(argv[5]), case == "produce-keyed")
    print(json.dumps(out), flush=True)


def child(*args: object, timeout: float = 600) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", *map(str, args)]
    env = None
    if args[1] == BASE:
        env = dict(os.environ, PYTHONPATH=BASELINE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        return {"problem": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the parent: broker, topics, rounds --------------------------------------------------


# Larger than the broker's log.index.interval.bytes (4,096): the append after it writes
# the partition's first index entry (see the module docstring).
INDEX_WARM_UP = b"w" * 5000


def create(admin, bootstrap: str, topic: str, partitions: int, index: bool = False) -> None:
    """Create ``topic`` and wait until every partition takes a record: Kafka answers
    CreateTopics before its partitions have leaders, and the first sends would measure
    the retries.  ``index``: also have Kafka write each partition's first index entry
    (a timed run would otherwise pay for it)."""
    from kafkawire import Producer
    from kafkawire.client.admin import NewTopic

    admin.create_topics([NewTopic(topic, partitions, 1)], timeout=120)
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for value in (INDEX_WARM_UP, b"warm-up") if index else (b"warm-up",):
            futures = [p.send(topic, value, partition=i) for i in range(partitions)]
            p.flush(120)
            for f in futures:
                f.result(0)


def topic_records(consumer, topic: str, partitions: int) -> int:
    """The records ``topic`` holds: the sum of its partitions' end offsets."""
    return sum(consumer.end_offsets([(topic, p) for p in range(partitions)], timeout=60).values())


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> int:
    """Write ``records`` records round-robin; the number the topic then holds (the
    consumers read exactly that many: a producer's duplicates count as records)."""
    from kafkawire import Consumer

    out = child("produce-rr", "kafkawire", bootstrap, topic, partitions, records)
    if "problem" in out:
        raise RuntimeError(f"filling {topic}: {out['problem']}")
    with Consumer(bootstrap_servers=bootstrap) as c:
        return topic_records(c, topic, partitions)  # nothing deleted yet: every offset from 0 is a record


def run(args: argparse.Namespace) -> dict:
    """The rounds, on a broker whose logs are in memory unless --logs-on-disk (or no
    /dev/shm to write to)."""
    memory = not args.logs_on_disk and os.access("/dev/shm", os.W_OK)
    storage = tempfile.mkdtemp(prefix="kafkawire-bench-", dir="/dev/shm") if memory else None
    args.storage = "in memory (tmpfs)" if memory else "on disk"
    try:
        return run_on(args, {"num.partitions": 1, **({"log.dirs": storage} if storage else {})})
    finally:
        if storage:
            shutil.rmtree(storage, ignore_errors=True)


def run_on(args: argparse.Namespace, broker_config: dict) -> dict:
    from kafkawire import Admin, Consumer
    from kafkawire.testing import KafkaCluster

    results: dict = {}
    n = args.partitions
    with KafkaCluster(1, broker_config=broker_config) as broker:
        bs = broker.bootstrap
        print(f"Kafka on {bs}", file=sys.stderr, flush=True)
        admin = Admin(bootstrap_servers=bs)
        offsets = Consumer(bootstrap_servers=bs)
        try:
            full, idle = f"parts-full-{uuid.uuid4().hex[:6]}", f"parts-idle-{uuid.uuid4().hex[:6]}"
            create(admin, bs, full, n)
            create(admin, bs, idle, n)
            produce_topics = {case: f"parts-{case}-{uuid.uuid4().hex[:6]}" for case in ("produce-rr", "produce-keyed")}
            for topic in produce_topics.values():
                create(admin, bs, topic, n, index=True)
            held = args.held = fill(bs, full, n, args.records)
            print(f"{full}: {held:,} records after {args.records:,} sends and {n:,} warm-up records",
                  file=sys.stderr, flush=True)
            clients = CLIENTS + [BASE] if BASELINE else CLIENTS
            for r in range(args.rounds):
                order = clients if r % 2 == 0 else clients[::-1]
                for client in order:
                    outs = {"consume-all": child("consume-all", client, bs, full, n, held)}
                    feeder = subprocess.Popen(
                        [sys.executable, os.path.abspath(__file__), "--child", "feed", "-", bs, idle, "10",
                         str(args.rate), str(args.idle_seconds + 6)], stdout=subprocess.DEVNULL)
                    try:
                        outs["idle"] = child("idle", client, bs, idle, n, args.idle_seconds)
                    finally:
                        feeder.wait(timeout=120)
                    for case, topic in produce_topics.items():
                        before = topic_records(offsets, topic, n)
                        out = outs[case] = child(case, client, bs, topic, n, args.records)
                        out["written"] = written = topic_records(offsets, topic, n) - before
                        if written < args.records and "problem" not in out:
                            out["problem"] = f"{written} of {args.records} records in the topic"
                    for case, out in outs.items():
                        results.setdefault((client, case), []).append(out)
                        print(f"  round {r + 1}/{args.rounds} {client:9s} {case:13s} {json.dumps(out)}",
                              file=sys.stderr, flush=True)
        finally:
            offsets.close()
            admin.close()
    return results


def med(outs: list[dict], key: str) -> float | None:
    vals = [o[key] for o in outs if "problem" not in o and key in o]
    return statistics.median(vals) if vals else None


def cpu_us(outs: list[dict]) -> float | None:
    """Median CPU time per record (µs): on a busy machine a steadier measure than records/s."""
    vals = [o["cpu"] * 1e6 / o["records"] for o in outs if "problem" not in o and o.get("records")]
    return statistics.median(vals) if vals else None


def rate(outs: list[dict]) -> float | None:
    vals = [o["records"] / o["seconds"] for o in outs if "problem" not in o]
    return statistics.median(vals) if vals else None


def fmt(x: float | None, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def report(results: dict, args: argparse.Namespace) -> tuple[str, dict]:
    def value(client: str, case: str, fn) -> float | None:
        outs = results.get((client, case), [])
        return fn(outs) if outs else None

    rows = []
    ratios = {}

    def row(label: str, case: str, fn, spec: str = ",.0f") -> None:
        kw, ck = value("kafkawire", case, fn), value("confluent", case, fn)
        r = ratio(kw, ck)
        base = f" {fmt(value(BASE, case, fn), spec)} |" if BASELINE else ""
        rows.append(f"| {label} | {fmt(kw, spec)} |{base} {fmt(ck, spec)} | {fmt(r, '.2f')}x |")
        if r is not None:
            ratios[f"partitions/{case}/{label.split(' (')[0].replace(' ', '-')}"] = r

    row("consume-all records/s", "consume-all", rate)
    row("consume-all CPU per record (µs)", "consume-all", cpu_us, ".2f")
    row("consume-all peak RSS growth (MB)", "consume-all", lambda o: (med(o, "peak_rss_kb") or 0) / 1024, ",.1f")
    row("idle CPU (s per s)", "idle", lambda o: med(o, "cpu_per_s"), ".3f")
    row("idle Fetch requests/s", "idle", lambda o: med(o, "fetches_per_s"), ",.1f")
    row("idle bytes per Fetch request", "idle", lambda o: med(o, "bytes_per_fetch"), ",.0f")
    row("idle records/s delivered", "idle", rate, ",.0f")
    row("idle RSS per assigned partition (bytes)", "idle", lambda o: med(o, "rss_per_partition"), ",.0f")
    row("produce round-robin records/s", "produce-rr", rate)
    row("produce round-robin CPU per record (µs)", "produce-rr", cpu_us, ".2f")
    row("produce round-robin peak RSS growth (MB)", "produce-rr",
        lambda o: (med(o, "peak_rss_kb") or 0) / 1024, ",.1f")
    row("produce keyed records/s", "produce-keyed", rate)
    row("produce keyed CPU per record (µs)", "produce-keyed", cpu_us, ".2f")
    row("produce keyed peak RSS growth (MB)", "produce-keyed",
        lambda o: (med(o, "peak_rss_kb") or 0) / 1024, ",.1f")
    from kafkawire import codec

    lines = [
        f"# {args.partitions:,} partitions: kafkawire against confluent-kafka",
        "",
        f"CPython {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; codec "
        f"{codec.IMPLEMENTATION}; one Apache Kafka node on loopback, its logs {args.storage}; "
        f"topics of {args.partitions:,} partitions, {args.records:,} records of 100-byte values; "
        f"the idle case has "
        f"{args.rate:,.0f} records/s arriving in 10 of the partitions for {args.idle_seconds:.0f} s; "
        f"the consumed topic held {args.held:,} records (sends, warm-up records and any duplicates "
        f"the producer wrote); each produce case writes to one topic warmed up before the rounds "
        f"(every partition's first index entry written); "
        f"each client in its own process; median of {args.rounds} interleaved rounds.",
        "",
        "| measure | kafkawire |" + (" kafkawire before (baseline) |" if BASELINE else "")
        + " confluent-kafka | kafkawire / confluent |",
        "|---|---|---|---|" + ("---|" if BASELINE else ""),
        *rows,
        "",
        "Bytes per Fetch request: kafkawire's sampled requests encoded at the negotiated version with "
        "their header; confluent-kafka's bytes sent over its Fetch count (librdkafka's statistics, "
        "`txbytes` and `req.Fetch`; other requests are rare in that window).",
    ]
    return "\n".join(lines) + "\n", ratios


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--records", type=int, default=None, help="records per consume/produce case (500,000)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (3)")
    parser.add_argument("--idle-seconds", type=float, default=None, help="length of the idle case (10)")
    parser.add_argument("--rate", type=float, default=2000.0, help="records/s arriving in the idle case")
    parser.add_argument("--baseline", metavar="SRC", help="also run kafkawire imported from SRC")
    parser.add_argument("--logs-on-disk", action="store_true",
                        help="keep the broker's logs on disk, not in memory (/dev/shm)")
    parser.add_argument("--quick", action="store_true", help="100,000 records, 2 rounds, 6 s idle")
    parser.add_argument("--markdown", metavar="PATH", default=os.path.join(HERE, "results", "partitions.md"))
    parser.add_argument("--json", metavar="PATH", help="also write {ratio name: ratio} to PATH")
    args = parser.parse_args()
    args.records = args.records or (100_000 if args.quick else 500_000)
    args.rounds = args.rounds or (2 if args.quick else 3)
    args.idle_seconds = args.idle_seconds or (6.0 if args.quick else 10.0)
    global BASELINE
    BASELINE = os.path.abspath(args.baseline) if args.baseline else ""
    started = time.monotonic()
    results = run(args)
    text, ratios = report(results, args)
    finish(text, started, args.markdown, args.json, ratios)


if __name__ == "__main__":
    main()
