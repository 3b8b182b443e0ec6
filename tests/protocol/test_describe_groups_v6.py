"""DescribeGroups v6 (KIP-1043): each group's error_message, after its error_code.
Golden bytes written field by field (wirebytes.py) from Kafka's DescribeGroupsResponse
layout."""

from __future__ import annotations

from kafkawire.protocol.apis import groups
from wirebytes import NO_TAGS, carr, cs, i16, i32


def test_describe_groups_v6_carries_the_error_message():
    dg = groups.DESCRIBE_GROUPS
    assert dg.encode_request(dg.Request(groups=["a"]), 6).getvalue() == carr([cs("a")]) + b"\x00" + NO_TAGS
    # ThrottleTimeMs [ErrorCode ErrorMessage GroupId GroupState ProtocolType ProtocolData
    #   [Members] AuthorizedOperations] (flexible: compact strings, tagged fields)
    group = (i16(69) + cs("Group a is not a classic group.") + cs("a") + cs("Dead") + cs("") + cs("")
             + carr([]) + i32(-(2**31)) + NO_TAGS)
    wire = i32(0) + carr([group]) + NO_TAGS
    resp = dg.decode_response(wire, 6)
    (g,) = resp.groups
    assert (g.error_code, g.error_message, g.group_id, g.group_state) == (
        69, "Group a is not a classic group.", "a", "Dead")
    assert dg.encode_response(resp, 6).getvalue() == wire
    # Before v6 there is no message on the wire.
    v5 = i32(0) + carr([i16(0) + cs("a") + cs("Dead") + cs("") + cs("") + carr([]) + i32(-(2**31)) + NO_TAGS]) + NO_TAGS
    assert dg.decode_response(v5, 5).groups[0].error_message is None
