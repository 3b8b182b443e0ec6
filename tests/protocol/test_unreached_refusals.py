"""What a caller waiting for a bootstrap made elsewhere (the producer's sender thread, or
connections a poll set up without waiting) is told before its deadline (no I/O): a login
refused at any address at once, as the bootstrap itself ends on it; a refusal for good at
every address at once; a refused address that has left its reconnect backoff no longer,
for a caller whose own polls make the next attempt."""

from __future__ import annotations

from kafkawire.errors import (
    BrokerConnectionRefusedError,
    BrokerTLSError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    SaslAuthenticationError,
)
from kafkawire.protocol.metadata import Backoffs, unreached

ADDRESSES = [("h", 1), ("h", 2)]


def _backoffs() -> Backoffs:
    return Backoffs(100, 1000, jitter=lambda: 1.0)


def test_a_refused_login_at_one_address_ends_the_wait_at_once():
    backoffs = _backoffs()
    backoffs.failed(backoffs.get("h", 1), BrokerConnectionRefusedError("refused", host="h", port=1), 0.0)
    assert unreached(backoffs, ADDRESSES, 0.1, 20.0, at_deadline=False) is None  # h:2 not tried yet
    login = SaslAuthenticationError("SCRAM-SHA-256 authentication failed", mechanism="SCRAM-SHA-256")
    backoffs.failed(backoffs.get("h", 2), login, 0.0)
    assert unreached(backoffs, ADDRESSES, 0.1, 20.0, at_deadline=False) is login  # itself, not summed up


def test_a_token_providers_own_error_ends_it_too_but_no_answer_in_time_does_not():
    class VaultDown(Exception):
        pass

    backoffs = _backoffs()
    backoffs.failed(backoffs.get("h", 1), KafkaTimeoutError("Metadata: no answer in time"), 0.0)
    assert unreached(backoffs, ADDRESSES, 0.1, 20.0, at_deadline=False) is None
    down = VaultDown("no token")
    backoffs.failed(backoffs.get("h", 2), down, 0.0)
    assert unreached(backoffs, ADDRESSES, 0.1, 20.0, at_deadline=False) is down


def test_every_address_refused_for_good_is_told_at_once():
    backoffs = _backoffs()
    first = BrokerTLSError("wrong CA", host="h", port=1)
    backoffs.failed(backoffs.get("h", 1), first, 0.0)
    assert unreached(backoffs, ADDRESSES, 0.1, 20.0, at_deadline=False) is None
    backoffs.failed(backoffs.get("h", 2), BrokerTLSError("wrong CA", host="h", port=2), 0.0)
    err = unreached(backoffs, ADDRESSES, 0.1, 20.0, at_deadline=False)
    assert isinstance(err, NoBrokersAvailableError) and isinstance(err, BrokerTLSError)
    assert not err.retriable and err.__cause__ is first


def test_given_now_a_refusal_counts_only_while_its_address_backs_off():
    backoffs = _backoffs()
    login = SaslAuthenticationError("PLAIN authentication failed", mechanism="PLAIN")
    backoffs.failed(backoffs.get("h", 1), login, 0.0)  # in backoff until 0.1
    assert unreached(backoffs, ADDRESSES, 0.05, 20.0, False, now=0.05) is login
    # Past its backoff the caller's next poll tries again; that attempt decides.
    assert unreached(backoffs, ADDRESSES, 0.2, 20.0, False, now=0.2) is None
    for port in (1, 2):
        backoffs.failed(backoffs.get("h", port), BrokerTLSError("wrong CA", host="h", port=port), 0.2)
    assert isinstance(unreached(backoffs, ADDRESSES, 0.25, 20.0, False, now=0.25), BrokerTLSError)
    assert unreached(backoffs, ADDRESSES, 1.0, 20.0, False, now=1.0) is None
    # Without now (the sender thread keeps trying anyway) the last errors always count.
    assert isinstance(unreached(backoffs, ADDRESSES, 1.0, 20.0, False), BrokerTLSError)
