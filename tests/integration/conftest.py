"""The front door of the local stack for the integration tests that go through it: the shared ``stack`` (one per test
process, tests/conftest.py; the e2e tests use the same one), its state, and a client signing as the local developer.
Module scope, as ``stack``'s: the shared stack stops after the last file that uses it and may start again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.frontdoor import FrontDoorClient, developer_door
from tests.support.stack import LocalStack


@pytest.fixture(scope="module")
def door_state(stack: LocalStack) -> dict[str, Any]:
    return stack.state()


@pytest.fixture(scope="module")
def door(door_state: dict[str, Any]) -> FrontDoorClient:
    """The front door, signing as the local developer (the CLI's identity)."""
    return developer_door(door_state)
