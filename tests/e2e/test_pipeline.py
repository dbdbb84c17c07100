"""The whole pipeline on the embedded local stack, driven through the `omnireel` CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from omnireel.events.event_types import TERMINAL_EVENT_TYPES
from tests.support.loopback import http
from tests.support.stack import ROOT, LocalStack, cli_command

from .helpers import LineReader, decode_mp4, drain_events_until, png_size

pytestmark = pytest.mark.e2e

JOB_TIMEOUT = "90"


def test_api_path_produces_a_decodable_mp4(stack: LocalStack, tmp_path: Path) -> None:
    result = stack.cli(
        "submit", "a red fox running through fresh snow", "--seed", "7", "--wait", "--json",
        "--out", str(tmp_path), "--timeout", JOB_TIMEOUT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert job["status"] == "succeeded"
    assert set(job["timings"]) >= {"image_s", "staging_s", "video_queue_and_render_s", "total_s"}
    folder = tmp_path / job["job_id"]
    assert decode_mp4(folder / "video.mp4") == (17, 480, 320)
    assert png_size(folder / "image.png") == (1024, 1024)


def test_s3_drop_path_produces_a_decodable_mp4(stack: LocalStack, tmp_path: Path) -> None:
    prompt = tmp_path / "lighthouse.json"
    prompt.write_text(
        json.dumps({"prompt": "a lighthouse in a storm", "video": {"num_frames": 9, "width": 320, "height": 256}})
    )
    result = stack.cli("drop", str(prompt), "--wait", "--json", "--out", str(tmp_path), "--timeout", JOB_TIMEOUT)
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert job["status"] == "succeeded"
    assert job["source"] != "api"
    assert decode_mp4(tmp_path / job["job_id"] / "video.mp4") == (9, 320, 256)


def test_a_subscriber_receives_job_succeeded(stack: LocalStack) -> None:
    consumer = subprocess.Popen(
        [*cli_command(), "events", "--follow", "--json", "--timeout", "120"],
        env=stack.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        reader = LineReader(consumer)
        submitted = stack.cli("submit", "a paper boat on a rainy street", "--json", check=True)
        job_id = json.loads(submitted.stdout)["job_id"]
        event = reader.wait_for_json(
            lambda e: e.get("job_id") == job_id and e["event_type"] in TERMINAL_EVENT_TYPES, 90
        )
    finally:
        consumer.terminate()
        consumer.wait(timeout=10)
    assert event is not None, f"no event for job {job_id}"
    assert event["event_type"] == "job.succeeded"
    assert event["status"] == "succeeded"
    assert event["artifacts"]["video"]["s3_uri"].endswith(f"jobs/{job_id}/video.mp4")
    assert event["timings"]["total_s"] > 0


def test_image_endpoint_faults_end_in_job_failed_with_the_reason(stack: LocalStack) -> None:
    emulator = stack.outputs["OMNIREEL_EMULATOR_IMAGE_MODEL_URL"]
    http().put(
        f"{emulator}/_emulator/config", json={"faults": {"images": {"error_rate": 1.0}}}, timeout=10
    ).raise_for_status()
    try:
        result = stack.cli("submit", "this image will never render", "--wait", "--json", "--timeout", JOB_TIMEOUT)
    finally:
        http().put(f"{emulator}/_emulator/config", json={"faults": {"images": None}}, timeout=10).raise_for_status()
    assert result.returncode == 1, result.stderr
    job = json.loads(result.stdout)
    assert job["status"] == "failed"
    assert job["error"]["stage"] == "generate_image"
    assert job["error"]["code"] == "EndpointUnavailable"
    assert "injected fault" in job["error"]["message"]
    assert "failed at generate_image" in result.stderr
    # Retried (ImageMaxAttempts) before giving up: 1 + 2 calls reached the container.
    stats = http().get(f"{emulator}/_emulator/stats", timeout=10).json()
    assert stats["routes"]["images"].get("error", 0) >= 3
    event = drain_events_until(
        stack, lambda e: e.get("job_id") == job["job_id"] and e["event_type"] in TERMINAL_EVENT_TYPES
    )
    assert event is not None and event["event_type"] == "job.failed"
    assert event["error"]["code"] == "EndpointUnavailable"


def test_video_endpoint_failure_reaches_the_job_through_the_error_topic(stack: LocalStack) -> None:
    emulator = stack.outputs["OMNIREEL_EMULATOR_VIDEO_MODEL_URL"]
    faults = {"faults": {"videos": {"error_rate": 1.0}}}
    http().put(f"{emulator}/_emulator/config", json=faults, timeout=10).raise_for_status()
    try:
        result = stack.cli("submit", "this video will never render", "--wait", "--json", "--timeout", JOB_TIMEOUT)
    finally:
        http().put(f"{emulator}/_emulator/config", json={"faults": {"videos": None}}, timeout=10).raise_for_status()
    assert result.returncode == 1, result.stderr
    job = json.loads(result.stdout)
    assert job["error"]["stage"] == "render_video"
    assert job["error"]["code"] == "VideoRenderFailed"
    assert "injected fault" in job["error"]["message"]  # SageMaker failureReason -> SendTaskFailure cause


def test_an_invalid_dropped_file_yields_job_failed(stack: LocalStack, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"prompt": "unterminated')
    result = stack.cli("drop", str(bad), "--wait", "--json", "--timeout", JOB_TIMEOUT)
    assert result.returncode == 1, result.stderr
    job = json.loads(result.stdout)
    assert job["status"] == "failed"
    assert job["error"]["code"] == "InvalidRequest"
    event = drain_events_until(
        stack, lambda e: e.get("job_id") == job["job_id"] and e["event_type"] in TERMINAL_EVENT_TYPES
    )
    assert event is not None and event["event_type"] == "job.failed"
    assert "not valid JSON" in event["error"]["message"]


def test_cli_errors_have_exit_codes(stack: LocalStack) -> None:
    assert stack.cli("submit", "x", "--size", "huge").returncode == 2
    bad_request = stack.cli("submit", "x", "--frames", "6")
    assert bad_request.returncode == 2
    assert "num_frames" in bad_request.stderr
    assert stack.cli("status", "00000000-0000-0000-0000-000000000000").returncode == 2
    assert stack.cli("no-such-command").returncode == 2
