"""describe_features and update_features through kafkawire's Admin and AsyncAdmin on an Apache
Kafka node formatted without KIP-890 (transaction.version 0): the levels in force and
supported, a validate-only update that changes nothing, an upgrade and a safe downgrade seen
through describe_features, and a request Kafka refuses whole."""

from __future__ import annotations

import pytest
from settle import eventually
from shells import make_admin  # noqa: F401 - the fixture
from javaview import java_view

from kafkawire import errors
from kafkawire.client.admin import AdminError, FeatureMetadata
from kafkawire.testing.kafka import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def kafka():
    with KafkaCluster(1, transaction_version=0) as cluster:
        yield cluster


@pytest.fixture
def admin(kafka, make_admin):
    with make_admin(bootstrap_servers=kafka.bootstrap, request_timeout_ms=15000) as a:
        yield a


def _tv(admin) -> tuple[int, int] | None:
    return admin.describe_features(timeout=TIMEOUT).finalized.get("transaction.version")


def test_upgrade_and_downgrade_a_feature(kafka, admin):
    features = admin.describe_features(timeout=TIMEOUT)
    assert isinstance(features, FeatureMetadata) and features.epoch is not None
    low, high = features.supported["metadata.version"]
    assert low <= features.finalized["metadata.version"][1] <= high
    assert features.supported["transaction.version"] == (0, 2)
    # Kafka's own Admin client describes the same.
    view = java_view("ClusterView", kafka.bootstrap)
    assert {x[1]: (int(x[2]), int(x[3])) for x in view if x[0] == "finalized"} == features.finalized
    assert {x[1]: (int(x[2]), int(x[3])) for x in view if x[0] == "supported"} == features.supported
    # The epoch is the metadata log's offset of that state: it only grows.
    [epoch] = [int(x[1]) for x in view if x[0] == "epoch"]
    assert epoch >= features.epoch
    start = _tv(admin)
    assert start in (None, (0, 0), (2, 2), (1, 1))  # the other shell's run may have moved it

    target = 1 if start == (2, 2) else 2
    kind = "safe_downgrade" if target == 1 else "upgrade"
    assert admin.update_features({"transaction.version": target}, upgrade_type=kind, validate_only=True,
                                 timeout=TIMEOUT) == {"transaction.version": None}
    assert _tv(admin) == start
    assert admin.update_features({"transaction.version": target}, upgrade_type=kind,
                                 timeout=TIMEOUT) == {"transaction.version": None}
    eventually(lambda: _tv(admin), (target, target), TIMEOUT)

    # One bad level: Kafka refuses the whole request, each feature holding the error.
    with pytest.raises(AdminError) as info:
        admin.update_features({"transaction.version": 99, "group.version": 1}, timeout=TIMEOUT)
    assert set(info.value.errors) == {"transaction.version", "group.version"}
    assert all(isinstance(e, errors.InvalidUpdateVersionError) for e in info.value.errors.values())
    assert _tv(admin) == (target, target)
    with pytest.raises(ValueError, match="upgrade_type"):
        admin.update_features({"transaction.version": 2}, upgrade_type="sideways")
