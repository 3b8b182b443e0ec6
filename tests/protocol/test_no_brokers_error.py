"""NoBrokersAvailableError as the sans-IO layer builds it (no I/O): each attempt's typed
exception in ``.errors``, the first (or, when every address refused for good, the
refusal) as ``__cause__``; a permanent refusal's class is the error's class too; it
pickles (a multiprocessing worker or a Spark task sends it back) with all of that."""

from __future__ import annotations

import pickle

from kafkawire.errors import (
    BrokerConnectionRefusedError,
    BrokerResolutionError,
    BrokerTLSError,
    KafkaConnectionError,
    NoBrokersAvailableError,
)
from kafkawire.protocol.metadata import Backoffs, BrokerAttempts, refresh_timeout, unreached


def test_a_refresh_that_reached_no_broker_keeps_each_error():
    attempts = BrokerAttempts()
    refused = BrokerConnectionRefusedError("refused", host="a", port=1)
    tls = BrokerTLSError("certificate verify failed", host="b", port=2)
    attempts.failed("a", 1, refused)
    attempts.failed("b", 2, tls)
    err = attempts.error()
    assert type(err) is NoBrokersAvailableError and err.retriable  # the refused one may come up
    assert err.errors == [refused, tls] and err.__cause__ is refused


def test_every_address_refused_for_good_is_that_refusals_class_too():
    attempts = BrokerAttempts()
    first, second = BrokerTLSError("wrong CA", host="a", port=1), BrokerTLSError("wrong CA", host="b", port=2)
    attempts.failed("a", 1, first)
    attempts.failed("b", 2, second)
    err = attempts.error()
    assert isinstance(err, BrokerTLSError) and isinstance(err, NoBrokersAvailableError)
    assert not err.retriable and err.errors == [first, second] and err.__cause__ is first
    assert (err.host, err.port) == ("a", 1)
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err) and not again.retriable and str(again) == str(err)
    assert [str(e) for e in again.errors] == ["wrong CA", "wrong CA"]
    # A name that does not resolve ends at once too, and is caught by its class.
    attempts = BrokerAttempts()
    dns = BrokerResolutionError("no such host", host="nowhere", port=1)
    attempts.failed("nowhere", 1, dns)
    err = attempts.error()
    assert isinstance(err, BrokerResolutionError) and not err.retriable and err.__cause__ is dns


def test_the_sender_threads_error_keeps_each_addresses_last():
    backoffs = Backoffs(50, 1000, jitter=lambda: 1.0)
    a = BrokerConnectionRefusedError("refused a")
    b = BrokerConnectionRefusedError("refused b")
    backoffs.failed(backoffs.get("h", 1), BrokerConnectionRefusedError("earlier"), 0.0)
    backoffs.failed(backoffs.get("h", 1), a, 1.0)
    backoffs.failed(backoffs.get("h", 2), b, 1.0)
    assert unreached(backoffs, [("h", 1), ("h", 2)], 1.0, 5.0, at_deadline=False) is None  # wait on
    err = unreached(backoffs, [("h", 1), ("h", 2)], 5.0, 5.0, at_deadline=True)
    assert isinstance(err, NoBrokersAvailableError) and err.retriable
    assert err.errors == [a, b] and err.__cause__ is a and "2 attempts, the last" in str(err)


def test_a_refresh_timeout_keeps_its_last_error():
    last = BrokerTLSError("wrong CA")
    err = refresh_timeout(2.0, last)
    assert err.errors == [last] and err.__cause__ is last
    assert refresh_timeout(2.0, None).errors == [] and refresh_timeout(2.0, None).__cause__ is None


def test_a_plain_summary_is_not_a_refusal():
    err = NoBrokersAvailableError("nothing tried")
    assert err.errors == [] and err.__cause__ is None and isinstance(err, KafkaConnectionError)
    assert pickle.loads(pickle.dumps(err)).errors == []


def test_pickling_keeps_what_was_set():
    err = NoBrokersAvailableError("every address refused", host="h", port=9)
    err.retriable = False
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is NoBrokersAvailableError and not again.retriable and (again.host, again.port) == ("h", 9)
