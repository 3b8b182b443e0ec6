"""Consumer groups in the sync client: :class:`GroupThread`, the driver that runs the
group's state machine on a thread of its own with a coordinator connection, and
:class:`ConsumerGroup`, the shared consumer side (kafkawire.protocol.group_member) with
the operations that wait for the coordinator run on the consumer's Cluster, blocking.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

from kafkawire.client.cluster import Cluster
from kafkawire.core import fork as _fork
from kafkawire.core.config import Config
from kafkawire.core.future import Future
from kafkawire.core.group import GroupDriver, log, settle
from kafkawire.errors import KafkaConnectionError
from kafkawire.protocol import group_member as _shared
from kafkawire.protocol.group import Failed, GroupMembership, Outgoing
from kafkawire.protocol.group_member import ConsumerRebalanceListener

__all__ = ["GroupThread", "ConsumerGroup", "ConsumerRebalanceListener"]


class _Waiting:
    # A request held until its connection is ready.
    __slots__ = ("out", "since")

    def __init__(self, out: Outgoing, since: float):
        self.out = out
        self.since = since


class GroupThread(GroupDriver):
    def __init__(self, config: Config, brokers: dict[int, tuple[str, int]], wake_caller: Callable[[], None]):
        self.machine = self._make_machine(config)
        self.cluster = Cluster(config)
        self.cluster.brokers.update(brokers)
        self.wake_caller = wake_caller
        self._commands: queue.SimpleQueue[tuple[Callable[[GroupMembership, float], Any], Future]] = queue.SimpleQueue()
        self._events: list[Any] = []
        self._events_lock = threading.Lock()
        self._snapshot: dict[str, Any] = self.machine.snapshot(time.monotonic())
        self._waiting: list[_Waiting] = []
        self._stop = False
        self._stop_asked = False  # stop() was called: the thread closes its cluster as it ends
        #: Set by the caller's poll(): the machine's poll-interval clock reads it.
        self.last_poll = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"kafkawire-group-{config.group_id}", daemon=True)
        self._thread.start()
        _fork.register(self)

    def _after_fork_in_child(self) -> None:
        # kafkawire.core.fork: the thread did not come along, and its lock may have
        # been held when the parent forked.  Calls fail from now on (ConsumerGroup.after_fork
        # makes a new GroupThread where the child may go on); the Cluster's poller drops
        # the coordinator connection by itself.
        self._events_lock = threading.Lock()
        self._commands = queue.SimpleQueue()
        self._events = []
        self._waiting = []
        self._stop = True

    # -- the caller's side ----------------------------------------------------------------

    new_future = staticmethod(Future)

    @staticmethod
    def now() -> float:
        """The clock of the machine, the last poll and the caller's deadlines."""
        return time.monotonic()

    def call(self, fn: Callable[[GroupMembership, float], Any]) -> Future:
        """Run ``fn(machine, now)`` on the group thread; its result (or exception) comes
        back in the Future."""
        fut = Future()
        if self._stop:
            fut.set_exception(KafkaConnectionError("the consumer's group thread has stopped"))
            return fut
        self._commands.put((fn, fut))
        self.cluster.poller.wakeup()
        return fut

    def take_events(self) -> list[Any]:
        with self._events_lock:
            ev, self._events = self._events, []
        return ev

    def snapshot(self) -> dict[str, Any]:
        """The machine's state as of the thread's last step."""
        return dict(self._snapshot)

    def send(self, out: Outgoing | None) -> Future | None:
        """(On the group thread.) Send ``out``, a request the machine handed back
        directly (LeaveGroup); its answer comes in the returned Future."""
        if out is None:
            return None
        out.token = Future()
        self._waiting.append(_Waiting(out, time.monotonic()))
        return out.token

    def stop(self, timeout: float) -> None:
        self._stop = self._stop_asked = True
        self.cluster.poller.wakeup()
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.cluster.close()
        # Else the thread closes it as it ends (a poll in progress ends within its wait).

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        m = self.machine
        try:
            while not self._stop:
                now = time.monotonic()
                m.poll_called(self.last_poll)
                while True:
                    try:
                        fn, fut = self._commands.get_nowait()
                    except queue.Empty:
                        break
                    try:
                        fut.set_result(fn(m, now))
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller
                        fut.set_exception(exc)
                self._expire_held(now)
                for out in m.poll(now):
                    self._waiting.append(_Waiting(out, now))
                self._send_waiting(now)
                self._publish(now)
                wait = m.next_wakeup(now)
                if self._waiting:
                    wait = min(wait, 0.05)  # a connection being set up: check again soon
                self.cluster.poll(wait)
                self._publish(time.monotonic())
        except BaseException as exc:  # noqa: BLE001 - a bug here must not go unseen
            log.exception("group thread of %r stopped", m.group_id)
            with self._events_lock:
                self._events.append(Failed(exc))
            self.wake_caller()
        finally:
            self._stop = True
            self._fail_waiting(KafkaConnectionError("the consumer's group thread has stopped"))
            if self._stop_asked:
                self.cluster.close()

    def _publish(self, now: float) -> None:
        ev = self.machine.events()
        self._snapshot = self.machine.snapshot(now)
        if ev:
            self._log_events(ev)
            with self._events_lock:
                self._events.extend(ev)
            self.wake_caller()

    def _connection(self, out: Outgoing) -> Any:
        if not out.to_coordinator:
            return self.cluster.any_ready_connection()
        coord = self.machine.coordinator
        if coord is None:
            return None
        node, host, port = coord
        if self.cluster.brokers.get(node) != (host, port):
            self.cluster.brokers[node] = (host, port)
        return self.cluster.ready_connection(node)

    def _send_waiting(self, now: float) -> None:
        keep = []
        for w in self._waiting:
            out = w.out
            if out.to_coordinator and self.machine.coordinator is None:
                if out.kind in ("commit", "fetch_offsets"):
                    # The coordinator moved while it waited: queue it again for the next one.
                    self._requeue(out)
                else:
                    self.machine.on_failure(out, KafkaConnectionError("the coordinator is unknown"), now)
                continue
            conn = self._connection(out)
            if conn is not None and self._refused(out, conn.protocol):
                continue
            if conn is None:
                coord = self.machine.coordinator
                failed = coord is not None and out.to_coordinator and self.cluster.backoff_remaining(coord[1], coord[2]) > 0
                if failed or now - w.since > out.timeout:
                    self._finish(out, None, KafkaConnectionError(
                        f"could not connect to the {'coordinator' if out.to_coordinator else 'cluster'} "
                        f"for {out.api.name}"), now)
                else:
                    keep.append(w)
                continue
            fut = conn.send(out.api, out.request, timeout=out.timeout)
            fut.add_done_callback(lambda f, out=out: self._on_done(out, f))
        self._waiting = keep

    def _on_done(self, out: Outgoing, f: Future) -> None:
        exc = f.exception(0)
        self._finish(out, None if exc else f.result(0), exc, time.monotonic())

    def _fail_waiting(self, exc: BaseException) -> None:
        for w in self._waiting:
            settle(w.out.token, exc=exc)
        self._waiting = []
        while True:
            try:
                _fn, fut = self._commands.get_nowait()
            except queue.Empty:
                break
            fut.set_exception(exc)


class ConsumerGroup(_shared.ConsumerGroup):
    """The shared consumer side of group membership, with the group thread as its
    driver and the coordinator operations run by the consumer's Cluster (the sync
    shell's one step runner), blocking, by a deadline."""

    def __init__(self, consumer: Any, driver: Any = None):
        super().__init__(consumer, driver or GroupThread(
            consumer.config, dict(consumer.cluster.brokers), consumer.cluster.poller.wakeup),
            time.monotonic())

    def after_fork(self) -> None:
        """In a child process, for a consumer that is not a group member (it only commits
        and reads offsets of assign()ed partitions): a new group thread, with its own
        coordinator connection; the parent's thread did not come along."""
        old = self.driver
        self.driver = GroupThread(self.config, dict(self.consumer.cluster.brokers),
                                  self.consumer.cluster.poller.wakeup)
        old.cluster.close()  # its poller let go of the parent's descriptors already
        self._committed_fut = None
        self.done_commits.clear()  # the parent runs their callbacks

    def _run(self, steps: Any, deadline: float) -> Any:
        return self.consumer.cluster.run(steps, deadline, self.coordinator_name)

    def commit(self, offsets: dict[Any, int] | None, deadline: float) -> None:
        self._run(self.commit_steps(offsets, deadline), deadline)

    def unsubscribe(self, deadline: float) -> None:
        self._run(self.unsubscribe_steps(deadline), deadline)

    def committed(self, partitions: list[Any], deadline: float) -> dict[Any, int | None]:
        return self._run(self.committed_steps(partitions, deadline), deadline)

    def close(self, deadline: float) -> None:
        try:
            self._run(self.close_steps(deadline), deadline)
        finally:
            self.driver.stop(max(0.0, deadline - time.monotonic()))


