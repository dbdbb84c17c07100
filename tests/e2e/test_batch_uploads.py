"""Issue 33 item 7: POST /batches is bounded by Lambda's 6 MB request, not API Gateway's 10 MB; a larger batch goes
through POST /batches/uploads -- a presigned S3 PUT URL an app without S3 credentials uses with plain HTTP, for a
JSONL file that runs as a drop owned by that caller.

Through the front door and a real S3 PUT: the upload URL is signed for one key under prompts/uploads/ and the exact
size asked for, the batch runs and is visible to its caller only, and a POST /batches whose Lambda event would pass
6 MB is refused at the door (413) before the function runs.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

from tests.support.frontdoor import FrontDoorClient, Reply, aws, developer_door, new_user
from tests.support.stack import LocalStack

pytestmark = pytest.mark.e2e

SMALL_VIDEO = {"num_frames": 9, "width": 320, "height": 256, "num_inference_steps": 2}
BATCH_TIMEOUT_S = 240  # bounded (below pytest-timeout's 300 s); generous: the machine is shared (2 cores)
POLL_S = 2.0
LAMBDA_MAX_REQUEST_BYTES = 6 * 1024 * 1024  # Lambda's synchronous Invoke request (6,291,456 bytes)


def _put(url: str, data: bytes, headers: dict[str, str] | None = None) -> int:
    """A plain HTTP PUT, no AWS credentials anywhere (urllib, as any app would)."""
    request = urllib.request.Request(url, data=data, method="PUT", headers=headers or {})  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - presigned, loopback
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _poll(door: FrontDoorClient, batch_id: str, done, what: str) -> Reply:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + BATCH_TIMEOUT_S
    while time.monotonic() < deadline:
        reply = door.request("GET", f"/batches/{batch_id}", b"", [])
        if done(reply):
            return reply
        time.sleep(POLL_S)
    raise AssertionError(f"batch {batch_id}: timed out after {BATCH_TIMEOUT_S} s waiting for {what}")


def test_an_uploaded_jsonl_runs_as_a_batch_owned_by_its_caller(stack: LocalStack) -> None:
    door = developer_door(stack.state())
    _, alice_keys = new_user(stack.state())
    alice = door.as_(alice_keys)
    lines = [json.dumps({"prompt": f"an uploaded lantern {i}", "seed": i, "video": SMALL_VIDEO}) for i in range(2)]
    data = ("\n".join([*lines, "{not json"]) + "\n").encode()

    reply = alice.request("POST", "/batches/uploads", json.dumps({"size": len(data)}).encode())

    assert reply.status == 201, reply.body
    answer = reply.json
    upload, batch_id = answer["upload"], answer["batch_id"]
    assert upload["method"] == "PUT" and upload["headers"] == {"Content-Length": str(len(data))}
    assert answer["status_url"] == f"/batches/{batch_id}" and answer["max_bytes"] == 10 * 1024 * 1024
    query = dict(part.split("=", 1) for part in urlsplit(upload["url"]).query.split("&"))
    assert int(query["X-Amz-Expires"]) <= 900
    assert "content-length" in query["X-Amz-SignedHeaders"]
    assert "/prompts/uploads/" in urlsplit(upload["url"]).path
    assert alice.request("GET", f"/batches/{batch_id}", b"", []).status == 404  # nothing until the file arrives

    # The URL is signed for exactly that size: another Content-Length is refused by S3.
    assert _put(upload["url"], data + b"\n") == 403
    assert _put(upload["url"], data) == 200

    view = _poll(alice, batch_id, lambda r: r.status == 200 and r.json["status"] == "completed", "completion")
    counts = view.json["counts"]
    # Every line handled: the two jobs accepted (how they end is the pipeline's business), the bad line rejected.
    assert (counts["total"], counts["accepted"], counts["rejected"]) == (3, 2, 1), view.json
    assert counts["succeeded"] + counts["failed"] + counts["cancelled"] == 3, view.json
    assert "/prompts/uploads/" in view.json["source"]
    # Its caller's only: the developer (another caller) and a stranger get the 404 of an unknown id.
    assert door.request("GET", f"/batches/{batch_id}", b"", []).status == 404
    _, stranger = new_user(stack.state())
    assert door.as_(stranger).request("GET", f"/batches/{batch_id}", b"", []).status == 404
    # ... and so are its jobs.
    listed = alice.request("GET", "/jobs", b"", []).json["jobs"]
    theirs = door.request("GET", "/jobs?limit=100", b"", []).json["jobs"]
    alice_jobs = {job["job_id"] for job in listed}
    assert len(alice_jobs) >= 3 and not alice_jobs & {job["job_id"] for job in theirs}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "size"),
        (b'{"size": 0}', "size"),
        (b'{"size": 10485761}', "10 MB"),
        (b'{"size": "12"}', "size"),
        (b'{"size": 12, "extra": 1}', "size"),
        (b'{"size": 12, "webhook": "ftp://example.com/x"}', "webhook"),
    ],
)
def test_post_batches_uploads_refuses_a_bad_request(stack: LocalStack, body: bytes, fragment: str) -> None:
    reply = developer_door(stack.state()).request("POST", "/batches/uploads", body)
    assert reply.status == 400, reply.body
    assert fragment in reply.json["error"]["message"]


def test_a_file_put_under_prompts_uploads_without_a_reservation_is_refused(stack: LocalStack) -> None:
    """Anyone who may write the inbox cannot make a batch look like another caller's upload: the owner comes from
    the reservation the API wrote, never from the key."""
    state = stack.state()
    s3 = aws(state, "s3")  # the local developer: may write the inbox bucket
    bucket = state["outputs"]["InboxBucketName"]
    key = "prompts/uploads/" + "0" * 32 + "/00000000-0000-4000-8000-000000000000.jsonl"
    version = s3.put_object(Bucket=bucket, Key=key, Body=b'{"prompt": "not mine"}\n')["VersionId"]
    deadline = time.monotonic() + 60
    tags: dict[str, str] = {}
    while time.monotonic() < deadline and "omnireel-status" not in tags:
        found = s3.get_object_tagging(Bucket=bucket, Key=key, VersionId=version)["TagSet"]
        tags = {t["Key"]: t["Value"] for t in found}
        time.sleep(0.5)
    assert tags.get("omnireel-status") == "rejected", tags
    assert "no upload was reserved" in tags["omnireel-reason"]


def test_a_post_batches_over_lambda_s_6_mb_is_refused_at_the_door(stack: LocalStack) -> None:
    """6 MB + 1 byte of body (within API Gateway's 10 MB): the Lambda event cannot be under 6 MB, so the door answers
    413 as API Gateway does, and the function never runs (no batch)."""
    door = developer_door(stack.state())
    filler = "x" * (LAMBDA_MAX_REQUEST_BYTES + 1 - len('{"jobs": [{"prompt": ""}]}'))
    body = json.dumps({"jobs": [{"prompt": filler}]}).encode()
    assert len(body) == LAMBDA_MAX_REQUEST_BYTES + 1
    reply = door.request("POST", "/batches", body, [("Content-Type", "application/json")], timeout=60)
    assert reply.status == 413, reply.body[:300]
    assert reply.json == {"message": "Request Too Long"}
    # Just under: a body the event still fits is the function's to judge (here: a prompt over its limit, a 202 with
    # the line failed later, or a 400 -- anything but the door's 413).
    small = json.dumps({"jobs": [{"prompt": "x" * 1000}]}).encode()
    assert door.request("POST", "/batches", small, [("Content-Type", "application/json")]).status != 413


def test_the_cli_sends_a_file_over_6_mb_through_an_upload(stack: LocalStack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`omnireel batch --api` of a file whose POST /batches would pass Lambda's 6 MB uses POST /batches/uploads (the
    door would answer 413). 110 lines of ~60 KB, each a job whose prompt is over its limit: every line is a failed
    job, so no model runs."""
    line = json.dumps({"prompt": "y" * 60_000})
    file = tmp_path / "big.jsonl"
    file.write_text("\n".join([line] * 110) + "\n")
    assert len(json.dumps(json.dumps({"jobs": [json.loads(line)] * 110}))) > LAMBDA_MAX_REQUEST_BYTES
    result = stack.cli("batch", str(file), "--api", "--wait", "--json", "--timeout", str(BATCH_TIMEOUT_S),
                       timeout=BATCH_TIMEOUT_S + 30)  # fmt: skip
    assert result.returncode == 1, result.stderr  # every line failed: exit 1
    batch = json.loads(result.stdout)
    assert "/prompts/uploads/" in batch["source"], batch
    assert batch["status"] == "completed"
    assert (batch["counts"]["total"], batch["counts"]["rejected"]) == (110, 110), batch["counts"]
