"""Fixtures for tests/testing.

pytest only honours ``pytest_plugins`` in the top-level conftest, so the fixtures are
imported here until tests/conftest.py registers ``kafkawire.testing.plugin``.
"""

from kafkawire.testing.plugin import (  # noqa: F401 - imported fixtures register themselves
    mock_cluster,
    mock_cluster_factory,
    tansu_broker,
    tansu_broker_factory,
)
