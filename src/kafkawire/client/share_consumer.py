"""The share consumer (KIP-932, "queues for Kafka"): members of a share group read the same
partitions together, each record acquired by one member under a time-limited lock and
acknowledged one by one.

Every decision is the I/O-free :class:`~kafkawire.protocol.share_group.ShareGroupMember`'s;
this shell sends the requests it asks for on the cluster's connections, hands back the
answers, and runs the caller's acknowledgement callback.  Nothing runs between calls: the
heartbeat goes out from poll(), commit_sync() and close(), so call poll() at least every
few seconds (the group's ``group.share.session.timeout.ms``, 45 s by default, ends a
member that is not heard from, and a record's lock, 30 s by default, ends sooner).

Not thread-safe: call it from one thread.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from kafkawire.client.cluster import Cluster
from kafkawire.core import fork as _fork
from kafkawire.core.fork import ForkedClientError
from kafkawire.core.config import Config, merge_options
from kafkawire.errors import KafkaConnectionError
from kafkawire.protocol.fetcher import TopicPartition
from kafkawire.protocol.share_consumer_base import ShareConsumerBase
from kafkawire.protocol.share_group import (
    AcknowledgementCallback,
    Send,
    ShareConsumerRecord,
    member_for,
    share_mode,
)

__all__ = ["ShareConsumer", "ShareConsumerRecord"]


class ShareConsumer(ShareConsumerBase):
    """A member of share group ``group_id``.  Options are the consumer's (Java names in
    snake_case), plus ``share_acknowledgement_mode``: "implicit" (the default: the records a
    poll() returned are accepted by the next poll() or commit, unless acknowledge()d
    otherwise) or "explicit" (acknowledge() every record before the next poll()).

    ``poll()`` returns :class:`ShareConsumerRecord` objects (``delivery_count`` says how
    often the record was delivered); ``acknowledge(record, ACCEPT | RELEASE | REJECT)``;
    ``commit_sync()`` / ``commit_async()`` send the acknowledgements at once rather than
    with the next fetch; ``close()`` releases what the consumer holds and leaves."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **options: Any):
        opts, mode = share_mode(merge_options("ShareConsumer", config, options))
        self.config = Config.consumer(**opts)
        self._member = member_for(self.config, mode)
        self._fork_generation = _fork.generation
        self.cluster = Cluster(self.config)
        try:
            self.cluster.check_addresses()  # no broker is asked: poll() connects
        except BaseException:
            self.cluster.close()
            raise
        self._answers: list[tuple[Send, Any, BaseException | None]] = []
        # Requests whose connection is being set up, with when to give up on it.
        self._held: list[tuple[Send, float]] = []
        self._callback: AcknowledgementCallback | None = None
        self._closed = False
        self._answer_timeout = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000.0

    _now = staticmethod(time.monotonic)

    # -- the calls that wait (the others: ShareConsumerBase) ------------------------------

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ShareConsumerRecord]:
        """Records acquired for this member, waiting up to ``timeout`` seconds for some."""
        self._check_open()
        m = self._member
        limit = max_records or self.config.max_poll_records
        started = time.monotonic()
        deadline = started + timeout
        out = m.take_records(limit)  # settles the last poll's records first
        while True:
            self._step(fetch=True)
            self._raise_refused(started, timeout)
            if not out:
                out = m.take_records(limit)
            if out:
                self._step(fetch=True)  # the next fetch goes out while the caller works
                return out
            now = time.monotonic()
            if now >= deadline:
                return out
            self._wait(deadline, now)

    def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, BaseException | None]:
        """Send the acknowledgements held (the last poll's too, in implicit mode) and wait
        for the answers: {partition: None, or the typed error for its acknowledgements}."""
        self._check_open()
        started = time.monotonic()
        deadline = started + self._timeout(timeout)
        c = self._member.commit(started)
        while True:
            self._step(fetch=False)
            self._raise_refused(started, self._timeout(timeout))
            if c.done:
                return dict(c.results)
            now = time.monotonic()
            if now >= deadline:
                raise self._commit_timeout(c, timeout)
            self._wait(deadline, now)

    def commit_async(self) -> None:
        """Send the acknowledgements held now; their results reach the acknowledgement
        commit callback from a later call."""
        self._check_open()
        self._member.commit(time.monotonic())
        self._step(fetch=False)

    def close(self, timeout: float | None = None) -> None:
        """Release the records held and not delivered (and, in explicit mode, the last
        poll's unacknowledged ones; implicit mode accepts them), close the share sessions
        and leave the group, within ``timeout`` seconds (default request_timeout_ms)."""
        if self._closed:
            return
        deadline = time.monotonic() + self._timeout(timeout)
        try:
            if self._forked():
                return  # the parent's member: its records and sessions are the parent's to let go
            self._member.close(time.monotonic())
            while not self._member.closed:
                now = time.monotonic()
                if now >= deadline:
                    break
                self._step(fetch=False)
                if self._member.closed:
                    break
                self._wait(deadline, time.monotonic())
        finally:
            self._closed = True
            self.cluster.close()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the shell's loop -----------------------------------------------------------------

    def _forked(self) -> bool:
        return self._fork_generation != _fork.generation

    def _check_open(self) -> None:
        super()._check_open()
        if self._forked():
            raise ForkedClientError(
                "this share consumer was made before os.fork(): the parent process is the group "
                "member, holding its records; make a new ShareConsumer in the child")

    def _raise_refused(self, started: float, timeout: float) -> None:
        """Before any broker answered, one refused for good (a certificate, a login) ends
        the call at once; one not up yet is waited for, as any answer is."""
        refused = self.cluster.refused_for_good(started, timeout)
        if refused is not None:
            raise refused

    def _step(self, fetch: bool) -> None:
        if self._held:
            held, self._held = self._held, []
            for send, give_up in held:
                self._start(send, give_up)
        super()._step(fetch)

    def _start(self, send: Send, give_up: float | None = None) -> None:
        cluster = self.cluster
        conn = cluster.any_ready_connection() if send.node is None else cluster.ready_connection(send.node)
        if conn is None:
            now = time.monotonic()
            if give_up is None:
                give_up = now + self.config.request_timeout_ms / 1000.0
            # A node the metadata does not list yet (a coordinator named by FindCoordinator
            # before the Metadata answer) is waited for as one connecting is.
            refused = send.node is not None and send.node in cluster.brokers and not cluster.connecting(send.node)
            if not refused and now < give_up:
                # Being set up (inside the cluster's polls): sent once ready, as the
                # asyncio shell's request awaits its connection; not a failure.
                self._held.append((send, give_up))
                return
            why = "refused or in reconnect backoff" if refused else "no connection within request_timeout_ms"
            self._answers.append((send, None, KafkaConnectionError(
                f"{send.api.name}: broker {'(any)' if send.node is None else send.node}: {why}")))
            return
        try:
            conn.send_nowait(send.api, send.request, conn.version_for(send.api), timeout=self._answer_timeout,
                             on_answer=lambda resp, exc, send=send: self._answers.append((send, resp, exc)))
        except Exception as exc:  # noqa: BLE001 - the member decides what a failure means
            self._answers.append((send, None, exc))

    def _wait(self, deadline: float, now: float) -> None:
        if self._answers:
            return
        wait = self._wait_time(deadline, now)
        delay = self.cluster.next_connect_delay()
        if delay > 0:
            wait = min(wait, delay)
        if self._held:
            wait = max(0.0, min(wait, min(give_up for _send, give_up in self._held) - now))
        self.cluster.poll(wait)
