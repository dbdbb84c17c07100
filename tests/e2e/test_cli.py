"""The CLI's own behaviours, through the `omnireel` command against the local stack."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from omnireel.events.event_types import TERMINAL_EVENT_TYPES
from tests.e2e.helpers import LineReader, aws_client, wait_for
from tests.support.stack import ROOT, LocalStack, cli_command

JOB_TIMEOUT = "120"


def test_submit_sends_every_job_field(stack: LocalStack) -> None:
    result = stack.cli(
        "submit", "a lighthouse at dusk", "--negative-prompt", "blurry, text", "--guidance-scale", "6.5",
        "--image-size", "512x512", "--image-steps", "2", "--width", "320", "--height", "256", "--frames", "9",
        "--fps", "12", "--steps", "2", "--seed", "11", "--video-prompt", "the beam sweeps the sea",
        "--video-negative-prompt", "flicker", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job_id = json.loads(result.stdout)["job_id"]
    request = json.loads(stack.cli("status", job_id, "--json", check=True).stdout)["request"]
    assert request["negative_prompt"] == "blurry, text"
    assert request["guidance_scale"] == 6.5
    assert request["seed"] == 11
    assert request["image"] == {"size": "512x512", "num_inference_steps": 2}
    assert request["video"] == {
        "width": 320, "height": 256, "num_frames": 9, "fps": 12, "num_inference_steps": 2,
        "prompt": "the beam sweeps the sea", "negative_prompt": "flicker",
    }  # fmt: skip


def test_drop_prints_the_job_id(stack: LocalStack, tmp_path: Path) -> None:
    prompt = tmp_path / "cli-drop-id.txt"
    prompt.write_text("a kite over a beach")
    result = stack.cli("drop", str(prompt))
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    assert "(accepted)" in result.stderr
    job = json.loads(stack.cli("status", job_id, "--json", check=True).stdout)
    assert job["job_id"] == job_id and job["source"].endswith("prompts/cli-drop-id.txt")


def test_drop_of_a_rejected_file_prints_its_job_and_fails(stack: LocalStack, tmp_path: Path) -> None:
    bad = tmp_path / "cli-drop-empty.txt"
    bad.write_text("   ")
    result = stack.cli("drop", str(bad))
    assert result.returncode == 1, result.stderr
    assert result.stdout.strip()  # the failed job's id
    assert "(rejected)" in result.stderr and "empty" in result.stderr


def test_drop_refuses_an_unsupported_extension_before_uploading(stack: LocalStack, tmp_path: Path) -> None:
    wrong = tmp_path / "cli-drop-wrong.md"
    wrong.write_text("a prompt in the wrong file type")
    result = stack.cli("drop", str(wrong))
    assert result.returncode == 2
    assert "unsupported file type '.md'" in result.stderr and "nothing was uploaded" in result.stderr
    s3 = aws_client(stack, "s3")
    listed = s3.list_object_versions(
        Bucket=stack.outputs["OMNIREEL_INBOX_BUCKET_NAME"], Prefix="prompts/cli-drop-wrong"
    )
    assert listed.get("Versions", []) == []
    assert stack.cli("drop", str(wrong), "--key", "other/cli-drop-wrong.txt").returncode == 2


def test_events_is_a_replayable_log(stack: LocalStack) -> None:
    job_id = json.loads(stack.cli("submit", "a replayable event", "--frames", "5", "--json", check=True).stdout)[
        "job_id"
    ]
    stack.cli("status", job_id, check=True)

    def events_of_job() -> list[dict]:
        result = stack.cli("events", "--json", "--job", job_id, check=True)
        found = [json.loads(line) for line in result.stdout.splitlines()]
        return found if any(e["event_type"] == "job.succeeded" for e in found) else []

    first = wait_for(events_of_job, 120, f"the terminal event of {job_id}")
    # The log keeps every delivery. job.image_ready may arrive twice with one event_id: GenerateImage publishes it
    # before InvokeVideo queues the render, but if its mark is not recorded by the time the render is done (a crash or
    # a lost write), AsyncResult publishes it too (omnireel/events/progress.py). Consumers de-duplicate on event_id.
    distinct = list({e["event_id"]: e for e in first}.values())
    assert [e["event_type"] for e in distinct] == ["job.image_ready", "job.succeeded"]
    assert events_of_job() == first  # shown again: reading did not consume it
    everything = stack.cli("events", "--json", check=True).stdout.splitlines()
    # Every event of the stack, also other tests' (a batch.completed event names a batch, not a job).
    assert any(json.loads(line).get("job_id") == job_id for line in everything)


def test_events_follow_says_it_is_waiting_then_shows_new_events(stack: LocalStack) -> None:
    follower = subprocess.Popen(
        [*cli_command(), "events", "--follow", "--json", "--timeout", "120"],
        env=stack.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # Both pipes are read from the start: the replayed log on stdout can exceed a pipe's buffer, and a CLI
        # blocked writing it would never print the waiting line (this test then hung until pytest's timeout).
        reader = LineReader(follower)
        waiting = LineReader(follower, "stderr").next_line(60)  # printed after the log, before the first wait
        assert "waiting for job events" in waiting and "120 s" in waiting
        job_id = json.loads(stack.cli("submit", "followed", "--frames", "5", "--json", check=True).stdout)["job_id"]
        event = reader.wait_for_json(
            lambda e: e.get("job_id") == job_id and e["event_type"] in TERMINAL_EVENT_TYPES, 120
        )
    finally:
        follower.terminate()
        follower.wait(timeout=10)
    assert event is not None and event["event_type"] == "job.succeeded"


def test_version_help_and_suggestions(stack: LocalStack) -> None:
    version = stack.cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("omnireel 0.")
    typo = stack.cli("evnets")
    assert typo.returncode == 2 and "did you mean: events?" in typo.stderr
    helped = stack.cli("submit", "--help")
    assert helped.returncode == 0
    for flag in ("--negative-prompt", "--guidance-scale", "--image-size", "--image-steps", "--fps", "--width"):
        assert flag in helped.stdout


def test_aws_runs_the_aws_cli_as_the_developer_without_eval(stack: LocalStack) -> None:
    env = {**stack.env, "AWS_PROFILE": "no-such-profile", "AWS_SESSION_TOKEN": "stale"}  # kept out of the call
    who = subprocess.run(
        [*cli_command(), "aws", "sts", "get-caller-identity", "--output", "json"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert who.returncode == 0, who.stderr
    assert json.loads(who.stdout)["Arn"].endswith(":user/omnireel-local")
    listed = stack.cli("aws", "s3", "ls", timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert stack.outputs["OMNIREEL_INBOX_BUCKET_NAME"] in listed.stdout
    refused = stack.cli("aws", "dynamodb", "delete-table", "--table-name", "nope", timeout=60)
    assert refused.returncode != 0 and "AccessDenied" in refused.stderr  # IAM enforced: the developer, not an admin


def test_aws_without_the_aws_cli_says_how_to_install_it(stack: LocalStack) -> None:
    env = {**stack.env, "OMNIREEL_AWS_CLI": "/nonexistent/aws"}
    result = subprocess.run([*cli_command(), "aws", "s3", "ls"], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert result.returncode == 2 and "not an executable file" in result.stderr
    env = {**stack.env, "OMNIREEL_AWS_CLI": "", "PATH": "/nonexistent"}
    result = subprocess.run([*cli_command(), "aws", "s3", "ls"], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    if Path(ROOT / ".venv-aws/bin/aws").exists():
        assert result.returncode == 0, result.stderr  # .venv-aws is found without PATH
    else:
        assert result.returncode == 2 and "make aws-cli" in result.stderr
