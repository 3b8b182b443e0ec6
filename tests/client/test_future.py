import threading
import time

import pytest

from kafkawire.errors import KafkaTimeoutError
from kafkawire.client.future import Future


def test_result_and_callbacks():
    f = Future()
    seen = []
    f.add_done_callback(lambda x: seen.append(x.result()))
    f.set_result(3)
    f.set_result(4)  # first outcome wins
    assert f.result() == 3 and seen == [3]
    f.add_done_callback(lambda x: seen.append("late"))
    assert seen == [3, "late"]


def test_exception_is_raised_by_result():
    f = Future()
    f.set_exception(KeyError("k"))
    assert f.failed()
    with pytest.raises(KeyError):
        f.result(0)


def test_timeout_then_other_thread_completes():
    f = Future()
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        f.result(0.05)
    assert time.monotonic() - start < 1
    threading.Timer(0.05, f.set_result, (7,)).start()
    assert f.result(5) == 7


def test_driver_is_called_until_done():
    calls = []

    def driver(timeout):
        calls.append(timeout)
        if len(calls) == 3:
            f.set_result("ok")

    f = Future(driver)
    assert f.result(5) == "ok" and len(calls) == 3


def test_every_waiting_thread_wakes_once_resolved_and_a_late_waiter_is_forgotten():
    f = Future()
    assert not f.wait(0.01) and not f._waiters  # a waiter that gave up leaves no lock behind
    woke: list = []
    threads = [threading.Thread(target=lambda: woke.append(f.result(10))) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    f.set_result("v")
    for t in threads:
        t.join(10)
    assert woke == ["v"] * 8 and f._waiters is None


def test_resolving_while_threads_start_waiting_never_strands_one():
    # Each round resolves the future from another thread at about the moment this one
    # starts waiting: whichever comes first, the wait ends with the value (no hang).
    for i in range(2000):
        f = Future()
        t = threading.Thread(target=f.set_result, args=(i,))
        t.start()
        assert f.result(5) == i
        t.join(5)


def test_a_callback_added_while_another_thread_resolves_runs_exactly_once():
    for i in range(2000):
        f = Future()
        runs: list = []
        t = threading.Thread(target=f.set_result, args=(i,))
        t.start()
        f.add_done_callback(lambda fut: runs.append(fut.result(0)))
        t.join(5)
        assert runs == [i]
