"""A small future: a value or an exception that arrives later.

Futures made by a :class:`~kafkawire.client.conn.BrokerConnection` are *driven*: waiting
on one runs the connection's I/O loop until it resolves, so no thread is needed.  Futures
completed by another thread (the producer's sender) are waited on with a one-shot lock
per waiting thread, made only when someone actually waits: the thread that resolves the
future releases it.  That is one hand-off between threads, not a Condition's lock round
trips (a send().result() waits on one of these for every record it sends).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from kafkawire.errors import KafkaTimeoutError

__all__ = ["Future"]

_PENDING = object()
# Guards a future's lists of waiters and of callbacks as threads add to them and the
# resolving thread takes them (uncontended: one acquire per wait() or callback added).
_WAITERS = threading.Lock()


def _new_waiters_lock() -> None:
    # In a forked child: a parent thread may have held it at the fork, for good.
    global _WAITERS
    _WAITERS = threading.Lock()


os.register_at_fork(after_in_child=_new_waiters_lock)


class Future:
    __slots__ = ("_value", "_exception", "_callbacks", "_driver", "_waiters", "__weakref__")

    def __init__(self, driver: Callable[[float], Any] | None = None):
        self._value: Any = _PENDING
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[Future], Any]] | None = None
        # driver(timeout) does some I/O for at most ``timeout`` seconds.
        self._driver = driver
        # One acquired lock per thread blocked in wait(); _finish releases them.
        self._waiters: list[Any] | None = None

    def done(self) -> bool:
        return self._value is not _PENDING or self._exception is not None

    def succeeded(self) -> bool:
        return self._value is not _PENDING

    def failed(self) -> bool:
        return self._exception is not None

    def set_result(self, value: Any) -> None:
        if self.done():
            return
        self._value = value
        self._finish()

    def set_exception(self, exc: BaseException) -> None:
        if self.done():
            return
        self._exception = exc
        self._finish()

    def _finish(self) -> None:
        if self._waiters is not None:
            with _WAITERS:
                waiters, self._waiters = self._waiters, None
            for lock in waiters or ():
                lock.release()
        if self._callbacks is not None:
            self._run_callbacks()

    def _run_callbacks(self) -> None:
        # Taken under the guard: the resolving thread and one adding a callback may both
        # get here, and each callback must run once.
        with _WAITERS:
            callbacks, self._callbacks = self._callbacks, None
        for cb in callbacks or ():
            cb(self)

    def add_done_callback(self, fn: Callable[[Future], Any]) -> None:
        """Call ``fn(future)`` when the future resolves (now, if it already has)."""
        if self.done():
            fn(self)
            return
        with _WAITERS:
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(fn)
        if self.done():  # resolved by another thread meanwhile: it may have missed fn
            self._run_callbacks()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until resolved or ``timeout`` seconds pass; True when resolved."""
        if self.done():
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._driver is not None:
            while not self.done():
                remaining = 3600.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._driver(min(remaining, 1.0))
            return True
        lock = threading.Lock()
        lock.acquire()
        with _WAITERS:
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(lock)
        # Resolved before the lock was listed: _finish may have released the list already.
        while not self.done():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                self._forget_waiter(lock)
                return self.done()
            # In slices, so that a signal handler (KeyboardInterrupt) runs in time.
            if lock.acquire(timeout=1.0 if remaining is None else min(remaining, 1.0)):
                break
        return True

    def _forget_waiter(self, lock: Any) -> None:
        with _WAITERS:
            if self._waiters is not None and lock in self._waiters:
                self._waiters.remove(lock)

    def _after_fork(self) -> None:
        """In a forked child: the threads that waited here stayed in the parent."""
        self._waiters = None

    def result(self, timeout: float | None = None) -> Any:
        """The value; raises the failure, or KafkaTimeoutError after ``timeout`` seconds."""
        if not self.wait(timeout):
            raise KafkaTimeoutError(f"no result within {timeout}s")
        if self._exception is not None:
            raise self._exception
        return self._value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self.wait(timeout):
            raise KafkaTimeoutError(f"no result within {timeout}s")
        return self._exception

    def __repr__(self) -> str:
        if self._exception is not None:
            return f"<Future failed {self._exception!r}>"
        if self._value is not _PENDING:
            return f"<Future done {self._value!r}>"
        return "<Future pending>"
