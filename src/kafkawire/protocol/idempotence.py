"""The idempotent producer's identity and sequence numbers (KIP-98), with no I/O.

A producer id and epoch come from InitProducerId; every batch carries them and the
sequence number of its first record, counted per partition from 0.  The partition's
leader keeps the last five batches' sequences per producer and answers a resent batch
it already wrote as a duplicate (with its offset), so a retry can never write a record
twice, and refuses a batch whose sequence is not the next one (OUT_OF_ORDER_SEQUENCE_NUMBER),
so a retry can never reorder.

Up to five batches of a partition are in flight (the accumulator sends them in sequence
order, and resends a refused or failed one only once every batch before it is
acknowledged); but until one batch of a partition is written under the current id and
epoch, only that one: a broker with no state for the producer there takes any sequence,
so a batch behind a refused first one would be written before it.  OUT_OF_ORDER_SEQUENCE_NUMBER for a batch with an unacknowledged one before
it only says that one is not written yet: it is resent after it, with its sequence.  A
real sequence gap can only come from a batch that failed, or from a broker that lost its
producer state.  Then, as the Java client and librdkafka do since KIP-360, the producer
bumps its epoch itself (brokers take a higher epoch starting at sequence 0 from an
idempotent producer; a new id from InitProducerId once the epoch would overflow), and
every partition counts from 0 again.  Before the bump, no batch may be in flight, and
every batch an attempt of which may have been written (no answer, REQUEST_TIMED_OUT, and
no answer since that says it was not: a refusal of a later attempt, such as
NOT_LEADER_OR_FOLLOWER, does not) is resolved under the old epoch, where the broker can
still recognize it as written;
otherwise resending it under the new epoch could write it twice.  (One behind a batch the
broker refused cannot have been written: its sequence did not follow the last written.)
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from kafkawire import codec
from kafkawire.errors import ConfigError, KafkaConnectionError, KafkaTimeoutError, broker_error
from kafkawire.protocol import apis

__all__ = ["ProducerIdentity", "restamp", "INIT_PRODUCER_ID"]

log = logging.getLogger("kafkawire.producer")

INIT_PRODUCER_ID = apis.get("InitProducerId")

_SEQUENCE_MASK = 0x7FFFFFFF  # sequences wrap to 0 after INT32_MAX, as the broker expects
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
UNKNOWN_PRODUCER_ID = 59
# Produce answers after which the batch may or may not have been written.
_UNKNOWN_OUTCOME_CODES = frozenset({7, 20})  # REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND
# InitProducerId answers worth retrying (coordinator moving or loading, a transaction ending).
_INIT_RETRY_CODES = frozenset({14, 15, 16, 51})

# RecordBatch header (magic 2): crc at 17 covers everything from attributes (21) on.
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_LAST_OFFSET_DELTA_AT = 23
_PRODUCER_AT = 43  # producer_id int64, producer_epoch int16, base_sequence int32
_TRANSACTIONAL = 0x10
_PRODUCER = struct.Struct(">qhi")


def restamp(data: Any, producer_id: int, epoch: int, base_sequence: int, transactional: bool) -> bytearray:
    """``data`` (whole magic-2 record batches, as encoded) with the producer id, epoch and
    sequences (each batch's first following the one before) and the transactional flag
    replaced, and each CRC computed again: a batch encoded before its sequence was known
    (send_batch) or resent under a new epoch is not encoded twice.  One copy of the
    bytes: the patched buffer itself is returned."""
    buf = bytearray(data)
    pos, end, seq = 0, len(buf), base_sequence
    while pos + 61 <= end:
        length = int.from_bytes(buf[pos + 8:pos + 12], "big")
        stop = pos + 12 + length
        if buf[pos + 16] != 2 or length < 49 or stop > end:
            raise ValueError("restamp: not a whole magic-2 record batch at byte %d" % pos)
        attributes = int.from_bytes(buf[pos + 21:pos + 23], "big")
        attributes = attributes | _TRANSACTIONAL if transactional else attributes & ~_TRANSACTIONAL
        buf[pos + 21:pos + 23] = attributes.to_bytes(2, "big")
        _PRODUCER.pack_into(buf, pos + _PRODUCER_AT, producer_id, epoch, seq)
        crc = codec.crc32c(memoryview(buf)[pos + _ATTRIBUTES_AT:stop])
        buf[pos + _CRC_AT:pos + _CRC_AT + 4] = crc.to_bytes(4, "big")
        seq = (seq + int.from_bytes(buf[pos + 23:pos + 27], "big", signed=True) + 1) & _SEQUENCE_MASK
        pos = stop
    if pos != end:
        raise ValueError("restamp: trailing bytes after the record batches")
    return buf


class ProducerIdentity:
    """One producer's id, epoch and next sequence per partition.

    ``explicit``: idempotence was asked for (a broker that cannot do it is an error);
    otherwise, as the Java client does for its default, a broker too old for it (Produce
    before v3 or no InitProducerId) turns it off with a warning."""

    def __init__(self, transactional_id: str | None = None, transaction_timeout_ms: int = 60000,
                 explicit: bool = False, retry_backoff_ms: int = 100):
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.explicit = explicit
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.producer_id = -1
        self.epoch = -1
        self.next_sequence: dict[tuple[str, int], int] = {}
        # Partitions with a batch written under this id and epoch.  Until a partition has
        # one, the broker holds no state for the producer there and takes any sequence, so
        # a batch sent behind a refused first one could be written before it: only one
        # batch of such a partition goes out at a time (Accumulator.collect).
        self.written: set[tuple[str, int]] = set()
        self.requesting = False
        self.retry_at = 0.0
        # Why the epoch must be bumped (None: it need not be).
        self.bump_wanted: str | None = None
        self.bumps = 0
        self.fatal: BaseException | None = None
        self.disabled = False

    def reset(self) -> None:
        """Forget the producer id (a forked child asks for its own)."""
        self.producer_id = self.epoch = -1
        self.next_sequence.clear()
        self.written.clear()
        self.requesting = False
        self.retry_at = 0.0
        self.bump_wanted = None
        self.fatal = None

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def active(self) -> bool:
        return not self.disabled

    def may_send(self, b: Any) -> bool:
        """Whether batch ``b`` may be sent now."""
        if self.disabled:
            return True
        if self.producer_id < 0 or self.fatal is not None:
            return False
        if self.bump_wanted is None:
            return True
        return self.unresolved(b)

    def unresolved(self, b: Any) -> bool:
        """``b`` was sent under the current id and epoch and its outcome is unknown."""
        return b.unknown and b.sequence >= 0 and b.pid == self.producer_id and b.epoch == self.epoch

    def wants_init(self, now: float) -> bool:
        """Whether an InitProducerId should go out now (the caller checks that no batch
        is in flight or unresolved before a bump)."""
        return (not self.disabled and not self.transactional and self.fatal is None and not self.requesting
                and now >= self.retry_at and (self.producer_id < 0 or self.bump_wanted is not None))

    def init_request(self, version: int) -> Any:
        """The InitProducerId request to send (the caller marks nothing: this does)."""
        self.requesting = True
        # Transactional producers bump through their coordinator (v3+, KIP-360); older
        # coordinators and an exhausted epoch get a new id.
        bump = (self.transactional and self.bump_wanted is not None and self.producer_id >= 0
                and version >= 3 and self.epoch < 0x7FFF)
        return INIT_PRODUCER_ID.Request(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self.producer_id if bump else -1,
            producer_epoch=self.epoch if bump else -1,
        )

    def apply_init(self, resp: Any, exc: BaseException | None, now: float, broker: str) -> bool:
        """Take InitProducerId's answer (or the exception instead of it).  Returns True
        when the request should go to another coordinator (transactional producers)."""
        self.requesting = False
        if exc is not None:
            if not isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
                self.fatal = exc
                return False
            self.retry_at = now + self.retry_backoff
            return isinstance(exc, KafkaConnectionError)
        code = resp.error_code
        if code in _INIT_RETRY_CODES:
            self.retry_at = now + self.retry_backoff
            return code in (15, 16)
        if code:
            self.fatal = broker_error(code, f"InitProducerId on {broker}"
                                      + (f" for transactional_id {self.transactional_id!r}"
                                         if self.transactional else ""))
            return False
        self._take(resp.producer_id, resp.producer_epoch)
        self.bump_wanted = None
        return False

    def bump_locally(self) -> bool:
        """Bump the epoch without asking (idempotent, not transactional, and the epoch
        has room); False when an InitProducerId must do it."""
        if self.transactional or self.epoch >= 0x7FFF:
            return False
        self._take(self.producer_id, self.epoch + 1)
        self.bump_wanted = None
        return True

    def _take(self, producer_id: int, epoch: int) -> None:
        if (producer_id, epoch) == (self.producer_id, self.epoch):
            return
        if self.producer_id >= 0:
            self.bumps += 1
            log.info("producer id %d epoch %d -> id %d epoch %d (%s); sequences start again at 0",
                     self.producer_id, self.epoch, producer_id, epoch, self.bump_wanted)
        self.producer_id = producer_id
        self.epoch = epoch
        self.next_sequence.clear()
        self.written.clear()

    def unsupported(self, why: str) -> None:
        """The broker cannot do idempotence: off (with a warning) unless it was asked for."""
        if self.explicit or self.transactional:
            self.fatal = ConfigError(f"{why}; the producer's enable_idempotence/transactional_id "
                                     f"need Produce v3+ and InitProducerId (Kafka 0.11+)")
            return
        if not self.disabled:
            log.warning("%s: idempotence turned off for this producer (a retry may write a "
                        "record twice); set enable_idempotence=False to say so", why)
        self.disabled = True

    # -- batches ---------------------------------------------------------------------------

    def stamp(self, b: Any) -> None:
        """Give ``b`` this producer's id and epoch and its partition's next sequence,
        unless it already has them (a retry keeps its sequence)."""
        if b.sequence >= 0 and b.pid == self.producer_id and b.epoch == self.epoch:
            return
        tp = (b.topic, b.partition)
        seq = self.next_sequence.get(tp, 0)
        b.pid, b.epoch, b.sequence = self.producer_id, self.epoch, seq
        b.unknown = False  # what an attempt under an older stamp left unknown was settled
        self.next_sequence[tp] = (seq + b.count()) & _SEQUENCE_MASK

    def produce_error(self, b: Any, code: int) -> bool:
        """A Produce answer's error for ``b``: True when it is retriable here because
        the epoch will be bumped first (the batch was not written)."""
        if code == OUT_OF_ORDER_SEQUENCE_NUMBER:
            b.unknown = False  # not written (a batch the broker wrote is a duplicate)
        elif code in _UNKNOWN_OUTCOME_CODES:
            b.unknown = True
        # Other errors refuse this attempt only: an earlier one may still have been written.
        if self.disabled or b.pid != self.producer_id or b.epoch != self.epoch:
            return False
        if code in (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID) or (
                code == INVALID_PRODUCER_EPOCH and not self.transactional):
            self.bump_wanted = self.bump_wanted or (
                f"{b.topic}[{b.partition}] answered error {code} to sequence {b.sequence}")
            return not self.transactional
        return False

    def acknowledged(self, b: Any) -> None:
        """``b`` was written (its answer said so, or that it is a duplicate)."""
        if b.sequence >= 0 and b.pid == self.producer_id and b.epoch == self.epoch:
            self.written.add((b.topic, b.partition))

    def no_answer(self, b: Any) -> None:
        """``b``'s request got no answer: it may have been written."""
        b.unknown = True

    def failed(self, b: Any) -> None:
        """``b`` will not be sent again.  If it was certainly not written and nothing
        after it has a sequence, its partition's next sequence is its own again;
        otherwise the partition's sequences have a gap the broker would refuse, so the
        epoch is bumped (after which every partition starts again at 0)."""
        if self.disabled or b.sequence < 0 or b.pid != self.producer_id or b.epoch != self.epoch:
            return
        tp = (b.topic, b.partition)
        if not b.unknown and self.next_sequence.get(tp) == (b.sequence + b.count()) & _SEQUENCE_MASK:
            self.next_sequence[tp] = b.sequence
            return
        self.bump_wanted = self.bump_wanted or f"{b.topic}[{b.partition}] batch at sequence {b.sequence} failed"

    def describe(self) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "producer_epoch": self.epoch,
                "epoch_bumps": self.bumps, "idempotent": not self.disabled}
