"""Defect 8 on the wire: error messages that quote caller input stay bounded (<= 1 KB), however large the input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omnireel.bounded import MAX_MESSAGE_CHARS
from tests.integration.frontdoor.client import FrontDoorClient, executions


@pytest.mark.parametrize(
    "request_body",
    [
        {"prompt": "a", "x" * 100_000: 1},  # a 100 KB field name
        {"prompt": "a", "y" * 5_000_000: 1},  # a 5 MB one (under Lambda's 6 MB invoke payload)
        {"prompt": "a", **{f"field{i}": i for i in range(20_000)}},  # 20,000 unknown fields
        {"prompt": "a", "video": {"z" * 100_000: 1}},  # nested
    ],
    ids=["100kb-name", "5mb-name", "20k-fields", "nested-100kb-name"],
)
def test_unknown_fields_get_a_bounded_400(door: FrontDoorClient, door_state: dict[str, Any], request_body) -> None:
    before = len(executions(door_state))
    reply = door.request("POST", "/jobs", json.dumps(request_body).encode(), [("Content-Type", "application/json")])
    assert reply.status == 400, reply.body[:300]
    error = reply.json["error"]
    assert error["code"] == "InvalidRequest"
    assert "unknown field" in error["message"]
    assert len(error["message"]) <= MAX_MESSAGE_CHARS
    assert len(reply.body) < 2 * MAX_MESSAGE_CHARS
    assert len(executions(door_state)) == before
