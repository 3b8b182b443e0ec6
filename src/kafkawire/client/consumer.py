"""The consumer: manual assignment (``assign``, ``seek``, ``poll``) or a consumer group
(``group_id`` and ``subscribe``; see :mod:`kafkawire.client.group`).

``poll(timeout, max_records)`` returns :class:`ConsumerRecord` objects (with topic and
partition); ``poll_batch(timeout)`` returns the codec's columnar shape per partition.
What to fetch and what the answers mean is decided by the I/O-free
:class:`~kafkawire.protocol.fetcher.Fetcher`; this shell sends its requests (one long
poll per leader broker) and feeds back the answers.  The next fetch is sent before
poll() returns, so it is in flight while the caller works.

Not thread-safe: call it from one thread.

After ``os.fork()`` (see :mod:`kafkawire.core.fork`): the child's copy of a consumer
made before the fork lets go of the parent's connections without touching them (the
parent goes on undisturbed) and

* without ``group_id``, or with one but not subscribed (assign() and commits): it goes on
  in the child.  It connects again on its next call, fetches from its own positions
  (records the parent had prefetched are fetched again), and a ``group_id`` consumer gets
  a new group thread;
* subscribed to a group (a member): every call but close() raises
  :class:`~kafkawire.core.fork.ForkedClientError`, since the parent is the member and
  the child is not.  Create a new Consumer in the child.  close() there only lets go of
  the copy: no commit, no LeaveGroup, the parent stays in the group.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

from kafkawire.core import fork as _fork
from kafkawire.core.fork import ForkedClientError
from kafkawire.client.cluster import Cluster
from kafkawire.core.config import Config, merge_options
from kafkawire.errors import ClientClosedError, NoBrokersAvailableError
from kafkawire.client.group import ConsumerGroup, ConsumerRebalanceListener
from kafkawire.protocol import apis
from kafkawire.protocol.fetcher import (
    ConsumerRecord,
    FetchedBatch,
    Fetcher,
    OffsetAndTimestamp,
    TopicPartition,
)
from kafkawire.protocol.fetcher import EARLIEST, LATEST
from kafkawire.protocol.fetcher import as_topic_partition as _tp
from kafkawire.protocol.consumer_base import ConsumerBase
from kafkawire.protocol.metadata import check_topic_name, list_topics_steps, missing_partitions_steps
from kafkawire.protocol.offsets import check_timestamps, list_offsets_steps, offsets_and_times, reset_steps

__all__ = ["Consumer", "ConsumerRecord", "TopicPartition", "FetchedBatch", "OffsetAndTimestamp",
           "ConsumerRebalanceListener"]

FETCH = apis.get("Fetch")


class Consumer(ConsumerBase):
    """A Kafka consumer.  Options are the Java client's in snake_case
    (``bootstrap_servers``, ``group_id``, ``fetch_max_wait_ms``, ...).

    Without ``group_id``, ``assign()`` the partitions and ``seek()`` positions yourself.
    With it, ``subscribe()`` to topics and the group shares their partitions among its
    members; offsets are committed to the group (automatically every
    ``auto_commit_interval_ms`` unless ``enable_auto_commit=False``: only offsets of
    records an earlier poll() returned, so every record is processed at least once).
    A member that assign()s its partitions can still commit to its group.

    The constructor waits for no broker (it refuses only bootstrap host names that
    resolve nowhere); the first call that needs the cluster (poll(), assign(),
    list_topics(), end_offsets() ...) connects, and raises a refusal no wait fixes (TLS,
    a login, a protocol mismatch) at once.
    """

    _now = staticmethod(time.monotonic)

    def __init__(self, config: Mapping[str, Any] | None = None, /, **options: Any):
        self.config = c = Config.consumer(**merge_options("Consumer", config, options))
        self._fork_generation = _fork.generation
        self._forked_member = False  # a group member's copy in a forked child: unusable
        self.cluster = Cluster(c)
        try:
            # No broker is asked here: the first call that needs the cluster bootstraps
            # (Cluster.run), retrying what waiting may fix up to its own deadline.
            self.cluster.check_addresses()
        except BaseException:
            self.cluster.close()
            raise
        self._fetcher = Fetcher(c)
        self._inflight: dict[int, object] = {}  # broker id -> a token for its Fetch in flight
        self._closed = False
        self._group = ConsumerGroup(self) if c.group_id is not None else None

    # -- assignment and positions ---------------------------------------------------------

    def assign(self, partitions: Iterable[Any]) -> None:
        """Consume exactly these (topic, partition) pairs (replacing any earlier set).
        A partition its topic lacks is refused (UnknownPartitionError, naming the
        topic's partitions) once a Metadata answer says so."""
        tps = self._assignment(partitions)
        # A leader unknown: ask now, as this call may wait (no answer: poll() keeps trying).
        try:
            self._refuse_missing(tps, self._timeout(None))
        except NoBrokersAvailableError as exc:
            if not exc.retriable:
                raise
        self._assign(tps)

    def _refuse_missing(self, tps: list[TopicPartition], timeout: float) -> None:
        self.cluster.run(missing_partitions_steps(self.cluster.meta, tps, timeout),
                         time.monotonic() + timeout, "Metadata")

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None, timeout: float | None = None) -> None:
        self._seek_to(EARLIEST, partitions, timeout)

    def seek_to_end(self, partitions: Iterable[Any] | None = None, timeout: float | None = None) -> None:
        self._seek_to(LATEST, partitions, timeout)

    def _seek_to(self, which: int, partitions: Iterable[Any] | None, timeout: float | None) -> None:
        tps = list(self._assigned) if partitions is None else [_tp(x) for x in partitions]
        offsets = self._list_offsets({tp: which for tp in tps}, self._timeout(timeout))
        for tp, (offset, _ts) in offsets.items():
            self.seek(tp, offset)

    def position(self, partition: Any, timeout: float | None = None) -> int:
        """The offset of the next record poll() returns for ``partition``."""
        state = self._state(partition)
        if state.position is None:
            self._reset_positions([_tp(partition)], self._timeout(timeout))
        return state.position  # type: ignore[return-value]

    def offsets_for_times(self, timestamps: dict[Any, int], timeout: float | None = None
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one (ms), per partition;
        None where no such record exists."""
        query = check_timestamps(timestamps)
        return offsets_and_times(query, self._list_offsets(query, self._timeout(timeout)))

    def beginning_offsets(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int]:
        got = self._list_offsets({_tp(x): EARLIEST for x in partitions}, self._timeout(timeout))
        return {tp: v[0] for tp, v in got.items()}

    def end_offsets(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int]:
        got = self._list_offsets({_tp(x): LATEST for x in partitions}, self._timeout(timeout))
        return {tp: v[0] for tp, v in got.items()}

    def _list_offsets(self, query: dict[TopicPartition, int], timeout: float
                      ) -> dict[TopicPartition, tuple[int, int]]:
        self._check_open()
        steps = list_offsets_steps(self.cluster.meta, query, self._fetcher.isolation, timeout,
                                   self._fetcher.retry_backoff)
        return self.cluster.run(steps, time.monotonic() + timeout, "ListOffsets")

    def _reset_positions(self, tps: list[TopicPartition], timeout: float) -> None:
        steps = reset_steps(self._fetcher, self.cluster.meta, tps, timeout)
        self.cluster.run(steps, time.monotonic() + timeout, "ListOffsets")

    # -- the cluster's topics (as the producer's) -------------------------------------------

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """Partition ids of ``topic``, waiting up to ``timeout`` seconds (default
        request_timeout_ms) for its metadata."""
        self._check_open()
        return self.cluster.partitions_for(check_topic_name(topic), self._timeout(timeout))

    def list_topics(self, timeout: float | None = None, include_internal: bool = False) -> dict[str, list[int]]:
        """Every topic of the cluster and its partition ids (internal ones such as
        __consumer_offsets only with ``include_internal``), within ``timeout`` seconds
        (default request_timeout_ms)."""
        self._check_open()
        return self.cluster.run(list_topics_steps(include_internal), time.monotonic() + self._timeout(timeout),
                                "Metadata")

    # -- fetching -------------------------------------------------------------------------

    def _send_fetches(self) -> None:
        f = self._fetcher
        now = time.monotonic()
        due, offsets, buffered = f.due(self.cluster.meta, now, self._inflight)
        timeout = f.answer_timeout
        for node, tps in due:
            # Never waits: a connection being set up finishes inside the polls that
            # follow, and the partitions are fetched once it is ready.
            conn = self.cluster.ready_connection(node)
            if conn is None:
                if not self.cluster.connecting(node):
                    # Refused or in reconnect backoff: a replica read from instead of
                    # the leader (KIP-392) is given up, as a failed fetch would.
                    f.replica_failed(node)
                continue
            req, positions = f.request(tps, offsets, buffered, self.cluster.topics)
            # In flight from here: the answer (or a failure) may come before send_nowait returns.
            token = self._inflight[node] = object()
            try:
                conn.send_nowait(FETCH, req, conn.version_for(FETCH), timeout=timeout,
                                 on_answer=lambda resp, exc, node=node, positions=positions, token=token:
                                 self._on_fetch(node, positions, token, resp, exc))
            except Exception as exc:  # noqa: BLE001 - the fetcher says what it means
                if self._inflight.get(node) is token:
                    del self._inflight[node]
                f.fetch_failed(positions, exc, self.cluster.meta, node, now)

    def _on_fetch(self, node: int, positions: dict[TopicPartition, int], token: object,
                  resp: Any, exc: BaseException | None) -> None:
        if self._inflight.get(node) is token:
            del self._inflight[node]
        if exc is not None:
            self._fetcher.fetch_failed(positions, exc, self.cluster.meta, node, time.monotonic())
        else:
            self._fetcher.fetched(resp, positions, self.cluster.meta, node, time.monotonic())

    def high_watermarks(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int]:
        """The offset after each partition's last readable record, as a Fetch response
        reports it (the high watermark; the last stable offset under read_committed).

        Each partition is fetched from its ListOffsets latest offset, so an answer carries
        at most the last batch; where no Fetch answers, or ListOffsets says more, that is
        the result.  Tansu answers ListOffsets latest with the last batch's base offset + 1,
        below its watermark, so end_offsets() alone can stop a reader short there."""
        deadline = time.monotonic() + self._timeout(timeout)
        latest = self._list_offsets({_tp(x): LATEST for x in partitions}, self._timeout(timeout))
        out = {tp: offset for tp, (offset, _ts) in latest.items()}
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, offset in out.items():
            leader = self.cluster.leader_for(*tp)
            if leader is not None:
                by_node.setdefault(leader, {})[tp] = offset
        for node, wanted in by_node.items():
            # Tansu answers a Fetch with max_wait_ms=0 with no partitions at all: wait a little.
            # min_bytes=0: Kafka answers at once instead of holding a fetch at the log end
            # for max_wait_ms (100 ms per call, paid by every Spark read's planning).
            req = FETCH.Request(
                replica_id=-1, max_wait_ms=100, min_bytes=0, max_bytes=1 << 16,
                isolation_level=self._fetcher.isolation, session_id=0, session_epoch=-1,
                topics=Fetcher.fetch_topics(wanted, 1 << 16, self.cluster.topics))
            resp = self.cluster.request(node, FETCH, req, max(0.0, deadline - time.monotonic()))
            for name, t in Fetcher.response_topics(resp, self.cluster.meta.topic_names):
                for p in t.partitions:
                    tp = TopicPartition(name, p.partition_index)
                    if tp in wanted and p.error_code == 0:
                        lso = getattr(p, "last_stable_offset", -1)
                        out[tp] = max(out[tp], lso if self._fetcher.isolation and lso >= 0 else p.high_watermark)
        return out

    def _poll(self, timeout: float, max_records: int, columnar: bool) -> list[Any]:
        self._check_poll()
        started = time.monotonic()
        deadline = started + timeout
        while True:
            # Before any broker answered, one refused for good (a certificate, a login)
            # ends the poll at once; one not up yet leaves it empty at its deadline.
            refused = self.cluster.refused_for_good(started, timeout)
            if refused is not None:
                raise refused
            lookup = self._poll_start(deadline)
            if lookup is not None:
                try:
                    self.cluster.run(*lookup, "ListOffsets")
                except NoBrokersAvailableError as exc:
                    if not exc.retriable:
                        raise  # else no broker up yet: this poll is empty, the next asks again
            out = self._fetch_round(max_records, columnar, deadline)
            if out is not None:
                return out
            # A fetch's answer, a connection's setup or a refresh ends the wait.
            self.cluster.poll(self._idle_wait(deadline - time.monotonic(), bool(self._inflight),
                                              self.cluster.next_connect_delay()))

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to ``timeout`` seconds for
        some; at most ``max_records`` (default ``max_poll_records``)."""
        return self._poll(timeout, max_records or self.config.max_poll_records, False)

    def poll_batch(self, timeout: float = 1.0) -> list[FetchedBatch]:
        """Like poll(), but one :class:`FetchedBatch` (columnar) per partition fetched."""
        return self._poll(timeout, 1 << 62, True)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        if self._fork_generation != _fork.generation:
            self._after_fork()
        if self._forked_member:
            raise ForkedClientError(
                f"this Consumer joined group {self.config.group_id!r} before os.fork(): the "
                f"parent process is the group member, not this child, so it cannot be used "
                f"here; create a new Consumer in the child (close() on this one is allowed "
                f"and leaves the parent's membership alone)")

    def _after_fork(self) -> None:
        # The first call in a forked child (see the module docstring).  The poller has
        # already let go of the parent's sockets; the fetches that were in flight fail now.
        self._fork_generation = _fork.generation
        self.cluster.poller._fail_orphans()
        g = self._group
        if g is not None:
            if g.member:
                self._forked_member = True
                return
            g.after_fork()
        self._fetcher.forget_fetches()
        self._inflight.clear()

    def metrics(self) -> dict[str, Any]:
        """What the consumer holds that poll() has not returned yet, and where it reads:

        * ``buffered_records``: decoded records waiting (poll()'s max_records cut them off);
        * ``buffered_bytes``: their keys and values, plus the undecoded records data of
          the fetch answers buffered (at most two answers per partition, each up to
          ``max_partition_fetch_bytes``, a batch larger than that excepted, KIP-74);
        * ``retained_bytes``: the size of the fetch answers that data keeps in memory
          (it is read without copying, so a partition's slice keeps its whole answer,
          up to ``fetch_max_bytes``, alive);
        * ``buffered_partitions``, ``fetches_in_flight``;
        * ``preferred_read_replicas``: {partition: broker id} of the partitions read from
          a replica their leader named (``client_rack``, KIP-392) rather than the leader;
        * ``fetched_bytes_by_node``: {broker id: bytes of records data its answers carried}.
        """
        return {**self._fetcher.metrics(), "fetches_in_flight": len(self._inflight)}

    # -- groups and offsets -----------------------------------------------------------------

    def unsubscribe(self, timeout: float | None = None) -> None:
        """Give up the subscription's partitions (committing with auto-commit) and leave the group."""
        self._need_group("unsubscribe()").unsubscribe(time.monotonic() + self._timeout(timeout))

    def commit(self, offsets: dict[Any, int] | None = None, timeout: float | None = None) -> None:
        """Commit ``offsets`` ({(topic, partition): next offset to read}; default: the
        position of every assigned partition, i.e. after the records poll() returned)
        and wait for the group's answer.  Raises :class:`~kafkawire.errors.CommitFailedError`
        when the group rebalanced in the meantime, KafkaTimeoutError after ``timeout``."""
        g = self._need_group("commit()")
        g.commit(self._offsets(offsets), time.monotonic() + self._timeout(timeout))

    def committed(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where there is none)."""
        g = self._need_group("committed()")
        tps = [_tp(x) for x in partitions]
        deadline = time.monotonic() + self._timeout(timeout)
        self._refuse_missing(tps, self._timeout(timeout))
        return g.committed(tps, deadline)

    def close(self, timeout: float | None = None) -> None:
        """Leave the group (committing first with auto-commit) and close the
        connections, within ``timeout`` seconds (default request_timeout_ms).  In a
        forked child, a group member's copy is only let go of (see the module docstring)."""
        if self._closed:
            return
        if self._fork_generation != _fork.generation:
            self._after_fork()
        try:
            if self._group is not None:
                if self._forked_member:
                    # The parent's member: no commit, no LeaveGroup, no listener calls.
                    self._group.driver.stop(0)
                else:
                    self._group.close(time.monotonic() + self._timeout(timeout))
        finally:
            self._closed = True
            self.cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
