"""Typing stub for the compiled kafkawire._accumulate (twin: kafkawire.protocol._accumulate_py)."""

from typing import Any, Callable, Iterable

IMPLEMENTATION: str

def murmur2(data: Any) -> int: ...

class Batch:
    topic: Any
    partition: Any
    records: list[Any] | None
    columns: Any
    size: int
    created: float
    future: Any
    attempts: int
    deadline: float
    retry_at: float
    encoded: tuple[int, int, bytes, tuple[int, int, int]] | None
    reserved: int
    full: bool
    in_flight: bool
    default_ts: int
    pid: int
    epoch: int
    sequence: int
    unknown: bool
    def __init__(self, topic: Any, partition: Any, now: float, deadline: float, future: Any) -> None: ...
    def count(self) -> int: ...
    @property
    def appended(self) -> int: ...
    def allocate(self, capacity: int) -> None: ...
    def trim(self) -> None: ...
    def free(self) -> None: ...
    def add(self, key: Any, value: Any, timestamp: int,
            headers: Iterable[tuple[bytes, Any]] | None = None) -> int: ...
    def encode_v2(self, compression: int, level: int | None, producer_id: int, producer_epoch: int,
                  base_sequence: int, transactional: bool) -> bytes: ...

class Appender:
    enabled: bool
    full: Callable[..., Any] | None
    pick: Callable[[Any], Any] | None
    counts: dict[str, int] | None
    lock: Any
    def __init__(self, open: dict[tuple[Any, Any], Batch], batch_size: int, lock: Any, future: type,
                 clock_ns: Callable[[], int], full: Callable[..., Any] | None = None,
                 pick: Callable[[Any], Any] | None = None, counts: dict[str, int] | None = None) -> None: ...
    def append(self, topic: Any, partition: Any, key: Any, value: Any, timestamp: Any,
               headers: Any) -> Any: ...
    def send(self, topic: Any, value: Any = None, key: Any = None, partition: Any = None,
             timestamp: Any = None, headers: Any = None, callback: Any = None) -> Any: ...
    def offer(self, topic: Any, value: Any = None, key: Any = None, partition: Any = None,
              timestamp: Any = None, headers: Any = None) -> Any: ...
