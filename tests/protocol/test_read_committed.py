"""read_committed in the I/O-free Fetcher (kafkawire.protocol.fetcher), driven with no I/O.

Fetch answers are built from batches the codec encodes with producer ids, transactional
and control flags (KIP-98), as a Kafka partition leader would hold them: interleaved
transactions of several producers, committed and aborted, COMMIT/ABORT markers, and the
answer's aborted_transactions list (producer_id, first_offset).  The rule checked is the
Java consumer's: a transactional batch is dropped while its producer has an aborted
transaction starting at or before the batch's last offset, until that producer's ABORT
marker; control batches are never returned; the position moves past both.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire import codec
from kafkawire.client.config import Config
from kafkawire.errors import CorruptRecordError
from kafkawire.protocol import apis
from kafkawire.protocol.fetcher import Fetcher, FetchedBatch, TopicPartition, _drop_aborted, _AbortedTxns

FETCH = apis.get("Fetch")
_Topic = FETCH.Response.FetchableTopicResponse
_Partition = _Topic.PartitionData
_Aborted = _Partition.AbortedTransaction

TP = TopicPartition("t", 0)
A, B, C = 4000, 5000, 6000  # producer ids
COMMIT, ABORT = True, False


def batch(offset: int, pid: int, values: list[bytes], *, txn: bool = True, compression: int = 0) -> bytes:
    return codec.encode_record_batch([(None, v) for v in values], base_offset=offset, producer_id=pid,
                                     producer_epoch=0, base_sequence=0, is_transactional=txn,
                                     compression=compression, timestamp=1_700_000_000_000)


_TYPE_KEY = object()


def marker(offset: int, pid: int, commit: bool, key: object = _TYPE_KEY) -> bytes:
    """An end-transaction marker: one control record, key = version 0 + type (0 ABORT, 1 COMMIT)."""
    if key is _TYPE_KEY:
        key = b"\x00\x00\x00\x01" if commit else b"\x00\x00\x00\x00"
    return codec.encode_record_batch([(key, b"\x00\x00\x00\x00\x00\x00")], base_offset=offset,
                                     producer_id=pid, producer_epoch=0, is_transactional=True,
                                     is_control=True, timestamp=1_700_000_000_000)


def fetcher(isolation: str = "read_committed", **options) -> Fetcher:
    f = Fetcher(Config.consumer(bootstrap_servers="127.0.0.1:9", isolation_level=isolation, **options))
    f.assign([TP])
    return f


def answer(f: Fetcher, records: bytes | None, aborted: list[tuple[int, int]] | None,
           hw: int = -1, lso: int = -1) -> None:
    """Ask for TP from its next fetch offset and feed back an answer carrying ``records``."""
    by_node, offsets, buffered, _ = f.plan(lambda topic, partition: 1)
    req, positions = f.request(by_node[1], offsets, buffered, {})
    assert req.isolation_level == f.isolation
    part = _Partition(partition_index=0, high_watermark=hw, last_stable_offset=lso,
                      aborted_transactions=None if aborted is None else
                      [_Aborted(producer_id=p, first_offset=o) for p, o in aborted],
                      records=None if records is None else memoryview(records))
    f.on_response(FETCH.Response(responses=[_Topic(topic="t", partitions=[part])]), positions, {}, 1)


def drain_all(f: Fetcher, max_records: int, columnar: bool) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    for _ in range(200):
        out = f.drain(max_records, columnar)
        if not out and not f.assigned[TP].buffered():
            break
        for x in out:
            if columnar:
                assert isinstance(x, FetchedBatch)
                got += [(r.offset, r.value) for r in x.columns.to_records()]
            else:
                got.append((x.offset, x.value))
    return got


def consume(log: bytes, aborted, isolation: str, max_records: int, columnar: bool,
            start: int = 0, **options) -> tuple[list[tuple[int, bytes]], int]:
    f = fetcher(isolation, **options)
    f.seek(TP, start)
    answer(f, log, aborted)
    got = drain_all(f, max_records, columnar)
    return got, f.assigned[TP].position


# Two producers, interleaved (as a partition leader writes them):
#   0-1 A (txn 1, committed)   2 B (txn 1, aborted)   3 A gzip (txn 1)   4 A COMMIT
#   5 B (txn 1)   6 B ABORT   7 A (txn 2, aborted)   8 A ABORT   9 B (txn 2, committed)
#   10 B COMMIT   11 non-transactional (no producer id)
INTERLEAVED = b"".join([
    batch(0, A, [b"a0", b"a1"]), batch(2, B, [b"b2"]), batch(3, A, [b"a3"], compression=1),
    marker(4, A, COMMIT), batch(5, B, [b"b5"]), marker(6, B, ABORT), batch(7, A, [b"a7"]),
    marker(8, A, ABORT), batch(9, B, [b"b9"]), marker(10, B, COMMIT),
    codec.encode_record_batch([(None, b"n11")], base_offset=11),
])
INTERLEAVED_ABORTED = [(B, 2), (A, 7)]
COMMITTED = [(0, b"a0"), (1, b"a1"), (3, b"a3"), (9, b"b9"), (11, b"n11")]
EVERY_DATA_RECORD = [(0, b"a0"), (1, b"a1"), (2, b"b2"), (3, b"a3"), (5, b"b5"), (7, b"a7"), (9, b"b9"), (11, b"n11")]

MODES = [(m, c) for c in (False, True) for m in (1, 2, 3, 500)]
MODE_IDS = [f"{'poll_batch' if c else 'poll'}-max{m}" for m, c in MODES]


@pytest.mark.parametrize("max_records,columnar", MODES, ids=MODE_IDS)
def test_read_committed_returns_only_committed_records(max_records: int, columnar: bool) -> None:
    got, position = consume(INTERLEAVED, INTERLEAVED_ABORTED, "read_committed", max_records, columnar)
    assert got == COMMITTED
    assert position == 12  # past the markers and the aborted batches


@pytest.mark.parametrize("max_records,columnar", MODES, ids=MODE_IDS)
def test_read_uncommitted_returns_every_data_record(max_records: int, columnar: bool) -> None:
    # A read_uncommitted fetch gets no aborted list from Kafka; one sent anyway changes nothing.
    for aborted in (None, INTERLEAVED_ABORTED):
        got, position = consume(INTERLEAVED, aborted, "read_uncommitted", max_records, columnar)
        assert got == EVERY_DATA_RECORD
        assert position == 12


@pytest.mark.parametrize("columnar", [False, True], ids=["poll", "poll_batch"])
@pytest.mark.parametrize("aborted", [None, []], ids=["null", "empty"])
def test_no_aborted_list_drops_nothing(aborted, columnar: bool) -> None:
    # Kafka's rule: without the broker's list, a consumer cannot know a transaction aborted
    # (both test brokers answer so; the integration tests show Java's rule in librdkafka agrees).
    got, position = consume(INTERLEAVED, aborted, "read_committed", 500, columnar)
    assert got == EVERY_DATA_RECORD and position == 12


@pytest.mark.parametrize("compression", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("columnar", [False, True], ids=["poll", "poll_batch"])
def test_compressed_transactional_batches(compression: int, columnar: bool) -> None:
    log = b"".join([
        batch(0, A, [b"a0", b"a1", b"a2"], compression=compression),
        batch(3, B, [b"b3", b"b4"], compression=compression),
        marker(5, B, ABORT),
        batch(6, A, [b"a6"], compression=compression),
        marker(7, A, COMMIT),
    ])
    for max_records in (1, 500):
        got, position = consume(log, [(B, 3)], "read_committed", max_records, columnar)
        assert got == [(0, b"a0"), (1, b"a1"), (2, b"a2"), (6, b"a6")]
        assert position == 8


@pytest.mark.parametrize("columnar", [False, True], ids=["poll", "poll_batch"])
def test_aborted_transaction_that_began_before_the_fetch_offset(columnar: bool) -> None:
    # Fetching from 5: the broker lists B's transaction from its first offset, 2.
    tail = b"".join([batch(5, B, [b"b5"]), batch(6, A, [b"a6"]), marker(7, B, ABORT), marker(8, A, COMMIT)])
    got, position = consume(tail, [(B, 2)], "read_committed", 500, columnar, start=5)
    assert got == [(6, b"a6")] and position == 9


@pytest.mark.parametrize("columnar", [False, True], ids=["poll", "poll_batch"])
def test_same_producer_committed_then_aborted(columnar: bool) -> None:
    # A's first transaction ends before its aborted one begins: its batches stay.
    log = b"".join([batch(0, A, [b"a0"]), marker(1, A, COMMIT), batch(2, A, [b"a2"]), marker(3, A, ABORT),
                    batch(4, A, [b"a4"]), marker(5, A, COMMIT)])
    got, position = consume(log, [(A, 2)], "read_committed", 500, columnar)
    assert got == [(0, b"a0"), (4, b"a4")] and position == 6


@pytest.mark.parametrize("columnar", [False, True], ids=["poll", "poll_batch"])
def test_only_transactional_batches_are_dropped(columnar: bool) -> None:
    # An idempotent (non-transactional) batch of a producer with an aborted transaction
    # under way is not part of it, nor is a batch without a producer id.
    log = b"".join([batch(0, A, [b"a0"]), batch(1, A, [b"idem1"], txn=False),
                    codec.encode_record_batch([(None, b"plain2")], base_offset=2), marker(3, A, ABORT)])
    got, _ = consume(log, [(A, 0)], "read_committed", 500, columnar)
    assert got == [(1, b"idem1"), (2, b"plain2")]


@pytest.mark.parametrize("max_records,columnar", MODES, ids=MODE_IDS)
def test_an_answer_of_markers_and_aborted_batches_only_moves_the_position(max_records: int, columnar: bool) -> None:
    f = fetcher()
    f.seek(TP, 0)
    answer(f, b"".join([batch(0, A, [b"x", b"y"]), batch(2, B, [b"z"]), marker(3, A, ABORT), marker(4, B, ABORT)]),
           [(A, 0), (B, 2)])
    assert f.drain(max_records, columnar) == []
    st = f.assigned[TP]
    assert st.position == 5 and not st.buffered()
    # The next fetch asks from there.
    _by_node, offsets, _buffered, _ = f.plan(lambda topic, partition: 1)
    assert offsets[TP] == 5


@pytest.mark.parametrize("columnar", [False, True], ids=["poll", "poll_batch"])
def test_a_marker_alone_is_never_returned(columnar: bool) -> None:
    got, position = consume(marker(7, A, COMMIT), [], "read_committed", 500, columnar, start=7)
    assert got == [] and position == 8


@pytest.mark.parametrize("max_records,columnar", MODES, ids=MODE_IDS)
def test_aborted_transaction_spanning_two_fetch_answers(max_records: int, columnar: bool) -> None:
    f = fetcher()
    f.seek(TP, 0)
    # The first answer ends inside B's aborted transaction (before its marker) ...
    answer(f, b"".join([batch(0, A, [b"a0"]), batch(1, B, [b"b1"]), batch(2, B, [b"b2"])]), [(B, 1)])
    # ... the second, fetched from 3 while the first is still buffered, lists it again.
    answer(f, b"".join([batch(3, B, [b"b3"]), batch(4, A, [b"a4"]), marker(5, B, ABORT), marker(6, A, COMMIT),
                        batch(7, B, [b"b7"]), marker(8, B, COMMIT)]), [(B, 1)])
    assert len(f.assigned[TP].pending) == 2
    assert drain_all(f, max_records, columnar) == [(0, b"a0"), (4, b"a4"), (7, b"b7")]
    assert f.assigned[TP].position == 9


def test_state_carries_over_when_poll_cuts_an_answer() -> None:
    # max_records=1 decodes one batch per poll; B's aborted transaction spans the cuts.
    log = b"".join([batch(0, B, [b"b0"]), batch(1, A, [b"a1"]), batch(2, B, [b"b2"]), batch(3, A, [b"a3"]),
                    marker(4, B, ABORT), batch(5, B, [b"b5"]), marker(6, B, COMMIT), marker(7, A, COMMIT)])
    f = fetcher()
    f.seek(TP, 0)
    answer(f, log, [(B, 0)])
    polls = []
    for _ in range(10):
        polls.append([(r.offset, r.value) for r in f.drain(1, False)])
    assert [p for p in polls if p] == [[(1, b"a1")], [(3, b"a3")], [(5, b"b5")]]
    assert f.assigned[TP].position == 8


def test_key_and_value_deserializers_see_committed_records_only() -> None:
    seen = []

    def value(v: bytes) -> str:
        seen.append(v)
        return v.decode().upper()

    f = fetcher(value_deserializer=value)
    f.seek(TP, 0)
    answer(f, INTERLEAVED, INTERLEAVED_ABORTED)
    assert [r.value for r in f.drain(500, False)] == ["A0", "A1", "A3", "B9", "N11"]
    assert seen == [b"a0", b"a1", b"a3", b"b9", b"n11"]


def _reseal(data: bytearray, pos: int = 0) -> None:
    """Recompute the CRC32C of the RecordBatch at ``pos`` after its bytes were changed."""
    length = int.from_bytes(data[pos + 8:pos + 12], "big")
    data[pos + 17:pos + 21] = codec.crc32c(bytes(data[pos + 21:pos + 12 + length])).to_bytes(4, "big")


def test_records_of_aborted_batches_are_never_decoded() -> None:
    # B's aborted batch has garbage where its records are, under a valid CRC: read_committed
    # never decodes it (the header says it is B's); read_uncommitted must, and fails.
    bad = bytearray(batch(1, B, [b"b1" * 20]))
    bad[61:] = b"\xff" * (len(bad) - 61)
    _reseal(bad)
    log = b"".join([batch(0, A, [b"a0"]), bytes(bad), marker(2, B, ABORT), batch(3, A, [b"a3"]), marker(4, A, COMMIT)])
    for columnar in (False, True):
        got, position = consume(log, [(B, 1)], "read_committed", 500, columnar)
        assert got == [(0, b"a0"), (3, b"a3")] and position == 5
        with pytest.raises(CorruptRecordError):
            consume(log, [(B, 1)], "read_uncommitted", 500, columnar)


@pytest.mark.parametrize("columnar", [False, True], ids=["poll", "poll_batch"])
def test_an_aborted_batch_with_a_bad_crc_is_reported_not_dropped(columnar: bool) -> None:
    bad = bytearray(batch(1, B, [b"b1"]))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    log = b"".join([batch(0, A, [b"a0"]), bytes(bad), marker(2, B, ABORT)])
    with pytest.raises(CorruptRecordError):
        consume(log, [(B, 1)], "read_committed", 500, columnar)
    # check_crcs=False: the header is trusted and the batch dropped.
    got, position = consume(log, [(B, 1)], "read_committed", 500, columnar, check_crcs=False)
    assert got == [(0, b"a0")] and position == 3


@pytest.mark.parametrize("key", [b"\x00\x00", b"", None], ids=["short-key", "empty-key", "null-key"])
def test_a_malformed_marker_key_is_a_corrupt_record(key: bytes | None) -> None:
    log = b"".join([batch(0, B, [b"b0"]), marker(1, B, ABORT, key=key), batch(2, A, [b"a2"])])
    with pytest.raises(CorruptRecordError, match="control batch"):
        consume(log, [(B, 0)], "read_committed", 500, False)


def test_legacy_message_sets_before_transactional_batches() -> None:
    log = codec.encode_message_set([(None, b"m0"), (None, b"m1")], magic=1, base_offset=0) + b"".join([
        batch(2, A, [b"a2"]), marker(3, A, ABORT), batch(4, B, [b"b4"]), marker(5, B, COMMIT)])
    for columnar in (False, True):
        got, position = consume(log, [(A, 2)], "read_committed", 500, columnar)
        assert got == [(0, b"m0"), (1, b"m1"), (4, b"b4")] and position == 6


def test_a_partial_batch_at_the_end_is_left_for_the_next_fetch() -> None:
    full = b"".join([batch(0, A, [b"a0"]), batch(1, B, [b"b1"]), marker(2, B, ABORT), batch(3, A, [b"a3"])])
    cut = full[:-7]  # the last batch cut off by the size limit
    for columnar in (False, True):
        got, position = consume(cut, [(B, 1)], "read_committed", 500, columnar)
        assert got == [(0, b"a0")] and position == 3


def test_drop_aborted_keeps_bytes_uncopied_where_it_can() -> None:
    log = INTERLEAVED
    view = memoryview(log)
    # Nothing to drop: the very object comes back.
    kept, end = _drop_aborted(view, _AbortedTxns([]), True)
    assert kept is view and end == 12
    # One contiguous run kept (B's aborted batch is the first one): a view of the same buffer.
    head = b"".join([batch(0, B, [b"b0"]), marker(1, B, ABORT), batch(2, A, [b"a2"])])
    hv = memoryview(head)
    kept, end = _drop_aborted(hv, _AbortedTxns([_Aborted(producer_id=B, first_offset=0)]), True)
    assert isinstance(kept, memoryview) and kept.obj is head and end == 3
    assert [r.value for r in codec.decode_records(kept)] == [b"a2"]


def test_last_stable_offset_is_kept_and_handed_out_with_columns() -> None:
    f = fetcher()
    f.seek(TP, 0)
    answer(f, INTERLEAVED, INTERLEAVED_ABORTED, hw=20, lso=12)
    st = f.assigned[TP]
    assert (st.high_watermark, st.last_stable_offset) == (20, 12)
    (fb,) = f.drain(500, True)
    assert (fb.high_watermark, fb.last_stable_offset) == (20, 12)


def test_a_seek_drops_the_buffered_answers_and_their_state() -> None:
    f = fetcher()
    f.seek(TP, 0)
    answer(f, INTERLEAVED, INTERLEAVED_ABORTED)
    f.seek(TP, 9)
    st = f.assigned[TP]
    assert not st.pending and not st.txns
    # Refetched from 9 (a leader may answer from the batch holding it); no list this time.
    answer(f, INTERLEAVED, [])
    assert [(r.offset, r.value) for r in f.drain(500, False)] == [(9, b"b9"), (11, b"n11")]


# ---------------------------------------------------------------------------------------
# Random transactions of three producers, against the fate each one was given.
# ---------------------------------------------------------------------------------------

@dataclass
class Log:
    entries: list[tuple[int, int, bytes]] = field(default_factory=list)  # (first offset, next offset, bytes)
    committed: list[tuple[int, bytes]] = field(default_factory=list)
    everything: list[tuple[int, bytes]] = field(default_factory=list)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, first, last offset)
    next: int = 0


def build_log(seed: int, steps: int) -> Log:
    """A partition's log written by producers A, B, C with random transactions (each
    committed or aborted when it ends) and a non-transactional producer, interleaved."""
    rnd = random.Random(seed)
    log = Log()
    open_txn: dict[int, tuple[int, list[tuple[int, bytes]], bool]] = {}  # pid -> (first, records, commits)
    for step in range(steps + 3):
        pid = rnd.choice([A, B, C, -1])
        closing = step >= steps
        if pid == -1 and not closing:
            values = [b"plain-%d-%d" % (step, i) for i in range(rnd.randint(1, 3))]
            log.entries.append((log.next, log.next + len(values),
                                codec.encode_record_batch([(None, v) for v in values], base_offset=log.next,
                                                          compression=rnd.choice([0, 0, 1, 3]))))
            recs = [(log.next + i, v) for i, v in enumerate(values)]
            log.committed += recs
            log.everything += recs
            log.next += len(values)
            continue
        if pid == -1:
            continue
        if pid in open_txn and (closing or rnd.random() < 0.3):
            first, recs, commits = open_txn.pop(pid)
            if commits:
                log.committed += recs
            else:
                log.aborted.append((pid, first, log.next - 1))
            log.entries.append((log.next, log.next + 1, marker(log.next, pid, commits)))
            log.next += 1
            continue
        if closing:
            continue
        values = [b"%d-%d-%d" % (pid, step, i) for i in range(rnd.randint(1, 4))]
        if pid not in open_txn:
            open_txn[pid] = (log.next, [], rnd.random() < 0.5)
        log.entries.append((log.next, log.next + len(values),
                            batch(log.next, pid, values, compression=rnd.choice([0, 0, 1, 2, 3, 4]))))
        recs = [(log.next + i, v) for i, v in enumerate(values)]
        open_txn[pid][1].extend(recs)
        log.everything += recs
        log.next += len(values)
    for pid in list(open_txn):  # close what is still open (the loop's last steps may miss some)
        first, recs, commits = open_txn.pop(pid)
        if commits:
            log.committed += recs
        else:
            log.aborted.append((pid, first, log.next - 1))
        log.entries.append((log.next, log.next + 1, marker(log.next, pid, commits)))
        log.next += 1
    log.committed.sort()
    return log


def aborted_for(log: Log, fetch_offset: int, upper: int) -> list[tuple[int, int]]:
    """What a Kafka leader lists for a fetch of [fetch_offset, upper): aborted transactions
    that end at or after the fetch offset and begin before the upper bound."""
    return [(pid, first) for pid, first, last in log.aborted if last >= fetch_offset and first < upper]


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 40), max_records=st.sampled_from([1, 2, 5, 500]),
       columnar=st.booleans(), per_answer=st.integers(1, 8))
def test_random_interleavings_return_exactly_the_committed_records(seed, steps, max_records, columnar, per_answer):
    log = build_log(seed, steps)
    f = fetcher()
    f.seek(TP, 0)
    got: list[tuple[int, bytes]] = []
    i = 0
    while i < len(log.entries):
        # Answers of ``per_answer`` entries, fetched from the fetcher's own next offset.
        chunk = log.entries[i:i + per_answer]
        i += len(chunk)
        st_ = f.assigned[TP]
        assert st_.next_fetch() == chunk[0][0]
        answer(f, b"".join(e[2] for e in chunk), aborted_for(log, chunk[0][0], chunk[-1][1]))
        got += drain_all(f, max_records, columnar)
    assert got == log.committed
    assert f.assigned[TP].position == log.next
