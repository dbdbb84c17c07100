"""`omnireel invoke FUNCTION --event events/<file>.json`: every sample event, filled from a real job (CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnireel.batches.reconcile import Repairs
from tests.support.stack import ROOT, LocalStack

EVENT_FILES = sorted(p.name for p in (ROOT / "events").glob("*.json"))
FUNCTIONS = sorted(p.name for p in (ROOT / "functions").iterdir() if (p / "handler.py").exists())


def _function_of(event_file: str) -> str:
    return max((f for f in FUNCTIONS if event_file.startswith(f)), key=len)


@pytest.fixture(scope="module")
def jobs(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A dropped job (inbox placeholders) and, submitted after it, an API job (the latest)."""
    prompt = tmp_path_factory.mktemp("invoke") / "invoke sample.txt"
    prompt.write_text("a lantern on a pier")
    dropped = stack.cli("drop", str(prompt), "--wait", "--json", "--timeout", "120", timeout=180)
    assert dropped.returncode == 0, dropped.stderr
    submitted = stack.cli("submit", "a lantern in the fog", "--frames", "5", "--wait", "--json", "--timeout", "120",
                          timeout=180)  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    return {"dropped": json.loads(dropped.stdout)["job_id"], "api": json.loads(submitted.stdout)["job_id"]}


def invoke(stack: LocalStack, function: str, event: str, *extra: str) -> tuple[int, dict, str]:
    result = stack.cli("invoke", function, "--event", str(ROOT / "events" / event), "--json", *extra, timeout=120)
    out = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.returncode, out, result.stderr


def _conflict(stage: str):  # type: ignore[no-untyped-def]
    """A step re-run on a finished job: refused by the job's state machine rules (the job was found and read)."""
    return lambda r, job: (
        r["errorType"] == "StepError" and f"job {job} cannot move from succeeded to {stage}" in (r["errorMessage"])
    )


# What each sample event does to the real, finished job it is filled from (exit code, check on the result).
EXPECTED = {
    "api_get_job.json": (0, lambda r, job: r["statusCode"] == 200 and json.loads(r["body"])["job_id"] == job),
    "api_post_jobs.json": (0, lambda r, job: r["statusCode"] == 202 and json.loads(r["body"])["status"] == "accepted"),
    "async_result_completed.json": (0, lambda r, job: r["results"] == [{"job_id": job, "outcome": "ignored"}]),
    "async_result_failed.json": (0, lambda r, job: r["results"] == [{"job_id": job, "outcome": "ignored"}]),
    # Nothing overdue; the pending counters' heal (issue 34 item 5) reports how many it fixed (normally none).
    "fail_overdue_jobs.json": (
        0,
        lambda r, job: (
            r["failed"] == []
            and set(r) == {"failed", "pending_counters_healed"}
            and isinstance(r["pending_counters_healed"], int)
            and r["pending_counters_healed"] >= 0
        ),
    ),
    # A run on the shared stack: what it repaired, as counts (normally none; a batch of another test may be mid-way).
    "reconcile_batches.json": (
        0,
        lambda r, job: (
            set(r) == set(Repairs().counts())  # every count the reconciler keeps, by name
            and all(isinstance(v, int) and v >= 0 for v in r.values())
        ),
    ),
    "generate_image.json": (1, _conflict("generating_image")),
    # The admission schedule on the shared stack: per endpoint kind, its pool and what it repaired (counts).
    "heal_admission.json": (
        0,
        lambda r, job: (
            set(r) == {"image", "video"}
            and all(
                set(pool)
                == {
                    "capacity",
                    "in_use",
                    "waiting",
                    "released",
                    "resumed",
                    "dropped",
                    "recounted",
                    "granted",
                    "oldest_wait_s",
                }
                and all(isinstance(v, int) and v >= 0 for v in pool.values())
                for pool in r.values()
            )
        ),
    ),
    # A finished job does not wait for a slot: nothing is queued, no token is answered.
    "wait_for_slot.json": (0, lambda r, job: r == {"job_id": job, "kind": "image", "outcome": "ended"}),
    # The same bucket, key and version as the real upload: the inbox recognises its own job (one version, one job).
    "inbox_s3_put.json": (
        0,
        lambda r, job: (
            r["results"] == [{"key": "prompts/invoke sample.txt", "job_id": job, "status": "duplicate", "reason": None}]
        ),
    ),
    "invoke_video.json": (1, _conflict("rendering_video")),
    "publish_event_failed.json": (0, lambda r, job: r == {"job_id": job, "published": False}),  # exactly once
    "publish_event_succeeded.json": (0, lambda r, job: r == {"job_id": job, "published": False}),
    "reconcile_video.json": (0, lambda r, job: r["job_id"] == job and r["video"].endswith(f"/jobs/{job}/video.mp4")),
    "workflow_ended.json": (0, lambda r, job: r == {"job_id": job, "published": False}),
    # The sample names an event the stack never published: dropped unsigned, not retried (issue 33); its webhook, the
    # instance metadata address, is never looked at.
    "webhook_delivery_sqs.json": (0, lambda r, job: r == {"batchItemFailures": []}),
    # The batch samples name their own batch (no placeholders yet: a batch id would have to come from a real batch);
    # progress for a job of an unknown batch is a no-op, a submit message of an unknown batch goes back to the
    # queue (partial batch response) to be retried and redriven.
    "batch_progress.json": (0, lambda r, job: r == {"batchItemFailures": []}),
    "batch_submit_lines.json": (
        0,
        lambda r, job: r == {"batchItemFailures": [{"itemIdentifier": "0c2b1a9e-5f3d-4c1b-8e7a-000000000002"}]},
    ),
    "batch_submit_split.json": (
        0,
        lambda r, job: r == {"batchItemFailures": [{"itemIdentifier": "0c2b1a9e-5f3d-4c1b-8e7a-000000000001"}]},
    ),
}


def test_every_sample_event_has_an_expectation() -> None:
    assert set(EXPECTED) == set(EVENT_FILES)


@pytest.mark.parametrize("event_file", EVENT_FILES)
def test_every_sample_event_invokes_its_function(stack: LocalStack, jobs: dict[str, str], event_file: str) -> None:
    function = _function_of(event_file)
    job = jobs["dropped"] if event_file.startswith("inbox") else jobs["api"]
    code, out, err = invoke(stack, function, event_file, "--job", job)
    want_code, check = EXPECTED[event_file]
    assert code == want_code, err
    assert out["job_id"] == job and out["function"].startswith("omnireel-local-")
    assert check(out["result"], job), out["result"]


def test_the_latest_job_by_default_and_clear_errors(stack: LocalStack, jobs: dict[str, str], tmp_path: Path) -> None:
    latest = json.loads(stack.cli("submit", "the newest job", "--frames", "5", "--json", check=True).stdout)["job_id"]
    result = stack.cli("invoke", "publish_event", "--event", str(ROOT / "events" / "publish_event_succeeded.json"))
    assert f"(job {latest})" in result.stderr
    odd = tmp_path / "odd.json"
    odd.write_text('{"job_id": "{{job_id}}", "x": "{{no_such_thing}}"}')
    refused = stack.cli("invoke", "reconcile_video", "--event", str(odd))
    assert refused.returncode == 2 and "unknown placeholder(s) no_such_thing" in refused.stderr
    missing = stack.cli("invoke", "nope_function")
    assert missing.returncode == 2 and "generate_image" in missing.stderr
    overridden = stack.cli("invoke", "reconcile_video", "--job", jobs["api"], "--set", f"job_id={jobs['dropped']}",
                           "--json")  # fmt: skip
    assert json.loads(overridden.stdout)["result"]["job_id"] == jobs["dropped"]
