"""The reliability suite's marker (registered here so --strict-markers accepts it)."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reliability: fault-injection suite on the embedded local stack")
