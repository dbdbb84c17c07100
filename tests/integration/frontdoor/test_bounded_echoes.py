"""Defect 8 on the wire: error messages that quote caller input stay bounded (<= 1 KB), however large the input."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from omnireel.core.bounded import MAX_MESSAGE_CHARS
from tests.support.frontdoor import FrontDoorClient, aws, event_for, executions


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


def test_an_inbox_drop_with_a_huge_field_name_fails_with_a_bounded_reason(door_state: dict[str, Any]) -> None:
    """A real S3 PUT and its event: the failed job, its job.failed event and the object's tag all stay bounded."""
    s3 = aws(door_state, "s3")
    bucket, key = door_state["outputs"]["InboxBucketName"], f"prompts/huge-field-{uuid.uuid4().hex}.json"
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps({"prompt": "a", "k" * 60_000: 1}).encode())
    deadline = time.monotonic() + 30
    while "omnireel-status" not in (tags := _tags(s3, bucket, key)):
        assert time.monotonic() < deadline, "the drop was not picked up within 30 s"
        time.sleep(0.2)  # polling interval of a bounded wait
    assert tags["omnireel-status"] == "rejected"
    assert "unknown field" in tags["omnireel-reason"] and len(tags["omnireel-reason"]) <= 256
    event = event_for(door_state, tags["omnireel-job-id"])
    assert event["event_type"] == "job.failed" and event["error"]["stage"] == "accept"
    assert "unknown field" in event["error"]["message"]
    assert len(event["error"]["message"]) <= MAX_MESSAGE_CHARS


def _tags(s3: Any, bucket: str, key: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]}
