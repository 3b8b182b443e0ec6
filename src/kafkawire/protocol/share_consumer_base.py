"""What the sync :class:`~kafkawire.ShareConsumer` and the asyncio share consumer do alike
without waiting or I/O: the calls that hand straight to the
:class:`~kafkawire.protocol.share_group.ShareGroupMember`, one step of the member (answers
in, events applied, requests out, callbacks run) and how long a call may wait for news.
Both shells inherit it; each keeps its own sockets or tasks and the calls that wait.

A subclass sets ``config``, ``cluster`` (with ``interest``, ``meta``, ``maybe_refresh()``),
``_member``, ``_answers`` (the ``(send, response, error)`` outcomes come in so far),
``_callback`` and ``_closed``, and defines ``_now()`` (its clock) and ``_start(send)``
(puts a request on its way; its outcome is appended to ``_answers``).
"""

from __future__ import annotations

from typing import Any, Iterable

from kafkawire.errors import ClientClosedError, KafkaTimeoutError
from kafkawire.protocol.fetcher import TopicPartition
from kafkawire.protocol.share_group import (
    ACCEPT,
    AcknowledgementCallback,
    Commit,
    Failed,
    MetadataNeeded,
    Send,
    ShareGroupMember,
)

__all__ = ["ShareConsumerBase"]


class ShareConsumerBase:
    config: Any
    cluster: Any
    _member: ShareGroupMember
    _answers: list[tuple[Send, Any, BaseException | None]]
    _callback: AcknowledgementCallback | None
    _closed: bool

    @staticmethod
    def _now() -> float:
        raise NotImplementedError

    def _start(self, send: Send) -> None:
        raise NotImplementedError

    def _timeout(self, timeout: float | None) -> float:
        return self.config.request_timeout_ms / 1000.0 if timeout is None else timeout

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the share consumer is closed")

    # -- the calls that return at once ----------------------------------------------------

    @property
    def member_id(self) -> str:
        return self._member.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """The acquisition lock the broker named in its latest ShareFetch answer."""
        return self._member.acquisition_lock_timeout_ms

    def subscribe(self, topics: Iterable[str]) -> None:
        """Read ``topics`` with the share group (replacing an earlier subscription)."""
        self._check_open()
        self._member.subscribe(topics, self._now())
        self.cluster.interest.update(self._member.subscription)

    def subscription(self) -> list[str]:
        return list(self._member.subscription)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group coordinator gave this member (shared with others)."""
        return set(self._member.assignment)

    def unsubscribe(self) -> None:
        self._check_open()
        self._member.unsubscribe(self._now())

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCallback | None) -> None:
        """``callback(offsets, error)`` runs (inside poll(), commit_*() or close()) once the
        broker answered acknowledgements: ``offsets`` is {TopicPartition: [offset, ...]},
        ``error`` None or the typed error for them (InvalidRecordStateError: the lock ran
        out first)."""
        self._callback = callback

    def acknowledge(self, record: Any, type: int = ACCEPT) -> None:
        """Acknowledge a record the last poll() returned: ACCEPT (done), RELEASE (deliver it
        again) or REJECT (never again).  Sent with the next poll() or commit."""
        self._check_open()
        self._member.acknowledge(record, type)

    # -- the shells' loops ----------------------------------------------------------------

    def _step(self, fetch: bool) -> None:
        """Hand the member the outcomes come in, apply its events, start the requests it
        asks for (``fetch``: the caller wants records) and run the acknowledgement
        callbacks; then raise the error that ended the membership, if one did."""
        m = self._member
        answers, self._answers = self._answers, []
        m.on_answers(answers, self._now(), self.cluster.meta)
        failed = None
        for ev in m.events():
            if isinstance(ev, MetadataNeeded):
                self.cluster.interest.update(ev.topics)
                self.cluster.meta.need_refresh = True
            elif isinstance(ev, Failed):
                failed = ev.error
        self.cluster.maybe_refresh()
        for send in m.poll(self._now(), self.cluster.meta, fetch):
            self._start(send)
        done = m.completions()
        callback = self._callback
        if callback is not None:
            for c in done:
                callback(c.offsets, c.error)
        if failed is not None:
            raise failed

    def _wait_time(self, deadline: float, now: float) -> float:
        """How long a call waits for news before its next step: until its ``deadline``, the
        member's next request, or (a metadata refresh held back by retry_backoff_ms) the
        end of that backoff, whichever comes first."""
        wait = deadline - now
        wake = self._member.next_wakeup(now)
        if wake is not None:
            wait = min(wait, wake - now)
        if self.cluster.meta.need_refresh:
            wait = min(wait, self.config.retry_backoff_ms / 1000.0)
        return max(wait, 0.0)

    def _commit_timeout(self, c: Commit, timeout: float | None) -> KafkaTimeoutError:
        return KafkaTimeoutError(f"commit_sync: no answer for the acknowledgements of {sorted(c.acks)} "
                                 f"within {self._timeout(timeout):g}s")
