"""A ShareConsumer made before os.fork() is the parent's member: in the child its calls
raise ForkedClientError and close() lets nothing go (no leave, no sessions closed), as
the asyncio share consumer and a subscribed Consumer do."""

from __future__ import annotations

import os
import socket

from kafkawire import ShareConsumer
from kafkawire.core.fork import ForkedClientError


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_share_consumer_in_a_forked_child_refuses_and_closes_quietly():
    c = ShareConsumer(bootstrap_servers=f"127.0.0.1:{_closed_port()}", group_id="g", request_timeout_ms=500)
    c.subscribe(["t"])
    pid = os.fork()
    if pid == 0:  # the child: report by exit status only
        code = 1
        try:
            try:
                c.poll(0.1)
            except ForkedClientError:
                code = 2
                try:
                    c.commit_sync(0.1)
                except ForkedClientError:
                    c.close(0.1)
                    code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert c.poll(0.1) == []  # the parent's copy goes on
    c.close(0.5)
