"""Clients across os.fork(), on a real broker: parent and child never share a socket.

The rule per client (kafkawire.client._fork and each client's docstring):
* Consumer without a group, or with group_id but assign()ed (not a member), and Admin:
  the child's copy lets go of the inherited connections and reconnects on its own.
* Consumer subscribed to a group: the parent is the member, so the child's copy raises
  ForkedClientError; its close() lets go without a LeaveGroup.
* asyncio clients: the child's copy raises ForkedClientError (the event loop is the
  parent's).

Each child runs a function and sends its result back over a pipe; a child that does
not answer within its deadline is killed by its pid and the test fails.

Tansu auto-creates a topic with 4 partitions on its first produce.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import select
import signal
import threading
import time
import traceback
import uuid

import pytest
from topics import ensure_topic

from kafkawire.aio import AsyncConsumer, AsyncProducer
from kafkawire.client import _fork
from kafkawire.client._fork import ForkedClientError
from kafkawire.client.admin import Admin
from kafkawire.client.consumer import Consumer
from kafkawire.client.producer import Producer
from kafkawire.testing.tls import tls_broker, tls_certificates  # noqa: F401 - the fixtures

pytestmark = pytest.mark.broker

N = 200  # records per partition


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce(bootstrap: str, topic: str, partitions=(0, 1, 2, 3), n: int = N) -> None:
    ensure_topic(bootstrap, topic, max(partitions) + 1)
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        futs = [p.send(topic, f"{part}-{i}".encode(), partition=part)
                for part in partitions for i in range(n)]
        p.flush(20)
        for f in futs:
            f.result(0)


def _local_ports(cluster) -> set[int]:
    return {c.sock.getsockname()[1] for c in cluster._conns.values() if c.sock is not None}


class Child:
    """``fn()`` run in a forked child; ``result(timeout)`` is its return value (or
    raises what it raised, as a RuntimeError with the child's traceback)."""

    def __init__(self, fn):
        r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child
            os.close(r)
            code = 0
            try:
                out = ("ok", fn())
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                out = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                code = 1
            try:
                data = pickle.dumps(out)
            except Exception as exc:  # noqa: BLE001
                data = pickle.dumps(("error", f"unpicklable result: {exc!r}"))
            with os.fdopen(w, "wb") as f:
                f.write(data)
            os._exit(code)
        os.close(w)
        self._r = r

    def result(self, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        chunks = []
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    os.kill(self.pid, signal.SIGKILL)
                    raise AssertionError(f"the child did not finish within {timeout}s (killed)")
                ready, _, _ = select.select([self._r], [], [], remaining)
                if ready:
                    chunk = os.read(self._r, 1 << 16)
                    if not chunk:
                        break
                    chunks.append(chunk)
        finally:
            os.close(self._r)
            os.waitpid(self.pid, 0)
        if not chunks:
            raise AssertionError("the child exited without a result")
        status, value = pickle.loads(b"".join(chunks))
        if status != "ok":
            raise RuntimeError(f"in the child: {value}")
        return value


def _drain(consumer, want: int, timeout: float = 20.0) -> list:
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        out += consumer.poll(0.5)
    return out


def test_consumer_parent_and_child_consume_independently(kafka_broker):
    boot = kafka_broker.bootstrap
    topic = _topic("fork-c")
    _produce(boot, topic)
    parts = [(topic, p) for p in range(4)]
    c = Consumer(bootstrap_servers=boot, auto_offset_reset="earliest", max_poll_records=50,
                 fetch_max_wait_ms=100, max_partition_fetch_bytes=2048)
    try:
        c.assign(parts)
        first = _drain(c, 50)
        assert len(first) >= 50
        parent_ports = _local_ports(c.cluster)
        assert parent_ports
        gen = _fork.generation

        def child():
            inherited_open = _local_ports(c.cluster)  # none: let go of right after the fork
            got = _drain(c, 4 * N - len(first))
            return [(r.partition, r.offset) for r in got], _local_ports(c.cluster), \
                inherited_open, _fork.generation - gen

        kid = Child(child)
        # The parent goes on at the same time, on its own connections.
        mine = _drain(c, 4 * N - len(first))
        child_records, child_ports, inherited_open, generations = kid.result()
        assert inherited_open == set() and generations == 1
        assert _local_ports(c.cluster) == parent_ports  # same sockets as before the fork
        assert child_ports and not child_ports & parent_ports
        start = {(r.partition, r.offset) for r in first}
        everything = {(p, o) for p in range(4) for o in range(N)}
        # Each read every record from the positions at the fork, exactly once.
        assert sorted(child_records) == sorted(everything - start)
        assert sorted((r.partition, r.offset) for r in mine) == sorted(everything - start)
        # And the parent still works after the child has exited.
        _produce(boot, topic, partitions=(0,), n=5)
        assert len(_drain(c, 5)) == 5
    finally:
        c.close()


def test_child_closing_the_inherited_consumer_leaves_the_parent_alone(kafka_broker):
    # A close() in the child must not unregister the parent's sockets from the shared
    # epoll instance, shut them down, or send anything on them.
    boot = kafka_broker.bootstrap
    topic = _topic("fork-close")
    _produce(boot, topic, partitions=(0,), n=10)
    c = Consumer(bootstrap_servers=boot, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        c.assign([(topic, 0)])
        assert len(_drain(c, 10)) == 10
        ports = _local_ports(c.cluster)

        def child():
            t0 = time.monotonic()
            c.close()
            return time.monotonic() - t0

        assert Child(child).result() < 5
        # The fetch the parent had in flight at the fork, and later ones, still come back.
        _produce(boot, topic, partitions=(0,), n=10)
        got = _drain(c, 10, timeout=10)
        assert [r.offset for r in got] == list(range(10, 20))
        assert _local_ports(c.cluster) == ports
    finally:
        c.close()


def test_tls_session_stays_the_parents(tls_broker, tls_certificates):
    # The child drops the inherited TLS connections without a close_notify (which would
    # end the parent's TLS session: stunnel closes the connection on it) and makes its own.
    boot = tls_broker.bootstrap
    tls = {"security_protocol": "SSL", "ssl_cafile": tls_certificates.cafile}
    topic = _topic("fork-tls")
    with Producer(bootstrap_servers=boot, linger_ms=1, **tls) as p:
        for i in range(10):
            p.send(topic, f"{i}".encode(), partition=0)
        p.flush(20)
    c = Consumer(bootstrap_servers=boot, auto_offset_reset="earliest", fetch_max_wait_ms=100, **tls)
    try:
        c.assign([(topic, 0)])
        first = []
        deadline = time.monotonic() + 20
        while len(first) < 5 and time.monotonic() < deadline:
            first += c.poll(0.5, max_records=5 - len(first))
        assert [r.offset for r in first] == list(range(5))
        ports = _local_ports(c.cluster)
        conn = next(x for x in c.cluster._conns.values() if x.sock is not None)
        tls_socket = conn.sock

        def child():
            got = _drain(c, 5)  # the inherited consumer, reconnected over new TLS sessions
            child_ports = _local_ports(c.cluster)
            c.close()
            return len(got) > 0, child_ports

        consumed, child_ports = Child(child).result()
        assert consumed and child_ports and not child_ports & ports
        # Records written after the child exited come through the parent's TLS session.
        with Producer(bootstrap_servers=boot, linger_ms=1, **tls) as p:
            for i in range(10, 15):
                p.send(topic, f"{i}".encode(), partition=0)
            p.flush(20)
        rest = _drain(c, 10)
        assert [r.offset for r in rest] == list(range(5, 15))
        assert _local_ports(c.cluster) == ports and conn.sock is tls_socket
    finally:
        c.close()


def test_admin_parent_and_child(kafka_broker):
    boot = kafka_broker.bootstrap
    topic = _topic("fork-adm")
    _produce(boot, topic, partitions=(0,), n=3)
    with Admin(bootstrap_servers=boot) as admin:
        assert topic in admin.list_topics(timeout=10)
        parent_ports = _local_ports(admin.cluster)

        def child():
            made = _topic("fork-adm-child")
            admin.create_topics([made], num_partitions=2, timeout=10)
            offsets = admin.list_offsets({(topic, 0): "latest"}, timeout=10)
            return made, offsets[(topic, 0)].offset, _local_ports(admin.cluster)

        kid = Child(child)
        for _ in range(5):  # meanwhile, in the parent
            assert admin.describe_cluster(timeout=10).brokers
        made, latest, child_ports = kid.result()
        # (Tansu's ListOffsets "latest" is the last batch's base offset + 1: compare.)
        assert latest == admin.list_offsets({(topic, 0): "latest"}, timeout=10)[(topic, 0)].offset >= 1
        assert not child_ports & parent_ports
        assert made in admin.describe_topics([made], timeout=10)
        assert _local_ports(admin.cluster) == parent_ports


def test_child_makes_new_clients(kafka_broker):
    boot = kafka_broker.bootstrap
    topic = _topic("fork-new")
    with Admin(bootstrap_servers=boot) as admin:
        admin.describe_cluster(timeout=10)

        def child():
            _produce(boot, topic, partitions=(1,), n=20)
            with Consumer(bootstrap_servers=boot, auto_offset_reset="earliest",
                          fetch_max_wait_ms=100) as c2:
                c2.assign([(topic, 1)])
                return [r.value for r in _drain(c2, 20)]

        values = Child(child).result()
        assert values == [f"1-{i}".encode() for i in range(20)]
        # The parent reads what the child wrote.
        with Consumer(bootstrap_servers=boot, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            c.assign([(topic, 1)])
            assert [r.value for r in _drain(c, 20)] == values
            assert c.high_watermarks([(topic, 1)], timeout=10) == {(topic, 1): 20}
        assert admin.list_offsets({(topic, 1): "earliest"}, timeout=10)[(topic, 1)].offset == 0


@pytest.mark.groups
def test_group_member_refuses_in_the_child_and_the_parent_stays_member(kafka_broker):
    boot = kafka_broker.bootstrap
    topic = _topic("fork-grp")
    group = _topic("fork-group")
    _produce(boot, topic, n=20)
    c = Consumer(bootstrap_servers=boot, group_id=group, auto_offset_reset="earliest",
                 session_timeout_ms=2000, heartbeat_interval_ms=300, fetch_max_wait_ms=100,
                 enable_auto_commit=False)
    try:
        c.subscribe([topic])
        got = _drain(c, 80)
        assert len(got) == 80
        c.commit(timeout=10)
        before = c.group_state()
        assert before["state"] == "stable" and before["generation"] >= 0

        def child():
            errors = []
            for call in (lambda: c.poll(0.1), lambda: c.commit(timeout=1),
                         lambda: c.committed([(topic, 0)], timeout=1), c.group_state):
                try:
                    call()
                    errors.append(None)
                except ForkedClientError as exc:
                    errors.append(str(exc))
            t0 = time.monotonic()
            c.close(timeout=5)  # no LeaveGroup for the parent's member id
            return errors, time.monotonic() - t0

        errors, close_took = Child(child).result()
        assert all(e is not None and "create a new Consumer in the child" in e for e in errors), errors
        assert close_took < 1
        # Several heartbeats later the parent is the same member of the same generation:
        # nobody left or rejoined on its behalf.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert c.poll(0.2) == []
        after = c.group_state()
        assert (after["member_id"], after["generation"], after["state"]) == \
            (before["member_id"], before["generation"], "stable")
        c.commit(timeout=10)
        _produce(boot, topic, partitions=(2,), n=3)
        assert len(_drain(c, 3)) == 3
    finally:
        c.close(timeout=5)


def test_assigned_group_consumer_commits_from_the_child(kafka_broker):
    # Not a member (assign()), so the child's copy goes on with a new group thread.
    boot = kafka_broker.bootstrap
    topic = _topic("fork-cmt")
    group = _topic("fork-cmt-group")
    _produce(boot, topic, partitions=(0,), n=10)
    c = Consumer(bootstrap_servers=boot, group_id=group, auto_offset_reset="earliest",
                 fetch_max_wait_ms=100, enable_auto_commit=False)
    try:
        c.assign([(topic, 0)])
        assert len(_drain(c, 10)) == 10
        c.commit({(topic, 0): 4}, timeout=10)
        parent_thread = c._group.driver._thread

        def child():
            seen = c.committed([(topic, 0)], timeout=10)[(topic, 0)]
            c.commit({(topic, 0): 7}, timeout=10)
            assert c._group.driver._thread is not parent_thread
            assert c._group.driver._thread.is_alive()
            c.close(timeout=5)
            return seen

        assert Child(child).result() == 4
        assert c.committed([(topic, 0)], timeout=10)[(topic, 0)] == 7
        assert parent_thread.is_alive()
    finally:
        c.close(timeout=5)


def test_locks_held_by_other_threads_at_the_fork(kafka_broker):
    # Another thread holds kafkawire's registry lock and the group thread's event lock
    # while the main thread forks: the child makes clients and uses the inherited one
    # without deadlocking on them.
    boot = kafka_broker.bootstrap
    topic = _topic("fork-lock")
    _produce(boot, topic, partitions=(0,), n=5)
    c = Consumer(bootstrap_servers=boot, group_id=_topic("fork-lock-group"),
                 auto_offset_reset="earliest", fetch_max_wait_ms=100, enable_auto_commit=False)
    try:
        c.assign([(topic, 0)])
        assert len(_drain(c, 5)) == 5
        held = threading.Event()
        release = threading.Event()
        locks = [_fork._live_lock, c._group.driver._events_lock]

        def hold():
            for lock in locks:
                lock.acquire()
            held.set()
            release.wait(30)
            for lock in reversed(locks):
                lock.release()

        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(10)
        try:
            def child():
                with Consumer(bootstrap_servers=boot, auto_offset_reset="earliest",
                              fetch_max_wait_ms=100) as c2:  # registers: takes the registry lock
                    c2.assign([(topic, 0)])
                    n = len(_drain(c2, 5))
                c.commit({(topic, 0): 5}, timeout=10)
                c.group_state()
                return n

            kid = Child(child)
        finally:
            release.set()
            holder.join(10)
        assert kid.result(timeout=30) == 5
        assert c.committed([(topic, 0)], timeout=10)[(topic, 0)] == 5
    finally:
        c.close(timeout=5)


# -- multiprocessing with the fork start method ------------------------------------------

_MP_ADMIN: Admin | None = None  # made by the parent, inherited by the workers


def _mp_worker(boot: str, topic: str, partition: int, q) -> None:
    try:
        assert _MP_ADMIN is not None
        start = _MP_ADMIN.list_offsets({(topic, partition): "earliest"}, timeout=10)[(topic, partition)].offset
        with Consumer(bootstrap_servers=boot, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            c.assign([(topic, partition)])
            end = c.high_watermarks([(topic, partition)], timeout=10)[(topic, partition)]
            c.seek((topic, partition), start)
            got = _drain(c, end)
        q.put((partition, end, [r.value for r in got], sorted(_local_ports(_MP_ADMIN.cluster))))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        q.put((partition, "error", repr(exc), traceback.format_exc()))


def test_multiprocessing_fork_workers(kafka_broker):
    global _MP_ADMIN
    boot = kafka_broker.bootstrap
    topic = _topic("fork-mp")
    _produce(boot, topic, n=30)
    ctx = multiprocessing.get_context("fork")
    with Admin(bootstrap_servers=boot) as admin:
        _MP_ADMIN = admin
        try:
            admin.describe_cluster(timeout=10)
            parent_ports = _local_ports(admin.cluster)
            q = ctx.Queue()
            procs = [ctx.Process(target=_mp_worker, args=(boot, topic, p, q)) for p in range(4)]
            for pr in procs:
                pr.start()
            results = {}
            for _ in procs:
                partition, *rest = q.get(timeout=60)
                results[partition] = rest
            for pr in procs:
                pr.join(30)
                assert pr.exitcode == 0
            for p in range(4):
                end, values, ports = results[p][0], results[p][1], results[p][2]
                assert end == 30, results[p]
                assert values == [f"{p}-{i}".encode() for i in range(30)]
                assert ports and not set(ports) & parent_ports
            assert admin.list_offsets({(topic, 0): "earliest"}, timeout=10)[(topic, 0)].offset == 0
            assert _local_ports(admin.cluster) == parent_ports
        finally:
            _MP_ADMIN = None


# -- asyncio -----------------------------------------------------------------------------

def test_asyncio_consumer_refuses_in_the_child(kafka_broker):
    boot = kafka_broker.bootstrap
    topic = _topic("fork-aio")
    _produce(boot, topic, partitions=(0,), n=5)
    loop = asyncio.new_event_loop()
    c = AsyncConsumer(bootstrap_servers=boot, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        loop.run_until_complete(c.start(10))
        assert loop.run_until_complete(c.beginning_offsets([(topic, 0)], timeout=10)) == {(topic, 0): 0}

        def child():
            async def use():
                try:
                    await asyncio.wait_for(c.end_offsets([(topic, 0)], timeout=5), 10)
                except ForkedClientError as exc:
                    return str(exc)
                return None
            return asyncio.run(use())

        message = Child(child).result()
        assert message is not None and "create a new client in the child" in message
        # The parent's loop and connections go on.
        c.assign([(topic, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            got += loop.run_until_complete(c.poll(0.5))
        assert [r.offset for r in got] == list(range(5))
    finally:
        loop.run_until_complete(c.close(5))
        loop.close()


def test_producer_parent_and_child_produce_independently(kafka_broker):
    boot = kafka_broker.bootstrap
    topic = ensure_topic(boot, _topic("fork-produce"), 2)
    with Producer(bootstrap_servers=boot, linger_ms=200) as p:
        p.send(topic, b"before", partition=0).result(20)
        parent_pid = p.metrics()["producer_id"]
        queued = p.send(topic, b"queued at the fork", partition=0)  # held by linger_ms

        def child():
            futs = [p.send(topic, b"child-%d" % i, partition=1) for i in range(10)]
            # The first call let go of the parent's batches: the parent delivers them.
            lost = type(queued.exception(5)).__name__
            p.flush(20)
            offsets = [f.result(0).offset for f in futs]
            pid = p.metrics()["producer_id"]
            p.close(5)
            return lost, offsets, pid

        lost, offsets, child_pid = Child(child).result()
        assert lost == "ForkedClientError"
        assert offsets == list(range(10))
        assert child_pid >= 0 and child_pid != parent_pid  # an idempotent identity of its own
        assert queued.result(20).offset == 1  # the parent's copy went out once
        assert p.send(topic, b"after", partition=0).result(20).offset == 2
    with Consumer(bootstrap_servers=boot, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([(topic, 0), (topic, 1)])
        got = sorted((r.partition, r.value) for r in _drain(c, 13))
    assert got == sorted([(0, b"before"), (0, b"queued at the fork"), (0, b"after")]
                         + [(1, b"child-%d" % i) for i in range(10)])


def test_transactional_producer_refuses_in_the_child(kafka_broker):
    topic = _topic("fork-txn")
    with Producer(bootstrap_servers=kafka_broker.bootstrap, transactional_id=f"fork-{topic}") as p:
        p.init_transactions(20)

        def child():
            try:
                p.begin_transaction()
            except ForkedClientError as exc:
                p.close(5)
                return str(exc)
            return "no error"

        assert "transactional_id" in Child(child).result()
        p.begin_transaction()  # the parent's is untouched
        p.send(topic, b"x", partition=0)
        p.commit_transaction(20)


def test_asyncio_producer_refuses_in_the_child_and_closes_its_copy(kafka_broker):
    topic = _topic("fork-aio-produce")
    loop = asyncio.new_event_loop()
    p = AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=0)
    try:
        loop.run_until_complete(p.start(10))
        first = loop.run_until_complete(p.send(topic, b"before", partition=0))
        assert loop.run_until_complete(first).offset == 0

        def child():
            async def use():
                try:
                    await p.send(topic, b"from the child", partition=0)
                except ForkedClientError as exc:
                    await asyncio.wait_for(p.close(5), 5)  # lets go of the copy, never hangs
                    return str(exc)
                return None
            return asyncio.run(use())

        message = Child(child).result()
        assert message is not None and "create a new client in the child" in message
        fut = loop.run_until_complete(p.send(topic, b"after", partition=0))
        assert loop.run_until_complete(fut).offset == 1  # the parent goes on
    finally:
        loop.run_until_complete(p.close(5))
        loop.close()
