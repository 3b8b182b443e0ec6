"""Admin calls on share groups (KIP-932), as :class:`~kafkawire.protocol.admin.Op` s over an
:class:`~kafkawire.protocol.admin.AdminCore` (its coordinator lookup, rounds and retries):
list them (ListGroups with the "share" type filter), describe them (ShareGroupDescribe:
members and their assignments), and read, set or forget their start offsets
(Describe/Alter/DeleteShareGroupOffsets, all at the group's coordinator).

A share group has no committed offsets: its *start offset* per partition is where its
members' deliveries begin (records below it are never delivered); the group must have no
members to change it (GROUP_NOT_EMPTY otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kafkawire.errors import broker_error
from kafkawire.protocol import apis
from kafkawire.protocol.admin import (
    AdminCore,
    Budget,
    GroupListing,
    Op,
    Steps,
    _label,
    _outcome,
    _partitions_by_topic,
    _Progress,
)
from kafkawire.protocol.fetcher import TopicPartition
from kafkawire.protocol.fetcher import as_topic_partition as _tp

__all__ = ["ShareMemberDescription", "ShareGroupDescription", "ShareOffset", "list_share_groups",
           "describe_share_groups", "list_share_group_offsets", "alter_share_group_offsets",
           "delete_share_group_offsets"]

LIST_GROUPS = apis.get("ListGroups")
SHARE_GROUP_DESCRIBE = apis.get("ShareGroupDescribe")
DESCRIBE_OFFSETS = apis.get("DescribeShareGroupOffsets")
ALTER_OFFSETS = apis.get("AlterShareGroupOffsets")
DELETE_OFFSETS = apis.get("DeleteShareGroupOffsets")
_GROUP_ID_NOT_FOUND = 69


@dataclass(frozen=True)
class ShareMemberDescription:
    """A share group's member: its ``assignment`` ({topic: [partitions]}, shared with other
    members where the group has more members than partitions) and ``subscription``."""

    member_id: str
    client_id: str
    host: str
    rack_id: str | None
    member_epoch: int
    subscription: list[str]
    assignment: dict[str, list[int]]


@dataclass(frozen=True)
class ShareGroupDescription:
    """A share group as its coordinator describes it: ``state`` (Empty, Stable, Dead),
    ``assignor`` (the broker's, "simple" by default), the group and assignment epochs."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMemberDescription]
    coordinator: int


@dataclass(frozen=True)
class ShareOffset:
    """A partition's ``start_offset`` in a share group (-1: not started), the leader epoch
    it was set under, and ``lag`` (records after it not yet acknowledged; None when the
    broker does not say: before DescribeShareGroupOffsets v1)."""

    start_offset: int
    leader_epoch: int
    lag: int | None


def list_share_groups(core: AdminCore) -> Op:
    """Every share group of the cluster (ListGroups to each broker, types "share")."""
    return core._every_broker(
        "list_share_groups", LIST_GROUPS, _list_request,
        lambda resp: (GroupListing(g.group_id, g.protocol_type, g.group_state or None)
                      for g in resp.groups if getattr(g, "group_type", "") == "share"),
        key=lambda g: g.group_id)


def _list_request(version: int) -> Any:
    if version < 5:
        # KIP-848's group types came with v5: an older broker has no share groups.
        raise broker_error(35, f"ListGroups v{version} cannot filter by group type: share groups need Kafka 4.1+")
    return LIST_GROUPS.Request(types_filter=["share"])


def describe_share_groups(core: AdminCore, group_ids: Iterable[str], raise_on_error: bool) -> Op:
    groups = list(dict.fromkeys(group_ids))

    def step(progress: _Progress, deadline: float) -> Steps:
        for node, gs in (yield from core._by_coordinator(progress)).items():
            _v, resp = yield from core._send(node, SHARE_GROUP_DESCRIBE, lambda v, gs=gs: SHARE_GROUP_DESCRIBE.Request(
                group_ids=gs, include_authorized_operations=False))
            for g in resp.groups:
                if g.group_id not in progress.todo:
                    continue
                if g.error_code == _GROUP_ID_NOT_FOUND:
                    progress.done(g.group_id, ShareGroupDescription(g.group_id, "Dead", -1, -1, "", [], node))
                    continue
                desc = ShareGroupDescription(
                    g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
                    [ShareMemberDescription(
                        m.member_id, m.client_id, m.client_host, m.rack_id, m.member_epoch,
                        list(m.subscribed_topic_names),
                        {t.topic_name: sorted(t.partitions) for t in m.assignment.topic_partitions})
                     for m in g.members], node)
                core._group_result(progress, g.group_id, g.error_code, "describing share", desc, g.error_message)

    return core._rounds("describe_share_groups", groups, step, raise_on_error)


def list_share_group_offsets(core: AdminCore, group_id: str, partitions: Iterable[Any] | None,
                             raise_on_error: bool) -> Op:
    wanted = None if partitions is None else [_tp(x) for x in partitions]

    def build(version: int) -> Any:
        G = DESCRIBE_OFFSETS.Request.DescribeShareGroupOffsetsRequestGroup
        topics = None
        if wanted is not None:
            topics = [G.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=p)
                      for t, p in _partitions_by_topic(wanted).items()]
        return DESCRIBE_OFFSETS.Request(groups=[G(group_id=group_id, topics=topics)])

    def fetch(deadline: float) -> Steps:
        node = yield from core._coordinator(group_id)
        version, resp = yield from core._send(node, DESCRIBE_OFFSETS, build)
        answer = next((g for g in resp.groups if g.group_id == group_id), None)
        if answer is None:
            raise broker_error(-1, f"DescribeShareGroupOffsets answered without group {group_id!r}")
        core._group_error(group_id, answer.error_code, "start offsets")
        out: dict[TopicPartition, Any] = {}
        for t in answer.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic_name, p.partition_index)
                if p.error_code:
                    out[tp] = broker_error(p.error_code, f"share group {group_id!r} {_label(tp)}", p.error_message)
                else:
                    out[tp] = ShareOffset(p.start_offset, p.leader_epoch, p.lag if version >= 1 else None)
        if wanted is not None:
            out = {tp: out.get(tp) for tp in wanted}
        return dict(sorted(out.items()))

    op = core._one("list_share_group_offsets", fetch)

    def steps(budget: Budget) -> Steps:
        return _outcome(op.name, (yield from op.steps(budget)), raise_on_error)

    return Op(op.name, steps)


def alter_share_group_offsets(core: AdminCore, group_id: str, offsets: Mapping[Any, int],
                              raise_on_error: bool) -> Op:
    """Set the group's start offset of each partition (the group must have no members)."""
    wanted = {_tp(k): int(v) for k, v in offsets.items()}

    def step(progress: _Progress, deadline: float) -> Steps:
        node = yield from core._coordinator(group_id)
        T = ALTER_OFFSETS.Request.AlterShareGroupOffsetsRequestTopic
        by_topic: dict[str, list[Any]] = {}
        for tp in progress.todo:
            by_topic.setdefault(tp.topic, []).append(
                T.AlterShareGroupOffsetsRequestPartition(partition_index=tp.partition, start_offset=wanted[tp]))
        _v, resp = yield from core._send(node, ALTER_OFFSETS, lambda v: ALTER_OFFSETS.Request(
            group_id=group_id, topics=[T(topic_name=t, partitions=ps) for t, ps in by_topic.items()]))
        core._group_error(group_id, resp.error_code, "altering the start offsets")
        for t in resp.responses:
            for p in t.partitions:
                core._settle(progress, TopicPartition(t.topic_name, p.partition_index), p.error_code,
                             f"share group {group_id!r} {t.topic_name}[{p.partition_index}]", None, p.error_message)

    return core._rounds("alter_share_group_offsets", list(wanted), step, raise_on_error)


def delete_share_group_offsets(core: AdminCore, group_id: str, topics: Iterable[str], raise_on_error: bool) -> Op:
    """Forget the group's start offsets of whole topics (the group must not be reading them)."""
    names = list(dict.fromkeys(topics))

    def step(progress: _Progress, deadline: float) -> Steps:
        node = yield from core._coordinator(group_id)
        T = DELETE_OFFSETS.Request.DeleteShareGroupOffsetsRequestTopic
        _v, resp = yield from core._send(node, DELETE_OFFSETS, lambda v: DELETE_OFFSETS.Request(
            group_id=group_id, topics=[T(topic_name=t) for t in progress.todo]))
        core._group_error(group_id, resp.error_code, "deleting the start offsets")
        for t in resp.responses:
            core._settle(progress, t.topic_name, t.error_code, f"share group {group_id!r} topic {t.topic_name!r}",
                         None, t.error_message)

    return core._rounds("delete_share_group_offsets", names, step, raise_on_error)
