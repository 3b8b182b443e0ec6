"""The steps of a multi-request operation, and the runners that move one on.

An operation that needs several requests and waits (the transaction coordinator
exchanges of protocol/transactions.py, the consumer group's commits, committed offsets
and leaving in protocol/group_member.py, offset lookups, metadata) is written once, as a generator that yields the step it needs next and
is resumed with that step's result, or has the exception that stopped it thrown in; its
return value is the outcome.  The steps:

* :class:`Request`: send ``build(version)`` to broker ``node`` (None: any broker);
  resumed with the response;
* :class:`Await`: an answer already on its way (a future); resumed with its result;
* :class:`Sleep`: resumed after ``seconds``;
* :class:`Refresh`: resumed once the cluster metadata has been fetched again (within
  ``timeout`` seconds; the shell's refresh error is thrown in);
* :data:`NOW`: resumed at once with the runner's clock (monotonic seconds: the sync
  shell's ``time.monotonic()``, the asyncio shell's ``loop.time()``), so that a generator
  keeps deadlines without reading a clock itself.

A shell only says how a request starts and how to wait: the sync shell moves a
generator with :class:`StepRun` (never blocking, from its sender thread or its polls;
client/steps.py's ``run_blocking`` waits on it for callers that may block), the asyncio
shell with :func:`drive_async`.  Each shell's cluster runs a generator to its end with
every step done the one way (``Cluster.run``, ``AsyncCluster.run``: offset lookups,
bootstrap, metadata refresh, partitions_for and the consumer group's operations today).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Generator, Mapping, NamedTuple

__all__ = ["Request", "Await", "Sleep", "Refresh", "Now", "NOW", "StepRun", "drive_async", "Prepare", "Late"]

# A cap on the version that depends on the broker's finalized features (KIP-584).
VersionCap = Callable[[Mapping[str, int]], "int | None"]


class Request(NamedTuple):
    """Send ``build(version)`` to ``node`` (None: any broker), at a version no higher
    than ``max_version`` (None: the negotiated one; a callable gets the broker's
    finalized features and returns the cap)."""

    node: int | None
    api: Any
    build: Callable[[int], Any]
    max_version: int | VersionCap | None = None

    def version(self, negotiated: int, features: Mapping[str, int]) -> int:
        """The version to send, given the one negotiated with the chosen broker."""
        cap = self.max_version(features) if callable(self.max_version) else self.max_version
        return negotiated if cap is None else min(negotiated, cap)


# A runner's hooks for a Request step on a ready connection (``conn``, the shell's):
# ``prepare`` gives the (version, request) to send where the step's own version and build
# do not do (Admin checks the version against the call); ``late``, for an answer not in
# by the deadline, gives (the error to close the connection with, or None; the error
# thrown in): Admin closes it, as a broker answers a connection's requests in order.
Prepare = Callable[[Request, Any], "tuple[int, Any]"]
Late = Callable[[Request, Any], "tuple[BaseException | None, BaseException]"]


class Await(NamedTuple):
    """Wait for ``answer``, a future already on its way."""

    answer: Any


class Sleep(NamedTuple):
    seconds: float


class Refresh(NamedTuple):
    """Fetch the cluster metadata again, waiting up to ``timeout`` seconds."""

    timeout: float


class Now(NamedTuple):
    """Resumed with the runner's clock: see :data:`NOW`."""


NOW = Now()


# How long a runner waiting for an answer says it can wait: the answer's arrival wakes
# the shell anyway (the sender's poll, a callback), so this only bounds a lost wake-up.
ANSWER_LOOK = 0.1
# A request whose connection is still being set up is tried again this much later.
CONNECT_LOOK = 0.05


class StepRun:
    """Moves a steps generator on without ever blocking: call :meth:`advance` whenever
    the shell has a moment (its sender loop, its polls).  Once ``finished``, ``error``
    is what the generator raised, or ``value`` what it returned.

    ``on_wait(future)`` is called for each answer waited for, so that the shell can
    arrange to be woken when it arrives.  Given ``now``, the generator starts at once
    (its first request is asked for before the first :meth:`advance`).  :data:`NOW` is
    answered with the ``now`` of the call that resumes the generator, or ``clock()``."""

    def __init__(self, steps: Generator[Any, Any, Any], on_wait: Callable[[Any], Any] | None = None,
                 now: float | None = None, clock: Callable[[], float] | None = None):
        self.steps = steps
        self.on_wait = on_wait
        # Answers NOW when given (a blocking start() makes the ``now`` passed in stale).
        self.clock = clock
        self.request: Request | Refresh | None = None  # yielded, not yet begun
        self.waiting: Any = None  # the future of the answer waited for
        self.sleep_until = 0.0
        self.finished = False
        self.value: Any = None
        self.error: BaseException | None = None
        self._started = now is not None
        if now is not None:
            self._resume(None, None, now)

    def advance(self, now: float, start: Callable[[Any], Any] | None = None) -> float | None:
        """Go as far as the answers in and ``now`` allow.  ``start(step)`` begins a
        :class:`Request` (or a :class:`Refresh`) and returns its future, or None while no
        connection is ready (it is then asked again later); what it raises is thrown into
        the generator.  Returns how long until another look is due, or None once the
        generator has ended."""
        if not self._started:
            self._started = True
            self._resume(None, None, now)
        while not self.finished:
            if self.waiting is not None:
                fut = self.waiting
                if not fut.done():
                    return ANSWER_LOOK
                exc = fut.exception()
                self._resume(None if exc is not None else fut.result(), exc, now)
            elif self.request is not None:
                if start is None:
                    self.fail(TypeError(f"{_name(self.request)} step, and nothing to start it"), now)
                    continue
                try:
                    fut = start(self.request)
                except Exception as exc:  # noqa: BLE001 - thrown into the generator
                    self._resume(None, exc, now)
                    continue
                if fut is None:
                    return CONNECT_LOOK
                self.request = None
                self._wait_for(fut)
            elif now < self.sleep_until:
                return self.sleep_until - now
            else:
                self._resume(None, None, now)
        return None

    def fail(self, exc: BaseException, now: float) -> None:
        """Stop waiting for the present step: ``exc`` is thrown into the generator."""
        self.waiting = self.request = None
        self._resume(None, exc, now)

    def _wait_for(self, fut: Any) -> None:
        self.waiting = fut
        if self.on_wait is not None:
            self.on_wait(fut)

    def _resume(self, value: Any, exc: BaseException | None, now: float) -> None:
        self.waiting = self.request = None
        self.sleep_until = 0.0
        while True:
            try:
                step = self.steps.throw(exc) if exc is not None else self.steps.send(value)
            except StopIteration as stop:
                self.finished, self.value = True, stop.value
                return
            except Exception as err:  # noqa: BLE001 - the outcome, for the shell to raise
                self.finished, self.error = True, err
                return
            if type(step) is not Now:
                break
            value, exc = now if self.clock is None else self.clock(), None  # the runner's clock
        if isinstance(step, (Request, Refresh)):
            self.request = step
        elif isinstance(step, Await):
            self._wait_for(step.answer)
        elif isinstance(step, Sleep):
            self.sleep_until = now + step.seconds
        else:
            self.fail(TypeError(f"not a step: {step!r}"), now)


def _name(step: Any) -> str:
    return f"a {step.api.name} request" if isinstance(step, Request) else f"a {type(step).__name__}"


async def drive_async(steps: Generator[Any, Any, Any], do_step: Callable[[Any], Awaitable[Any]],
                      clock: Callable[[], float] | None = None) -> Any:
    """Run ``steps`` to its end in a coroutine, each step done by ``await
    do_step(step)``: what it returns is sent in, what it raises is thrown in.  Returns
    the generator's return value.  Given ``clock``, :data:`NOW` is answered from it."""
    value: Any = None
    exc: BaseException | None = None
    while True:
        try:
            step = steps.throw(exc) if exc is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        value, exc = None, None
        if clock is not None and type(step) is Now:
            value = clock()
            continue
        try:
            value = await do_step(step)
        except Exception as err:  # noqa: BLE001 - thrown into the generator
            exc = err
