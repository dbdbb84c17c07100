"""Batches on the local stack (issue 14): a 20-line JSONL with bad lines through a real S3 PUT (the CLI's drop) and
through POST /batches at the front door; every line ends in exactly one terminal state, with one batch.completed.

The fan-out runs as on AWS: the batch queue's SQS event source mapping (local pollers with partial batch responses
and MaximumConcurrency, omnireel_local/event_sources.py) under the template's roles, IAM enforced.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.support.frontdoor import developer_door, new_user
from tests.support.stack import LocalStack

from .helpers import SMALL_MEDIA, JobEvents, wait_for

pytestmark = pytest.mark.e2e

BATCH_TIMEOUT_S = 480  # bounded; generous because the machine is shared (2 cores)
WEBHOOK_TIMEOUT_S = 240  # a 2-line batch; below pytest-timeout's 300 s so a missing delivery fails with its message


def _job(i: int) -> dict:
    return {"prompt": f"a small paper lantern number {i} drifting at dusk", "seed": i, **SMALL_MEDIA}


def twenty_lines() -> tuple[bytes, dict[int, str]]:
    """20 lines: 13 good jobs, 2 blank lines (ignored), 5 bad lines (line -> a fragment of the expected reason)."""
    lines: list[bytes] = [json.dumps(_job(i)).encode() for i in range(20)]
    bad = {
        3: (b"{not json", "not valid JSON"),
        7: (json.dumps({"prompt": ""}).encode(), "prompt"),
        11: (b'["a list, not an object"]', "object"),
        14: (b'{"prompt": "\xff\xfe broken"}', "not UTF-8"),
        18: (json.dumps({"prompt": "x", "video": {"width": 123}}).encode(), "video"),
    }
    for number, (raw, _) in bad.items():
        lines[number - 1] = raw
    lines[9] = b""  # line 10: blank
    lines[15] = b"   \r"  # line 16: blank (whitespace, CRLF)
    return b"\n".join(lines) + b"\n", {n: reason for n, (_, reason) in bad.items()}


def _check_completed(batch: dict, events: list[dict], bad: dict[int, str], total: int) -> list[dict]:
    batch_id = batch["batch_id"]
    assert batch["status"] == "completed"
    counts = batch["counts"]
    assert counts == {
        "total": total,
        "accepted": total - len(bad),
        "rejected": len(bad),
        "succeeded": total - len(bad),
        "failed": len(bad),
        "cancelled": 0,
    }
    completed = [e for e in events if e.get("event_type") == "batch.completed" and e.get("batch_id") == batch_id]
    assert len(completed) == 1, f"expected one batch.completed, got {len(completed)}"
    assert completed[0]["counts"] == counts
    assert completed[0]["manifest"]["s3_uri"] == batch["manifest"]["s3_uri"]
    with urllib.request.urlopen(batch["manifest"]["url"], timeout=30) as response:  # noqa: S310 - presigned, loopback
        manifest = [json.loads(line) for line in response.read().decode().splitlines()]
    assert len(manifest) == total
    assert len({row["job_id"] for row in manifest}) == total
    for row in manifest:
        if row["line"] in bad:
            assert row["status"] == "failed" and row["video"] is None
            assert row["error"].startswith(f"line {row['line']}: ") and bad[row["line"]] in row["error"], row
        else:
            assert row["status"] == "succeeded" and row["video"].endswith(f"jobs/{row['job_id']}/video.mp4"), row
    # Every line's job has exactly one terminal event, and it names the batch and the line.
    terminal = [e for e in events if (e.get("batch") or {}).get("batch_id") == batch_id]
    by_job: dict[str, list[dict]] = {}
    for event in terminal:
        by_job.setdefault(event["job_id"], []).append(event)
    assert set(by_job) == {row["job_id"] for row in manifest}
    assert all(len(found) == 1 for found in by_job.values()), "a job of the batch had more than one terminal event"
    lines_of_events = {found[0]["batch"]["line"]: found[0]["job_id"] for found in by_job.values()}
    assert lines_of_events == {row["line"]: row["job_id"] for row in manifest}
    return manifest


def _done(batch_id: str, expected_terminal: int):  # type: ignore[no-untyped-def]
    def done(received: list[dict]) -> bool:
        completed = any(e.get("event_type") == "batch.completed" and e.get("batch_id") == batch_id for e in received)
        terminal = sum(1 for e in received if (e.get("batch") or {}).get("batch_id") == batch_id)
        return completed and terminal >= expected_terminal

    return done


def test_a_dropped_jsonl_with_bad_lines_runs_every_line_once(stack: LocalStack, tmp_path: Path) -> None:
    data, bad = twenty_lines()
    file = tmp_path / "catalogue.jsonl"
    file.write_bytes(data)
    events = JobEvents(stack)
    try:
        result = stack.cli("batch", str(file), "--wait", "--json", "--timeout", str(BATCH_TIMEOUT_S),
                           timeout=BATCH_TIMEOUT_S + 30)  # fmt: skip
        assert result.returncode == 1, result.stderr  # some lines failed: exit 1, as for a failed job
        batch = json.loads(result.stdout)
        assert batch["source"].endswith("/prompts/catalogue.jsonl") and batch["source_version"]["version_id"]
        received = events.until(_done(batch["batch_id"], 18), timeout=60)
    finally:
        events.close()
    _check_completed(batch, received, bad, total=18)
    status = stack.cli("batch", "status", batch["batch_id"], "--json", check=True)
    assert json.loads(status.stdout)["counts"] == batch["counts"]


def test_post_batches_through_the_front_door(stack: LocalStack) -> None:
    state = stack.state()
    door = developer_door(state)
    jobs: list = [_job(100 + i) for i in range(20)]
    bad = {4: "prompt", 9: "object", 15: "video"}
    jobs[3] = {"prompt": "   "}
    jobs[8] = "just a string"
    jobs[14] = {"prompt": "x", "video": {"num_frames": 0}}
    body = json.dumps({"jobs": jobs}).encode()
    headers = [("Content-Type", "application/json"), ("Idempotency-Key", "e2e-batch-20")]
    events = JobEvents(stack)
    try:
        first = door.request("POST", "/batches", body, headers)
        assert first.status == 202, first.body
        batch_id = first.json["batch_id"]
        assert first.json["total"] == 20 and first.header("Idempotent-Replayed") == "false"
        # The same key and body: the same batch (and so the same line jobs); another body: 409.
        again = door.request("POST", "/batches", body, headers)
        assert again.status == 202 and again.json["batch_id"] == batch_id
        assert again.header("Idempotent-Replayed") == "true"
        other = json.dumps({"jobs": jobs[:5]}).encode()
        assert door.request("POST", "/batches", other, headers).status == 409
        received = events.until(_done(batch_id, 20), timeout=BATCH_TIMEOUT_S)
    finally:
        events.close()
    # The record says completed once the publisher has recorded its publish, just after the event went out.
    view = wait_for(
        lambda: (
            (r := door.request("GET", f"/batches/{batch_id}", b"", [])).status == 200
            and r.json["status"] == "completed"
            and r
        ),
        timeout=30,
        what="GET /batches to show the batch completed",
    )
    _check_completed(view.json, received, bad, total=20)
    # Owner only: another caller gets the same 404 as for an unknown id.
    _, stranger = new_user(state)
    assert door.as_(stranger).request("GET", f"/batches/{batch_id}", b"", []).status == 404
    assert door.request("GET", "/batches/00000000-0000-4000-8000-000000000000", b"", []).status == 404


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "jobs"),
        (b'{"jobs": []}', "1 to 1000"),
        (json.dumps({"jobs": [{"prompt": "p"}] * 1001}).encode(), "at most 1000"),
        (b'{"jobs": [], "extra": 1}', "jobs"),
        (b"[1, 2]", "jobs"),
    ],
)
def test_post_batches_refuses_a_bad_envelope(stack: LocalStack, body: bytes, fragment: str) -> None:
    state = stack.state()
    door = developer_door(state)
    reply = door.request("POST", "/batches", body, [("Content-Type", "application/json")])
    assert reply.status == 400, reply.body
    assert fragment in reply.json["error"]["message"]


def test_post_batches_webhook_gets_one_signed_batch_completed(stack: LocalStack) -> None:
    """POST /batches with "webhook": a receiver holding the deployment's secret (`omnireel webhooks listen`) verifies
    the Standard Webhooks signature of the one batch.completed delivery (SNS `webhook` attribute -> webhook queue ->
    WebhookDelivery, IAM enforced)."""
    import subprocess

    from omnireel_local.home import free_port
    from tests.support.stack import ROOT, cli_command

    from .helpers import LineReader

    state = stack.state()
    door = developer_door(state)
    port, secret = free_port(), stack.outputs["OMNIREEL_WEBHOOK_SECRET"]
    process = subprocess.Popen(
        [*cli_command(), "webhooks", "listen", "--port", str(port), "--secret", secret,
         "--json", "--count", "1", "--timeout", str(WEBHOOK_TIMEOUT_S)],
        env=stack.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        assert "listening on" in process.stderr.readline()  # bound before anything is sent to it
        reader = LineReader(process)
        hook = f"http://127.0.0.1:{port}/hooks/batches"
        body = json.dumps({"jobs": [_job(300), {"prompt": ""}], "webhook": hook}).encode()
        reply = door.request("POST", "/batches", body, [("Content-Type", "application/json")])
        assert reply.status == 202, reply.body
        batch_id = reply.json["batch_id"]
        delivery = reader.wait_for_json(lambda line: True, timeout=WEBHOOK_TIMEOUT_S)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert delivery is not None, "no verified batch.completed delivery reached the batch's webhook"
    assert delivery["verified"] is True and delivery["path"] == "/hooks/batches"
    event = delivery["event"]
    assert event["event_type"] == "batch.completed" and event["batch_id"] == batch_id
    assert delivery["webhook_id"] == event["event_id"]
    assert event["counts"] == {"total": 2, "accepted": 1, "rejected": 1, "succeeded": 1, "failed": 1, "cancelled": 0}
    assert event["manifest"]["s3_uri"].endswith(f"batches/{batch_id}/manifest.jsonl") and event["truncated"] is None
    # The attempt is recorded on the batch (the delivery function's UpdateItem, IAM enforced): its view says so.
    view = wait_for(
        lambda: (
            (r := door.request("GET", f"/batches/{batch_id}", b"", [])).status == 200
            and (r.json.get("webhook") or {}).get("deliveries", {}).get("batch.completed", {}).get("delivered_at")
            and r
        ),
        timeout=30,
        what="GET /batches to show the batch.completed delivery",
    )
    webhook = view.json["webhook"]
    assert webhook["url"] == hook and webhook["events"] == ["batch.completed"]
    state = webhook["deliveries"]["batch.completed"]
    assert state["outcome"] == "delivered" and state["last_status"] == 204 and state["attempts"] >= 1
    assert state["last_error"] is None and state["refused"] is False
