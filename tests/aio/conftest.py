"""Brokers for the asyncio shell's own tests: Apache Kafka first, Tansu as a second opinion."""

from __future__ import annotations

import pytest


@pytest.fixture(params=[pytest.param("kafka", marks=pytest.mark.kafka),
                        pytest.param("tansu", marks=pytest.mark.tansu)])
def broker(request: pytest.FixtureRequest):
    """The session's Apache Kafka, then its Tansu broker."""
    return request.getfixturevalue(f"{request.param}_broker")
