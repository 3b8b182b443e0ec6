"""protocol/coordinator.py: FindCoordinator asked and read alike at every version."""

from __future__ import annotations

import pytest

from kafkawire.protocol.coordinator import FIND_COORDINATOR, GROUP, TRANSACTION, answers, find_request

R = FIND_COORDINATOR.Response


@pytest.mark.parametrize("version", range(FIND_COORDINATOR.min_version, FIND_COORDINATOR.max_version + 1))
def test_one_request_shape_serves_every_version(version: int) -> None:
    keys = ["g1"] if version < 4 else ["g1", "g2"]
    sent = FIND_COORDINATOR.decode_request(
        bytes(FIND_COORDINATOR.encode_request(find_request(keys, TRANSACTION), version).getvalue()), version)
    if version < 4:
        assert sent.key == "g1"
    else:
        assert sent.coordinator_keys == ["g1", "g2"]
    assert sent.key_type == (TRANSACTION if version >= 1 else GROUP)  # v0 asks for groups only


def test_answers_before_v4_are_for_the_one_key_asked_about() -> None:
    resp = R(error_code=15, error_message="moving", node_id=-1, host="", port=-1)
    assert answers(resp, ["g"]) == [("g", -1, "", -1, 15, "moving")]


def test_answers_from_v4_are_per_key() -> None:
    c = R.Coordinator
    resp = R(coordinators=[c(key="a", node_id=1, host="h1", port=9, error_code=0, error_message=None),
                           c(key="b", node_id=-1, host="", port=-1, error_code=16, error_message=None)])
    got = answers(resp, ["a", "b"])
    assert [(a.key, a.node_id, a.error_code) for a in got] == [("a", 1, 0), ("b", -1, 16)]
