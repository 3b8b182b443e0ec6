"""The consumer protocol embedded in group membership messages, and two assignors.

A consumer joining a group with protocol type "consumer" puts a
:class:`ConsumerProtocolSubscription` into each JoinGroup protocol's ``metadata``; the
leader answers with one :class:`ConsumerProtocolAssignment` per member in SyncGroup, and
each member reads its own from the SyncGroup response's ``assignment``.  Both are
non-flexible structs prefixed by an int16 version:

* Subscription v0: topics, user_data; v1 adds owned_partitions (KIP-429, cooperative
  rebalancing); v2 generation_id (KIP-792); v3 rack_id (KIP-881).
* Assignment v0-v3: assigned_partitions, user_data (the versions move with the
  subscription's; the layout has not changed).

A reader meets versions newer than it knows when a newer client joins the group first:
Kafka decodes those as its newest known version, reading the prefix it understands and
ignoring the rest, and so does kafkawire.

The assignors are pure functions from subscriptions and partition counts to assignments:
:func:`range_assign` (0.7's consumer rebalancing rule: sort, contiguous chunks, extras to the
earliest consumers), :func:`round_robin_assign` and :func:`sticky_assign` (KIP-54).

This module does no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kafkawire import errors
from kafkawire.protocol.schema import Field as F
from kafkawire.protocol.schema import Struct, build_struct, decode, encode

__all__ = [
    "PROTOCOL_TYPE",
    "SUBSCRIPTION_VERSION",
    "ASSIGNMENT_VERSION",
    "ConsumerProtocolSubscription",
    "ConsumerProtocolAssignment",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
    "header_version",
    "assignment_from_map",
    "assignment_to_map",
    "range_chunks",
    "range_assign",
    "round_robin_assign",
    "sticky_assign",
    "StickyAssignorUserData",
    "encode_sticky_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "decode_cooperative_user_data",
    "ASSIGNORS",
    "is_cooperative",
    "subscription_metadata",
    "member_topics",
    "leader_assign",
    "RANGE",
    "ROUNDROBIN",
    "STICKY",
    "COOPERATIVE_STICKY",
]

#: JoinGroup's protocol_type for Kafka consumers.
PROTOCOL_TYPE = "consumer"
#: Assignor names as they appear in JoinGroup protocols (Kafka's).
RANGE = "range"
ROUNDROBIN = "roundrobin"
STICKY = "sticky"
COOPERATIVE_STICKY = "cooperative-sticky"

#: The newest versions kafkawire knows (and writes by default).
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3

_TOPIC_PARTITION = [
    F("topic", "string"),
    F("partitions", "[]int32"),
]

ConsumerProtocolSubscription: type[Struct] = build_struct(
    "ConsumerProtocolSubscription",
    [
        F("topics", "[]string"),
        F("user_data", "bytes", nullable_since=0, default=None),
        F("owned_partitions", array=True, since=1, struct_name="TopicPartition",
          fields=_TOPIC_PARTITION),
        F("generation_id", "int32", since=2, default=-1),
        F("rack_id", "string", since=3, nullable_since=3, default=None),
    ],
    flexible_from=None,
)

ConsumerProtocolAssignment: type[Struct] = build_struct(
    "ConsumerProtocolAssignment",
    [
        F("assigned_partitions", array=True, struct_name="TopicPartition", fields=_TOPIC_PARTITION),
        F("user_data", "bytes", nullable_since=0, default=None),
    ],
    flexible_from=None,
)

#: The "sticky" assignor's subscription user_data (KIP-54; v1 adds the generation,
#: KIP-341).  Kafka writes it with no version prefix and reads v1, then v0.
StickyAssignorUserData: type[Struct] = build_struct(
    "StickyAssignorUserData",
    [
        F("previous_assignment", array=True, struct_name="TopicPartition", fields=_TOPIC_PARTITION),
        F("generation", "int32", since=1, default=-1),
    ],
    flexible_from=None,
)

# Each struct has its own (topic, partitions) element class: use
# ConsumerProtocolSubscription.TopicPartition for owned_partitions and
# ConsumerProtocolAssignment.TopicPartition for assigned_partitions.

_VERSION = struct.Struct(">h")


def header_version(data: Any) -> int:
    """The int16 version that starts an embedded subscription or assignment."""
    view = memoryview(data)
    if view.nbytes < 2:
        raise errors.truncated("consumer protocol version", 0, 2, view.nbytes)
    (version,) = _VERSION.unpack_from(view, 0)
    if version < 0:
        raise errors.malformed(
            "consumer protocol header", 0,
            f"negative version {version}; the bytes are not consumer protocol data",
        )
    return int(version)


def _encode(obj: Struct, cls: type[Struct], version: int, newest: int, what: str) -> bytes:
    if not isinstance(obj, cls):
        raise errors.encode_error(f"expected a {cls.__name__}, got {type(obj).__name__}")
    if not 0 <= version <= newest:
        raise errors.encode_error(
            f"{what} version {version} is not one kafkawire writes (0 to {newest})"
        )
    return _VERSION.pack(version) + encode(obj, version).getvalue()


def _decode(data: Any, cls: type[Struct], newest: int) -> Struct:
    version = header_version(data)
    # Newer than known: read the known prefix and ignore the rest, as Kafka does.
    obj, _end = decode(cls, data, min(version, newest), pos=2)
    return obj


def encode_subscription(sub: Struct, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """Bytes for a JoinGroup protocol's ``metadata``: int16 version, then the struct."""
    return _encode(sub, ConsumerProtocolSubscription, version, SUBSCRIPTION_VERSION, "subscription")


def decode_subscription(data: Any) -> Struct:
    """Decode a member's JoinGroup metadata (any version; newer ones by their known prefix)."""
    return _decode(data, ConsumerProtocolSubscription, SUBSCRIPTION_VERSION)


def encode_assignment(assignment: Struct, version: int = ASSIGNMENT_VERSION) -> bytes:
    """Bytes for a SyncGroup assignment: int16 version, then the struct."""
    return _encode(
        assignment, ConsumerProtocolAssignment, version, ASSIGNMENT_VERSION, "assignment"
    )


def decode_assignment(data: Any) -> Struct:
    """Decode a SyncGroup assignment.

    An empty buffer is an empty assignment: a broker sends one to a member the leader left
    out, and on errors.
    """
    if memoryview(data).nbytes == 0:
        return ConsumerProtocolAssignment()
    return _decode(data, ConsumerProtocolAssignment, ASSIGNMENT_VERSION)


def assignment_from_map(
    topics: Mapping[str, Iterable[int]], user_data: bytes | None = None
) -> Struct:
    """A ConsumerProtocolAssignment from {topic: partitions} (sorted, for stable bytes)."""
    cls = ConsumerProtocolAssignment
    return cls(
        assigned_partitions=[
            cls.TopicPartition(topic=t, partitions=sorted(topics[t]))  # type: ignore[attr-defined]
            for t in sorted(topics)
        ],
        user_data=user_data,
    )


def assignment_to_map(assignment: Struct) -> dict[str, list[int]]:
    """{topic: partitions} of an assignment (partitions of a repeated topic are merged)."""
    out: dict[str, list[int]] = {}
    for tp in assignment.assigned_partitions:  # type: ignore[attr-defined]
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return out


# ---------------------------------------------------------------------------------------
# Assignors
# ---------------------------------------------------------------------------------------

_T = TypeVar("_T")
_C = TypeVar("_C", bound=Hashable)


def range_chunks(items: Iterable[_T], consumers: Iterable[_C]) -> dict[_C, list[_T]]:
    """0.7's consumer rebalancing rule on any sortable items and consumer ids.

    Items and consumers are sorted; each consumer gets a contiguous chunk of
    ``len(items) // len(consumers)`` items, and the first ``len(items) % len(consumers)``
    consumers one extra each (so 5-5-4-4, never 4-4-4-5).  Every consumer is a key of
    the result, with an empty list when there are fewer items than consumers.
    """
    ordered_items = sorted(items)  # type: ignore[type-var]
    ordered = sorted(set(consumers))  # type: ignore[type-var]
    out: dict[_C, list[_T]] = {c: [] for c in ordered}
    if not ordered:
        if ordered_items:
            raise ValueError(f"cannot assign {len(ordered_items)} items to no consumers")
        return out
    per, extra = divmod(len(ordered_items), len(ordered))
    start = 0
    for i, consumer in enumerate(ordered):
        n = per + (1 if i < extra else 0)
        out[consumer] = ordered_items[start : start + n]
        start += n
    return out


def _partitions(topic: str, value: int | Iterable[int]) -> list[int]:
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"topic {topic!r}: partition count {value} is negative")
        return list(range(value))
    parts = sorted(set(value))
    for p in parts:
        if not isinstance(p, int) or p < 0:
            raise ValueError(f"topic {topic!r}: partition {p!r} is not a non-negative int")
    return parts


def _check_subscriptions(subscriptions: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    subs: dict[str, set[str]] = {}
    for member, topics in subscriptions.items():
        if isinstance(topics, str):
            raise TypeError(
                f"member {member!r}: topics must be a collection of names, got the string "
                f"{topics!r} (wrap it in a list)"
            )
        subs[member] = set(topics)
    return subs


def range_assign(
    subscriptions: Mapping[str, Iterable[str]],
    partitions_per_topic: Mapping[str, int | Iterable[int]],
) -> dict[str, dict[str, list[int]]]:
    """Kafka's "range" assignor: for each topic, :func:`range_chunks` of its partitions over
    the members subscribed to it, in member-id order.

    ``subscriptions`` maps member id to subscribed topics; ``partitions_per_topic`` maps a
    topic to its partition count or its partition ids.  Topics missing from it (unknown to
    the cluster) are skipped.  Returns {member: {topic: partitions}}, every member present.
    """
    subs = _check_subscriptions(subscriptions)
    out: dict[str, dict[str, list[int]]] = {m: {} for m in sorted(subs)}
    for topic in sorted(set().union(*subs.values()) if subs else ()):
        if topic not in partitions_per_topic:
            continue
        parts = _partitions(topic, partitions_per_topic[topic])
        members = [m for m in out if topic in subs[m]]
        for member, chunk in range_chunks(parts, members).items():
            if chunk:
                out[member][topic] = chunk
    return out


def round_robin_assign(
    subscriptions: Mapping[str, Iterable[str]],
    partitions_per_topic: Mapping[str, int | Iterable[int]],
) -> dict[str, dict[str, list[int]]]:
    """Kafka's "roundrobin" assignor.

    Every partition of every subscribed topic, sorted by (topic, partition), is dealt in
    turn to the members sorted by id; a member not subscribed to a partition's topic is
    passed over for it.  Same arguments and result shape as :func:`range_assign`.
    """
    subs = _check_subscriptions(subscriptions)
    members: Sequence[str] = sorted(subs)
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    subscribed = set().union(*subs.values()) if subs else set()
    topics = sorted(t for t in subscribed if t in partitions_per_topic)
    cursor = 0
    for topic in topics:
        parts = _partitions(topic, partitions_per_topic[topic])
        for p in parts:
            # Some member subscribes to this topic (it came from a subscription), so the
            # scan ends within one turn of the circle.
            while topic not in subs[members[cursor % len(members)]]:
                cursor += 1
            member = members[cursor % len(members)]
            out[member].setdefault(topic, []).append(p)
            cursor += 1
    return out


def sticky_assign(
    subscriptions: Mapping[str, Iterable[str]],
    partitions_per_topic: Mapping[str, int | Iterable[int]],
    owned: Mapping[str, Iterable[tuple[str, int]]] | None = None,
    generations: Mapping[str, int] | None = None,
) -> dict[str, dict[str, list[int]]]:
    """Kafka's "sticky" assignor (KIP-54), also the plan of "cooperative-sticky" (KIP-429).

    Balance first, then stickiness: every partition goes to one member subscribed to its
    topic; no partition could move to a member holding two or more fewer partitions; and
    among such assignments, members keep as much of ``owned`` (member -> the (topic,
    partition)s it held) as balance allows.  A partition claimed by two members stays with
    the higher generation (``generations``; KIP-341), then the lower member id.  The
    result need not equal the Java assignor's, only meet the same rules: in a mixed group
    only the leader's assignor runs.  Same arguments and result shape as :func:`range_assign`.
    """
    subs = _check_subscriptions(subscriptions)
    members = sorted(subs)
    subscribed = set().union(*subs.values()) if subs else set()
    eligible: dict[tuple[str, int], list[str]] = {}
    for topic in sorted(t for t in subscribed if t in partitions_per_topic):
        takers = [m for m in members if topic in subs[m]]
        for p in _partitions(topic, partitions_per_topic[topic]):
            eligible[(topic, p)] = takers
    gens = generations or {}
    held: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    previous: dict[tuple[str, int], str] = {}
    for member in sorted(owned or {}, key=lambda m: (-gens.get(m, -1), m)):
        for tp in (owned or {})[member]:
            tp = (tp[0], tp[1])
            if tp in previous or tp not in eligible or member not in subs or tp[0] not in subs[member]:
                continue
            previous[tp] = member
            held[member].add(tp)
    # New and orphaned partitions, the most constrained first, each to the least loaded
    # member that may take it.
    free = sorted((tp for tp in eligible if tp not in previous), key=lambda tp: (len(eligible[tp]), tp))
    for tp in free:
        taker = min(eligible[tp], key=lambda m: (len(held[m]), m))
        held[taker].add(tp)
    # Then move partitions from the most loaded members to eligible members holding two
    # or more fewer, until no such move is left (each move lowers the sum of squared
    # loads, so this ends).  A member gives up what it did not own before first.
    while True:
        moved = False
        for giver in sorted(members, key=lambda m: (-len(held[m]), m)):
            load = len(held[giver])
            for tp in sorted(held[giver], key=lambda tp: (previous.get(tp) == giver, tp)):
                takers = [m for m in eligible[tp] if len(held[m]) <= load - 2]
                if takers:
                    taker = min(takers, key=lambda m: (len(held[m]), m))
                    held[giver].remove(tp)
                    held[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    for member, tps in held.items():
        for topic, p in sorted(tps):
            out[member].setdefault(topic, []).append(p)
    return out


def encode_sticky_user_data(owned: Mapping[str, Iterable[int]], generation: int) -> bytes:
    """The "sticky" assignor's user_data: the partitions a member held and the generation
    it held them in (v1, unprefixed, as Kafka writes it)."""
    tp = StickyAssignorUserData.TopicPartition  # type: ignore[attr-defined]
    obj = StickyAssignorUserData(
        previous_assignment=[tp(topic=t, partitions=sorted(ps)) for t, ps in sorted(owned.items())],
        generation=generation,
    )
    return encode(obj, 1).getvalue()


def decode_sticky_user_data(data: Any) -> tuple[dict[str, list[int]], int]:
    """(previous assignment, generation) from a "sticky" member's user_data: v1, else v0
    (generation -1); bytes that are neither give ({}, -1), since Kafka's assignor ignores
    user_data it cannot read rather than fail the rebalance."""
    view = memoryview(data or b"")
    for version in (1, 0):
        try:
            obj, end = decode(StickyAssignorUserData, view, version)
        except errors.CodecError:
            continue
        tps = obj.previous_assignment
        # A null array (length -1) is not a previous assignment: unreadable, like Kafka.
        if end == view.nbytes and tps is not None and all(
                tp.topic is not None and tp.partitions is not None for tp in tps):
            return {tp.topic: list(tp.partitions) for tp in tps}, obj.generation if version == 1 else -1
    return {}, -1


_GENERATION = struct.Struct(">i")


def encode_cooperative_user_data(generation: int) -> bytes:
    """The "cooperative-sticky" assignor's user_data: only the generation (its owned
    partitions travel in the subscription's owned_partitions, KIP-429)."""
    return _GENERATION.pack(generation)


def decode_cooperative_user_data(data: Any) -> int:
    """The generation in a "cooperative-sticky" member's user_data; -1 when absent."""
    view = memoryview(data or b"")
    return _GENERATION.unpack_from(view)[0] if view.nbytes >= 4 else -1


# ---------------------------------------------------------------------------------------
# A consumer's part in a rebalance: what it offers in JoinGroup, what the leader assigns
# ---------------------------------------------------------------------------------------

#: The assignors kafkawire can run as leader, by JoinGroup protocol name.
ASSIGNORS = (RANGE, ROUNDROBIN, STICKY, COOPERATIVE_STICKY)


def is_cooperative(protocol: str) -> bool:
    """True for assignors that rebalance incrementally (KIP-429): a member keeps its
    partitions through a rebalance and gives up only those that move."""
    return protocol == COOPERATIVE_STICKY


def subscription_metadata(
    protocol: str, topics: Iterable[str], owned: Mapping[str, Iterable[int]], generation: int,
    rack: str | None = None,
) -> bytes:
    """The JoinGroup metadata a member offers for ``protocol``: its ``topics``, the
    partitions it ``owned`` in ``generation``, and, for the sticky assignors, their user_data."""
    if protocol not in ASSIGNORS:
        raise ValueError(f"unknown assignor {protocol!r}; kafkawire has {', '.join(ASSIGNORS)}")
    cls = ConsumerProtocolSubscription
    owned_list = [cls.TopicPartition(topic=t, partitions=sorted(ps))  # type: ignore[attr-defined]
                  for t, ps in sorted(owned.items()) if ps]
    user_data = None
    if protocol == STICKY:
        user_data = encode_sticky_user_data(owned, generation)
    elif protocol == COOPERATIVE_STICKY:
        user_data = encode_cooperative_user_data(generation)
    sub = cls(topics=sorted(set(topics)), user_data=user_data, owned_partitions=owned_list,
              generation_id=generation, rack_id=rack)
    return encode_subscription(sub)


def member_topics(members: Iterable[tuple[str, Any, Any]]) -> set[str]:
    """Every topic some member subscribes to (the leader needs all their metadata)."""
    out: set[str] = set()
    for _member, _instance, metadata in members:
        out.update(decode_subscription(metadata).topics or ())
    return out


def leader_assign(
    protocol: str,
    members: Iterable[tuple[str, Any, Any]],
    partitions_per_topic: Mapping[str, int | Iterable[int]],
) -> dict[str, bytes]:
    """The leader's SyncGroup assignments: member id -> ConsumerProtocolAssignment bytes.

    ``members`` are JoinGroup's (member id, group instance id, metadata).  With
    cooperative-sticky, a partition that moves from one member to another is left out
    this time (KIP-429): its owner revokes it, rejoins, and the next rebalance gives it
    to its new member, so no partition is ever consumed by two members at once."""
    subs: dict[str, list[str]] = {}
    owned: dict[str, list[tuple[str, int]]] = {}
    generations: dict[str, int] = {}
    for member_id, _instance, metadata in members:
        sub = decode_subscription(metadata)
        subs[member_id] = list(sub.topics or ())
        held = [(tp.topic, p) for tp in (getattr(sub, "owned_partitions", None) or ()) for p in tp.partitions]
        gen = getattr(sub, "generation_id", -1)
        if protocol == STICKY:
            prev, gen = decode_sticky_user_data(sub.user_data)
            held = [(t, p) for t, ps in prev.items() for p in ps] or held
        elif protocol == COOPERATIVE_STICKY and gen < 0:
            gen = decode_cooperative_user_data(sub.user_data)
        owned[member_id] = held
        generations[member_id] = gen
    if protocol == RANGE:
        plan = range_assign(subs, partitions_per_topic)
    elif protocol == ROUNDROBIN:
        plan = round_robin_assign(subs, partitions_per_topic)
    elif protocol in (STICKY, COOPERATIVE_STICKY):
        plan = sticky_assign(subs, partitions_per_topic, owned, generations)
    else:
        raise ValueError(f"the group chose assignor {protocol!r}, which kafkawire cannot run as leader")
    if protocol == COOPERATIVE_STICKY:
        claimed: dict[tuple[str, int], set[str]] = {}
        for m, tps in owned.items():
            for tp in tps:
                claimed.setdefault(tp, set()).add(m)
        for member, topics in plan.items():
            for topic in list(topics):
                # Withheld only when someone else holds it and this member does not.
                kept = [p for p in topics[topic]
                        if member in claimed.get((topic, p), {member}) or not claimed.get((topic, p))]
                if kept:
                    topics[topic] = kept
                else:
                    del topics[topic]
    return {m: encode_assignment(assignment_from_map(plan.get(m, {}))) for m in subs}
