"""Transactions on the real test brokers: the transaction APIs in raw exchanges, and
kafkawire's read_committed consumer on what confluent-kafka's transactional producers write.

Measured broker behaviour (Tansu 0.6.0, librdkafka 2.16.0's mock cluster):
- Both run transactions for confluent-kafka's producer (InitProducerId, AddPartitionsToTxn,
  AddOffsetsToTxn, TxnOffsetCommit, EndTxn) and write COMMIT/ABORT control batches.
- Neither lists aborted transactions in Fetch answers (KIP-98's aborted_transactions is
  always empty), so a consumer that follows Kafka's rule, librdkafka's as well as
  kafkawire's, returns the records of aborted transactions under read_committed too.  The
  tests check that kafkawire agrees with confluent-kafka there, and check the filtering on
  the brokers' own bytes with the list a Kafka leader would send.
- Tansu holds read_committed fetches at the last stable offset while a transaction is
  open; the mock reports the high watermark as the last stable offset and ignores the
  isolation level, so open transactions are tested on Tansu.
- The mock writes its COMMIT/ABORT control batches with a CRC of 0, which kafkawire (like
  Kafka's Java consumer) reports as damage unless check_crcs=False.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from rawsocket import BrokerClosedError, RawConnection
from shells import shell  # noqa: F401 - the fixture

from kafkawire import codec
from kafkawire.client.config import Config
from kafkawire.errors import CorruptRecordError
from kafkawire.protocol import apis
from kafkawire.protocol.fetcher import Fetcher, TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

pytestmark = pytest.mark.broker

FETCH = apis.get("Fetch")
TXN_APIS = ["AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit"]
# AddPartitionsToTxn v4+ is the brokers' batched form (KIP-890); clients send v3 and below.
CLIENT_MAX = {"AddPartitionsToTxn": 3}


def _uid() -> str:
    return uuid.uuid4().hex[:8]


class Broker:
    """One test broker: its bootstrap address, a port to talk raw to, and topic creation."""

    def __init__(self, name: str, bootstrap: str, port: int, mock: Any = None):
        self.name, self.bootstrap, self.port, self.mock = name, bootstrap, port, mock
        # Mock quirk: its control batches carry CRC 0 (rdkafka_mock.c: "mock doesn't validate").
        self.check_crcs = mock is None

    def topic(self, prefix: str) -> str:
        name = f"{prefix}-{self.name}-{_uid()}"
        if self.mock is not None:
            self.mock.create_topic(name, 1, 1)  # the mock has no CreateTopics
        else:
            admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
            admin.create_topics([confluent_kafka.admin.NewTopic(name, 1, 1)])[name].result(15)
        return name


@pytest.fixture(scope="module", params=["tansu", "mock"])
def broker(request: pytest.FixtureRequest) -> Broker:
    if request.param == "tansu":
        b = request.getfixturevalue("tansu_broker")
        return Broker("tansu", b.bootstrap, b.port)
    cluster = request.getfixturevalue("mock_cluster")
    return Broker("mock", cluster.bootstrap, cluster.brokers[1][1], mock=cluster)


@pytest.fixture(scope="module")
def tansu(tansu_broker) -> Broker:
    return Broker("tansu", tansu_broker.bootstrap, tansu_broker.port)


# ---------------------------------------------------------------------------------------
# Raw exchanges: a whole transaction in raw requests, one API at the version under test.
# ---------------------------------------------------------------------------------------

def _connect(port: int) -> RawConnection:
    rc = RawConnection(port, timeout=15.0)
    rc.negotiate()
    return rc


# Answers a client retries: Kafka creates __transaction_state and __consumer_offsets at the
# first FindCoordinator for them and answers COORDINATOR_NOT_AVAILABLE, then
# COORDINATOR_LOAD_IN_PROGRESS, until their partitions are loaded.
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
COORDINATOR_RETRIABLE = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)


def coordinator_retry(call: Any, what: str, deadline_s: float = 30.0) -> Any:
    """``call()`` again while its answer's error_code is a coordinator error a client retries."""
    deadline = time.monotonic() + deadline_s
    while True:
        resp = call()
        if resp.error_code not in COORDINATOR_RETRIABLE:
            return resp
        assert time.monotonic() < deadline, f"{what}: the coordinator was not ready within {deadline_s}s: {resp}"
        time.sleep(0.2)


def _coordinator(rc: RawConnection, key: str, key_type: int) -> int:
    fc = apis.get("FindCoordinator")
    resp = coordinator_retry(lambda: rc.request(fc, fc.Request(key=key, key_type=key_type), 3).response,  # v3: one key
                             f"FindCoordinator {key!r}")
    assert resp.error_code == 0 and resp.port > 0, resp
    return resp.port


INVALID_PRODUCER_ID_MAPPING = 49


def _add_partitions_errors(resp: Any) -> set[int]:
    """Every error code in an AddPartitionsToTxn answer (any version)."""
    topics = list(resp.results_by_topic_v3_and_below or [])
    for r in resp.results_by_transaction or []:
        topics += r.topic_results
    return {resp.error_code} | {p.partition_error_code for t in topics for p in t.results_by_partition}


def raw_transaction(port: int, topic: str, versions: dict[str, int], commit: bool = True) -> dict[str, Any]:
    """Run one transaction with raw requests: InitProducerId, AddPartitionsToTxn, Produce,
    AddOffsetsToTxn, TxnOffsetCommit, EndTxn; each API at ``versions`` or the highest
    both sides speak (clients' range for AddPartitionsToTxn).  Returns the answers."""
    txn, group = f"raw-txn-{_uid()}", f"raw-txn-group-{_uid()}"
    out: dict[str, Any] = {"group": group, "transactional_id": txn}
    with _connect(port) as boot:
        offered = boot.conn.broker_versions

        def version(name: str) -> int:
            if name in versions:
                return versions[name]
            api = apis.get(name)
            return min(offered[api.key][1], api.max_version, CLIENT_MAX.get(name, 1 << 15))

        md = apis.get("Metadata")
        meta = boot.request(md, md.Request(topics=[md.Request.MetadataRequestTopic(name=topic)])).response
        leader = {b.node_id: b.port for b in meta.brokers}[meta.topics[0].partitions[0].leader_id]
        with _connect(_coordinator(boot, txn, 1)) as tc, _connect(leader) as lc, \
                _connect(_coordinator(boot, group, 0)) as gc:
            ip = apis.get("InitProducerId")
            init_request = ip.Request(transactional_id=txn, transaction_timeout_ms=60000)
            apt = apis.get("AddPartitionsToTxn")
            v = version("AddPartitionsToTxn")
            for _attempt in range(3):
                init = coordinator_retry(lambda: tc.request(ip, init_request, version("InitProducerId")).response,
                                         "InitProducerId")
                assert init.error_code == 0, init
                pid, epoch = init.producer_id, init.producer_epoch
                out["producer"] = (pid, epoch)
                if v <= 3:
                    req = apt.Request(v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                                      v3_and_below_producer_epoch=epoch,
                                      v3_and_below_topics=[apt.Request.AddPartitionsToTxnTopic(name=topic,
                                                                                              partitions=[0])])
                else:
                    tx = apt.Request.AddPartitionsToTxnTransaction
                    req = apt.Request(transactions=[tx(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                       topics=[tx.AddPartitionsToTxnTopic(name=topic,
                                                                                          partitions=[0])])])
                out["AddPartitionsToTxn"] = tc.request(apt, req, v).response
                # Mock quirk: its producer ids are random (rdkafka_mock.c: rd_jitter(1, 900000) *
                # 1000) and one handed out twice maps to its first transactional id: a fresh one.
                if INVALID_PRODUCER_ID_MAPPING not in _add_partitions_errors(out["AddPartitionsToTxn"]):
                    break

            pr = apis.get("Produce")
            data = codec.encode_record_batch([(None, b"raw-txn-0"), (None, b"raw-txn-1")], producer_id=pid,
                                             producer_epoch=epoch, base_sequence=0, is_transactional=True)
            R = pr.Request
            produced = lc.request(pr, R(transactional_id=txn, acks=-1, timeout_ms=10000, topic_data=[
                R.TopicProduceData(name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(
                    index=0, records=data)])]), version("Produce")).response
            out["Produce"] = produced.responses[0].partition_responses[0]

            ao = apis.get("AddOffsetsToTxn")
            out["AddOffsetsToTxn"] = tc.request(ao, ao.Request(transactional_id=txn, producer_id=pid,
                                                               producer_epoch=epoch, group_id=group),
                                                version("AddOffsetsToTxn")).response
            toc = apis.get("TxnOffsetCommit")
            T = toc.Request.TxnOffsetCommitRequestTopic
            out["TxnOffsetCommit"] = gc.request(toc, toc.Request(
                transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch,
                topics=[T(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=2, committed_metadata=None)])]),
                version("TxnOffsetCommit")).response

            et = apis.get("EndTxn")
            out["EndTxn"] = tc.request(et, et.Request(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                      committed=commit), version("EndTxn")).response
    return out


def raw_log(port: int, topic: str, isolation: int = 0, check_crcs: bool = True,
            deadline_s: float = 15.0) -> tuple[bytes, Any]:
    """Partition 0's batches from offset 0 to the high watermark, fetched raw (the mock
    answers one stored message set per Fetch), and the last partition answer."""
    chunks: list[bytes] = []
    offset = 0
    deadline = time.monotonic() + deadline_s
    with _connect(port) as rc:
        version = rc.conn.version_for(FETCH)
        md = apis.get("Metadata")
        topic_id = rc.request(md, md.Request(topics=[md.Request.MetadataRequestTopic(name=topic)])).response.topics[0].topic_id
        while True:
            part = FETCH.Request.FetchTopic.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
            ft = FETCH.Request.FetchTopic(topic=topic, topic_id=topic_id, partitions=[part])
            req = FETCH.Request(max_wait_ms=100, min_bytes=1, max_bytes=1 << 22, isolation_level=isolation, topics=[ft])
            (pd,) = rc.request(FETCH, req, version).response.responses[0].partitions
            assert pd.error_code == 0, pd
            data = bytes(pd.records or b"")
            batches = codec.decode_batches(data, check_crcs=check_crcs)
            if batches:
                chunks.append(data)
                offset = batches[-1].base_offset + batches[-1].last_offset_delta + 1
            end = pd.last_stable_offset if isolation else pd.high_watermark
            if offset >= end:
                return b"".join(chunks), pd
            assert time.monotonic() < deadline, f"fetched up to {offset} of {end} only"


def logged_batches(port: int, topic: str, count: int, check_crcs: bool = True, deadline_s: float = 15.0) -> list[Any]:
    """Partition 0's batches once there are ``count`` of them: Kafka answers EndTxn once the
    coordinator has logged PREPARE_COMMIT/PREPARE_ABORT and writes the markers after (KIP-98),
    so a fetch right after the answer may not see them yet."""
    deadline = time.monotonic() + deadline_s
    while True:
        batches = codec.decode_batches(raw_log(port, topic, check_crcs=check_crcs)[0], check_crcs=check_crcs)
        if len(batches) >= count or time.monotonic() > deadline:
            return batches
        time.sleep(0.1)


def check_transaction_api(port: int, topic: str, api_name: str, version: int, check_crcs: bool = True,
                          kafka: bool = False) -> None:
    """One committed transaction in raw requests with ``api_name`` at ``version`` (the
    exchange test_raw_protocol.py can register for the transaction APIs); ``kafka``: the
    broker is Apache Kafka."""
    batched = version > CLIENT_MAX.get(api_name, version)
    if batched and not kafka:
        # Tansu quirk: it offers AddPartitionsToTxn v4-v5 (KIP-890's broker-to-broker form)
        # but closes the connection on them; clients use v0-v3.  Kafka answers them (meant
        # for brokers, but a Kafka without an authorizer does not refuse a client's).
        with pytest.raises(BrokerClosedError):
            raw_transaction(port, topic, {api_name: version})
        return
    out = raw_transaction(port, topic, {api_name: version})
    apt = out["AddPartitionsToTxn"]
    if batched:
        assert apt.error_code == 0, apt
        assert [(r.transactional_id, [(t.name, [(p.partition_index, p.partition_error_code)
                                               for p in t.results_by_partition]) for t in r.topic_results])
                for r in apt.results_by_transaction] == [(out["transactional_id"], [(topic, [(0, 0)])])], apt
    else:
        assert [(t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition])
                for t in apt.results_by_topic_v3_and_below] == [(topic, [(0, 0)])], apt
    assert out["Produce"].error_code == 0, out["Produce"]
    assert out["AddOffsetsToTxn"].error_code == 0, out["AddOffsetsToTxn"]
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in out["TxnOffsetCommit"].topics] == [(topic, [(0, 0)])], out["TxnOffsetCommit"]
    assert out["EndTxn"].error_code == 0, out["EndTxn"]
    # The commit wrote a COMMIT marker after the two records.
    batches = logged_batches(port, topic, 2, check_crcs)
    pid = out["producer"][0]
    assert [(b.producer_id, b.is_transactional, b.is_control) for b in batches] == \
        [(pid, True, False), (pid, True, True)], batches
    assert [r.value for r in batches[0].records] == [b"raw-txn-0", b"raw-txn-1"]
    assert batches[1].records[0].key == b"\x00\x00\x00\x01"  # version 0, type 1: COMMIT


@pytest.mark.parametrize("api_name", TXN_APIS)
def test_transaction_api_every_version(broker: Broker, api_name: str) -> None:
    api = apis.get(api_name)
    with _connect(broker.port) as rc:
        lo, hi = rc.conn.broker_versions[api.key]
    versions = range(max(lo, api.min_version), min(hi, api.max_version) + 1)
    assert versions, f"{broker.name} offers no version of {api_name}"
    failures = {}
    for v in versions:
        try:
            check_transaction_api(broker.port, broker.topic(f"raw-{api_name.lower()}-v{v}"), api_name, v,
                                  broker.check_crcs)
        except Exception as exc:  # noqa: BLE001 - every failing version, then report
            failures[v] = f"{type(exc).__name__}: {exc}"
    print(f"{broker.name} {api_name}: ok v{[v for v in versions if v not in failures]} (broker v{lo}-v{hi})")
    assert not failures, failures


def test_abort_writes_an_abort_marker(broker: Broker) -> None:
    topic = broker.topic("raw-abort")
    out = raw_transaction(broker.port, topic, {}, commit=False)
    assert out["EndTxn"].error_code == 0, out["EndTxn"]
    batches = logged_batches(broker.port, topic, 2, broker.check_crcs)
    assert [(b.is_control, b.records[0].key if b.is_control else None) for b in batches] == \
        [(False, None), (True, b"\x00\x00\x00\x00")]  # version 0, type 0: ABORT


# ---------------------------------------------------------------------------------------
# confluent-kafka's transactional producers write; kafkawire and confluent-kafka read.
# ---------------------------------------------------------------------------------------

def _txn_producer(bootstrap: str, txn_id: str, compression: str) -> Any:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                                  "compression.type": compression, "linger.ms": 5, "log_level": 3})
    p.init_transactions(20)
    return p


def write_interleaved(bootstrap: str, topic: str) -> tuple[list[bytes], list[bytes]]:
    """Two transactional producers (lz4 and gzip) and a plain one write interleaved
    committed and aborted transactions to partition 0.  Returns (values of committed
    transactions and plain records in log order, every value in log order)."""
    a = _txn_producer(bootstrap, f"{topic}-a", "lz4")
    b = _txn_producer(bootstrap, f"{topic}-b", "gzip")
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    committed: list[bytes] = []
    everything: list[bytes] = []

    def send(p: Any, values: list[bytes], keep: bool) -> None:
        # Padded: librdkafka sends a batch uncompressed when compressing does not shrink it.
        values = [v + b"." * 100 for v in values]
        for v in values:
            p.produce(topic, v, partition=0)
        assert p.flush(15) == 0
        everything.extend(values)
        if keep:
            committed.extend(values)

    a.begin_transaction()
    send(a, [b"a-commit-%d" % i for i in range(3)], True)
    b.begin_transaction()
    send(b, [b"b-abort-%d" % i for i in range(2)], False)
    send(a, [b"a-commit-3"], True)
    a.commit_transaction(20)
    send(plain, [b"plain-4"], True)
    send(b, [b"b-abort-5"], False)
    b.abort_transaction(20)
    a.begin_transaction()
    send(a, [b"a-abort-6"], False)
    b.begin_transaction()
    send(b, [b"b-commit-7"], True)
    a.abort_transaction(20)
    b.commit_transaction(20)
    a.begin_transaction()
    send(a, [b"a-commit-big-%03d" % i for i in range(50)], True)
    a.commit_transaction(20)
    return committed, everything


def kafkawire_read(shell: Any, bootstrap: str, topic: str, isolation: str, columnar: bool, end: int,
                   check_crcs: bool = True, deadline_s: float = 20.0) -> tuple[list[tuple[int, bytes]], int]:
    """(offset, value) of what kafkawire's consumer returns from offset 0 until its
    position reaches ``end``, and that position."""
    got: list[tuple[int, bytes]] = []
    with shell.Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, check_crcs=check_crcs,
                        auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([(topic, 0)])
        deadline = time.monotonic() + deadline_s
        while True:
            if columnar:
                for fb in c.poll_batch(0.3):
                    got += [(r.offset, r.value) for r in fb.columns.to_records()]
            else:
                got += [(r.offset, r.value) for r in c.poll(0.3, max_records=7)]
            position = c.position((topic, 0))
            if position >= end or time.monotonic() > deadline:
                return got, position


def confluent_read(bootstrap: str, topic: str, isolation: str, end: int, deadline_s: float = 20.0
                   ) -> list[tuple[int, bytes]]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"ck-{_uid()}",
                                  "isolation.level": isolation, "enable.auto.commit": False, "log_level": 3})
    got: list[tuple[int, bytes]] = []
    try:
        c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                got.append((m.offset(), m.value()))
            (pos,) = c.position([confluent_kafka.TopicPartition(topic, 0)])
            if pos.offset >= end:
                break
    finally:
        c.close()
    return got


@pytest.fixture(scope="module")
def interleaved(broker: Broker) -> dict[str, Any]:
    topic = broker.topic("rc-interleaved")
    committed, everything = write_interleaved(broker.bootstrap, topic)
    log, pd = raw_log(broker.port, topic, check_crcs=broker.check_crcs)
    return {"topic": topic, "committed": committed, "everything": everything, "log": log, "end": pd.high_watermark}


@pytest.mark.parametrize("columnar", [False, True], ids=["poll", "poll_batch"])
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_kafkawire_agrees_with_confluent(broker: Broker, interleaved, shell, isolation: str, columnar: bool) -> None:
    topic, end = interleaved["topic"], interleaved["end"]
    got, position = kafkawire_read(shell, broker.bootstrap, topic, isolation, columnar, end, broker.check_crcs)
    theirs = confluent_read(broker.bootstrap, topic, isolation, end)
    assert got == theirs
    # Both brokers list no aborted transactions (module docstring), so under either
    # isolation level every data record comes back, in order; markers never do.
    assert [v for _o, v in got] == interleaved["everything"]
    markers = {b.base_offset for b in codec.decode_batches(interleaved["log"], check_crcs=broker.check_crcs)
               if b.is_control}
    assert len(markers) == 5 and not markers & {o for o, _v in got}
    assert position == end  # past the last COMMIT marker


@pytest.mark.parametrize("columnar", [False, True], ids=["poll", "poll_batch"])
def test_read_committed_on_the_brokers_bytes_with_a_leaders_aborted_list(broker: Broker, interleaved,
                                                                         columnar: bool) -> None:
    # The bytes the broker holds (confluent's lz4 and gzip transactional batches and the
    # markers), answered as a Kafka leader would: with the aborted transactions listed.
    log = interleaved["log"]
    aborted = leader_aborted_list(log, broker.check_crcs)
    assert len(aborted) == 2  # b's first and a's second transaction
    compressed = {b.compression for b in codec.decode_batches(log, check_crcs=broker.check_crcs)
                  if b.is_transactional and not b.is_control}
    assert compressed == {1, 3}  # confluent's gzip and lz4 batches
    f = Fetcher(Config.consumer(bootstrap_servers="127.0.0.1:9", isolation_level="read_committed",
                                check_crcs=broker.check_crcs))
    tp = TopicPartition(interleaved["topic"], 0)
    f.assign([tp])
    f.seek(tp, 0)
    _nodes, offsets, buffered, _ = f.plan(lambda topic, partition: 1)
    _req, positions = f.request([tp], offsets, buffered, {})
    P = FETCH.Response.FetchableTopicResponse.PartitionData
    part = P(partition_index=0, high_watermark=interleaved["end"], last_stable_offset=interleaved["end"],
             aborted_transactions=[P.AbortedTransaction(producer_id=p, first_offset=o) for p, o in aborted],
             records=memoryview(log))
    f.on_response(FETCH.Response(responses=[FETCH.Response.FetchableTopicResponse(topic=tp.topic, partitions=[part])]),
                  positions, {}, 1)
    got: list[bytes] = []
    for _ in range(100):
        for x in f.drain(7, columnar):
            got += [r.value for r in x.columns.to_records()] if columnar else [x.value]
    assert got == interleaved["committed"]
    assert f.assigned[tp].position == interleaved["end"]


def leader_aborted_list(log: bytes, check_crcs: bool) -> list[tuple[int, int]]:
    """(producer_id, first_offset) of every aborted transaction in ``log``, as a Kafka
    partition leader keeps them: from a producer's first transactional batch to its marker."""
    first: dict[int, int] = {}
    aborted = []
    for b in codec.decode_batches(log, check_crcs=check_crcs):
        if not b.is_transactional:
            continue
        if b.is_control:
            start = first.pop(b.producer_id)
            if b.records[0].key == b"\x00\x00\x00\x00":
                aborted.append((b.producer_id, start))
        else:
            first.setdefault(b.producer_id, b.base_offset)
    return aborted


def test_read_committed_waits_for_an_open_transaction_on_tansu(tansu: Broker, shell) -> None:
    # Tansu holds read_committed fetches at the last stable offset (the mock does not).
    topic = tansu.topic("rc-open")
    plain = confluent_kafka.Producer({"bootstrap.servers": tansu.bootstrap, "log_level": 3})
    plain.produce(topic, b"plain-0", partition=0)
    assert plain.flush(15) == 0
    a = _txn_producer(tansu.bootstrap, f"{topic}-a", "none")
    a.begin_transaction()
    a.produce(topic, b"open-1", partition=0)
    assert a.flush(15) == 0
    plain.produce(topic, b"plain-2", partition=0)
    assert plain.flush(15) == 0
    _log, pd = raw_log(tansu.port, topic, isolation=1)
    assert (pd.high_watermark, pd.last_stable_offset) == (3, 1)

    with shell.Consumer(bootstrap_servers=tansu.bootstrap, isolation_level="read_committed",
                        auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # a fixed window: nothing past the LSO may come
            got += [r.value for r in c.poll(0.3)]
        assert got == [b"plain-0"] and c.position((topic, 0)) == 1
        if hasattr(c, "high_watermarks"):  # the sync Consumer's: the LSO under read_committed
            assert c.high_watermarks([(topic, 0)], timeout=10) == {(topic, 0): 1}
        # Tansu quirk: ListOffsets latest at read_committed answers 0, below the LSO (1); at
        # read_uncommitted 3.  So 0 here shows the consumer asked at its isolation level.
        assert c.end_offsets([(topic, 0)], timeout=10) == {(topic, 0): 0}
        uncommitted, _pos = kafkawire_read(shell, tansu.bootstrap, topic, "read_uncommitted", False, 3)
        assert [v for _o, v in uncommitted] == [b"plain-0", b"open-1", b"plain-2"]
        with shell.Consumer(bootstrap_servers=tansu.bootstrap) as other:
            assert other.end_offsets([(topic, 0)], timeout=10) == {(topic, 0): 3}

        a.commit_transaction(20)
        deadline = time.monotonic() + 15
        while len(got) < 3 and time.monotonic() < deadline:
            got += [r.value for r in c.poll(0.3)]
        assert got == [b"plain-0", b"open-1", b"plain-2"]
        deadline = time.monotonic() + 15
        while c.position((topic, 0)) < 4 and time.monotonic() < deadline:
            assert c.poll(0.3) == []  # the COMMIT marker at 3 is never returned
        assert c.position((topic, 0)) == 4


def test_the_mocks_markers_fail_the_crc_check(mock_cluster, shell) -> None:
    # kafkawire checks every batch it decodes, control batches too (as Kafka's Java
    # consumer does); the mock's markers carry CRC 0, so they are reported, not skipped.
    broker = Broker("mock", mock_cluster.bootstrap, mock_cluster.brokers[1][1], mock=mock_cluster)
    topic = broker.topic("rc-mock-crc")
    out = raw_transaction(broker.port, topic, {})
    assert out["EndTxn"].error_code == 0
    (marker,) = [b for b in codec.decode_batches(raw_log(broker.port, topic, check_crcs=False)[0], check_crcs=False)
                 if b.is_control]
    assert marker.crc == 0
    with shell.Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([(topic, 0)])
        got: list[bytes] = []
        with pytest.raises(CorruptRecordError, match="CRC"):
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                got += [r.value for r in c.poll(0.3)]
        assert got == [b"raw-txn-0", b"raw-txn-1"]
