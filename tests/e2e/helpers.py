"""Shared checks for the e2e tests."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import av
from PIL import Image

from omnireel.events.job_events import PROGRESS_EVENT_TYPES
from tests.support.waiting import wait_for


def decode_mp4(path: Path) -> tuple[int, int, int]:
    """(frames, width, height) decoded with a real decoder (PyAV / FFmpeg)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = [frame for frame in container.decode(stream)]
        return len(frames), frames[0].width, frames[0].height


def png_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return image.size


class LineReader:
    """Reads a subprocess's stdout lines on a thread so tests can wait for one with a deadline."""

    def __init__(self, proc: subprocess.Popen[str], stream: str = "stdout"):
        self.proc = proc
        self.stream = getattr(proc, stream)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.stream is not None
        for line in self.stream:
            self.lines.put(line)

    def next_line(self, timeout: float) -> str:
        """The next line, or "" when none came within ``timeout`` s (or the stream closed)."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return ""

    def wait_for_json(self, predicate, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if predicate(data):
                return data
        return None


def drain_events_until(stack, predicate, timeout: float = 90) -> dict | None:
    """Consume `omnireel events --json` batches until an event matches (bounded).

    The bound covers SQS semantics: a consumer stopped during a long poll (another test's `events --follow`) may
    still take the next message, which then stays invisible for the queue's visibility timeout (30 s) after its
    20 s poll."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = stack.cli("events", "--json", timeout=60)
        assert result.returncode == 0, result.stderr
        for line in result.stdout.splitlines():
            event = json.loads(line)
            if predicate(event):
                return event
        time.sleep(0.5)
    return None


def resource_id(stack, logical: str) -> str:  # type: ignore[no-untyped-def]
    """The physical id of a template resource on the local stack (its state file)."""
    return stack.state()["provisioned"]["resources"][logical]["id"]


def terminal_events(stack, job_id: str, want: int, timeout: float) -> list[dict]:  # type: ignore[no-untyped-def]
    """Terminal job events for ``job_id`` as a subscriber receives them (`omnireel events`; job.image_ready, a progress
    event, left out), until ``want`` arrived."""
    from omnireel.events.event_types import TERMINAL_EVENT_TYPES

    found: list[dict] = []

    def more() -> bool:
        result = stack.cli("events", "--json", "--job", job_id, timeout=60)
        assert result.returncode == 0, result.stderr
        events = map(json.loads, result.stdout.splitlines())  # the whole log of the job's events, every time
        found[:] = [e for e in events if e.get("event_type") in TERMINAL_EVENT_TYPES]
        return len(found) >= want

    wait_for(more, timeout, f"{want} event(s) for job {job_id}")
    return found


# Jobs whose subject is not the media (limits, tenants, webhooks, batches) ask for small media: the emulators render a
# 256x256 image and 9 frames at 320x256 in ~4 + ~20 ms of CPU against ~47 + ~73 ms at the defaults (1024x1024; 17 frames
# at 480x320), and the functions' image handling shrinks with them. The default sizes keep their own e2e tests (the
# pipeline's, the CLI's, the client's, the UI's, the demo's, the S3 drops').
SMALL_IMAGE = {"size": "256x256"}
SMALL_VIDEO = {"num_frames": 9, "width": 320, "height": 256, "num_inference_steps": 2}
SMALL_MEDIA = {"image": SMALL_IMAGE, "video": SMALL_VIDEO}


def aws_client(stack, service: str):  # type: ignore[no-untyped-def]
    """A boto3 client for the local stack, configured from `omnireel local env` (as a user's shell would be); one per
    endpoint and identity in the process (tests/support/local_clients.py)."""
    from tests.support import local_clients

    env = stack.outputs
    return local_clients.client(
        service, env["AWS_ENDPOINT_URL"], env["AWS_REGION"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    )


def platform_faults(stack, config: dict) -> None:  # type: ignore[no-untyped-def]
    """The local stack's own fault hooks (omnireel_local/fault_injection.py), effective on the next event."""
    path = stack.home / "fault-injection.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config))
    tmp.replace(path)
    stamp = time.time_ns()  # a distinct mtime for every write, even within one filesystem tick
    os.utime(path, ns=(stamp, stamp))


@contextlib.contextmanager
def held_s3_events(stack, prefix: str, max_s: float = 60) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """S3 -> Lambda events for keys under ``prefix`` are delivered only when the block ends (the local stack's
    ``s3_event_hold`` fault hook: a late delivery, as S3 may make), so the test can change the bucket in between."""
    platform_faults(stack, {"s3_event_hold": {"prefix": prefix, "max_s": max_s}})
    try:
        yield
    finally:
        platform_faults(stack, {})


class JobEvents:
    """A subscriber of its own: an SQS queue subscribed to the job-events topic (the shared local events queue is
    drained by other tests' waits)."""

    def __init__(self, stack, *, progress: bool = False):  # type: ignore[no-untyped-def]
        """``progress``: also the progress events, job.image_ready and job.queued (by default only the terminal job
        events and the batch events are kept)."""
        self.progress = progress
        self.sqs, self.sns = aws_client(stack, "sqs"), aws_client(stack, "sns")
        self.url = self.sqs.create_queue(QueueName=f"omnireel-e2e-events-{uuid.uuid4().hex[:10]}")[
            "QueueUrl"
        ]  # omnireel-*: the developer's
        arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        topic = stack.outputs["OMNIREEL_JOB_EVENTS_TOPIC_ARN"]
        self.subscription = self.sns.subscribe(
            TopicArn=topic, Protocol="sqs", Endpoint=arn, ReturnSubscriptionArn=True
        )["SubscriptionArn"]
        self.received: list[dict] = []

    def until(self, done, timeout: float) -> list[dict]:  # type: ignore[no-untyped-def]
        """Receive until ``done(received)`` holds or ``timeout`` passes; returns everything received."""
        deadline = time.monotonic() + timeout
        while not done(self.received) and time.monotonic() < deadline:
            wait_s = max(0, min(2, int(deadline - time.monotonic())))
            response = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_s)
            for message in response.get("Messages", []):
                body = json.loads(message["Body"])
                event = json.loads(body["Message"]) if body.get("Type") == "Notification" else body
                if self.progress or event.get("event_type") not in PROGRESS_EVENT_TYPES:  # terminal and batch events
                    self.received.append(event)
                self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
        return self.received

    def close(self) -> None:
        self.sns.unsubscribe(SubscriptionArn=self.subscription)
        self.sqs.delete_queue(QueueUrl=self.url)


def job_of_version(s3, bucket: str, key: str, version_id: str, timeout: float = 30) -> str:  # type: ignore[no-untyped-def]
    """The job id the inbox function tagged this object version with (bounded wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tags = s3.get_object_tagging(Bucket=bucket, Key=key, VersionId=version_id)["TagSet"]
        found = {t["Key"]: t["Value"] for t in tags}
        if "omnireel-job-id" in found:
            return found["omnireel-job-id"]
        time.sleep(0.2)  # the inbox function tags a version within a second or two: not worth backing off
    raise AssertionError(f"s3://{bucket}/{key} version {version_id} was not tagged within {timeout:.0f} s")
