"""async_result's MP4 check before the terminal event: S3 requests on the path to ``job.succeeded`` (issue 11 item 3).

A short video (every top-level box header in its first 64 KiB) is checked with ONE ranged GET that also gives the
object's size, then copied: no HeadObject first (each request is ~5 ms locally and tens of ms on AWS).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from msgspec.structs import replace

from omnireel.core.errors import MalformedModelOutput
from omnireel.core.s3uri import S3Uri
from omnireel.jobs.job import Job, JobStatus
from omnireel.jobs.steps import finalize_video

FTYP = (24).to_bytes(4, "big") + b"ftypisom" + b"\0" * 12
MOOV = (2000).to_bytes(4, "big") + b"moov" + b"\0" * 1992


def mp4(mdat_bytes: int) -> bytes:
    return FTYP + MOOV + (mdat_bytes + 8).to_bytes(4, "big") + b"mdat" + b"\1" * mdat_bytes


class RecordingArtifacts:
    """The ArtifactStore calls finalize_video makes, served from one object in memory."""

    def __init__(self, objects: dict[str, bytes]):
        self.objects = objects
        self.calls: list[tuple[Any, ...]] = []

    def read_head(self, uri: S3Uri, length: int) -> tuple[bytes, int] | None:
        self.calls.append(("read_head", length))
        data = self.objects.get(uri.key)
        return None if data is None else (data[:length], len(data))

    def size(self, uri: S3Uri) -> int | None:
        self.calls.append(("size",))
        data = self.objects.get(uri.key)
        return None if data is None else len(data)

    def read_range(self, uri: S3Uri, offset: int, length: int) -> bytes:
        self.calls.append(("read_range", offset, length))
        return self.objects[uri.key][offset : offset + length]

    def copy(self, source: S3Uri, key: str, content_type: str) -> S3Uri:
        self.calls.append(("copy", key))
        return S3Uri("artifacts", key)


def job() -> Job:
    stamp = "2026-12-02T00:00:00.000Z"
    return Job(job_id="j-1", status=JobStatus.RENDERING_VIDEO, request=None, source="api", created_at=stamp,
               updated_at=stamp)  # fmt: skip


def test_a_short_video_is_checked_with_one_ranged_get_and_copied() -> None:
    artifacts = RecordingArtifacts({"async/out.mp4": mp4(20000)})
    uri = finalize_video(job(), "s3://artifacts/async/out.mp4", jobs=None, artifacts=artifacts, record=False)  # type: ignore[arg-type]
    assert uri == "s3://artifacts/jobs/j-1/video.mp4"
    assert artifacts.calls == [("read_head", 65536), ("copy", "jobs/j-1/video.mp4")]


def test_a_longer_video_reads_only_the_blocks_its_box_headers_are_in() -> None:
    data = mp4(200000) + (16).to_bytes(4, "big") + b"free" + b"\0" * 8  # a box header past the first block
    artifacts = RecordingArtifacts({"async/out.mp4": data})
    finalize_video(job(), "s3://artifacts/async/out.mp4", jobs=None, artifacts=artifacts, record=False)  # type: ignore[arg-type]
    assert artifacts.calls[0] == ("read_head", 65536) and ("size",) not in artifacts.calls
    assert artifacts.calls[1:] == [("read_range", 196608, 65536), ("copy", "jobs/j-1/video.mp4")]


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        ({}, "does not exist"),
        ({"async/out.mp4": b""}, "not an MP4"),
        ({"async/out.mp4": mp4(20000)[:5000]}, "truncated"),
    ],
)
def test_missing_empty_or_cut_off_output_is_refused_before_any_copy(objects: dict[str, bytes], message: str) -> None:
    artifacts = RecordingArtifacts(objects)
    with pytest.raises(MalformedModelOutput, match=message):
        finalize_video(job(), "s3://artifacts/async/out.mp4", jobs=None, artifacts=artifacts, record=False)  # type: ignore[arg-type]
    assert not [c for c in artifacts.calls if c[0] == "copy"]


# async_result: the output's first block is read while the job is read (one round trip on the path, not two).
class WaitingJobs:
    """find_with_token waits until the output's first block is being read, then answers a job waiting on video."""

    def __init__(self, read_started: threading.Event):
        self.read_started = read_started
        self.read_was_under_way: bool | None = None
        self.fields: dict[str, Any] = {}

    def find_with_token(self, job_id: str) -> tuple[Job, str]:
        self.read_was_under_way = self.read_started.wait(5)
        return replace(job(), image_ready_published_at="2026-12-02T00:00:01.000Z"), "token-1"

    def transition(self, job_id: str, target: JobStatus, **fields: Any) -> Job:
        self.fields = fields
        return replace(job(), status=target, image_ready_published_at="2026-12-02T00:00:01.000Z")

    def claim_publication(self, job: Job) -> bool:
        return True


class SignalingArtifacts(RecordingArtifacts):
    def __init__(self, objects: dict[str, bytes], read_started: threading.Event):
        super().__init__(objects)
        self.read_started = read_started

    def read_head(self, uri: S3Uri, length: int) -> tuple[bytes, int] | None:
        self.read_started.set()
        return super().read_head(uri, length)

    def presign(self, uri: S3Uri, seconds: int) -> tuple[str, str]:
        return f"https://example.invalid/{uri.key}", "2026-12-03T00:00:00.000Z"


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def publish(self, event: Any) -> None:
        self.calls.append(("publish", event.event_type))

    def succeed(self, token: str, output: dict[str, Any]) -> bool:
        self.calls.append(("succeed", token))
        return True


def test_async_result_reads_the_output_while_it_reads_the_job() -> None:
    from omnireel.jobs.steps import complete_video
    from omnireel.media.notification import parse_notification

    read_started = threading.Event()
    jobs, recorder = WaitingJobs(read_started), Recorder()
    artifacts = SignalingArtifacts({"async/out.mp4": mp4(20000)}, read_started)
    notification = parse_notification({
        "invocationStatus": "Completed", "inferenceId": "j-1",
        "responseParameters": {"contentType": "video/mp4", "outputLocation": "s3://artifacts/async/out.mp4"},
    })  # fmt: skip
    outcome = complete_video(notification, jobs=jobs, artifacts=artifacts, callbacks=recorder, publisher=recorder,
                             presign_seconds=60)  # type: ignore[arg-type]  # fmt: skip
    assert outcome == "succeeded" and jobs.read_was_under_way is True
    assert artifacts.calls == [("read_head", 65536), ("copy", "jobs/j-1/video.mp4")]
    assert jobs.fields["artifacts"]["video"] == "s3://artifacts/jobs/j-1/video.mp4"
    assert recorder.calls == [("publish", "job.succeeded"), ("succeed", "token-1")]
