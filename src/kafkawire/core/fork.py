"""Fork detection for both shells' clients.

After ``os.fork()`` the child holds copies of the parent's file descriptors: the broker
sockets, the ``epoll`` instance of each :class:`~kafkawire.client.conn.Poller` and its
wake-up pipe.  They are *shared* with the parent, not duplicated: a child that reads a
socket steals the parent's answers, one that writes interleaves its requests with the
parent's, and an ``EPOLL_CTL_DEL`` on the shared epoll instance unregisters the parent's
socket (the parent then waits forever).  Threads other than the forking one do not exist
in the child, and a lock one of them held stays held.

So, in the child, right after the fork (``os.register_at_fork(after_in_child=...)``):

* every object registered here with :func:`register` gets its ``_after_fork_in_child()``
  called.  Those hooks only close the child's copies of the
  descriptors and replace locks and selectors; they run no callbacks and do no I/O.
  Closing a descriptor never ends the TCP connection while the parent holds another
  (no FIN), and ``SSLSocket.close()`` frees the TLS state without sending close_notify
  (only ``unwrap()`` sends one), so the parent's connections are untouched;
* :data:`generation` goes up by one.  A client compares it with the value it saw when
  it was made (:func:`forked`) on its next call and finishes the job there, where
  callbacks may run: fail what was in flight, reconnect, restart its thread, or raise
  :class:`ForkedClientError` where continuing would be wrong.

Clients made in the child see the new generation from the start and work normally.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any

from kafkawire.errors import ClientClosedError

__all__ = ["ForkedClientError", "register", "generation", "forked", "pid"]

log = logging.getLogger("kafkawire.fork")

#: How many forks this process is away from the one that imported kafkawire (0 there,
#: 1 in a child, 2 in a grandchild...).  Read it as ``_fork.generation``.
generation = 0
#: The pid the current generation belongs to.
pid = os.getpid()

_live: weakref.WeakSet[Any] = weakref.WeakSet()
_live_lock = threading.Lock()


class ForkedClientError(ClientClosedError):
    """A client made before ``os.fork()`` was used in the child where it cannot go on
    (a consumer group member: the parent is the member, not the child).  Create a new
    client in the child; closing the inherited one there is allowed and leaves the
    parent's connections and group membership alone."""


def register(obj: Any) -> None:
    """Have ``obj._after_fork_in_child()`` called in every child forked from now on
    (while ``obj`` is alive: the registry holds it weakly)."""
    with _live_lock:
        _live.add(obj)


def forked(seen: int) -> bool:
    """True when the process forked since ``generation`` was ``seen``."""
    return generation != seen


def _after_fork_in_child() -> None:
    global generation, pid, _live_lock
    generation += 1
    pid = os.getpid()
    # Another thread may have held it at the fork; nobody else runs in the child yet.
    _live_lock = threading.Lock()
    try:
        objs = list(_live)
    except RuntimeError:  # another thread was changing the set at the fork
        objs = list(_live.data)
        objs = [r() for r in objs]
    for obj in objs:
        if obj is None:
            continue
        try:
            obj._after_fork_in_child()
        except Exception:  # noqa: BLE001 - one client's failure must not stop the others
            log.exception("kafkawire: resetting %r after fork failed", obj)


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)
