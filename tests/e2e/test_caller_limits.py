"""Issue 34 items 5 and 8 through the front door, on the shared stack set to ``CallerMaxPendingJobs=2``: two callers.

- A at its limit: POST /jobs answers 429 TooManyPendingJobs with Retry-After and the IETF RateLimit fields (r=0);
  B, submitting at the same time, is unaffected (202, its own r). When one of A's jobs ends (cancelled), A may submit
  again. Every POST /jobs answer carries RateLimit-Policy and RateLimit.
- Dropped files count against the inbox (one caller): a drop over the limit is tagged ``waiting``, waits on the inbox
  retry queue, and runs once a place is free: its job succeeds.
- Usage: a finished job shows ``usage`` (queue, image and video seconds, instance types, estimated cost) in GET
  /jobs/{id} and in its terminal event; GET /usage gives the caller its own day totals only; bad ranges are 400s.

On main there was no per-caller limit (the third submit was a 202), no RateLimit field, no usage and no GET /usage.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.credentials import Credentials

from omnireel.aws.usage_store import PENDING_ITEM
from omnireel.usage.limits import INBOX_CALLER
from tests.support.frontdoor import FrontDoorClient, aws, new_user
from tests.support.loopback import http
from tests.support.stack import LocalStack, reconfigured

from .helpers import SMALL_MEDIA, wait_for

LIMIT = 2
HOLD_S = 25  # the emulator's video latency while A's jobs must stay pending
TIMEOUT_S = 300
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(TIMEOUT_S + 300)]
POLICY = re.compile(r'^"pending";q=2;qu="concurrent-requests"$')


@pytest.fixture(scope="module")
def stack(stack: LocalStack) -> Iterator[LocalStack]:
    """The shared stack (tests/conftest.py) with CallerMaxPendingJobs=LIMIT: the parameter only reaches functions'
    environments (CALLER_MAX_PENDING_JOBS), so it is set at run time in every function that reads it, as an
    operator's redeploy would, and put back after this file."""
    with reconfigured(stack, {"CALLER_MAX_PENDING_JOBS": str(LIMIT)}):
        yield stack


def _door(stack: LocalStack, credentials: Credentials) -> FrontDoorClient:
    state = stack.state()
    return FrontDoorClient(state["api_url"], state["region"], credentials)


def _video_latency(stack: LocalStack, seconds: float | None) -> None:
    emulator = stack.outputs["OMNIREEL_EMULATOR_VIDEO_MODEL_URL"]
    faults = {"videos": {"latency_s": seconds} if seconds else None}
    http().put(f"{emulator}/_emulator/config", json={"faults": faults}, timeout=10).raise_for_status()


def _submit(door: FrontDoorClient, prompt: str) -> Any:
    return door.post_json({"prompt": prompt, **SMALL_MEDIA}, ("Idempotency-Key", uuid.uuid4().hex))


def _remaining(reply: Any) -> int:
    field = reply.header("RateLimit") or ""
    match = re.fullmatch(r'"pending";r=(\d+)', field)
    assert match, f"RateLimit field {field!r}"
    return int(match.group(1))


def _job(door: FrontDoorClient, job_id: str) -> dict[str, Any]:
    reply = door.get_job(job_id)
    assert reply.status == 200, reply.body
    return reply.json


def _wait_ended(door: FrontDoorClient, job_id: str) -> None:
    wait_for(lambda: _job(door, job_id)["status"] in ("succeeded", "failed"), TIMEOUT_S, f"job {job_id} to end")


def _wait_tag(s3: Any, bucket: str, key: str, version: str, status: str, timeout: float) -> None:
    wait_for(lambda: _tags(s3, bucket, key, version).get("omnireel-status") == status, timeout, f"{key}: {status}")


def test_a_caller_at_its_limit_gets_429_with_the_ratelimit_fields_and_another_caller_does_not(
    stack: LocalStack,
) -> None:
    state = stack.state()
    a = _door(stack, new_user(state)[1])
    b = _door(stack, new_user(state)[1])
    _video_latency(stack, HOLD_S)
    try:
        first = [_submit(a, f"a{i}") for i in range(LIMIT)]
        assert [r.status for r in first] == [202] * LIMIT, [r.body for r in first]
        assert [_remaining(r) for r in first] == [1, 0]
        assert all(POLICY.match(r.header("RateLimit-Policy") or "") for r in first)

        over = _submit(a, "one too many")
        assert over.status == 429, over.body
        assert over.json["error"]["code"] == "TooManyPendingJobs"
        assert int(over.header("Retry-After") or "0") > 0
        assert POLICY.match(over.header("RateLimit-Policy") or "") and _remaining(over) == 0

        other = _submit(b, "b is not held back")  # B: its own count, untouched by A's
        assert other.status == 202, other.body
        assert _remaining(other) == LIMIT - 1

        bad = a.post_json({"prompt": ""})  # a 400 carries the fields too
        assert bad.status == 400 and POLICY.match(bad.header("RateLimit-Policy") or "") and _remaining(bad) == 0

        # One of A's jobs ends (its owner cancels it): its place is free again, exactly one.
        job_id = first[0].json["job_id"]
        cancelled = a.request("DELETE", f"/jobs/{job_id}", b"", [])
        assert cancelled.status == 200, cancelled.body
        again = _submit(a, "a again")
        assert again.status == 202, again.body
        assert _remaining(again) == 0
        assert _submit(a, "still over").status == 429
    finally:
        _video_latency(stack, None)

    # Every job of A and B ends; then both may fill their limit again (no place leaked, none counted twice).
    for door, reply in [(a, first[1]), (a, again), (b, other)]:
        _wait_ended(door, reply.json["job_id"])
    for door in (a, b):
        check = _submit(door, "after the end")
        assert check.status == 202 and _remaining(check) == LIMIT - 1, (check.status, check.body)
        _wait_ended(door, check.json["job_id"])

    # Usage (item 8): per job and per caller, each caller sees only its own.
    finished = _job(a, again.json["job_id"])
    assert finished["status"] == "succeeded", (finished["error"], finished["stage_times"])
    usage = finished["usage"]
    assert usage["image_seconds"] > 0 and usage["video_seconds"] > 0, usage
    assert usage["queue_seconds"] >= 0 and usage["estimated_cost_usd"] > 0, usage
    assert usage["instance_types"]["image"] and usage["instance_types"]["video"], usage
    today = datetime.now(UTC).date().isoformat()
    mine = a.request("GET", f"/usage?from={today}&to={today}", b"", [])
    assert mine.status == 200, mine.body
    totals = mine.json["totals"]
    assert totals["jobs"] == 4 and totals["succeeded"] == 3 and totals["cancelled"] == 1, mine.json
    assert mine.json["pending_jobs"] == 0 and mine.json["max_pending_jobs"] == LIMIT
    theirs = b.request("GET", "/usage", b"", [])
    assert theirs.status == 200 and theirs.json["totals"]["jobs"] == 2, theirs.json
    for query, code in (
        ("from=2026-13-01", "InvalidDate"),
        ("from=2026-01-02&to=2026-01-01", "InvalidRange"),
        ("from=2020-01-01&to=2026-01-01", "InvalidRange"),
        ("since=2026-01-01", "InvalidRequest"),
    ):
        refused = a.request("GET", f"/usage?{query}", b"", [])
        assert refused.status == 400 and refused.json["error"]["code"] == code, (query, refused.body)


def _tags(s3: Any, bucket: str, key: str, version: str) -> dict[str, str]:
    found = s3.get_object_tagging(Bucket=bucket, Key=key, VersionId=version)["TagSet"]
    return {t["Key"]: t["Value"] for t in found}


def _inbox_pending(state: dict[str, Any]) -> int:
    """The dropped files' jobs not yet terminal, as the limit counts them (the usage table's counter)."""
    table = state["provisioned"]["resources"]["UsageTable"]["id"]
    key = {"caller": {"S": INBOX_CALLER}, "item": {"S": PENDING_ITEM}}
    item = aws(state, "dynamodb").get_item(TableName=table, Key=key, ConsistentRead=True).get("Item") or {}
    return int(item.get("pending", {}).get("N", "0"))


def test_a_drop_over_the_limit_waits_and_then_runs(stack: LocalStack) -> None:
    state = stack.state()
    s3 = aws(state, "s3")
    bucket = state["outputs"]["InboxBucketName"]
    # The stack is shared: drops of files before this one count against the inbox too until their jobs end.
    wait_for(lambda: _inbox_pending(state) == 0, TIMEOUT_S, "the inbox's earlier drops to end")
    _video_latency(stack, 15)
    versions: list[tuple[str, str]] = []
    try:
        for index in range(LIMIT + 1):
            key = f"prompts/limit-{uuid.uuid4().hex[:8]}-{index}.txt"
            put = s3.put_object(Bucket=bucket, Key=key, Body=f"drop {index}".encode())
            versions.append((key, put["VersionId"]))
            if index < LIMIT:  # the first ones hold the inbox's places before the last one comes
                _wait_tag(s3, bucket, key, put["VersionId"], "accepted", 60)
        key, version = versions[-1]
        _wait_tag(s3, bucket, key, version, "waiting", 60)
    finally:
        _video_latency(stack, None)
    # It runs once a place is free: accepted, then its job succeeds (no failure, no silent drop).
    _wait_tag(s3, bucket, key, version, "accepted", TIMEOUT_S)
    job_id = _tags(s3, bucket, key, version)["omnireel-job-id"]
    deadline = time.monotonic() + TIMEOUT_S
    table = state["outputs"]["JobsTableName"]
    ddb = aws(state, "dynamodb")
    status = ""
    while time.monotonic() < deadline:
        item = ddb.get_item(TableName=table, Key={"job_id": {"S": job_id}}, ConsistentRead=True).get("Item") or {}
        status = item.get("status", {}).get("S", "")
        if status in ("succeeded", "failed"):
            break
        time.sleep(1)
    assert status == "succeeded", json.dumps(item)[:2000]

    # Operators: `omnireel usage --all` reads every caller's days from the usage table with their own credentials
    # (here the local developer's): the inbox's drops and both API callers of the other test are there.
    result = stack.cli("usage", "--all", "--json", timeout=60)
    assert result.returncode == 0, result.stderr
    callers = {block["caller"]: block["totals"] for block in json.loads(result.stdout)["callers"]}
    assert callers["inbox"]["succeeded"] >= LIMIT + 1, callers
    assert len(callers) >= 3, callers  # A and B of the other test, and the inbox
    own = stack.cli("usage", "--json", timeout=60)  # the developer's own (no job of its own: no days, limit shown)
    assert own.returncode == 0 and json.loads(own.stdout)["max_pending_jobs"] == LIMIT, own.stderr


def test_a_batch_over_its_owners_limit_waits_line_by_line_and_completes(stack: LocalStack) -> None:
    """A batch counts its lines as they are queued: with LIMIT + 2 lines, the lines over the limit wait (deferred like
    lines without an in-flight slot) and run as places free up; the batch completes with every line succeeded, and the
    owner never has more than LIMIT jobs pending."""
    state = stack.state()
    owner = _door(stack, new_user(state)[1])
    _video_latency(stack, 5)
    try:
        lines = [{"prompt": f"line {i}", **SMALL_MEDIA} for i in range(LIMIT + 2)]
        body = json.dumps({"jobs": lines}).encode()
        headers = [("Content-Type", "application/json"), ("Idempotency-Key", uuid.uuid4().hex)]
        reply = owner.request("POST", "/batches", body, headers)
        assert reply.status == 202, reply.body
        batch_id = reply.json["batch_id"]
        peak = 0
        deadline = time.monotonic() + TIMEOUT_S
        batch: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:  # a loaded machine (2 cores, other stacks) may let one read time out: the loop is the bound
                usage = owner.request("GET", "/usage", b"", [])
                found = owner.request("GET", f"/batches/{batch_id}", b"", [])
            except TimeoutError:
                continue
            assert usage.status == 200 and found.status == 200, (usage.body, found.body)
            peak = max(peak, usage.json["pending_jobs"])
            batch = found.json
            if batch["status"] == "completed":
                break
            time.sleep(1)
    finally:
        _video_latency(stack, None)
    assert batch.get("status") == "completed", batch
    assert batch["counts"]["succeeded"] == LIMIT + 2 and batch["counts"]["failed"] == 0, batch["counts"]
    assert 0 < peak <= LIMIT, peak
