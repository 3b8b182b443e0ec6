"""Finding a coordinator (FindCoordinator, API 10), with no I/O: the request for one
key or many, the answers read alike at every version, and the error codes that mean
"ask where the coordinator is again".  Used by the group membership machine, the
transaction manager and Admin."""

from __future__ import annotations

from typing import Any, NamedTuple

from kafkawire.protocol import apis

__all__ = ["FIND_COORDINATOR", "GROUP", "TRANSACTION", "COORDINATOR_MOVED", "CoordinatorAnswer",
           "find_request", "answers"]

FIND_COORDINATOR = apis.get("FindCoordinator")

# key_type: what the key names.
GROUP = 0
TRANSACTION = 1

# The coordinator is elsewhere (or nowhere yet): find it again before the next request.
# COORDINATOR_LOAD_IN_PROGRESS (14) is not here: that coordinator is the right one, busy.
COORDINATOR_MOVED = frozenset({15, 16})  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


class CoordinatorAnswer(NamedTuple):
    key: str
    node_id: int
    host: str
    port: int
    error_code: int
    error_message: str | None


def find_request(keys: list[str], key_type: int) -> Any:
    """FindCoordinator for ``keys``, good at every version: v0-v3 carry one key (the
    first), v4+ all of them (KIP-699)."""
    return FIND_COORDINATOR.Request(key=keys[0], key_type=key_type, coordinator_keys=list(keys))


def answers(resp: Any, keys: list[str]) -> list[CoordinatorAnswer]:
    """The answer for each key: v4+ answers per key; before, the one answer is for the
    one key asked about."""
    if resp.coordinators:
        return [CoordinatorAnswer(c.key, c.node_id, c.host, c.port, c.error_code, c.error_message)
                for c in resp.coordinators]
    return [CoordinatorAnswer(keys[0], resp.node_id, resp.host, resp.port, resp.error_code,
                              getattr(resp, "error_message", None))]
