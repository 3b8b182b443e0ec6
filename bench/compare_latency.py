"""Latency: kafkawire (sync and asyncio) against confluent-kafka, aiokafka and kafka-python.

Produce -> acknowledgement and produce -> consume (end to end, the consumer a separate
process of the same client) for one partition, at fixed offered rates: ``serial`` (one
record at a time: send, wait for its acknowledgement, next) and 1k/s, 10k/s, 100k/s.  At a
fixed rate record i is due at t0 + i/rate and its latency counts from that due time, not
from when the client got round to sending it, so a client that falls behind shows it
(no coordinated omission); a client whose sends end more than 20% late is marked
"behind" (it cannot offer that rate).  The end-to-end clock is ``time.perf_counter()``
(CLOCK_MONOTONIC, the same in both processes): the due time travels in the value.

Two phases per rate, so every client's acknowledgement latency is measured under the same
load: first produce -> acknowledgement with no consumer running anywhere (a consumer that
fetches the moment a record lands burns CPU that one waiting ~100 ms per fetch does not,
and this is a 2-core machine), then produce -> consume with the consumer child running.
The acknowledgement phase is split into slices (one at a time many short ones, at a
fixed rate four), every client's slice in turn and the order reversed each slice, so a
burst of load on a shared machine lands on every client alike.  Interleaved: every round runs every client at every rate, the client
order alternating from round to round; percentiles are over all rounds' records pooled.
Every producer: acks=1, linger 0, 100-byte values; consumers: their defaults
(fetch_min_bytes 1, so the broker answers a waiting fetch as soon as a record lands).
Up to 1,000/s every caller sleeps between sends alike (the asyncio ones on an event loop
whose waits end to the microsecond: fine_loop), and a threaded client's callbacks run in a
thread that wakes when an answer comes: kafkawire's sender thread, and for confluent-kafka a
thread of the bench's blocked in poll() (see produce_confluent).  The acknowledgement
tables give each producing process's CPU (cores kept busy while it sent), so a client that
buys latency with a spinning core shows it.  On Apache Kafka, 30 s of unmeasured
traffic come first (warm_up): its JIT is then past the slow start that would land on the
first round's first client.

    .venv/bin/python bench/compare_latency.py [--quick] [--brokers tansu,kafka]
        [--rates serial,1000,10000,100000] [--clients ...] [--rounds R] [--warmup SECONDS]
        [--markdown PATH] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import selectors
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import host_noise
from report import finish

CLIENTS = ("kafkawire", "kafkawire.aio", "confluent-kafka", "aiokafka", "kafka-python")
# Not in the default run: confluent-kafka as this bench first drove it, its caller
# spinning on poll(0) between sends (see produce_confluent).
OPTIONAL_CLIENTS = ("confluent-kafka.spin",)
RATES = ("serial", "1000", "10000", "100000")
VALUE_SIZE = 100
SPIN = 0.0002  # the pacers' last stretch before a due time, turns of sleep(0) finer than a sleep
WARMUP = 20  # serial records first (connections, metadata), left out of the figures
_VALUE = struct.Struct(">dI")  # due time (perf_counter seconds), sequence; padded
_PAD = b"x" * (VALUE_SIZE - _VALUE.size)
_WARM_SEQ = 0xFFFFFFFF
BEHIND = 1.2  # sends that end later than 1.2x the offered duration: the rate is not met
GIVE_UP = 1.0  # a client this many seconds behind its schedule stops sending (it is behind)
IDLE_END = 3.0  # a consumer that saw records and then none for this long has them all
WARM_UP = {"kafka": 30.0, "tansu": 0.0}  # seconds of unmeasured traffic first (warm_up)


def value(due: float, seq: int) -> bytes:
    return _VALUE.pack(due, seq) + _PAD


RATE_SLICES = 4  # acknowledgement slices per round at a fixed rate (ack_slices)


def ack_slices(rate: str, quick: bool) -> tuple[int, int]:
    """(slices, records per slice) of the acknowledgement phase, interleaved: one at a
    time, many short slices (the serial p50 is a fraction of a millisecond, so a few
    seconds of a neighbour's load sway one long run); at a fixed rate the usual length in
    RATE_SLICES slices, so that what the phase before leaves behind (consumer children
    exiting, topics being deleted) does not all land on the round's first client."""
    if rate == "serial":
        return (6, 350) if quick else (8, 750)
    return RATE_SLICES, records_for(rate, quick) // RATE_SLICES


def records_for(rate: str, quick: bool) -> int:
    """Records of one produce -> consume run (and of an acknowledgement slice at a rate)."""
    if rate == "serial":
        return 500 if quick else 2000
    r = int(rate)
    seconds = 1.0 if quick else 2.0
    return max(200, min(int(r * seconds), 200_000))


# ---------------------------------------------------------------------------------------
# Producers: each returns (ack latencies in seconds, seconds the sends took, CPU seconds
# the whole process spent meanwhile: every thread, the client's own and the pacer's)
# ---------------------------------------------------------------------------------------


class Pacer:
    """Due times at a fixed rate (None: serial) and the acknowledgement latencies."""

    def __init__(self, rate: str, n: int):
        self.n = n
        self.interval = None if rate == "serial" else 1.0 / int(rate)
        self.acks = [math.nan] * n
        self.start = 0.0

    def slots(self):
        """(i, due time) of each record at the fixed rate; ends early once the client is
        GIVE_UP seconds behind (checked every 512 records)."""
        for i in range(self.n):
            due = self.start + i * self.interval
            if not i & 511 and time.perf_counter() - due > GIVE_UP:
                return
            yield i, due

    @staticmethod
    def nap(left: float) -> float:
        """How long to sleep with ``left`` seconds to a due time: up to SPIN before it, then
        0 (a turn of sleep(0)), for a sleep ends late by about the timer's slack."""
        return left - SPIN if left > SPIN else 0

    def wait_until(self, t: float, idle=None) -> None:
        """Sleep to ``t`` (``idle(seconds)`` serves a client's callbacks meanwhile); the
        last 200 µs, finer than a sleep, spin on sleep(0), which lets the client's own
        threads have the GIL (a bare spin would keep them waiting a switch interval)."""
        while True:
            left = t - time.perf_counter()
            if left <= 0:
                return
            (idle or time.sleep)(self.nap(left))

    def callback(self, i: int, due: float):
        acks = self.acks
        perf = time.perf_counter

        def done(*_args) -> None:
            acks[i] = perf() - due

        return done


def _sync_paced(rate: str, n: int, send_and_wait, send_with_callback, idle=None, warm=None):
    """The threaded producers' loop: ``send_and_wait(value)`` one at a time, else
    ``send_with_callback(value, done)`` at each due time; ``warm()`` runs after the
    warm-up records."""
    for _ in range(WARMUP):
        send_and_wait(value(0.0, _WARM_SEQ))
    if warm is not None:
        warm()
    pace, perf = Pacer(rate, n), time.perf_counter
    cpu = time.process_time()
    pace.start = perf()
    if pace.interval is None:
        for i in range(n):
            due = perf()
            send_and_wait(value(due, i))
            pace.acks[i] = perf() - due
    else:
        for i, due in pace.slots():
            pace.wait_until(due, idle)
            send_with_callback(value(due, i), pace.callback(i, due))
    return pace.acks, perf() - pace.start, time.process_time() - cpu


def produce_kafkawire(bootstrap: str, topic: str, rate: str, n: int):
    from kafkawire import Producer

    p = Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    try:
        out = _sync_paced(rate, n, lambda v: p.send(topic, v, partition=0).result(30),
                          lambda v, done: p.send(topic, v, partition=0, callback=done))
        p.flush(60)
        return out
    finally:
        p.close(10)


def produce_kafkawire_aio(bootstrap: str, topic: str, rate: str, n: int):
    from kafkawire.aio import AsyncProducer

    return _aio_paced(lambda: AsyncProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0),
                      lambda p: p.close(10), topic, rate, n, lambda f, cb: f.add_callback(cb))


def produce_aiokafka(bootstrap: str, topic: str, rate: str, n: int):
    from aiokafka import AIOKafkaProducer

    return _aio_paced(lambda: AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0),
                      lambda p: p.stop(), topic, rate, n,
                      lambda f, cb: f.add_done_callback(lambda _f: cb()))


def _aio_paced(make, stop, topic: str, rate: str, n: int, on_done):
    """The asyncio producers' loop, in a new event loop: ``make()`` the producer, ``await
    p.send(...)`` gives an awaitable future, ``on_done(future, callback)``, ``stop(p)``."""

    async def run():
        p = make()
        await p.start()
        try:
            for _ in range(WARMUP):
                await (await p.send(topic, value(0.0, _WARM_SEQ), partition=0))
            pace, perf = Pacer(rate, n), time.perf_counter
            cpu = time.process_time()
            pace.start = perf()
            if pace.interval is None:
                for i in range(n):
                    due = perf()
                    await (await p.send(topic, value(due, i), partition=0))
                    pace.acks[i] = perf() - due
            else:
                for i, due in pace.slots():
                    # As Pacer.wait_until; never a bare spin, for the client's own tasks run
                    # only while this one awaits.
                    left = due - perf()
                    while left > 0:
                        await asyncio.sleep(pace.nap(left))
                        left = due - perf()
                    on_done(await p.send(topic, value(due, i), partition=0), pace.callback(i, due))
            took, cpu = perf() - pace.start, time.process_time() - cpu
            await p.flush()
            return pace.acks, took, cpu
        finally:
            await stop(p)

    with asyncio.Runner(loop_factory=fine_loop) as runner:
        return runner.run(run())


def fine_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose waits end to the microsecond, for the pacer's sleeps between
    sends.  The default selector (epoll) rounds every wait up to whole milliseconds, so
    at 1,000/s a sleeping pacer would send up to 1 ms late; it used to spin on sleep(0)
    instead, a whole core the threaded callers' pacers leave to the broker.  select()'s
    cost grows with the descriptors it watches, and a producer watches a few."""
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


def produce_confluent(bootstrap: str, topic: str, rate: str, n: int, spin: bool = False):
    """Where the caller sleeps between sends (1 ms or more apart: up to 1,000/s), the
    delivery reports are served by a thread of the bench's own, blocked in ``poll()`` until
    one is ready: a thread that wakes when an answer comes, as kafkawire's sender thread
    does.  Closer together no threaded caller sleeps (the pacer spins its last 200 µs), and
    the caller serves them itself with poll(0) after each send: a reporting thread would
    then wait for the GIL as kafkawire's sender does (measured: p50 0.3 ms on Kafka, 323 ms
    on Tansu at 10,000/s).
    ``spin`` (client ``confluent-kafka.spin``): the caller serves them itself at every rate,
    as this bench first did.  poll() takes whole milliseconds (a shorter timeout is 0), so
    below 1 ms to the next due time its wait is a spin on poll(0): a whole core, which on
    this 2-vCPU VM also shortens the broker's own turnaround (see bench/README.md)."""
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})

    def send_and_wait(v: bytes) -> None:
        delivered: list = []
        p.produce(topic, v, partition=0, on_delivery=lambda *_a: delivered.append(1))
        while not delivered:
            p.poll(1.0)  # returns as soon as the delivery report is served

    def send_with_callback(v: bytes, done) -> None:
        p.produce(topic, v, partition=0, on_delivery=done)
        if server is None:
            p.poll(0)

    stop = threading.Event()

    def serve_reports() -> None:
        while not stop.is_set():
            p.poll(0.05)  # the GIL is free while it waits

    server = None
    if rate != "serial" and int(rate) <= 1000 and not spin:
        server = threading.Thread(target=serve_reports, name="confluent-reports", daemon=True)
    try:
        # The server starts after the warm-up, whose send_and_wait polls in the caller.
        out = _sync_paced(rate, n, send_and_wait, send_with_callback,
                          None if server else p.poll, server and server.start)
        p.flush(60)
        return out
    finally:
        stop.set()
        if server is not None and server.is_alive():
            server.join(5)
        p.flush(10)


def produce_kafka_python(bootstrap: str, topic: str, rate: str, n: int):
    import kafka

    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    try:
        out = _sync_paced(rate, n, lambda v: p.send(topic, v, partition=0).get(30),
                          lambda v, done: p.send(topic, v, partition=0).add_callback(done))
        p.flush(60)
        return out
    finally:
        p.close(10)


PRODUCERS = {
    "kafkawire": produce_kafkawire,
    "kafkawire.aio": produce_kafkawire_aio,
    "confluent-kafka": produce_confluent,
    "confluent-kafka.spin": lambda *a: produce_confluent(*a, spin=True),
    "aiokafka": produce_aiokafka,
    "kafka-python": produce_kafka_python,
}


# ---------------------------------------------------------------------------------------
# Consumers (a child process each): read n records, write each one's latency
# ---------------------------------------------------------------------------------------


def consume(client: str, bootstrap: str, topic: str, n: int, deadline: float) -> list[float]:
    """Poll until ``n`` measured records arrived (or ``deadline``); print "ready" once the
    first poll returned, so the parent starts producing into a consumer already fetching."""
    lat = [math.nan] * n
    got = [0]
    perf = time.perf_counter
    last = [math.inf]  # when the latest record arrived

    def seen(values) -> None:
        now = perf()
        if values:
            last[0] = now
        for v in values:
            due, seq = _VALUE.unpack_from(v)
            if seq != _WARM_SEQ and seq < n:
                lat[seq] = now - due
                got[0] += 1

    def ready() -> None:
        print("ready", flush=True)

    if client == "kafkawire":
        from kafkawire import Consumer

        c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        c.assign([(topic, 0)])
        c.poll(0.1)
        ready()
        while got[0] < n and perf() < deadline and perf() - last[0] < IDLE_END:
            seen([r.value for r in c.poll(0.5)])
        c.close()
    elif client == "kafkawire.aio":
        from kafkawire.aio import AsyncConsumer

        async def run() -> None:
            c = AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
            await c.start()
            c.assign([(topic, 0)])
            await c.poll(0.1)
            ready()
            while got[0] < n and perf() < deadline and perf() - last[0] < IDLE_END:
                seen([r.value for r in await c.poll(0.5)])
            await c.close()

        asyncio.run(run())
    elif client == "confluent-kafka":
        import confluent_kafka

        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "latency",
                                      "enable.auto.commit": False,
                                      "auto.offset.reset": "earliest"})
        c.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        c.poll(0.1)
        ready()
        while got[0] < n and perf() < deadline and perf() - last[0] < IDLE_END:
            # poll() returns at the first record (consume(n, t) would wait for n or t)
            first = c.poll(0.5)
            if first is not None:
                seen([m.value() for m in [first, *c.consume(1000, 0)] if m.error() is None])
        c.close()
    elif client == "aiokafka":
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run() -> None:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False)
            await c.start()
            c.assign([TopicPartition(topic, 0)])
            await c.getmany(timeout_ms=100)
            ready()
            while got[0] < n and perf() < deadline and perf() - last[0] < IDLE_END:
                for records in (await c.getmany(timeout_ms=500)).values():
                    seen([r.value for r in records])
            await c.stop()

        asyncio.run(run())
    elif client == "kafka-python":
        import kafka

        c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
        c.assign([kafka.TopicPartition(topic, 0)])
        c.poll(timeout_ms=100)
        ready()
        while got[0] < n and perf() < deadline and perf() - last[0] < IDLE_END:
            for records in c.poll(timeout_ms=500).values():
                seen([r.value for r in records])
        c.close()
    else:
        raise SystemExit(f"unknown client {client}")
    return lat


class ConsumerChild:
    """``python compare_latency.py --consume ...`` in its own process."""

    def __init__(self, client: str, bootstrap: str, topic: str, n: int, timeout: float,
                 src: str | None = None):
        self.out = tempfile.NamedTemporaryFile(prefix="latency-", suffix=".json", delete=False)
        self.out.close()
        cmd = [sys.executable, os.path.abspath(__file__), "--consume", client, bootstrap, topic,
               str(n), str(timeout), self.out.name]
        # ``src``: import kafkawire from that tree instead (another version, same run).
        env = None if src is None else dict(os.environ, PYTHONPATH=src)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        self.ready = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        for line in self.proc.stdout:
            if line.strip() == "ready":
                self.ready.set()

    def result(self, timeout: float) -> list[float] | None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        try:
            with open(self.out.name) as fh:
                return [math.nan if x is None else x for x in json.load(fh)]
        except (OSError, ValueError):
            return None

    def discard(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.unlink(self.out.name)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------
# One run, the rounds, the report
# ---------------------------------------------------------------------------------------


def offered_seconds(rate: str, n: int) -> float:
    return n * (0 if rate == "serial" else 1 / int(rate))


def is_behind(rate: str, n: int, acks: list[float], took: float) -> bool:
    """Sends ended late, or the client gave up (records never sent)."""
    return rate != "serial" and (took > BEHIND * offered_seconds(rate, n)
                                 or any(math.isnan(a) for a in acks))


def new_topic(admin) -> str:
    topic = f"lat-{uuid.uuid4().hex[:10]}"
    admin.create_topics([topic], num_partitions=1, replication_factor=1, timeout=30)
    return topic


def drop_topic(admin, topic: str) -> None:
    try:
        admin.delete_topics([topic], timeout=30, raise_on_error=False)
    except Exception:  # noqa: BLE001 - freeing broker memory is best effort
        pass


def ack_run(bootstrap: str, topic: str, client: str, rate: str, n: int) -> dict:
    """Produce -> acknowledgement alone: no consumer of any client is running."""
    out = {"lat": [], "problem": None, "behind": False}
    try:
        acks, took, cpu = PRODUCERS[client](bootstrap, topic, rate, n)
        out["lat"] = acks
        out["behind"] = is_behind(rate, n, acks, took)
        out["cpu"] = (cpu, took)
    except Exception as exc:  # noqa: BLE001 - a failing client is reported, not fatal
        out["problem"] = f"{type(exc).__name__}: {exc}"[:160]
    return out


def e2e_run(admin, bootstrap: str, client: str, rate: str, n: int, producer: str | None = None,
            around=contextlib.nullcontext, src: str | None = None) -> dict:
    """Produce -> consume: the client's consumer in a child process, fetching before the
    first record is sent, fed by the client's own producer (or ``producer``); the
    producer's acknowledgements are not reported here, its CPU is ("cores").  ``around()``
    is a context entered from the first send until the consumer is done; ``src``: the
    consumer imports kafkawire from that source tree."""
    topic = new_topic(admin)
    timeout = 60 + 3 * offered_seconds(rate, n)
    child = ConsumerChild(client.removesuffix(".spin"), bootstrap, topic, n, timeout, src)
    out = {"lat": [], "problem": None, "behind": False, "cores": 0.0}
    try:
        if not child.ready.wait(60):
            out["problem"] = "consumer not ready"
            return out
        time.sleep(0.2)
        with around():
            acks, took, cpu = PRODUCERS[producer or client](bootstrap, topic, rate, n)
            e2e = child.result(timeout)
        out["behind"] = is_behind(rate, n, acks, took)
        out["cores"] = cpu / took if took else 0.0
        if e2e is None:
            out["problem"] = "consumer failed"
        else:
            out["lat"] = e2e
    except Exception as exc:  # noqa: BLE001 - a failing client is reported, not fatal
        out["problem"] = f"{type(exc).__name__}: {exc}"[:160]
    finally:
        child.discard()
        drop_topic(admin, topic)
    return out


def percentiles(samples: list[float]) -> dict | None:
    vals = sorted(s for s in samples if not math.isnan(s))
    if not vals:
        return None

    def q(p: float) -> float:
        return vals[min(len(vals) - 1, int(p * len(vals)))]

    return {"p50": q(0.5), "p99": q(0.99), "p99.9": q(0.999), "max": vals[-1],
            "n": len(vals), "lost": len(samples) - len(vals)}


def warm_up(admin, bootstrap: str, clients: list[str], seconds: float) -> None:
    """Unmeasured traffic before the first round, for ``seconds``: a fresh Apache Kafka
    answers slower while its JIT compiles the produce and fetch paths (records reached a
    consumer 2 ms late at 1,000/s for the first 12 s or more, see consumer_stages.py), and
    the first round's first client would take all of that.  Each pass: every client one
    at a time and at 1,000/s, then produce -> consume at 1,000/s."""
    if seconds <= 0:
        return
    started = time.monotonic()
    passes = 0
    while time.monotonic() - started < seconds:
        topic = new_topic(admin)
        try:
            for client in clients:
                for rate, n in (("serial", 500), ("1000", 1000)):
                    o = ack_run(bootstrap, topic, client, rate, n)
                    if o["problem"]:
                        raise RuntimeError(f"warm-up: {client} at {rate}: {o['problem']}")
        finally:
            drop_topic(admin, topic)
        for client in clients:
            e2e_run(admin, bootstrap, client, "1000", 1000)
        passes += 1
    print(f"  warm-up: {passes} pass(es) in {time.monotonic() - started:.0f}s, not measured",
          file=sys.stderr, flush=True)


def start_broker(name: str):
    if name == "tansu":
        from kafkawire.testing import TansuBroker

        return TansuBroker()
    from kafkawire.testing import KafkaCluster

    return KafkaCluster(1)


def run(args: argparse.Namespace) -> dict:
    """results[(broker, rate, client)][kind] for kind "ack" and "e2e": the pooled
    latencies, problems, and how many runs were behind out of how many."""
    from kafkawire import Admin

    results: dict = {}

    def add(broker_name: str, r: int, rate: str, client: str, kind: str, o: dict) -> None:
        agg = results.setdefault((broker_name, rate, client), {}).setdefault(
            kind, {"lat": [], "problems": set(), "behind": 0, "runs": 0, "cpu": 0.0, "wall": 0.0})
        agg["lat"] += o["lat"]
        if "cpu" in o:
            agg["cpu"] += o["cpu"][0]
            agg["wall"] += o["cpu"][1]
        agg["runs"] += 1
        agg["behind"] += o["behind"]
        if o["problem"]:
            agg["problems"].add(o["problem"])
        p = percentiles(o["lat"])
        print(f"  [{broker_name} r{r + 1} {rate:>6}] {client:<16} {kind:<3} "
              f"p50 {ms(p, 'p50')} p99 {ms(p, 'p99')}"
              f"{'  BEHIND' if o['behind'] else ''}"
              f"{'  ' + o['problem'] if o['problem'] else ''}",
              file=sys.stderr, flush=True)

    for broker_name in args.brokers:
        with start_broker(broker_name) as broker:
            bootstrap = broker.bootstrap
            print(f"{broker_name} on {bootstrap}", file=sys.stderr, flush=True)
            admin = Admin(bootstrap_servers=bootstrap)
            try:
                warm_up(admin, bootstrap, args.clients, args.warm_up[broker_name])
                for r in range(args.rounds):
                    order = args.clients if r % 2 == 0 else args.clients[::-1]
                    for rate in args.rates:
                        # Phase 1: acknowledgements, no consumer running; a topic per
                        # client, shared by its slices.
                        topics = {client: new_topic(admin) for client in order}
                        slices, per_slice = ack_slices(rate, args.quick)
                        try:
                            for s in range(slices):
                                for client in (order if s % 2 == 0 else order[::-1]):
                                    add(broker_name, r, rate, client, "ack",
                                        ack_run(bootstrap, topics[client], client, rate, per_slice))
                        finally:
                            for topic in topics.values():
                                drop_topic(admin, topic)
                        # Phase 2: produce -> consume, each client with its consumer.
                        n = records_for(rate, args.quick)
                        for client in order:
                            add(broker_name, r, rate, client, "e2e",
                                e2e_run(admin, bootstrap, client, rate, n))
            finally:
                admin.close()
    return results


def ms(p: dict | None, key: str) -> str:
    return "   -  " if p is None else f"{p[key] * 1000:6.3f}"


def add_split_arguments(parser: argparse.ArgumentParser) -> None:
    """The run options of the tools that split these runs' latency (latency_split.py,
    sched_split.py): which broker, rate, records and rounds, and the warm-up."""
    parser.add_argument("--broker", default="kafka", choices=("kafka", "tansu"))
    parser.add_argument("--rate", default="1000", help="serial or records/s (1000)")
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (2)")
    parser.add_argument("--warmup", type=float, metavar="SECONDS",
                        help="unmeasured traffic first, as compare_latency.py's (Kafka "
                             f"{WARM_UP['kafka']:g}, Tansu {WARM_UP['tansu']:g})")


def rate_label(rate: str) -> str:
    return "one at a time" if rate == "serial" else f"{int(rate):,}/s"


def warm_up_words(args: argparse.Namespace) -> str:
    warmed = [f"{b}: whole passes for at least {args.warm_up[b]:g} s" for b in args.brokers if args.warm_up[b] > 0]
    return f"unmeasured warm-up traffic first ({', '.join(warmed)}); " if warmed else ""


def report(results: dict, args: argparse.Namespace) -> tuple[list[str], dict]:
    serial_slices, serial_per_slice = ack_slices("serial", args.quick)
    out = [
        "# Latency: produce -> acknowledgement and produce -> consume",
        "",
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs; {warm_up_words(args)}{args.rounds} interleaved rounds; milliseconds over all rounds' "
        f"records pooled; one partition, {VALUE_SIZE}-byte values, acks=1, linger 0. "
        "Acknowledgements are measured with no consumer running, in interleaved slices (one "
        f"at a time {serial_slices} slices of {serial_per_slice:,} records per round, at a fixed "
        f"rate {RATE_SLICES} slices), "
        "produce -> consume in a later phase with the consumer a separate process of the "
        "same client. \"behind\": the client's sends ended "
        f"more than {BEHIND:g}x later than the offered rate allows (latency then grows with "
        "the run: it cannot offer that rate).",
        "",
        f"The machine (bench/host_noise.py: a busy loop on every CPU, nothing else running), "
        f"before the run: {host_noise.words(args.noise[0])}; after it: {host_noise.words(args.noise[1])}. "
        "A record that meets such a stop is late by it, whatever the client.",
        "",
    ]
    ratios: dict = {}
    for broker in args.brokers:
        for kind, title in (("ack", "produce -> acknowledgement"), ("e2e", "produce -> consume")):
            out += [f"## {broker}: {title}", "",
                    "| rate | client | p50 | p99 | p99.9 | max | records | p50 vs confluent | p99 vs confluent"
                    f"{' | CPU' if kind == 'ack' else ''} | |",
                    f"|---|---|---|---|---|---|---|---|---|{'---|' if kind == 'ack' else ''}---|"]
            for rate in args.rates:
                ref = results.get((broker, rate, "confluent-kafka"), {}).get(kind)
                ref = percentiles(ref["lat"]) if ref else None
                for client in args.clients:
                    agg = results.get((broker, rate, client), {}).get(kind)
                    p = percentiles(agg["lat"]) if agg else None
                    note = []
                    if agg and agg["behind"]:
                        note.append(f"behind in {agg['behind']}/{agg['runs']} runs")
                    if agg and agg["problems"]:
                        note.append("; ".join(sorted(agg["problems"])))
                    if p and p["lost"]:
                        note.append(f"{p['lost']:,} not sent or not measured")
                    cpu = ""
                    if kind == "ack":
                        cpu = f" {agg['cpu'] / agg['wall']:.2f} |" if agg and agg["wall"] else " |"
                    if p is None:
                        out.append(f"| {rate_label(rate)} | {client} | - | - | - | - | 0 | | |{cpu} {' '.join(note)} |")
                        continue
                    vs = ["", ""]
                    if ref and client != "confluent-kafka":
                        vs = [f"{p[q] / ref[q]:.2f}x" for q in ("p50", "p99")]
                        if client.startswith("kafkawire"):
                            # higher is better for the floors: confluent's / kafkawire's
                            for q in ("p50", "p99"):
                                ratios[f"{broker}/{kind}/{rate}/{client}/{q}/vs-confluent"] = round(
                                    ref[q] / p[q], 3)
                    out.append(
                        f"| {rate_label(rate)} | {client} | {p['p50'] * 1e3:.3f} | {p['p99'] * 1e3:.3f} | "
                        f"{p['p99.9'] * 1e3:.3f} | {p['max'] * 1e3:.3f} | {p['n']:,} | {vs[0]} | {vs[1]} |{cpu} "
                        f"{'; '.join(note)} |")
            out.append("")
    out.append("\"vs confluent\": the client's latency / confluent-kafka's at the same rate "
               "(below 1 is faster). \"CPU\": the cores the producing process kept busy while "
               "it sent (its CPU time / the sends' wall time: every thread, the client's and the "
               "pacer's, whose last 200 µs before each due time is a spin).")
    return out, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="Tansu only, serial and 1k/s, kafkawire and confluent-kafka, 2 rounds, short runs")
    parser.add_argument("--brokers", help="comma-separated: tansu,kafka (tansu,kafka)")
    parser.add_argument("--rates", help=f"comma-separated from {','.join(RATES)}")
    parser.add_argument("--clients", help=f"comma-separated from {','.join(CLIENTS + OPTIONAL_CLIENTS)}"
                        f" ({','.join(CLIENTS)})")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (3; quick 2)")
    parser.add_argument("--warmup", type=float, metavar="SECONDS",
                        help=f"unmeasured traffic before the first round on each broker "
                             f"(Kafka {WARM_UP['kafka']:g}, Tansu {WARM_UP['tansu']:g}: no JIT to warm)")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables to PATH")
    parser.add_argument("--json", metavar="PATH", help="write kafkawire's ratios to PATH")
    parser.add_argument("--consume", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        client, bootstrap, topic, n, timeout, path = args.consume
        lat = consume(client, bootstrap, topic, int(n), time.perf_counter() + float(timeout))
        with open(path, "w") as fh:
            json.dump([None if math.isnan(x) else x for x in lat], fh)
        return
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    args.brokers = split(args.brokers or ("tansu" if args.quick else "tansu,kafka"))
    args.rates = split(args.rates or ("serial,1000" if args.quick else ",".join(RATES)))
    args.clients = split(args.clients or ("kafkawire,kafkawire.aio,confluent-kafka" if args.quick
                                          else ",".join(CLIENTS)))
    args.rounds = args.rounds or (2 if args.quick else 3)
    args.warm_up = {b: WARM_UP[b] if args.warmup is None else args.warmup for b in ("tansu", "kafka")}
    for name, got, known in (("broker", args.brokers, ("tansu", "kafka")), ("rate", args.rates, RATES),
                             ("client", args.clients, CLIENTS + OPTIONAL_CLIENTS)):
        bad = [x for x in got if x not in known]
        if bad:
            parser.error(f"unknown {name} {bad}; choose from {', '.join(known)}")
    started = time.monotonic()
    before = host_noise.measure()
    results = run(args)
    args.noise = (before, host_noise.measure())
    lines, ratios = report(results, args)
    text = "\n".join(lines) + "\n"
    finish(text, started, args.markdown, args.json, ratios)


if __name__ == "__main__":
    main()
