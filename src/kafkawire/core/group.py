"""What both shells' group drivers share, and the consumer's group logic by its old name.

A *driver* runs the I/O-free membership machine (:class:`~kafkawire.protocol.group.GroupMembership`,
or KIP-848's :class:`~kafkawire.protocol.consumer_group.ConsumerGroupMembership`) over a
coordinator connection of its own: the sync shell's ``kafkawire.client.group.GroupThread``,
the asyncio shell's ``kafkawire.aio.group.AsyncGroupDriver``.  :class:`GroupDriver` is
what they do alike: the machine built from the consumer's options, what is refused before
it is sent, and what becomes of a request's answer or failure.

The consumer's side of membership (rebalances, commits, committed offsets) is
:class:`~kafkawire.protocol.group_member.ConsumerGroup`, in protocol/ since it does no I/O;
it is importable from here as before.
"""

from __future__ import annotations

import logging
from typing import Any

from kafkawire.core.config import Config
from kafkawire.errors import KafkaConnectionError, UnsupportedVersionError
from kafkawire.protocol.consumer_group import HEARTBEAT as CONSUMER_GROUP_HEARTBEAT
from kafkawire.protocol.consumer_group import ConsumerGroupMembership
from kafkawire.protocol.group import GroupMembership, Outgoing
from kafkawire.protocol.group_member import ConsumerGroup, ConsumerRebalanceListener

__all__ = ["ConsumerGroup", "ConsumerRebalanceListener", "GroupDriver", "settle"]

log = logging.getLogger("kafkawire.group")


def settle(token: Any, result: Any = None, exc: BaseException | None = None) -> None:
    """Resolve a request's token (a client Future or an asyncio future), once."""
    if token is None or token.done():
        return
    if exc is not None:
        token.set_exception(exc)
        if hasattr(token, "get_loop"):
            token.exception()  # an asyncio future nobody awaits must not log "never retrieved"
    else:
        token.set_result(result)


class GroupDriver:
    """What both shells' group drivers share: the state machine, built from the
    consumer's options, what is refused before it is sent, and what becomes of a
    request's answer or failure."""

    machine: GroupMembership

    def _make_machine(self, config: Config) -> GroupMembership:
        shared = dict(session_timeout_ms=config.session_timeout_ms,
                      retry_backoff_ms=config.retry_backoff_ms,
                      request_timeout_ms=config.request_timeout_ms,
                      group_instance_id=config.group_instance_id,
                      # The Java client's: a consumer that does not poll within it leaves.
                      rebalance_timeout_ms=config.max_poll_interval_ms)
        if config.group_protocol == "consumer":
            # KIP-848: the coordinator times the session and heartbeats, and assigns.
            return ConsumerGroupMembership(config.group_id, server_assignor=config.group_remote_assignor,
                                           **shared)
        return GroupMembership(config.group_id, heartbeat_interval_ms=config.heartbeat_interval_ms, **shared)

    def _log_events(self, events: list[Any]) -> None:
        for e in events:
            log.info("group %r: %s %s", self.machine.group_id, type(e).__name__,
                     getattr(e, "reason", "") or getattr(e, "error", "") or "")

    def _expire_held(self, now: float) -> None:
        """Fail what the machine held too long for want of a coordinator (expire_held),
        or held for one a permanent error says will not come (take_refused)."""
        m = self.machine
        for o, exc in m.take_refused():
            settle(o.token, exc=exc)
        expired = m.expire_held(now)
        if not expired:
            return
        err = KafkaConnectionError(
            f"no coordinator of group {m.group_id!r} found within request_timeout_ms="
            f"{expired[0].timeout * 1000:.0f}: the offsets were not committed (or read); "
            f"are the brokers up?")
        for o in expired:
            settle(o.token, exc=err)

    def _refused(self, out: Outgoing, protocol: Any) -> bool:
        """True when ``out`` was not sent because the broker cannot serve it, as its
        ApiVersions answer (``protocol``, the connection's) shows: the member fails at
        once with an error naming the fix, instead of asking again and again."""
        if out.kind != "heartbeat" or out.api is not CONSUMER_GROUP_HEARTBEAT:
            return False
        group = self.machine.group_id
        offered = (protocol.broker_versions or {}).get(out.api.key)
        if offered is None:
            err: BaseException | None = UnsupportedVersionError(
                f"group {group!r}: the broker does not offer ConsumerGroupHeartbeat, the consumer "
                f"group protocol of KIP-848 (Kafka 3.7+, on by default from Kafka 4.0): use "
                f"group_protocol='classic'")
        elif out.request.subscribed_topic_regex and _version(protocol, out.api) < 1:
            # The regex field (matched by the broker) came with v1 (Kafka 4.0); v0 would
            # drop it and subscribe to nothing.
            err = UnsupportedVersionError(
                f"group {group!r}: a pattern subscription with group_protocol='consumer' is "
                f"matched by the broker from ConsumerGroupHeartbeat v1 (Kafka 4.0+), and this "
                f"broker offers v{offered[0]}-v{offered[1]}: subscribe to topic names, or use "
                f"group_protocol='classic' (the client matches the pattern)")
        else:
            err = None
        if err is None:
            return False
        self.machine.refuse(out, err)
        return True

    def _requeue(self, out: Outgoing) -> None:
        # A commit or offset fetch whose coordinator moved while it waited: queued
        # again for the next coordinator.
        if out.kind == "commit":
            self.machine.commit(out.payload, out.token)
        else:
            self.machine.fetch_offsets(out.payload, out.token)

    def _finish(self, out: Outgoing, resp: Any, exc: BaseException | None, now: float) -> None:
        try:
            if exc is not None:
                self.machine.on_failure(out, exc, now)
                settle(out.token, exc=exc)
                return
            result = self.machine.on_response(out, resp, now)
        except BaseException as err:  # noqa: BLE001 - the group's error, for the caller
            settle(out.token, exc=err)
            return
        settle(out.token, result)
        for o, refused in self.machine.take_refused():  # a FindCoordinator answer ended them
            settle(o.token, exc=refused)


def _version(protocol: Any, api: Any) -> int:
    try:
        return protocol.version_for(api)
    except Exception:  # noqa: BLE001 - no version in common: as good as none offered
        return -1
