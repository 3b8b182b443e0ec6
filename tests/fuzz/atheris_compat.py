"""Differential fuzzing of the drop-ins against their hosts: the same bytes to the host's
own record reader and consumer (kafka-python's or aiokafka's classes) and to the
drop-in's; both must give the same batches and records, or raise the same exception
class, with the same message where the hosts' own tests pin one.

    .venv/bin/python tests/fuzz/atheris_compat.py kafka-python -max_total_time=600 [corpus]
    .venv/bin/python tests/fuzz/atheris_compat.py aiokafka --loop --seconds 600 [--seed N]
        [--keep-going]

With atheris (``make fuzz`` installs it) libFuzzer drives ``check``; ``--loop`` drives
it with a plain random mutation loop instead (no atheris needed; seeded, and it prints
the seed).  A difference raises AssertionError naming the input; with ``--keep-going``
the loop counts the differences by kind and lists them at the end (exit status 1).

Exception classes are compared exactly: where a host lets struct.error, AssertionError,
a compression library's own exception ... out for damaged data, the drop-in raises the
same (it hands data kafkawire's decoder refuses to the host's own classes,
kafkawire.compat._pristine).  Differences kept on purpose, not counted (each one line why,
each pinned for both hosts in tests/compat/test_kept_differences.py but the last two):

* the drop-in raises the host's corrupt-record error where the host would inflate a
  payload past 64 MiB (codec.DEFAULT_MAX_DECOMPRESSED_SIZE; "max_decompressed_size" in
  its message): a few kilobytes could otherwise exhaust the process's memory;
* the drop-in raises the host's corrupt-record error where the host's walk over entry or
  inner-message sizes comes back to where it was ("lead back to" in its message): the
  host loops for ever there (such inputs are also counted as host hangs, not compared);
* a magic-2 record whose attributes byte has its high bit set (an int8 in Kafka's
  format, unused, always 0) reads as Kafka reads it: both hosts read that byte as a
  varint and misread the rest of the record (their corrupt-record error); following them
  would take a look at every record's first bytes on the fast path, or a codec option;
* aiokafka runs its pure-Python record classes (its Cython ones crash the interpreter on
  some damaged input; KAFKAWIRE_FUZZ_CYTHON_HOST=1 runs them, an input its two readers
  read differently then skipped);
* aiokafka's int64 wrap-around of a wrapper's offset near -2**63 is not followed.
"""

from __future__ import annotations

import faulthandler
import os
import random
import signal
import struct
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from atheris_codec import fix_crcs  # noqa: E402 - beside this file

from kafkawire import compression  # noqa: E402

# Messages the hosts' own tests match, compared word for word (others: class only).
PINNED = ("Value of compressed message is None", "Unrecognized compression type",
          "Unknown compression codec", "compression codec not found",
          "Record size is less than the minimum record overhead", "Invalid CRC",
          "failed crc check")


class HostHang(BaseException):
    """The host's reader did not end (a BaseException: the walks report Exceptions)."""


HOST_SECONDS = 10
host_hangs = 0  # inputs the host's reader did not finish, not compared


def _on_alarm(signum, frame):
    raise HostHang


def _host(fn, *args):
    """``fn(*args)`` for the host's side, ended by HostHang after HOST_SECONDS: kafka-python
    3.0.12's legacy reader loops forever on an inner message whose size is -12 (its walk
    then does not move); the drop-in's must not, and is not timed."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, HOST_SECONDS)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# The drop-in's messages for the differences kept on purpose (see the docstring).
KEPT = ("max_decompressed_size", "lead back to")


def _error(exc) -> tuple:
    message = str(exc)
    if any(k in message for k in KEPT):
        return ("kept",)
    return ("error", type(exc).__module__ + "." + type(exc).__qualname__,
            message if any(p in message for p in PINNED) else None)


def _varint(buf, pos: int) -> tuple[int, int]:
    """A zigzag varint of ``buf`` at ``pos``: (value, position after it)."""
    shift = raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos


def v2_attributes_high(body: bytes) -> bool:
    """Whether a magic-2 batch in ``body`` has a record whose attributes byte has its high
    bit set (walking the records by their lengths, as Kafka does)."""
    pos = 0
    while len(body) - pos >= 61:
        size = struct.unpack_from(">i", body, pos + 8)[0]
        end = pos + 12 + size
        if size < 49 or end > len(body):
            return False
        if body[pos + 16] == 2:
            codec_id = body[pos + 22] & 0x07
            try:
                records = (body[pos + 61:end] if not codec_id else compression.decompress(
                    codec_id, body[pos + 61:end], 1 << 26))
                at = 0
                while at < len(records):
                    length, at = _varint(records, at)
                    if records[at] & 0x80:
                        return True
                    at += max(length, 1)
            except Exception:  # noqa: BLE001 - not readable that far: not this case
                pass
        pos = end
    return False


def _same(own: list, ours: list, data: bytes = b"") -> bool:
    """The same outcome, or one of the differences kept on purpose: the drop-in ends
    where the host raised too (or would not have ended), after the same records; or a
    record's attributes byte with its high bit set (see the docstring)."""
    if own == ours:
        return True
    if own and own[-1][0] == "error" and own[-1][1].endswith(
            (".CorruptRecordError", ".CorruptRecordException")) and v2_attributes_high(data):
        return True
    return bool(ours) and ours[-1] == ("kept",) and own[:len(ours) - 1] == ours[:-1] and (
        len(own) >= len(ours) and own[len(ours) - 1][0] in ("error", "kept"))


def _seeds(build) -> list[bytes]:
    out = []
    for magic, codec_id in [(2, c) for c in (0, 1, 2, 3, 4)] + [
            (m, c) for m in (0, 1) for c in (0, 1, 2)] + [(1, 3)]:
        try:
            out.append(build(magic, codec_id))
        except Exception:  # noqa: BLE001 - a host that does not write that combination
            pass
    return out


# ---- kafka-python ---------------------------------------------------------------------

def _kafka_python():
    import kafka.record.memory_records as k_memory
    from kafka.consumer.fetcher import Fetcher
    from kafka.structs import TopicPartition

    import kafkawire.compat.kafka_python as dropin

    own_memory = k_memory.MemoryRecords
    own_builder = k_memory.MemoryRecordsBuilder
    tp = TopicPartition("t", 0)

    def normalise(outcome):
        return outcome

    def walk(memory_records, data):
        out = []
        try:
            m = memory_records(data)
            while m.has_next():
                b = m.next_batch()
                if b is None:
                    break
                out.append(("batch", b.magic, b.base_offset, b.validate_crc()))
                for r in b:
                    out.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                                list(r.headers), r.checksum, r.validate_crc()))
            out.append(("valid", m.valid_bytes()))  # after the batches, as the fetcher asks
        except Exception as exc:  # noqa: BLE001 - the class is the result
            out.append(normalise(_error(exc)))
        return out

    def fetch(memory_records, data, check_crcs):
        out = []
        try:
            pr = Fetcher.PartitionRecords(0, tp, memory_records(data), check_crcs=check_crcs)
            while pr:
                out += [tuple(r) for r in pr.take(7)]
        except Exception as exc:  # noqa: BLE001
            out.append(normalise(_error(exc)))
        return out

    def build(magic, codec_id):
        b = own_builder(magic, codec_id, 1 << 20)
        for i in range(5):
            b.append(1_700_000_000_000 + i, None if i % 3 == 0 else b"k%d" % i,
                     b"value-%d" % i * (1 + i), [("h", b"x")] if magic == 2 and i % 2 else [])
        b.close()
        return bytes(b.buffer())

    def compare(data, flags):
        global host_hangs
        try:
            own = _host(walk, own_memory, data)
            check_crcs = bool(flags & 0x40)
            own_fetch = _host(fetch, own_memory, data, check_crcs)
        except HostHang:
            host_hangs += 1
            return
        ours = walk(dropin.MemoryRecords, data)
        if not _same(own, ours, data):
            raise AssertionError(f"MemoryRecords({data!r}):\nkafka-python {own!r}\ndrop-in {ours!r}")
        own = own_fetch
        dropin.install()
        try:
            ours = fetch(dropin.MemoryRecords, data, check_crcs)
        finally:
            dropin.uninstall()
        if not _same(own, ours, data):
            raise AssertionError(f"PartitionRecords({data!r}, check_crcs={check_crcs}):\n"
                                 f"kafka-python {own!r}\ndrop-in {ours!r}")

    return compare, _seeds(build)


# ---- aiokafka -------------------------------------------------------------------------

def _aiokafka():
    # aiokafka 0.14.0's Cython record classes crash the interpreter (SIGSEGV) on some
    # damaged sets, so aiokafka runs its pure-Python ones here (the drop-in follows the
    # classes aiokafka selects) unless KAFKAWIRE_FUZZ_CYTHON_HOST=1
    cython_host = os.environ.get("KAFKAWIRE_FUZZ_CYTHON_HOST") == "1"
    if not cython_host:
        os.environ["AIOKAFKA_NO_EXTENSIONS"] = "1"
    import aiokafka.consumer.fetcher as aio_fetcher
    import aiokafka.record.legacy_records as aio_legacy
    import aiokafka.record.default_records as aio_default
    import aiokafka.record.memory_records as aio_memory
    from aiokafka.structs import TopicPartition

    import kafkawire.compat.aiokafka as dropin

    own_memory = aio_memory.MemoryRecords  # the selected one
    assert aio_memory.NO_EXTENSIONS is not cython_host
    py_memory = aio_memory._MemoryRecordsPy
    own_partition_records = aio_fetcher.PartitionRecords
    tp = TopicPartition("t", 0)

    def normalise(outcome):
        return outcome

    def walk(memory_records, data):
        out = []
        try:
            m = memory_records(data)
            while m.has_next():
                b = m.next_batch()
                out.append(("batch", b.next_offset, b.validate_crc()))
                for r in b:
                    out.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                                tuple(r.headers), r.checksum))
        except Exception as exc:  # noqa: BLE001
            out.append(normalise(_error(exc)))
        return out

    def drain(pr_class, memory_records, data, check_crcs):
        out = []
        try:
            pr = pr_class(tp, memory_records(data), [], 0, None, None, check_crcs, 0)
            out += [tuple(vars(r).values()) for r in pr]
            out.append(("end", pr.next_fetch_offset))
        except Exception as exc:  # noqa: BLE001
            out.append(normalise(_error(exc)))
        return out

    def build(magic, codec_id):
        if magic == 2:
            b = aio_default.DefaultRecordBatchBuilder(2, codec_id, 0, -1, -1, -1, 1 << 20)
            for i in range(5):
                b.append(i, 1_700_000_000_000 + i, None if i % 3 == 0 else b"k%d" % i,
                         b"value-%d" % i * (1 + i), [("h", b"x")] if i % 2 else [])
        else:
            b = aio_legacy.LegacyRecordBatchBuilder(magic, codec_id, 1 << 20)
            for i in range(5):
                b.append(i, 1_700_000_000_000 + i, None if i % 3 == 0 else b"k%d" % i,
                         b"value-%d" % i * (1 + i))
        return bytes(b.build())

    def compare(data, flags):
        global host_hangs
        check_crcs = bool(flags & 0x40)
        try:
            own = _host(walk, own_memory, data)
            if cython_host and own != _host(walk, py_memory, data):
                return  # aiokafka's two readers disagree: nothing to be the same as
            own_drain = _host(drain, own_partition_records, own_memory, data, check_crcs)
            if cython_host and own_drain != _host(drain, own_partition_records, py_memory,
                                                  data, check_crcs):
                return
        except HostHang:
            host_hangs += 1
            return
        ours = walk(dropin.MemoryRecords, data)
        if not _same(own, ours, data):
            raise AssertionError(f"MemoryRecords({data!r}):\naiokafka {own!r}\ndrop-in {ours!r}")
        own = own_drain
        ours = drain(dropin.PartitionRecords, dropin.MemoryRecords, data, check_crcs)
        if not _same(own, ours, data):
            raise AssertionError(f"PartitionRecords({data!r}, check_crcs={check_crcs}):\n"
                                 f"aiokafka {own!r}\ndrop-in {ours!r}")

    return compare, _seeds(build)


HOSTS = {"kafka-python": _kafka_python, "aiokafka": _aiokafka}
_compare = _seeds_of_host = None


def setup(host: str) -> None:
    global _compare, _seeds_of_host
    _compare, _seeds_of_host = HOSTS[host]()


def shape(data: bytes) -> tuple[bytes, int]:
    """The bytes to read, shaped by ``data``'s first bytes as atheris_codec does: as they
    are, spliced into a host-built set (CRCs made right again), as the inner set of a
    gzip wrapper (offset from the input: below its inner offsets too), or CRCs fixed."""
    mode, flags, pick = data[0] % 4, data[1], data[2]
    body = data[3:]
    seeds = _seeds_of_host
    if mode == 1:
        seed = bytearray(seeds[pick % len(seeds)])
        at = (pick * 7) % (len(seed) + 1)
        seed[at:at + (flags % 8)] = body[:64]
        fix_crcs(seed)
        body = bytes(seed)
    elif mode == 2:
        magic = flags & 1
        inner = compression.compress(1, body)
        msg = struct.pack(">bb", magic, 1) + (struct.pack(">q", 0) if magic else b"")
        msg += struct.pack(">ii", -1, len(inner)) + inner
        msg = struct.pack(">I", zlib.crc32(msg)) + msg
        body = struct.pack(">qi", pick - 128, len(msg)) + msg
    elif mode == 3:
        buf = bytearray(body)
        fix_crcs(buf)
        body = bytes(buf)
    return body, flags


def check(data: bytes) -> None:
    if len(data) < 3:
        return
    body, flags = shape(data)
    _compare(body, flags)


HANG_SECONDS = 120


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(5)
        if op == 0 and buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif op == 1:
            buf.insert(rng.randint(0, len(buf)), rng.randrange(256))
        elif op == 2 and buf:
            del buf[rng.randrange(len(buf)):][:rng.randint(1, 16)]
        elif op == 3 and len(buf) >= 8:
            at = rng.randrange(len(buf) - 7)
            buf[at:at + 8] = struct.pack(">q", rng.choice(
                [0, -1, 1, 9, -(2**63), 2**63 - 1, rng.randrange(-1000, 1000)]))
        else:
            buf += rng.randbytes(rng.randint(1, 32))
    return bytes(buf)


def _kind(exc: AssertionError) -> str:
    """A difference's kind: where, and how each side ended (its error's class and pinned
    message, or records), e.g. "MemoryRecords: AssertionError / CorruptRecordError"."""
    lines = str(exc).splitlines()

    def ending(line: str) -> str:
        at = line.rfind("('error', '")
        if at < 0:
            return "records"
        cls, _, rest = line[at + 11:].partition("'")
        message = rest.split(", ", 1)[1].rstrip(")]") if ", " in rest else "None"
        return cls.rsplit(".", 1)[-1] + ("" if message == "None" else f" {message[:60]}")

    sides = [ending(line) for line in lines[1:3]]
    same_end = "" if sides[0] != sides[1] else " (records before it differ)"
    return f"{lines[0].split('(', 1)[0]}: host {sides[0]} / drop-in {sides[1]}{same_end}"


def _last_input_path() -> str:
    """Where the loop writes each input before reading it (outside the checkout)."""
    return os.path.join(tempfile.gettempdir(), f"fuzz-compat-last-input-{os.getpid()}.bin")


def loop(seconds: float, seed: int, keep_going: bool) -> tuple[int, dict]:
    """A plain mutation loop over the host's seeds (for where atheris does not install).
    With ``keep_going`` the differences are counted by kind (first input of each kept)
    instead of ending the run."""
    rng = random.Random(seed)
    corpus = [bytes([m, f, p]) + s for s in _seeds_of_host for m in range(4)
              for f, p in ((0, 0), (0x40, 3), (0x47, 200))]
    deadline = time.monotonic() + seconds
    runs = 0
    kinds: dict[str, list] = {}
    # an input that takes minutes (a loop that does not end, in host or drop-in) ends the
    # run with every thread's stack; the input is in the file named at the start
    last = _last_input_path()
    print(f"each input is written to {last} before it is read", flush=True)
    while time.monotonic() < deadline:
        data = _mutate(rng, rng.choice(corpus))
        with open(last, "wb") as f:
            f.write(data)
        faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
        try:
            check(data)
        except AssertionError as exc:
            if not keep_going:
                raise
            kinds.setdefault(_kind(exc), [0, data])[0] += 1
        finally:
            faulthandler.cancel_dump_traceback_later()
        runs += 1
        if runs % 50 == 0 and len(corpus) < 5000:
            corpus.append(data)
    return runs, kinds


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in HOSTS:
        raise SystemExit(f"usage: {sys.argv[0]} ({' | '.join(HOSTS)}) [libFuzzer args] | "
                         f"--loop [--seconds N] [--seed N]")
    host = sys.argv.pop(1)
    if "--loop" in sys.argv:
        setup(host)
        args = sys.argv[1:]
        seconds = float(args[args.index("--seconds") + 1]) if "--seconds" in args else 300
        seed = int(args[args.index("--seed") + 1]) if "--seed" in args else random.randrange(1 << 32)
        keep_going = "--keep-going" in args
        print(f"{host}: mutation loop, seed {seed}, {seconds:.0f} s", flush=True)
        runs, kinds = loop(seconds, seed, keep_going)
        os.unlink(_last_input_path())
        print(f"{host}: {host_hangs} inputs the host's own reader did not finish in "
              f"{HOST_SECONDS} s (not compared)", flush=True)
        if not kinds:
            print(f"{host}: {runs} inputs, no difference", flush=True)
            return
        print(f"{host}: {runs} inputs, {sum(k[0] for k in kinds.values())} with a "
              f"difference, {len(kinds)} kinds:", flush=True)
        for kind, (count, data) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
            print(f"  {count:6d}  {kind}\n          first input: {data!r}", flush=True)
        raise SystemExit(1)
    import atheris  # installed by `make fuzz`

    # coverage from the host's modules and the drop-in's, imported here (instrumenting
    # everything loaded takes minutes)
    with atheris.instrument_imports(include=["kafka", "aiokafka", "kafkawire.compat"]):
        setup(host)
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
