"""protocol.metadata.bootstrap_steps on a fake clock (no broker): a refused connection
is tried again as its reconnect backoff ends (reconnect_backoff_ms doubling up to
reconnect_backoff_max_ms) until the deadline; a host name that does not resolve, or a
refusal for good, ends the bootstrap at once; the error says what was tried, how often
and for how long."""

from __future__ import annotations

import asyncio
from typing import Any

from kafkawire.errors import BrokerConnectionRefusedError, BrokerResolutionError, BrokerTLSError
from kafkawire.protocol.metadata import Backoffs, bootstrap_steps
from kafkawire.protocol.steps import Await, Sleep, drive_async


def _run(addresses: list[tuple[str, int]], timeout: float, fails: Any, base_ms: int = 100,
         max_ms: int = 400) -> tuple[Any, list[Any], float]:
    """Run the bootstrap; ``fails(host, port, n)`` gives the exception of attempt n there
    (None: it answers).  The shell's side (the attempt records its failure) is played here."""
    clock = [0.0]
    backoffs = Backoffs(base_ms, max_ms, jitter=lambda: 1.0)
    counts: dict[tuple[str, int], int] = {}
    log: list[Any] = []

    def attempt(host: str, port: int, deadline: float) -> Any:
        n = counts[(host, port)] = counts.get((host, port), 0) + 1
        log.append((round(clock[0], 3), host, port))
        exc = fails(host, port, n)
        if exc is not None:
            backoffs.failed(backoffs.get(host, port), exc, clock[0])
            raise exc
        return "answer"

    async def do_step(step: Any) -> Any:
        if isinstance(step, Sleep):
            clock[0] += step.seconds
            return None
        assert isinstance(step, Await)
        return step.answer

    out = asyncio.run(drive_async(bootstrap_steps(addresses, timeout, attempt, backoffs), do_step, lambda: clock[0]))
    return out, log, clock[0]


def test_a_refused_address_is_tried_again_with_a_growing_backoff_until_it_answers():
    out, log, spent = _run([("h", 1)], 30.0, lambda h, p, n: BrokerConnectionRefusedError("refused") if n < 5 else None)
    assert out is None
    # 100, 200, 400, 400 ms between the attempts (jitter fixed at 1.0 here).
    assert [t for t, _h, _p in log] == [0.0, 0.1, 0.3, 0.7, 1.1] and spent == 1.1


def test_at_the_deadline_the_error_names_each_address_its_attempts_and_the_time():
    out, log, spent = _run([("h", 1), ("h", 2)], 1.0, lambda h, p, n: BrokerConnectionRefusedError(f"{h}:{p} refused"))
    assert spent == 1.0 and out.retriable
    message = str(out)
    assert "gave up after 1.0 s of the 1 s allowed" in message
    assert "h:1: 4 attempts, the last BrokerConnectionRefusedError: h:1 refused" in message
    assert "h:2: 4 attempts" in message


def test_an_unresolvable_name_or_a_refusal_for_good_ends_at_once():
    def fails(host, port, n):
        return BrokerResolutionError("cannot resolve") if port == 1 else BrokerTLSError("bad certificate")

    out, log, spent = _run([("h", 1), ("h", 2)], 30.0, fails)
    assert spent == 0.0 and len(log) == 2 and not out.retriable
    # One address that may yet come up keeps the bootstrap going.
    out, log, spent = _run([("h", 1), ("h", 3)], 1.0,
                           lambda h, p, n: BrokerResolutionError("x") if p == 1 else BrokerConnectionRefusedError("y"))
    assert spent == 1.0 and [p for _t, _h, p in log].count(1) == 1 and out.retriable


def test_no_backoff_configured_still_never_loops_without_a_wait():
    out, log, spent = _run([("h", 1)], 0.5, lambda h, p, n: BrokerConnectionRefusedError("refused"), 0, 0)
    assert out.retriable and spent == 0.5
    assert 40 <= len(log) <= 51  # one attempt per 10 ms at most
