"""One local stack (started through the CLI, as in the e2e suite) for every integration test that goes through the front
door: one per test process (session scope), stopped at its end. Package scope started it again every time an xdist
worker came back to tests/integration after a file of another package (five starts and stops in one run)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.credentials import Credentials

from omnireel_local import home as homedir
from tests.e2e.conftest import LocalStack, start_stack, stop_stack
from tests.integration.frontdoor.client import FrontDoorClient


@pytest.fixture(scope="session")
def door_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    local = start_stack(tmp_path_factory.mktemp("omnireel-front-door"), "--no-relay")
    try:
        yield local
    finally:
        left = stop_stack(local)
        assert not left, f"processes left after `omnireel local down`: {left}"


@pytest.fixture(scope="session")
def door_state(door_stack: LocalStack) -> dict[str, Any]:
    return door_stack.state()


@pytest.fixture(scope="session")
def door(door_state: dict[str, Any]) -> FrontDoorClient:
    """The front door, signing as the local developer (the CLI's identity)."""
    keys = homedir.developer_credentials(door_state)
    credentials = Credentials(keys["AWS_ACCESS_KEY_ID"], keys["AWS_SECRET_ACCESS_KEY"])
    return FrontDoorClient(door_state["api_url"], door_state["region"], credentials)
