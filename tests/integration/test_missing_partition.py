"""A partition its topic does not have is refused, on Apache Kafka, in both shells: by
assign() (the sync consumer asks for the metadata there) or by the next call once one
fresh Metadata answer says so, with UnknownPartitionError naming the topic's partitions,
as send() does; never a silent empty poll or a 30 s wait for offsets."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid

import pytest

from kafkawire.errors import UnknownPartitionError
from shells import shell  # noqa: F401 - the fixture

NAMED = "has 3 partitions (0-2), so partition 9 does not exist"


def _topic(broker, partitions: int = 3) -> str:
    from kafkawire import Admin

    name = f"nopart-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([name], num_partitions=partitions)
    return name


def _refused(call, within: float = 5.0) -> UnknownPartitionError:
    start = time.monotonic()
    with pytest.raises(UnknownPartitionError, match=re.escape(NAMED)) as info:
        call()
    assert time.monotonic() - start < within
    return info.value


def test_every_consumer_call_refuses_a_missing_partition(kafka_broker, shell):
    topic = _topic(kafka_broker)
    bad = (topic, 9)
    c = shell.Consumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest",
                       group_id=f"g-{uuid.uuid4().hex[:6]}", enable_auto_commit=False)
    try:
        err = _refused(lambda: (c.assign([bad]), c.poll(5)))
        assert (err.topic, err.partition, err.count) == (topic, 9, 3)
        if c.assignment():  # the asyncio consumer: assign() cannot wait for an answer
            _refused(lambda: c.position(bad))
            c.seek(bad, 0)
            _refused(lambda: c.poll(5))  # a position of its own: refused by the fetch planning
        else:  # the sync consumer refused it in assign(), and kept nothing of it
            assert c.assignment() == set()
        _refused(lambda: c.end_offsets([bad]))
        _refused(lambda: c.beginning_offsets([bad]))
        _refused(lambda: c.offsets_for_times({bad: 0}))
        _refused(lambda: c.committed([bad]))
        # The partitions it has go on working.
        c.assign([(topic, 2)])
        assert c.end_offsets([(topic, 2)]) == {(topic, 2): 0}
        assert c.committed([(topic, 2)]) == {(topic, 2): None}
        assert c.poll(0.2) == []
    finally:
        c.close()


def test_cli_consume_refuses_a_missing_partition(kafka_broker):
    topic = _topic(kafka_broker)
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "kafkawire", "consume", topic, "-p", "9", "-n", "1",
                          "-b", kafka_broker.bootstrap], capture_output=True, text=True, timeout=60,
                         env={**os.environ})
    assert time.monotonic() - start < 15
    assert out.returncode == 2, out
    assert "UnknownPartitionError" in out.stderr and NAMED in out.stderr
