"""Producer.list_topics() runs its Metadata request on the producer's own sender thread
and connections; with no broker to reach it ends by its deadline with the typed
NoBrokersAvailableError, and a call that ran out is dropped, not left queued in front of
the next one."""

from __future__ import annotations

import time

import pytest

from kafkawire import Producer
from kafkawire.errors import NoBrokersAvailableError
from kafkawire.testing import free_port

pytestmark = pytest.mark.deadlines


def test_list_topics_with_no_broker_ends_at_its_deadline_with_the_addresses_failures():
    address = f"127.0.0.1:{free_port()}"
    p = Producer(bootstrap_servers=address, max_block_ms=5000, reconnect_backoff_ms=50,
                 reconnect_backoff_max_ms=200)
    try:
        for timeout in (0.6, 0.4):
            start = time.monotonic()
            with pytest.raises(NoBrokersAvailableError) as info:
                p.list_topics(timeout=timeout)
            took = time.monotonic() - start
            assert timeout - 0.05 < took < timeout + 0.5, took
            assert info.value.retriable  # nothing listening yet: a later call may succeed
            assert address in str(info.value) and info.value.errors
    finally:
        p.close(1)
