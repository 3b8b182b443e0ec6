"""What a send gives back, in both shells: a record's :class:`RecordFuture` and the
:class:`RecordMetadata` it resolves to, and a send_batch's :class:`BatchMetadata`."""

from __future__ import annotations

from typing import Any, Callable

from kafkawire.core.future import Future

__all__ = ["RecordMetadata", "BatchMetadata", "RecordFuture"]


class RecordMetadata:
    """Where a record landed: topic, partition, offset (-1 with acks=0) and timestamp."""

    __slots__ = ("topic", "partition", "offset", "timestamp")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp})")


class BatchMetadata:
    """Where a batch from send_batch landed: its first offset and its record count."""

    __slots__ = ("topic", "partition", "base_offset", "count")

    def __init__(self, topic: str, partition: int, base_offset: int, count: int):
        self.topic = topic
        self.partition = partition
        self.base_offset = base_offset
        self.count = count

    def __repr__(self) -> str:
        return (f"BatchMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"base_offset={self.base_offset}, count={self.count})")


class RecordFuture(tuple):
    """The future of one record: ``result(timeout)`` gives its :class:`RecordMetadata`.

    Lean on purpose, as one is made per send(): a tuple (batch, index in the batch,
    timestamp), the batch's one future resolving every record of the batch."""

    __slots__ = ()

    @property
    def _batch_future(self) -> Future:
        return self[0].future

    @property
    def _topic(self) -> str:
        return self[0].topic

    @property
    def _partition(self) -> int:
        return self[0].partition

    @property
    def _index(self) -> int:
        return self[1]

    def _metadata(self, value: tuple[int, int]) -> RecordMetadata:
        batch, index, timestamp = self
        if type(value) is not tuple:  # a batch split after MESSAGE_TOO_LARGE (accumulator.SplitOffsets)
            value, index = value.part(index), 0  # the record's own offset; raises its part's error
        base, append_time = value
        offset = -1 if base < 0 else base + index
        ts = append_time if append_time is not None and append_time >= 0 else timestamp
        return RecordMetadata(batch.topic, batch.partition, offset, ts)

    def done(self) -> bool:
        return self._batch_future.done()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        return self._metadata(self._batch_future.result(timeout))

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._batch_future.exception(timeout) or self._part_error(self._batch_future.result())

    def _part_error(self, value: Any) -> BaseException | None:
        """The error of this record's part of a split batch (None: written, or no split)."""
        return None if type(value) is tuple else value.error(self[1])

    def add_callback(self, fn: Callable[[RecordMetadata | None, BaseException | None], Any]) -> None:
        """Call ``fn(metadata, None)`` on success or ``fn(None, exception)`` on failure,
        on the sender thread (keep it short)."""

        def done(f: Future) -> None:
            exc = f.exception() or self._part_error(f.result())
            if exc is not None:
                fn(None, exc)
            else:
                fn(self._metadata(f.result()), None)

        self._batch_future.add_done_callback(done)

    def __repr__(self) -> str:
        return f"<RecordFuture {self._topic}[{self._partition}] #{self._index} {self._batch_future!r}>"
