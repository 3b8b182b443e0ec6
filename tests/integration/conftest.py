"""Brokers for the client suites: Apache Kafka first, Tansu as a second opinion."""

from __future__ import annotations

import pytest


@pytest.fixture(params=[pytest.param("kafka", marks=pytest.mark.kafka),
                        pytest.param("tansu", marks=pytest.mark.tansu)])
def modern_broker(request: pytest.FixtureRequest):
    """Apache Kafka, then Tansu: what every modern broker must do alike runs on both (the
    Tansu case is also the one the pure-Python twin's run keeps)."""
    return request.getfixturevalue(f"{request.param}_broker")
