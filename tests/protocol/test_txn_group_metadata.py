"""send_offsets_to_transaction's group argument, without a broker: a consumer's
ConsumerGroupMetadata goes into TxnOffsetCommit (v3+, KIP-447) as it is, a bare group id
as an outsider (generation -1, no member id), and a refusal of the member names it and
says what to do."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_transaction_machine import Driver, begun, found

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.transactions import ABORTABLE, ConsumerGroupMetadata

OFFSETS = apis.get("AddOffsetsToTxn")
COMMIT = apis.get("TxnOffsetCommit")


def _commit_request(group, answer_code=0):
    d = Driver(begun().send_offsets_steps({("t", 0): 5}, group))
    d.answer(OFFSETS.Response(error_code=0))
    d.answer(found(4))
    topic = COMMIT.Response.TxnOffsetCommitResponseTopic
    d.answer(COMMIT.Response(topics=[topic(name="t", partitions=[
        topic.TxnOffsetCommitResponsePartition(partition_index=0, error_code=answer_code)])]))
    (_node, name, req) = d.sent[-1]
    assert name == "TxnOffsetCommit" and d.versions[-1] >= 3
    return req


def test_the_members_generation_id_and_instance_go_with_the_offsets():
    req = _commit_request(ConsumerGroupMetadata("g", 7, "member-1", "static-1"))
    assert (req.group_id, req.generation_id_or_member_epoch, req.member_id, req.group_instance_id) == ("g", 7, "member-1", "static-1")
    # Offsets go with empty metadata, as Kafka's producer sends them (null is the field's default).
    assert [(p.partition_index, p.committed_offset, p.committed_metadata) for t in req.topics for p in t.partitions] == [
        (0, 5, "")]
    # Any object with the same attributes does (confluent-kafka's style of passing it on).
    req = _commit_request(SimpleNamespace(group_id="g", generation_id=3, member_id="m"))
    assert (req.generation_id_or_member_epoch, req.member_id, req.group_instance_id) == (3, "m", None)


def test_a_group_id_alone_commits_as_an_outsider():
    req = _commit_request("g")
    assert (req.group_id, req.generation_id_or_member_epoch, req.member_id, req.group_instance_id) == ("g", -1, "", None)


def test_anything_else_is_refused_with_what_to_pass():
    with pytest.raises(TypeError, match="group id .* or the consumer's group_metadata"):
        _commit_request(42)


@pytest.mark.parametrize("code, exc", [(22, errors.IllegalGenerationError), (25, errors.UnknownMemberIdError),
                                       (82, errors.FencedInstanceIdError)])
def test_a_refused_member_is_named_and_told_to_abort(code, exc):
    txn = begun()
    d = Driver(txn.send_offsets_steps({("t", 0): 5}, ConsumerGroupMetadata("g", 7, "member-1")))
    d.answer(OFFSETS.Response(error_code=0))
    d.answer(found(4))
    topic = COMMIT.Response.TxnOffsetCommitResponseTopic
    with pytest.raises(exc) as info:
        d.answer(COMMIT.Response(topics=[topic(name="t", partitions=[
            topic.TxnOffsetCommitResponsePartition(partition_index=0, error_code=code)])]))
    assert "as member 'member-1' (generation/epoch 7)" in str(info.value)
    assert "abort the transaction" in str(info.value)
    assert txn.state == ABORTABLE
