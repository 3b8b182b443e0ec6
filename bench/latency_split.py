"""Where a produce -> acknowledgement latency goes: the client before its write, the broker,
the client after the answer.

Runs compare_latency.py's producers (same pacing, same clients) while tcpdump captures the
broker's port on the loopback interface, and splits each record's latency, from its due
time, at the kernel's timestamps of the request and of its answer (matched by correlation
id):

    before write: due time -> the request on the wire (the client's own work, and for a
                  client that writes from another thread, that thread's wake-up)
    broker:       request on the wire -> answer on the wire (the broker's turnaround, and
                  whatever keeps it from a CPU)
    after answer: answer on the wire -> the callback (the client's wake-up, read, decode,
                  and hand-over to the thread that runs the callback)

With ``--consume`` the clients are consumers (compare_latency.py's produce -> consume, the
consumer in a child process), all fed by one producer (``--producer``, confluent-kafka by
default), and each record's produce -> consume latency is split at the Produce request
and the first Fetch answer that carries it:

    before write: due time -> the Produce request on the wire (the producer's part)
    broker:       Produce request -> the Fetch answer with the record on the wire (the
                  broker's append, and the wait for a fetch to answer with it)
    after answer: Fetch answer on the wire -> the consumer's poll() returned it (its
                  wake-up, read, decode and hand-out)

Needs tcpdump (``apt-get install -y tcpdump``) and the right to capture (root).  Each
record's value carries its due time (compare_latency.value), found in the captured bytes
by its padding; for acknowledgements, records sent one per request (linger 0, one
partition, 1,000/s or one at a time) are split, others left out and counted.

With ``--replay SLICES`` the broker's part is tested apart from the clients: one Produce
request of each client, as captured, is sent again and again over one raw socket (its
correlation id rewritten), the clients' requests in turn, SLICES slices of 300 each.  Equal
turnarounds mean the bytes are not why one client's "broker" column is longer.

    .venv/bin/python bench/latency_split.py [--broker kafka] [--rate 1000] [--records 3000]
        [--rounds 2] [--clients kafkawire,confluent-kafka] [--consume [--producer P]
        [--variant NAME=CLIENT@SRC ...]] [--replay SLICES] [--warmup SECONDS] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from typing import NoReturn

import compare_latency as cl
import latency_floor as floor
from report import finish

_PCAP_NS = 0xA1B23C4D  # pcap with nanosecond timestamps (tcpdump --time-stamp-precision=nano)
_CORR = struct.Struct(">I")  # a correlation id


def packets(path: str, port: int):
    """(kernel ns, 'req' or 'ans', client port, TCP payload) for each captured segment that
    carries data, on a loopback (Ethernet-framed) capture of ``port``."""
    with open(path, "rb") as fh:
        data = fh.read()
    magic, = struct.unpack_from("<I", data, 0)
    if magic != _PCAP_NS:
        raise SystemExit(f"{path}: not a nanosecond pcap (magic {magic:#x})")
    pos = 24
    while pos + 16 <= len(data):
        sec, nsec, incl, _orig = struct.unpack_from("<IIII", data, pos)
        pkt = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        if len(pkt) < 14 + 20 or pkt[12:14] != b"\x08\x00":
            continue  # not IPv4
        ip = pkt[14:]
        ihl = (ip[0] & 15) * 4
        total, = struct.unpack_from(">H", ip, 2)
        tcp = ip[ihl:total]
        if len(tcp) < 20:
            continue
        src, dst = struct.unpack_from(">HH", tcp, 0)
        payload = tcp[(tcp[12] >> 4) * 4:]
        if not payload:
            continue
        if dst == port:
            yield sec * 1_000_000_000 + nsec, "req", src, payload
        elif src == port:
            yield sec * 1_000_000_000 + nsec, "ans", dst, payload


def _values(payload: bytes):
    """(due, seq) of each record value in a captured segment, found by its padding."""
    pad, size = cl._PAD, cl._VALUE.size
    at = payload.find(pad)
    while at >= size:
        yield cl._VALUE.unpack_from(payload, at - size)
        at = payload.find(pad, at + len(pad))


def split(pcap: str, port: int, acks: list[float], perf_to_wall_ns: int):
    """Per record sent alone in its request: (before write, broker, after answer) in ns."""
    sent: dict[tuple[int, int], tuple[int, float, int]] = {}  # (conn, corr) -> (t, due, seq)
    out, skipped = [], 0
    for t, kind, conn, payload in packets(pcap, port):
        if kind == "req":
            if len(payload) < 12:
                continue
            corr, = _CORR.unpack_from(payload, 8)  # after the size, api key and version
            found = [(due, seq) for due, seq in _values(payload) if seq != cl._WARM_SEQ]
            if len(found) == 1:
                sent[(conn, corr)] = (t, *found[0])
            elif found:
                skipped += len(found)
            continue
        if len(payload) < 8:
            continue
        corr, = _CORR.unpack_from(payload, 4)  # an answer's first frame: after its size
        hit = sent.pop((conn, corr), None)
        if hit is None:
            continue
        wrote, due, seq = hit
        if seq >= len(acks) or acks[seq] != acks[seq]:  # not acknowledged (NaN)
            skipped += 1
            continue
        due_ns = int(due * 1e9) + perf_to_wall_ns
        called = due_ns + int(acks[seq] * 1e9)
        if not due_ns <= wrote <= t <= called:
            skipped += 1  # stamped against another clock's drift or matched wrongly
            continue
        out.append((wrote - due_ns, t - wrote, called - t))
    return out, skipped


def split_consumed(pcap: str, port: int, lat: list[float], perf_to_wall_ns: int):
    """Per record consumed: (before write, broker, after answer) in ns, split at the first
    request (the Produce) and the first answer (a Fetch) that carry its value."""
    wrote: dict[int, tuple[int, float]] = {}  # seq -> (t, due)
    answered: dict[int, int] = {}  # seq -> t
    for t, kind, _conn, payload in packets(pcap, port):
        for due, seq in _values(payload):
            if kind == "req":
                wrote.setdefault(seq, (t, due))
            else:
                answered.setdefault(seq, t)
    out, skipped = [], 0
    for seq, (t_write, due) in wrote.items():
        if seq >= len(lat):
            continue  # the warm-up records
        t_answer = answered.get(seq)
        if t_answer is None or lat[seq] != lat[seq]:  # not captured, or not consumed (NaN)
            skipped += 1
            continue
        due_ns = int(due * 1e9) + perf_to_wall_ns
        seen = due_ns + int(lat[seq] * 1e9)
        if not due_ns <= t_write <= t_answer <= seen:
            skipped += 1  # a value cut across two segments, or matched wrongly
            continue
        out.append((t_write - due_ns, t_answer - t_write, seen - t_answer))
    return out, skipped


@contextlib.contextmanager
def capture(port: int, snaplen: int, pcap: str):
    """tcpdump of the broker's port on lo into ``pcap`` while the block runs."""
    dump = subprocess.Popen(
        ["tcpdump", "-i", "lo", "-n", "-s", str(snaplen), "--time-stamp-precision=nano", "-U",
         "-w", pcap, f"tcp port {port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = dump.stderr.readline()  # "listening on lo ..." once it captures
        if "listening" not in line:
            raise SystemExit(f"tcpdump did not start: {line.strip() or dump.wait(5)}")
        yield
        # libpcap hands captured packets to tcpdump in blocks, each at the latest 1 s
        # after its first packet; a block not handed over when tcpdump stops is lost
        # (a run's last records then counted as left out).
        time.sleep(1.5)
    finally:
        dump.terminate()
        dump.wait(10)


def run_one(admin, bootstrap: str, port: int, client: str, rate: str, n: int):
    topic = cl.new_topic(admin)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            pcap = os.path.join(tmp, "cap.pcap")
            with capture(port, 512, pcap):
                perf_to_wall_ns = time.time_ns() - time.perf_counter_ns()
                acks, took, cpu = cl.PRODUCERS[client](bootstrap, topic, rate, n)
            parts, skipped = split(pcap, port, acks, perf_to_wall_ns)
    finally:
        cl.drop_topic(admin, topic)
    return parts, skipped, cpu / took if took else 0.0


def run_one_consumed(admin, bootstrap: str, port: int, client: str, producer: str, rate: str, n: int,
                     src: str | None = None):
    """compare_latency's produce -> consume run (``client``'s consumer, from the kafkawire
    in ``src`` if given; ``producer`` writing) under capture: the e2e split, and the
    producing process's CPU."""
    with tempfile.TemporaryDirectory() as tmp:
        pcap = os.path.join(tmp, "cap.pcap")
        perf_to_wall_ns = time.time_ns() - time.perf_counter_ns()
        # A full segment: a Fetch answer's record sits behind its batch header.
        out = cl.e2e_run(admin, bootstrap, client, rate, n, producer=producer,
                         around=lambda: capture(port, 2048, pcap), src=src)
        if out["problem"]:
            raise SystemExit(f"{client}: {out['problem']}")
        parts, skipped = split_consumed(pcap, port, out["lat"], perf_to_wall_ns)
    return parts, skipped, out["cores"]


def captured_request(bootstrap: str, port: int, client: str, topic: str) -> bytes:
    """The last Produce request ``client`` (compare_latency's producer) wrote, sending a few
    of the bench's records to ``topic`` one at a time, as its bytes on the wire."""
    with tempfile.TemporaryDirectory() as tmp:
        pcap = os.path.join(tmp, "cap.pcap")
        with capture(port, 65535, pcap):
            cl.PRODUCERS[client](bootstrap, topic, "serial", 5)
        found = None
        for _t, kind, _conn, payload in packets(pcap, port):
            if kind == "req" and len(payload) >= 12 and cl._PAD in payload:
                size, api_key = struct.unpack_from(">ih", payload, 0)
                if api_key == 0 and size + 4 == len(payload):
                    found = payload
    if found is None:
        raise SystemExit(f"{client}: no whole Produce request of one segment captured")
    return found


def replay(bootstrap: str, requests: dict[str, bytes], slices: int, per_slice: int = 300) -> dict[str, list[int]]:
    """Round trips (ns) of each request in ``requests``, sent over one raw socket in turn
    (the order reversed every slice), the first slice a warm-up; every answer must say
    the records were written (a refused request would time something else)."""
    from kafkawire.protocol import apis

    produce = apis.get("Produce")
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=floor.ANSWER_WITHIN)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    frames = {name: bytearray(r) for name, r in requests.items()}
    versions = {name: struct.unpack_from(">h", r, 6)[0] for name, r in requests.items()}
    out: dict[str, list[int]] = {name: [] for name in requests}
    names = list(requests)
    corr = 0
    perf = time.perf_counter_ns
    try:
        for s in range(slices + 1):
            order = names if s % 2 == 0 else names[::-1]
            for _ in range(per_slice):
                for name in order:
                    corr += 1
                    frame = frames[name]
                    floor._CORRELATION.pack_into(frame, 8, corr)
                    t0 = perf()
                    sock.sendall(frame)
                    answer = _read_frame(sock)
                    took = perf() - t0
                    version = versions[name]
                    body = memoryview(answer)[4 + produce.response_header_version(version):]
                    resp = produce.decode_response(body, version)
                    code = resp.responses[0].partition_responses[0].error_code
                    if floor._CORRELATION.unpack_from(answer, 0)[0] != corr or code:
                        raise SystemExit(f"{name}: the replayed request was refused (error code {code}) "
                                         f"or answered out of turn")
                    if s:
                        out[name].append(took)
    finally:
        sock.close()
    return out


def _read_frame(sock) -> bytes:
    """The next answer frame's bytes after its size (read within the socket's timeout)."""
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head)) or _closed()
    size, = struct.unpack(">i", head)
    body = bytearray()
    while len(body) < size:
        body += sock.recv(size - len(body)) or _closed()
    return bytes(body)


def _closed() -> NoReturn:
    raise SystemExit("the broker closed the connection: it refused a replayed request")


def replay_main(broker_name: str, clients: list[str], slices: int, markdown: str | None,
                warm_up: float) -> None:
    from kafkawire import Admin

    started = time.monotonic()
    with cl.start_broker(broker_name) as broker:
        port = int(broker.bootstrap.rsplit(":", 1)[1])
        admin = Admin(bootstrap_servers=broker.bootstrap)
        cl.warm_up(admin, broker.bootstrap, clients, warm_up)
        topic = cl.new_topic(admin)
        try:
            requests = {c: captured_request(broker.bootstrap, port, c, topic) for c in clients}
            took = replay(broker.bootstrap, requests, slices)
        finally:
            cl.drop_topic(admin, topic)
            admin.close()
    us = lambda xs, q: f"{statistics.quantiles(xs, n=100)[q - 1] / 1000:.0f}"  # noqa: E731
    lines = [f"# The broker's part apart: {broker_name}, each client's Produce request replayed", "",
             f"One raw socket, the requests in turn, {slices} slices of 300 each; round trips in µs.", "",
             "| request of | Produce version | bytes | p50 | p90 |", "|---|---|---|---|---|"]
    for c in clients:
        r = requests[c]
        lines.append(f"| {c} | v{struct.unpack_from('>h', r, 6)[0]} | {len(r)} | {us(took[c], 50)} | {us(took[c], 90)} |")
    finish("\n".join(lines) + "\n", started, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cl.add_split_arguments(parser)
    parser.add_argument("--clients", default="kafkawire,confluent-kafka",
                        help=f"comma-separated from {','.join(cl.PRODUCERS)} (kafkawire,confluent-kafka); "
                             f"with --consume, consumers from {','.join(cl.CLIENTS)}")
    parser.add_argument("--consume", action="store_true",
                        help="split produce -> consume, the clients being consumers")
    parser.add_argument("--producer", default="confluent-kafka",
                        help="with --consume: the one producer for every consumer (confluent-kafka)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=CLIENT@SRC",
                        help="with --consume: one more row, NAME, the consumer CLIENT importing "
                             "kafkawire from the source tree SRC (another commit's src/, built), "
                             "interleaved with the others")
    parser.add_argument("--replay", type=int, metavar="SLICES",
                        help="replay each client's captured Produce request over one raw socket instead")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    args = parser.parse_args()
    warm = cl.WARM_UP[args.broker] if args.warmup is None else args.warmup
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    known = cl.CLIENTS if args.consume else tuple(cl.PRODUCERS)
    bad = [c for c in clients if c not in known]
    if bad:
        parser.error(f"unknown client {bad}; choose from {', '.join(known)}")
    variants: dict[str, tuple[str, str]] = {}  # row name -> (consumer client, src tree)
    for spec in args.variant:
        name, _, rest = spec.partition("=")
        client, _, src = rest.partition("@")
        if not args.consume or not name or client not in cl.CLIENTS or not os.path.isdir(src):
            parser.error(f"--variant {spec!r}: give NAME=CLIENT@SRC with --consume, CLIENT from "
                         f"{', '.join(cl.CLIENTS)} and SRC a directory")
        variants[name] = (client, os.path.abspath(src))
        clients.append(name)
    if args.producer not in cl.PRODUCERS:
        parser.error(f"unknown producer {args.producer}; choose from {', '.join(cl.PRODUCERS)}")
    if shutil.which("tcpdump") is None:
        sys.exit("latency_split.py needs tcpdump: apt-get install -y tcpdump")
    if args.replay:
        if args.consume or variants:
            parser.error("--replay replays producers' requests: no --consume or --variant")
        replay_main(args.broker, clients, args.replay, args.markdown, warm)
        return
    from kafkawire import Admin

    started = time.monotonic()
    got: dict[str, list] = {c: [] for c in clients}
    skipped = {c: 0 for c in clients}
    cores: dict[str, list[float]] = {c: [] for c in clients}
    with cl.start_broker(args.broker) as broker:
        port = int(broker.bootstrap.rsplit(":", 1)[1])
        admin = Admin(bootstrap_servers=broker.bootstrap)
        try:
            # Any client's traffic warms the broker; variants (other trees' consumers) are left out.
            cl.warm_up(admin, broker.bootstrap, [c for c in clients if c in cl.PRODUCERS], warm)
            for r in range(args.rounds):
                for client in clients if r % 2 == 0 else clients[::-1]:
                    if args.consume:
                        consumer, src = variants.get(client, (client, None))
                        parts, skip, busy = run_one_consumed(admin, broker.bootstrap, port, consumer,
                                                             args.producer, args.rate, args.records, src)
                    else:
                        parts, skip, busy = run_one(admin, broker.bootstrap, port, client, args.rate, args.records)
                    got[client] += parts
                    skipped[client] += skip
                    cores[client].append(busy)
                    print(f"  [r{r + 1}] {client:<22} {len(parts):,} records split, {skip} left out",
                          file=sys.stderr, flush=True)
        finally:
            admin.close()
    us = lambda xs: f"{statistics.median(xs) / 1000:.0f}"  # noqa: E731
    what = f"produce -> consume, every consumer fed by {args.producer}" if args.consume else "acknowledgements"
    lines = [f"# Where the latency goes: {args.broker}, {cl.rate_label(args.rate)}, {what}", "",
             f"{args.rounds} interleaved rounds of {args.records:,} records per client; medians in µs, "
             "each column's own median (they need not add up to the total's).", "",
             "| client | records | before write | broker | after answer | total | CPU |",
             "|---|---|---|---|---|---|---|"]
    for client in clients:
        parts = got[client]
        if not parts:
            lines.append(f"| {client} | 0 | - | - | - | - | |")
            continue
        lines.append(f"| {client} | {len(parts):,} | {us([p[0] for p in parts])} | {us([p[1] for p in parts])} | "
                     f"{us([p[2] for p in parts])} | {us([sum(p) for p in parts])} | "
                     f"{statistics.mean(cores[client]):.2f} |")
    if args.consume:
        lines += ["", "\"before write\": due time -> Produce request on the wire; \"broker\": Produce "
                  "request -> the Fetch answer carrying the record on the wire; \"after answer\": Fetch "
                  "answer on the wire -> the consumer's poll() returned the record.  \"CPU\": cores the "
                  "producing process kept busy while it sent (the same producer on every row)."]
    else:
        lines += ["", "\"before write\": due time -> request on the wire; \"broker\": request -> answer "
                  "on the wire; \"after answer\": answer on the wire -> callback.  \"CPU\": cores the "
                  "producing process kept busy while it sent (as in compare_latency.py)."]
    finish("\n".join(lines) + "\n", started, args.markdown)


if __name__ == "__main__":
    main()
