"""Every API x every version kafkawire and a real broker both speak, over a raw socket.

For each test broker (Apache Kafka 4.4 and 3.9, the reference; Tansu and librdkafka's mock
cluster as second opinions) and each API kafkawire declares,
the broker's ApiVersions answer gives the versions to try; each version sends a
well-formed request built by the API's exchange function below and checks the decoded
response makes sense (error codes, the produced record read back, ...).  An API the broker
does not offer is checked to be refused by version negotiation.

Broker quirks are named in one line where they are handled; the behaviour is asserted on
the broker that gets it right (see DESIGN.md).  Run with -rP to see the exchanged versions.
"""

from __future__ import annotations

import ast
import os
import struct
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest
from rawsocket import BrokerClosedError, RawConnection

from kafkawire import codec
from kafkawire.protocol import apis
from kafkawire.protocol.api import Api, ApiVersionError
from kafkawire.protocol.connection import ProtocolError

pytestmark = pytest.mark.broker

# Mock quirk: it closes the connection on JoinGroup v6 and SyncGroup v4, the first flexible
# versions (KIP-482), though it offers them (Tansu answers them).
MOCK_NO_FLEXIBLE_GROUPS = {"JoinGroup": 6, "SyncGroup": 4}

MEMBER_ID_REQUIRED = 79
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
UNSUPPORTED_VERSION = 35
UNKNOWN_TOPIC_OR_PARTITION = 3
GROUP_ID_NOT_FOUND = 69

# Exchanges that each wait for a join of their own group (half a session timeout on
# Tansu, the mock's 3 s initial rebalance delay): their versions run side by side, each
# on its own connections, instead of one wait after another (100 s of each run, now 20 s).
CONCURRENT_EXCHANGES = {"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "DescribeGroups", "ListGroups"}


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def consumer_metadata(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


def consumer_assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: version, [topic, [partition]], null user data."""
    name = topic.encode()
    out = struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", len(partitions))
    out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


class Target:
    """One broker under test: connections, topics and the helpers the exchanges share."""

    def __init__(self, name: str, port: int, mock: Any = None):
        self.name = name
        self.port = port
        self.mock = mock
        # Tansu completes a JoinGroup after half the session timeout, the mock after its
        # 3 s initial rebalance delay (and loses members whose session is shorter).
        self.session_timeout_ms = 2000 if name == "tansu" else 6000
        with self.connect() as c:
            self.broker_versions = dict(c.conn.broker_versions or {})
        self.topic = self.create_topic(f"raw-{name}-{_uid()}")
        # Records the Fetch and ListOffsets exchanges read back.
        self.values = [b"raw-%d" % i for i in range(3)]
        self.base_offset = self.produce(self.topic, self.values)

    @property
    def is_tansu(self) -> bool:
        return self.name == "tansu"

    @property
    def is_kafka(self) -> bool:
        """Apache Kafka itself (4.x or 3.9), the reference."""
        return self.name.startswith("kafka")

    @property
    def kip896(self) -> bool:
        """The broker dropped the oldest versions (Kafka 4, KIP-896): no Fetch v0-v3."""
        return self.broker_versions[apis.get("Fetch").key][0] >= 4

    def connect(self, port: int | None = None, **options: Any) -> RawConnection:
        rc = RawConnection(port or self.port, timeout=15.0, **options)
        rc.negotiate()
        return rc

    def call(self, api: Api | str, request: Any, version: int | None = None, port: int | None = None) -> Any:
        """One request on a fresh connection; returns the decoded response."""
        with self.connect(port) as rc:
            event = rc.request(api, request, version)
            assert event.api is (api if isinstance(api, Api) else apis.get(api))
            return event.response

    def highest(self, api: Api | str) -> int:
        api = api if isinstance(api, Api) else apis.get(api)
        lo, hi = self.broker_versions[api.key]
        return min(hi, api.max_version)

    # -- topics ---------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1) -> str:
        if self.mock is not None:
            # The mock cluster does not implement CreateTopics (DESIGN.md).
            self.mock.create_topic(name, partitions, 1)
        else:
            ct = apis.get("CreateTopics")
            topic = ct.Request.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
            resp = self.call(ct, ct.Request(topics=[topic], timeout_ms=10000))
            assert [(t.name, t.error_code) for t in resp.topics] == [(name, 0)]
        self.wait_served(name, partitions)
        return name

    def wait_served(self, topic: str, partitions: int) -> None:
        """Wait until Metadata lists ``partitions`` partitions of ``topic`` and each leader
        answers for its partition: Kafka answers CreateTopics and CreatePartitions once the
        controller has committed them, and its brokers apply that a little later (Metadata
        without the partitions, then NOT_LEADER_OR_FOLLOWER for a short while)."""
        lo = apis.get("ListOffsets")
        R = lo.Request
        deadline = time.monotonic() + 15
        while True:
            t, ports = self.metadata_topic(topic)
            served = len(t.partitions) == partitions and all(p.leader_id in ports for p in t.partitions)
            for p in t.partitions if served else ():
                part = R.ListOffsetsTopic.ListOffsetsPartition(partition_index=p.partition_index, timestamp=-1)
                req = R(replica_id=-1, topics=[R.ListOffsetsTopic(name=topic, partitions=[part])])
                answer = self.call(lo, req, self.highest(lo), port=ports[p.leader_id])
                served = served and answer.topics[0].partitions[0].error_code == 0
            if served:
                return
            assert time.monotonic() < deadline, f"{self.name} does not serve {partitions} partition(s) of {topic}: {t}"
            time.sleep(0.1)

    def metadata_topic(self, topic: str) -> tuple[Any, dict[int, int]]:
        md = apis.get("Metadata")
        version = self.highest(md)
        req = md.Request(topics=[md.Request.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
        deadline = time.monotonic() + 10
        while True:
            resp = self.call(md, req, version)
            ports = {b.node_id: b.port for b in resp.brokers}
            (t,) = resp.topics
            if t.error_code == 0 and t.partitions and t.partitions[0].leader_id in ports:
                return t, ports
            assert time.monotonic() < deadline, f"topic {topic} has no leader: {t}"
            time.sleep(0.1)

    def leader_port(self, topic: str, partition: int = 0) -> int:
        t, ports = self.metadata_topic(topic)
        (p,) = [p for p in t.partitions if p.partition_index == partition]
        return ports[p.leader_id]

    def topic_id(self, topic: str) -> uuid.UUID:
        t, _ = self.metadata_topic(topic)
        assert t.topic_id.int != 0, f"{self.name} sent no topic id for {topic}"
        return t.topic_id

    # -- records --------------------------------------------------------------------

    def produce(self, topic: str, values: list[bytes], version: int | None = None) -> int:
        """Produce ``values`` to partition 0; returns the base offset."""
        pr = apis.get("Produce")
        version = self.highest(pr) if version is None else version
        req = produce_request(topic, values, version, acks=-1)
        resp = self.call(pr, req, version, port=self.leader_port(topic))
        (tr,) = resp.responses
        (pp,) = tr.partition_responses
        assert (tr.name, pp.index, pp.error_code) == (topic, 0, 0), pp
        assert pp.base_offset >= 0
        return pp.base_offset

    def fetch(self, topic: str, offset: int, version: int | None = None) -> tuple[Any, list[codec.Record]]:
        """Fetch partition 0 from ``offset``; returns (partition data, decoded records)."""
        fe = apis.get("Fetch")
        version = self.highest(fe) if version is None else version
        R = fe.Request
        part = R.FetchTopic.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
        ft = R.FetchTopic(partitions=[part])
        if version >= 13:
            ft.topic_id = self.topic_id(topic)  # KIP-516: names replaced by ids
        else:
            ft.topic = topic
        req = R(max_wait_ms=500, min_bytes=1, max_bytes=1 << 22, topics=[ft])
        resp = self.call(fe, req, version, port=self.leader_port(topic))
        assert getattr(resp, "error_code", 0) == 0
        (tr,) = resp.responses
        (pd,) = tr.partitions
        assert pd.error_code == 0, pd
        records = codec.decode_records(pd.records) if pd.records is not None else []
        return pd, records

    # -- groups ---------------------------------------------------------------------

    def coordinator_port(self, group: str) -> int:
        fc = apis.get("FindCoordinator")
        resp = coordinator_retry(lambda: self.call(fc, fc.Request(key=group), 0), f"FindCoordinator {group!r}")
        assert resp.error_code == 0, resp
        assert resp.host == "127.0.0.1" and resp.port > 0
        return resp.port

    def group_version(self, api: str) -> int:
        """The version the group helpers use for ``api``."""
        if self.mock is not None and api in MOCK_NO_FLEXIBLE_GROUPS:
            return MOCK_NO_FLEXIBLE_GROUPS[api] - 1
        return self.highest(api)

    def join(self, group: str, version: int | None = None, rc: RawConnection | None = None) -> tuple[RawConnection, Any]:
        """Join ``group`` as its only member; returns (connection to the coordinator, response)."""
        jg = apis.get("JoinGroup")
        version = self.group_version("JoinGroup") if version is None else version
        if rc is None:
            rc = self.connect(self.coordinator_port(group))
        protocol = jg.Request.JoinGroupRequestProtocol(name="range", metadata=consumer_metadata(self.topic))
        req = jg.Request(
            group_id=group, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.session_timeout_ms, member_id="",
            protocol_type="consumer", protocols=[protocol],
        )
        # A broker just started answers COORDINATOR_LOAD_IN_PROGRESS (or NOT_COORDINATOR)
        # until it has loaded the group's __consumer_offsets partition.
        resp = coordinator_retry(lambda: rc.request(jg, req, version).response, f"JoinGroup {group!r}")
        if resp.error_code == MEMBER_ID_REQUIRED:
            # KIP-394: the broker hands out the member id, and the member joins again with it.
            # Tansu quirk: it answers MEMBER_ID_REQUIRED even to v0-v3, which predate KIP-394.
            assert version >= 4 or self.is_tansu, f"MEMBER_ID_REQUIRED to JoinGroup v{version}"
            assert resp.member_id
            req.member_id = resp.member_id
            resp = rc.request(jg, req, version).response
        assert resp.error_code == 0, resp
        assert resp.member_id and resp.generation_id >= 0
        return rc, resp

    def join_and_sync(self, group: str) -> tuple[RawConnection, Any]:
        sg = apis.get("SyncGroup")
        rc, joined = self.join(group)
        version = self.group_version("SyncGroup")
        assignment = consumer_assignment(self.topic, [0])
        req = sg.Request(
            group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
            protocol_type="consumer", protocol_name="range",
            assignments=[sg.Request.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=assignment)],
        )
        resp = rc.request(sg, req, version).response
        assert resp.error_code == 0 and resp.assignment == assignment, resp
        return rc, joined

    def commit(self, group: str, offset: int, version: int | None = None, metadata: str = "") -> Any:
        oc = apis.get("OffsetCommit")
        version = self.highest(oc) if version is None else version
        R = oc.Request
        part = R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_metadata=metadata
        )
        req = R(group_id=group, topics=[R.OffsetCommitRequestTopic(name=self.topic, partitions=[part])])
        return self.call(oc, req, version, port=self.coordinator_port(group))


def produce_request(topic: str, values: list[bytes], version: int, acks: int) -> Any:
    pr = apis.get("Produce")
    now = int(time.time() * 1000)
    records = [(None, v, now) for v in values]
    if version >= 3:
        data = codec.encode_record_batch(records)
    else:
        # Produce v0-v1 carry MessageSet magic 0, v2 magic 1 (KIP-32).
        magic = 1 if version == 2 else 0
        data = codec.encode_message_set([(k, v) for k, v, _ in records] if magic == 0 else records, magic=magic)
    R = pr.Request
    part = R.TopicProduceData.PartitionProduceData(index=0, records=data)
    return R(acks=acks, timeout_ms=10000, topic_data=[R.TopicProduceData(name=topic, partition_data=[part])])


# ---------------------------------------------------------------------------------------
# One exchange function per API: (target, version) -> None, asserting as it goes.
# ---------------------------------------------------------------------------------------

EXCHANGES: dict[str, Callable[[Target, int], None]] = {}


def exchange(name: str) -> Callable[[Callable[[Target, int], None]], Callable[[Target, int], None]]:
    def register(fn: Callable[[Target, int], None]) -> Callable[[Target, int], None]:
        EXCHANGES[name] = fn
        return fn

    return register


# The transaction APIs: one committed transaction in raw requests per version (the
# exchange lives with the other transaction tests).
from test_read_committed_brokers import TXN_APIS, check_transaction_api, coordinator_retry  # noqa: E402

for _name in TXN_APIS:
    exchange(_name)(lambda t, v, _name=_name: check_transaction_api(
        t.port, t.create_topic(f"raw-txn-{_uid()}"), _name, v, check_crcs=t.mock is None, kafka=t.is_kafka))


@exchange("ApiVersions")
def _api_versions(t: Target, v: int) -> None:
    av = apis.get("ApiVersions")
    resp = t.call(av, av.Request(client_software_name="kafkawire", client_software_version="0"), v)
    assert resp.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys == t.broker_versions


@exchange("Metadata")
def _metadata(t: Target, v: int) -> None:
    md = apis.get("Metadata")
    req = md.Request(topics=[md.Request.MetadataRequestTopic(name=t.topic)], allow_auto_topic_creation=False)
    resp = t.call(md, req, v)
    assert resp.brokers and all(b.host == "127.0.0.1" and b.port > 0 for b in resp.brokers)
    assert t.port in {b.port for b in resp.brokers}
    (topic,) = resp.topics
    assert (topic.name, topic.error_code) == (t.topic, 0)
    assert [p.partition_index for p in topic.partitions] == [0]
    assert topic.partitions[0].leader_id in {b.node_id for b in resp.brokers}
    if v >= 10:
        assert topic.topic_id.int != 0
    if v >= 13:
        assert resp.error_code == 0


@exchange("Produce")
def _produce(t: Target, v: int) -> None:
    values = [b"produce-v%d-%d" % (v, i) for i in range(2)]
    port = t.leader_port(t.topic)
    if t.is_tansu and v <= 2:
        # Tansu quirk: it closes the connection on a magic 0/1 produce (the mock accepts it).
        with t.connect(port) as rc:
            rc.send("Produce", produce_request(t.topic, values, v, acks=-1), v)
            assert rc.expect_closed(), "Tansu now answers magic 0/1 produce: drop the quirk"
        return
    if t.kip896 and v <= 2:
        # Kafka 4 lists Produce v0-v2 in ApiVersions for librdkafka's sake (KAFKA-18659) but
        # closes the connection on them (KIP-896): negotiation must not pick them.
        with t.connect(port, version_overrides={"Produce": v}) as rc:
            with pytest.raises(ApiVersionError, match=f"Produce v{v} .*speaks v3-v.*KAFKA-18659"):
                rc.conn.version_for("Produce")
            rc.send("Produce", produce_request(t.topic, values, v, acks=-1), v)
            assert rc.expect_closed(), f"Kafka now answers Produce v{v}: let negotiation offer it again"
        return
    if t.mock is not None and v == 5:
        # Mock quirk: its Produce v5 response lacks log_start_offset (added in v5, KIP-107).
        with t.connect(port) as rc, pytest.raises(ProtocolError, match="truncated int64"):
            rc.request("Produce", produce_request(t.topic, values, v, acks=-1), v)
        return
    base = t.produce(t.topic, values, v)
    _pd, records = t.fetch(t.topic, base)
    got = [r.value for r in records if r.offset >= base][:2]
    assert got == values
    assert [r.offset for r in records if r.offset >= base][:2] == [base, base + 1]
    # acks=0: no response; the next request's answer still matches.
    with t.connect(port) as rc:
        cid = rc.send("Produce", produce_request(t.topic, [b"acks0-v%d" % v], v, acks=0), v, expects_response=False)
        assert rc.conn.in_flight == 0
        md = apis.get("Metadata")
        # Tansu and the mock answer a Produce with acks=0 (Kafka sends nothing); the
        # Connection drops that answer and stays in step.
        mid = rc.send(md, md.Request(topics=None), 1)
        event = rc.next_response()
        assert event.correlation_id == mid and event.correlation_id != cid


@exchange("Fetch")
def _fetch(t: Target, v: int) -> None:
    pd, records = t.fetch(t.topic, t.base_offset, v)
    assert pd.partition_index == 0
    assert pd.high_watermark >= t.base_offset + len(t.values)
    assert isinstance(pd.records, memoryview)
    mine = [r for r in records if t.base_offset <= r.offset < t.base_offset + len(t.values)]
    assert [r.value for r in mine] == t.values
    assert [r.offset for r in mine] == list(range(t.base_offset, t.base_offset + len(t.values)))


@exchange("ListOffsets")
def _list_offsets(t: Target, v: int) -> None:
    lo = apis.get("ListOffsets")
    R = lo.Request
    results = {}
    for ts in (-2, -1):  # earliest, latest
        part = R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=ts, max_num_offsets=1)
        req = R(replica_id=-1, topics=[R.ListOffsetsTopic(name=t.topic, partitions=[part])])
        if t.is_tansu and v == 0:
            # Tansu quirk: its ListOffsets v0 response is truncated.
            with t.connect(t.leader_port(t.topic)) as rc:
                with pytest.raises(Exception, match="truncated"):
                    rc.request(lo, req, v)
            return
        resp = t.call(lo, req, v, port=t.leader_port(t.topic))
        (tr,) = resp.topics
        (p,) = tr.partitions
        assert (tr.name, p.partition_index, p.error_code) == (t.topic, 0, 0), p
        results[ts] = p.old_style_offsets[0] if v == 0 else p.offset
    end = t.base_offset + len(t.values)
    assert results[-2] == 0
    if t.is_tansu:
        # Tansu quirk: "latest" can be less than the high watermark.
        assert 0 <= results[-1] <= t.fetch(t.topic, 0)[0].high_watermark
    else:
        assert results[-1] >= end and results[-1] == t.fetch(t.topic, 0)[0].high_watermark


@exchange("CreateTopics")
def _create_topics(t: Target, v: int) -> None:
    ct = apis.get("CreateTopics")
    name = f"raw-ct-v{v}-{_uid()}"
    topic = ct.Request.CreatableTopic(name=name, num_partitions=2, replication_factor=1)
    resp = t.call(ct, ct.Request(topics=[topic], timeout_ms=10000), v)
    (r,) = resp.topics
    assert (r.name, r.error_code) == (name, 0), r
    if v >= 5:
        assert r.num_partitions == 2 and r.replication_factor == 1
    md, _ = t.metadata_topic(name)
    assert len(md.partitions) == 2
    again = t.call(ct, ct.Request(topics=[topic], timeout_ms=10000), v)
    assert again.topics[0].error_code == 36  # TOPIC_ALREADY_EXISTS


@exchange("DeleteTopics")
def _delete_topics(t: Target, v: int) -> None:
    dt = apis.get("DeleteTopics")
    name = t.create_topic(f"raw-dt-v{v}-{_uid()}")
    if v >= 6:
        req = dt.Request(topics=[dt.Request.DeleteTopicState(name=name)], timeout_ms=10000)
    else:
        req = dt.Request(topic_names=[name], timeout_ms=10000)
    resp = t.call(dt, req, v)
    (r,) = resp.responses
    assert (r.name, r.error_code) == (name, 0), r
    md = apis.get("Metadata")
    # Kafka answers once the controller has committed the deletion; its broker's Metadata
    # follows a little later.
    deadline = time.monotonic() + 10
    while True:
        after = t.call(md, md.Request(topics=[md.Request.MetadataRequestTopic(name=name)],
                                      allow_auto_topic_creation=False), 4)
        if after.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION:
            break
        assert time.monotonic() < deadline, f"{name} is still listed after DeleteTopics: {after.topics}"
        time.sleep(0.1)


@exchange("DescribeConfigs")
def _describe_configs(t: Target, v: int) -> None:
    dc = apis.get("DescribeConfigs")
    res = dc.Request.DescribeConfigsResource(resource_type=2, resource_name=t.topic, configuration_keys=None)
    resp = t.call(dc, dc.Request(resources=[res]), v)
    (r,) = resp.results
    assert (r.error_code, r.resource_type, r.resource_name) == (0, 2, t.topic), r
    assert all(c.name for c in r.configs)
    if not t.is_tansu:  # Tansu answers with no configs at all
        # Null keys ask for every config: a topic has retention.ms whichever the version.
        assert "retention.ms" in {c.name for c in r.configs}, r


@exchange("InitProducerId")
def _init_producer_id(t: Target, v: int) -> None:
    ip = apis.get("InitProducerId")
    resp = t.call(ip, ip.Request(transactional_id=None, transaction_timeout_ms=60000), v)
    if t.is_tansu and v <= 2:
        # Tansu quirk: InitProducerId v0-v2 fail with UNKNOWN_SERVER_ERROR (v3+ work; the mock's v0-v2 too).
        assert resp.error_code == -1, resp
        return
    assert resp.error_code == 0, resp
    assert resp.producer_id >= 0 and resp.producer_epoch >= 0


@exchange("FindCoordinator")
def _find_coordinator(t: Target, v: int) -> None:
    fc = apis.get("FindCoordinator")
    group = f"raw-fc-{_uid()}"
    if v >= 4:
        resp = t.call(fc, fc.Request(key_type=0, coordinator_keys=[group]), v)
        (c,) = resp.coordinators
        assert (c.key, c.error_code) == (group, 0), c
        node, host, port = c.node_id, c.host, c.port
    else:
        # A broker just started answers COORDINATOR_NOT_AVAILABLE until __consumer_offsets exists.
        resp = coordinator_retry(lambda: t.call(fc, fc.Request(key=group), v), f"FindCoordinator v{v} {group!r}")
        assert resp.error_code == 0, resp
        node, host, port = resp.node_id, resp.host, resp.port
    assert node >= 0 and host == "127.0.0.1" and port > 0


def _mock_closes_flexible(t: Target, api: str, v: int) -> bool:
    """True (after checking the mock closes the connection) for a MOCK_NO_FLEXIBLE_GROUPS case."""
    if t.mock is None or v < MOCK_NO_FLEXIBLE_GROUPS.get(api, 1 << 15):
        return False
    a = apis.get(api)
    group = f"raw-flex-{_uid()}"
    req = a.Request(group_id=group)
    if api == "JoinGroup":
        req.session_timeout_ms = t.session_timeout_ms
        req.protocol_type = "consumer"
    with t.connect(t.coordinator_port(group)) as rc:
        rc.send(a, req, v)
        assert rc.expect_closed(), f"the mock now answers {api} v{v}: drop the quirk"
    return True


@exchange("JoinGroup")
def _join_group(t: Target, v: int) -> None:
    if _mock_closes_flexible(t, "JoinGroup", v):
        return
    group = f"raw-jg-v{v}-{_uid()}"
    rc, resp = t.join(group, v)
    with rc:
        assert resp.leader == resp.member_id  # the only member leads
        assert [m.member_id for m in resp.members] == [resp.member_id]
        assert resp.members[0].metadata == consumer_metadata(t.topic)
        assert resp.protocol_name == "range"


@exchange("SyncGroup")
def _sync_group(t: Target, v: int) -> None:
    if _mock_closes_flexible(t, "SyncGroup", v):
        return
    sg = apis.get("SyncGroup")
    group = f"raw-sg-v{v}-{_uid()}"
    rc, joined = t.join(group)
    with rc:
        assignment = consumer_assignment(t.topic, [0])
        req = sg.Request(
            group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
            protocol_type="consumer", protocol_name="range",
            assignments=[sg.Request.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=assignment)],
        )
        resp = rc.request(sg, req, v).response
        assert resp.error_code == 0, resp
        assert resp.assignment == assignment
        if v >= 5:
            assert (resp.protocol_type, resp.protocol_name) == ("consumer", "range")


@exchange("Heartbeat")
def _heartbeat(t: Target, v: int) -> None:
    hb = apis.get("Heartbeat")
    group = f"raw-hb-v{v}-{_uid()}"
    rc, joined = t.join_and_sync(group)
    with rc:
        req = hb.Request(group_id=group, generation_id=joined.generation_id, member_id=joined.member_id)
        assert rc.request(hb, req, v).response.error_code == 0
        req.member_id = "not-a-member"
        assert rc.request(hb, req, v).response.error_code == UNKNOWN_MEMBER_ID


@exchange("LeaveGroup")
def _leave_group(t: Target, v: int) -> None:
    lg = apis.get("LeaveGroup")
    group = f"raw-lg-v{v}-{_uid()}"
    rc, joined = t.join_and_sync(group)
    with rc:
        if v >= 3:
            req = lg.Request(group_id=group, members=[lg.Request.MemberIdentity(member_id=joined.member_id)])
        else:
            req = lg.Request(group_id=group, member_id=joined.member_id)
        if t.mock is not None and v >= 3:
            # Mock quirk: its LeaveGroup v3+ responses lack the members array (KIP-345).
            with pytest.raises(ProtocolError, match=f"LeaveGroup v{v} response .* truncated"):
                rc.request(lg, req, v)
            return
        resp = rc.request(lg, req, v).response
        assert resp.error_code == 0, resp
        if v >= 3:
            assert [(m.member_id, m.error_code) for m in resp.members] == [(joined.member_id, 0)]


@exchange("OffsetCommit")
def _offset_commit(t: Target, v: int) -> None:
    group = f"raw-oc-v{v}-{_uid()}"
    resp = t.commit(group, 2, v, metadata="m")
    (tr,) = resp.topics
    (p,) = tr.partitions
    if t.is_tansu and v == 1:
        # Tansu quirk: OffsetCommit v1 fails (the mock commits it).
        assert p.error_code != 0
        return
    if t.is_kafka and v == 0:
        # Kafka 3.9 in KRaft mode: v0 meant "store in ZooKeeper", which it has not, so it
        # answers UNSUPPORTED_VERSION per partition (Kafka 4 no longer offers v0-v1, KIP-896).
        assert (tr.name, p.partition_index, p.error_code) == (t.topic, 0, UNSUPPORTED_VERSION), p
        return
    assert (tr.name, p.partition_index, p.error_code) == (t.topic, 0, 0), p
    committed = _fetch_committed(t, group, t.highest("OffsetFetch"))
    assert committed.committed_offset == 2
    if not t.is_tansu:  # Tansu quirk: commit metadata is dropped.
        assert committed.metadata == "m"


def _fetch_committed(t: Target, group: str, v: int) -> Any:
    of = apis.get("OffsetFetch")
    R = of.Request
    port = t.coordinator_port(group)
    if v >= 8:
        topics = [R.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name=t.topic, partition_indexes=[0])]
        resp = t.call(of, R(groups=[R.OffsetFetchRequestGroup(group_id=group, topics=topics)]), v, port=port)
        (g,) = resp.groups
        assert (g.group_id, g.error_code) == (group, 0), g
        (tr,) = g.topics
    else:
        req = R(group_id=group, topics=[R.OffsetFetchRequestTopic(name=t.topic, partition_indexes=[0])])
        resp = t.call(of, req, v, port=port)
        if v >= 2:
            assert resp.error_code == 0, resp
        (tr,) = resp.topics
    (p,) = tr.partitions
    assert (tr.name, p.partition_index, p.error_code) == (t.topic, 0, 0), p
    return p


@exchange("OffsetFetch")
def _offset_fetch(t: Target, v: int) -> None:
    group = f"raw-of-v{v}-{_uid()}"
    resp = t.commit(group, 1)
    assert resp.topics[0].partitions[0].error_code == 0
    if t.is_kafka and v == 0:
        # Kafka 3.9 in KRaft mode: v0 read offsets from ZooKeeper, which it has not
        # (UNSUPPORTED_VERSION per partition; Kafka 4 no longer offers v0, KIP-896).
        of = apis.get("OffsetFetch")
        req = of.Request(group_id=group, topics=[of.Request.OffsetFetchRequestTopic(name=t.topic, partition_indexes=[0])])
        (p,) = t.call(of, req, v, port=t.coordinator_port(group)).topics[0].partitions
        assert (p.partition_index, p.error_code) == (0, UNSUPPORTED_VERSION), p
        return
    assert _fetch_committed(t, group, v).committed_offset == 1
    fresh = _fetch_committed(t, f"raw-of-none-{_uid()}", v)
    assert fresh.committed_offset == -1  # no offset committed: -1 with no error


@exchange("DescribeGroups")
def _describe_groups(t: Target, v: int) -> None:
    dg = apis.get("DescribeGroups")
    group = f"raw-dg-v{v}-{_uid()}"
    rc, joined = t.join_and_sync(group)
    with rc:
        resp = rc.request(dg, dg.Request(groups=[group]), v).response
    (g,) = resp.groups
    assert (g.error_code, g.group_id, g.protocol_type) == (0, group, "consumer"), g
    assert g.group_state == "Stable"
    assert [m.member_id for m in g.members] == [joined.member_id]
    (m,) = g.members
    if t.is_tansu:
        # Tansu quirk: protocol_data, client_id and member metadata/assignment come back empty.
        assert (g.protocol_data, m.client_id, m.member_metadata) == ("", "", b"")
    else:
        assert (g.protocol_data, m.client_id) == ("range", "kafkawire")
        assert m.member_metadata == consumer_metadata(t.topic)
        assert m.member_assignment == consumer_assignment(t.topic, [0])


@exchange("ListGroups")
def _list_groups(t: Target, v: int) -> None:
    lg = apis.get("ListGroups")
    group = f"raw-lsg-v{v}-{_uid()}"
    committed = f"raw-lsg-committed-v{v}-{_uid()}"
    assert t.commit(committed, 1).topics[0].partitions[0].error_code == 0
    rc, _joined = t.join_and_sync(group)
    with rc:
        resp = rc.request(lg, lg.Request(), v).response
    assert resp.error_code == 0
    listed = {g.group_id: g for g in resp.groups}
    # A group that only has committed offsets never chose a protocol: Kafka lists its
    # protocol_type as "", Tansu as "consumer".
    assert listed[committed].protocol_type == ("consumer" if t.is_tansu else ""), resp.groups
    if t.is_tansu:
        # Tansu quirk: only groups with committed offsets are listed, not groups with members.
        assert group not in listed
    else:
        assert listed[group].protocol_type == "consumer"
        if v >= 4:
            assert listed[group].group_state == "Stable"


def _consumer_protocol_off(t: Target, api: str, v: int) -> bool:
    """True (after checking the answer) where the broker lists a KIP-848 API but runs no
    consumer-protocol groups: Kafka 3.9 lists ConsumerGroupHeartbeat/Describe v0 with the
    protocol off by default (a preview before 4.0) and answers UNSUPPORTED_VERSION."""
    if t.name != "kafka39":
        return False
    a = apis.get(api)
    group = f"raw-kip848-off-{_uid()}"
    if api == "ConsumerGroupHeartbeat":
        req = a.Request(group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=30000,
                        subscribed_topic_names=[t.topic], topic_partitions=[])
        codes = [t.call(a, req, v, port=t.coordinator_port(group)).error_code]
    else:
        codes = [g.error_code for g in t.call(a, a.Request(group_ids=[group]), v).groups]
    assert codes == [UNSUPPORTED_VERSION], f"Kafka 3.9 now answers {api} v{v}: {codes}"
    return True


def _consumer_join(t: Target, group: str, v: int, rc: RawConnection) -> tuple[str, int]:
    """Join ``group`` with ConsumerGroupHeartbeat v``v`` (KIP-848) and heartbeat until the
    coordinator assigns partition 0 of the target's topic; returns (member id, epoch)."""
    hb = apis.get("ConsumerGroupHeartbeat")
    R = hb.Request
    # KIP-1082: from v1 the member makes up its id; v0 members get one from the broker.
    member_id = str(uuid.uuid4()) if v >= 1 else ""
    req = R(group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=[t.topic], topic_partitions=[])
    if t.mock is not None:
        # Mock quirk: it aborts its whole process (an assert in validate_subscription) unless
        # topic names and regex are both null or both set; Kafka takes names with a null regex.
        req.subscribed_topic_regex = ""
    topic_id = t.topic_id(t.topic)
    deadline = time.monotonic() + 15
    while True:
        resp = coordinator_retry(lambda: rc.request(hb, req, v).response, f"ConsumerGroupHeartbeat {group!r}")
        assert resp.error_code == 0, resp
        assert resp.member_id and resp.member_epoch >= 1 and resp.heartbeat_interval_ms > 0, resp
        if v >= 1:
            assert resp.member_id == member_id
        if resp.assignment is not None:
            owned = [(tp.topic_id, sorted(tp.partitions)) for tp in resp.assignment.topic_partitions]
            if owned == [(topic_id, [0])]:
                return resp.member_id, resp.member_epoch
            req = R(group_id=group, member_id=resp.member_id, member_epoch=resp.member_epoch,
                    topic_partitions=[R.TopicPartitions(topic_id=i, partitions=p) for i, p in owned])
        else:
            # Null fields: unchanged since the last heartbeat.
            req = R(group_id=group, member_id=resp.member_id, member_epoch=resp.member_epoch)
        assert time.monotonic() < deadline, f"partition 0 of {t.topic} was not assigned: {resp}"
        time.sleep(0.2)


@exchange("ConsumerGroupHeartbeat")
def _consumer_group_heartbeat(t: Target, v: int) -> None:
    if _consumer_protocol_off(t, "ConsumerGroupHeartbeat", v):
        return
    hb = apis.get("ConsumerGroupHeartbeat")
    group = f"raw-cgh-v{v}-{_uid()}"
    with t.connect(t.coordinator_port(group)) as rc:
        member_id, epoch = _consumer_join(t, group, v, rc)
        # The assignment acknowledged, a heartbeat with the same epoch changes nothing.
        same = rc.request(hb, hb.Request(group_id=group, member_id=member_id, member_epoch=epoch), v).response
        assert (same.error_code, same.member_epoch, same.assignment) == (0, epoch, None), same
        left = rc.request(hb, hb.Request(group_id=group, member_id=member_id, member_epoch=-1), v).response
        # Mock quirk: its answer to the leave has a null member id (Kafka's has the member's).
        echoed = None if t.mock is not None else member_id
        assert (left.error_code, left.member_id, left.member_epoch) == (0, echoed, -1), left


@exchange("ConsumerGroupDescribe")
def _consumer_group_describe(t: Target, v: int) -> None:
    if _consumer_protocol_off(t, "ConsumerGroupDescribe", v):
        return
    cd = apis.get("ConsumerGroupDescribe")
    unknown = f"raw-cgd-none-{_uid()}"
    if "ConsumerGroupHeartbeat" not in {apis.BY_KEY[k].name for k in t.broker_versions if k in apis.BY_KEY}:
        # Tansu quirk: it offers ConsumerGroupDescribe without ConsumerGroupHeartbeat, and
        # describes a group it does not know as Empty with no error (Kafka: GROUP_ID_NOT_FOUND).
        (g,) = t.call(cd, cd.Request(group_ids=[unknown]), v).groups
        assert (g.error_code, g.group_id, g.group_state, g.members) == (0, unknown, "Empty", []), g
        return
    group = f"raw-cgd-v{v}-{_uid()}"
    with t.connect(t.coordinator_port(group)) as rc:
        member_id, epoch = _consumer_join(t, group, t.highest("ConsumerGroupHeartbeat"), rc)
        resp = rc.request(cd, cd.Request(group_ids=[group, unknown]), v).response
    described = {d.group_id: d for d in resp.groups}
    assert sorted(described) == sorted([group, unknown]), resp
    g, none = described[group], described[unknown]
    assert (g.error_code, g.group_id, g.group_state) == (0, group, "Stable"), g
    assert none.group_id == unknown and none.error_code == GROUP_ID_NOT_FOUND, none
    (m,) = g.members
    assert (m.member_id, m.member_epoch, m.subscribed_topic_names) == (member_id, epoch, [t.topic]), m
    assert [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == [(t.topic, [0])], m
    if v >= 1:
        assert m.member_type == 1, m  # KIP-1099: a consumer-protocol member


@exchange("DeleteGroups")
def _delete_groups(t: Target, v: int) -> None:
    dg = apis.get("DeleteGroups")
    group = f"raw-delg-v{v}-{_uid()}"
    assert t.commit(group, 1).topics[0].partitions[0].error_code == 0
    resp = t.call(dg, dg.Request(groups_names=[group]), v, port=t.coordinator_port(group))
    assert [(r.group_id, r.error_code) for r in resp.results] == [(group, 0)]


@exchange("DeleteRecords")
def _delete_records(t: Target, v: int) -> None:
    dr = apis.get("DeleteRecords")
    R = dr.Request
    topic = t.create_topic(f"raw-dr-v{v}-{_uid()}")
    first = t.produce(topic, [b"a", b"b", b"c"])
    req = R(topics=[R.DeleteRecordsTopic(name=topic, partitions=[
        R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=first + 2)])], timeout_ms=10000)
    if t.is_tansu:
        # Tansu quirk: its memory storage panics on DeleteRecords and drops the connection.
        with t.connect(t.leader_port(topic)) as rc:
            rc.send("DeleteRecords", req, v)
            assert rc.expect_closed(), "Tansu now answers DeleteRecords: drop the quirk"
        return
    (rt,) = t.call(dr, req, v, port=t.leader_port(topic)).topics
    (rp,) = rt.partitions
    assert (rt.name, rp.partition_index, rp.error_code, rp.low_watermark) == (topic, 0, 0, first + 2), rp


def _config_change(t: Target, v: int, api_name: str, **config: Any) -> None:
    api = apis.get(api_name)
    R = api.Request
    res = R.AlterConfigsResource(resource_type=2, resource_name=t.topic, configs=[
        R.AlterConfigsResource.AlterableConfig(name="retention.ms", value="86400000", **config)])
    (r,) = t.call(api, R(resources=[res], validate_only=False), v).responses
    assert (r.error_code, r.resource_type, r.resource_name) == (0, 2, t.topic), r


@exchange("AlterConfigs")
def _alter_configs(t: Target, v: int) -> None:
    _config_change(t, v, "AlterConfigs")


@exchange("IncrementalAlterConfigs")
def _incremental_alter_configs(t: Target, v: int) -> None:
    _config_change(t, v, "IncrementalAlterConfigs", config_operation=0)  # SET


@exchange("CreatePartitions")
def _create_partitions(t: Target, v: int) -> None:
    cp = apis.get("CreatePartitions")
    R = cp.Request
    topic = t.create_topic(f"raw-cp-v{v}-{_uid()}")
    resp = t.call(cp, R(topics=[R.CreatePartitionsTopic(name=topic, count=2, assignments=None)], timeout_ms=10000,
                        validate_only=False), v)
    assert [(r.name, r.error_code) for r in resp.results] == [(topic, 0)], resp
    t.wait_served(topic, 2)


@exchange("OffsetDelete")
def _offset_delete(t: Target, v: int) -> None:
    od = apis.get("OffsetDelete")
    R = od.Request
    group = f"raw-od-v{v}-{_uid()}"
    assert t.commit(group, 1).topics[0].partitions[0].error_code == 0
    req = R(group_id=group, topics=[R.OffsetDeleteRequestTopic(
        name=t.topic, partitions=[R.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])])
    resp = t.call(od, req, v, port=t.coordinator_port(group))
    assert resp.error_code == 0, resp
    assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == [(0, 0)]


@exchange("SaslHandshake")
def _sasl_handshake(t: Target, v: int) -> None:
    sh = apis.get("SaslHandshake")
    resp = t.call(sh, sh.Request(mechanism="NO-SUCH-MECHANISM"), v)
    if t.is_kafka:
        # Kafka's PLAINTEXT listener has no SASL at all: a SaslHandshake there is out of place
        # (ILLEGAL_SASL_STATE, no mechanisms); Tansu and the mock treat it as a SASL listener.
        assert (resp.error_code, resp.mechanisms) == (ILLEGAL_SASL_STATE, []), resp
        return
    # An unknown mechanism is refused with the list of those the broker offers.
    assert resp.error_code == UNSUPPORTED_SASL_MECHANISM, resp
    assert all(isinstance(m, str) for m in resp.mechanisms)


@exchange("SaslAuthenticate")
def _sasl_authenticate(t: Target, v: int) -> None:
    sa = apis.get("SaslAuthenticate")
    # Without a SaslHandshake first there is no SASL exchange to continue.
    with t.connect() as rc:
        try:
            resp = rc.request(sa, sa.Request(auth_bytes=b"\0user\0pass"), v).response
        except BrokerClosedError:
            pytest.fail(f"{t.name} closed the connection on SaslAuthenticate v{v} without a handshake")
    assert resp.error_code == ILLEGAL_SASL_STATE, resp


def _scram_upsert(t: Target, v: int, user: str) -> None:
    from kafkawire.protocol.sasl import scram_credential

    au = apis.get("AlterUserScramCredentials")
    R = au.Request
    cred = scram_credential("SCRAM-SHA-512", "raw-secret", iterations=4096)
    req = R(deletions=[], upsertions=[R.ScramCredentialUpsertion(
        name=user, mechanism=cred.mechanism_type, iterations=cred.iterations, salt=cred.salt,
        salted_password=cred.salted_password)])
    resp = t.call(au, req, v)
    assert [(r.user, r.error_code) for r in resp.results] == [(user, 0)], resp


@exchange("AlterUserScramCredentials")
def _alter_user_scram_credentials(t: Target, v: int) -> None:
    _scram_upsert(t, v, f"raw-scram-v{v}-{_uid()}")


@exchange("DescribeUserScramCredentials")
def _describe_user_scram_credentials(t: Target, v: int) -> None:
    du = apis.get("DescribeUserScramCredentials")
    user = f"raw-scram-d{v}-{_uid()}"
    _scram_upsert(t, t.highest("AlterUserScramCredentials"), user)
    req = du.Request(users=[du.Request.UserName(name=user)])
    if t.is_tansu:
        # Tansu quirk: its answer is 9 bytes, one short: it frames it with the v0 response
        # header (no tagged fields, against KIP-482's flexible v0), then lists no users.
        with t.connect() as rc, pytest.raises(ProtocolError, match="DescribeUserScramCredentials v0 .*truncated"):
            rc.request(du, req, v)
        return
    # The upsert is answered once the controller has committed it; the broker asked next
    # applies it from the metadata log a moment later, and until then has no such user.
    deadline = time.monotonic() + 15
    while True:
        resp = t.call(du, req, v)
        found = [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                 for r in resp.results]
        if found != [(user, RESOURCE_NOT_FOUND, [])] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert resp.error_code == 0, resp
    assert found == [(user, 0, [(2, 4096)])], resp


# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[pytest.param("kafka", marks=pytest.mark.kafka),
                                        pytest.param("kafka39", marks=pytest.mark.kafka),
                                        pytest.param("tansu", marks=pytest.mark.tansu),
                                        pytest.param("mock", marks=pytest.mark.mock)])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param in ("kafka", "kafka39", "tansu"):
        broker = request.getfixturevalue(f"{request.param}_broker")
        return Target(request.param, broker.port)
    cluster = request.getfixturevalue("mock_cluster")
    return Target("mock", cluster.brokers[1][1], mock=cluster)


# The APIs declared since the last exchanges here were written: each is proven through the
# client call that sends it (at the negotiated version only, on Apache Kafka) in the file
# named, not yet here version by version on every broker.  An exchange here moves it out.
# (API, the file, the client call it makes, which that file must use.)
EXERCISED_ELSEWHERE = {
    "AlterClientQuotas": ("test_admin_quotas.py", "alter_client_quotas"),
    "DescribeClientQuotas": ("test_admin_quotas.py", "describe_client_quotas"),
    "AlterPartitionReassignments": ("test_admin_reassign.py", "alter_partition_reassignments"),
    "ListPartitionReassignments": ("test_admin_reassign.py", "list_partition_reassignments"),
    "ElectLeaders": ("test_admin_reassign.py", "elect_leaders"),
    "DescribeCluster": ("test_admin_reassign.py", "include_fenced_brokers"),
    "AlterReplicaLogDirs": ("test_admin_log_dirs.py", "alter_replica_log_dirs"),
    "DescribeLogDirs": ("test_admin_log_dirs.py", "describe_log_dirs"),
    "CreateAcls": ("test_admin_acls.py", "create_acls"),
    "DescribeAcls": ("test_admin_acls.py", "describe_acls"),
    "DeleteAcls": ("test_admin_acls.py", "delete_acls"),
    "DescribeProducers": ("test_admin_transactions.py", "describe_producers"),
    "DescribeTransactions": ("test_admin_transactions.py", "describe_transactions"),
    "ListTransactions": ("test_admin_transactions.py", "list_transactions"),
    "WriteTxnMarkers": ("test_admin_transactions.py", "abort_transaction"),
    "DescribeTopicPartitions": ("test_admin_topic_partitions.py", "describe_topic_partitions"),
    "UpdateFeatures": ("test_admin_features.py", "update_features"),
    "ShareGroupHeartbeat": ("test_share_groups.py", "ShareConsumer"),
    "ShareFetch": ("test_share_groups.py", "ShareConsumer"),
    "ShareAcknowledge": ("test_share_groups.py", "acknowledge"),
    "ShareGroupDescribe": ("test_share_groups.py", "describe_share_groups"),
    "DescribeShareGroupOffsets": ("test_share_groups.py", "list_share_group_offsets"),
    "AlterShareGroupOffsets": ("test_share_groups.py", "alter_share_group_offsets"),
    "DeleteShareGroupOffsets": ("test_share_groups.py", "delete_share_group_offsets"),
}


def test_every_api_has_an_exchange() -> None:
    assert not set(EXCHANGES) & set(EXERCISED_ELSEWHERE), "an API with an exchange here is no longer elsewhere"
    assert sorted([*EXCHANGES, *EXERCISED_ELSEWHERE]) == sorted(apis.BY_NAME)
    here = os.path.dirname(os.path.abspath(__file__))
    for name, (path, call) in EXERCISED_ELSEWHERE.items():
        with open(os.path.join(here, path), encoding="utf-8") as f:
            assert call in _calls(ast.parse(f.read())), f"{name}: {path} no longer calls {call}"


def _calls(tree: ast.AST) -> set[str]:
    """The names a module's code calls (``f(...)``, ``x.f(...)``) or passes as keywords:
    a name left only in a comment or a string does not count."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                out.add(func.id)
            elif isinstance(func, ast.Attribute):
                out.add(func.attr)
            out.update(k.arg for k in node.keywords if k.arg)
    return out


@pytest.mark.parametrize("api_name", sorted(EXCHANGES))
def test_api_versions_against_broker(target: Target, api_name: str) -> None:
    api = apis.get(api_name)
    broker = target.broker_versions.get(api.key)
    common = range(max(api.min_version, broker[0]), min(api.max_version, broker[1]) + 1) if broker else range(0)
    if not common:
        # Not offered: negotiation must refuse it rather than guess a version.
        with target.connect() as rc, pytest.raises(ApiVersionError, match=api.name):
            rc.conn.version_for(api)
        print(f"{target.name} {api.name}: not offered (broker {broker})")
        return

    def attempt(version: int) -> str | None:
        try:
            EXCHANGES[api.name](target, version)
        except Exception as exc:  # noqa: BLE001 - collect every failing version, then report
            return f"{type(exc).__name__}: {exc}"
        return None

    workers = len(common) if api.name in CONCURRENT_EXCHANGES else 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        outcomes = dict(zip(common, pool.map(attempt, common)))
    failures = {v: msg for v, msg in outcomes.items() if msg is not None}
    ok = [v for v in common if v not in failures]
    print(f"{target.name} {api.name}: ok v{ok} (broker v{broker[0]}-v{broker[1]})")
    assert not failures, "\n".join(f"{api.name} v{v}: {msg}" for v, msg in failures.items())
