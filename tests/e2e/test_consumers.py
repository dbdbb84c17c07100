"""Issue 13 on the local stack through the CLI: the motion prompt, listing, cancellation, job.image_ready and signed
webhooks."""

from __future__ import annotations

import json

import pytest
from requests_toolbelt.multipart.decoder import MultipartDecoder

from .conftest import LocalStack
from .helpers import aws_client

pytestmark = pytest.mark.e2e

JOB_TIMEOUT = "90"


def _staged_form(stack: LocalStack, uri: str) -> dict[str, str]:
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    staged = aws_client(stack, "s3").get_object(Bucket=bucket, Key=key)
    decoder = MultipartDecoder(staged["Body"].read(), staged["ContentType"])
    form = {}
    for part in decoder.parts:
        name = part.headers[b"Content-Disposition"].decode().split('name="', 1)[1].split('"', 1)[0]
        form[name] = part.text
    return form


def test_the_motion_prompt_reaches_the_video_call_and_the_prompt_the_image(stack: LocalStack) -> None:
    result = stack.cli(
        "submit", "a lighthouse on a cliff at dusk", "--video-prompt", "the camera circles the lighthouse",
        "--video-negative-prompt", "jitter", "--wait", "--json", "--timeout", JOB_TIMEOUT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert job["status"] == "succeeded"
    assert job["request"]["video"]["prompt"] == "the camera circles the lighthouse"
    form = _staged_form(stack, job["artifacts"]["video_request"]["s3_uri"])
    assert form["prompt"] == "the camera circles the lighthouse"
    assert form["negative_prompt"] == "jitter"


def test_without_a_motion_prompt_the_video_call_uses_the_prompt(stack: LocalStack) -> None:
    result = stack.cli("submit", "a red kite over a beach", "--wait", "--json", "--timeout", JOB_TIMEOUT)
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert _staged_form(stack, job["artifacts"]["video_request"]["s3_uri"])["prompt"] == "a red kite over a beach"
