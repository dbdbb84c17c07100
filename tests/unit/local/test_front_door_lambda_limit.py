"""Issue 33 item 7: the local front door refuses, as API Gateway does, a request whose Lambda proxy event would pass
Lambda's 6 MB synchronous request payload (6,291,456 bytes), before invoking the function; the event is measured as
Lambda counts it (JSON in UTF-8 bytes: a JSON body's quotes escaped, a binary body base64-encoded). The wire-level
test is tests/e2e/test_batch_uploads.py."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from omnireel_local.api_gateway import LAMBDA_MAX_REQUEST_BYTES, FrontDoor, lambda_payload_bytes
from omnireel_local.provision import Route


class _Lambda:
    def __init__(self) -> None:
        self.invoked: list[int] = []

    def invoke(self, FunctionName: str, Payload: bytes) -> dict[str, Any]:
        self.invoked.append(len(Payload))
        return {"Payload": io.BytesIO(json.dumps({"statusCode": 202, "body": "{}"}).encode())}


@pytest.fixture
def door() -> FrontDoor:
    front = FrontDoor([Route("POST", "/batches", "fn")], "http://127.0.0.1:1", "us-east-1", "123456789012")
    front._lambda = _Lambda()  # type: ignore[assignment]
    return front


def _post(door: FrontDoor, body: bytes, content_type: str = "application/json") -> int:
    return door.handle("POST", "/batches", [("Content-Type", content_type)], body, "127.0.0.1")[0]


def test_a_body_whose_event_passes_6_mb_is_413_and_never_invoked(door: FrontDoor) -> None:
    status, headers, data = door.handle(
        "POST", "/batches", [("Content-Type", "application/json")], b"x" * LAMBDA_MAX_REQUEST_BYTES, "127.0.0.1"
    )
    assert (status, json.loads(data)) == (413, {"message": "Request Too Long"})
    assert headers["x-amzn-ErrorType"] == "BadRequestException"
    assert door._lambda.invoked == []  # type: ignore[attr-defined]


def test_the_event_is_measured_not_the_body(door: FrontDoor) -> None:
    """4.5 MB of quotes is 9 MB once escaped inside the event; 4.8 MB of binary is 6.4 MB base64-encoded."""
    assert _post(door, b'"' * 4_500_000) == 413
    assert _post(door, b"\x00" * 4_800_000, "application/octet-stream") == 413
    assert _post(door, b"x" * 4_500_000) == 202
    assert door._lambda.invoked and max(door._lambda.invoked) <= LAMBDA_MAX_REQUEST_BYTES  # type: ignore[attr-defined]


def test_characters_count_as_their_utf8_bytes() -> None:
    assert lambda_payload_bytes({"body": "\U0001f600"}) == len('{"body": ""}') + 4
