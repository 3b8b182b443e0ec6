"""A client's constructor asks no broker (it may only resolve the bootstrap host names):
a refusal (a certificate, a login, a protocol mismatch) is met by the first call that
needs the cluster.  The security suites make both with :func:`first_call`."""

from __future__ import annotations

from typing import Any


def first_call(client_class: Any, *config: Any, **options: Any) -> None:
    """Make a client (a Producer, Consumer or Admin of either shell: the asyncio shell's
    constructor runs its start(), which is that shell's first call) and ask it for the
    cluster's topics; what either raises is raised."""
    client = client_class(*config, **options)
    try:
        client.list_topics()
    finally:
        client.close()
