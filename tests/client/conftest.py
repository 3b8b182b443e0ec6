"""Client tests use the broker fixtures registered in tests/conftest.py."""
