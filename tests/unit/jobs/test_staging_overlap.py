"""GenerateImage builds the video request while the staging transition is written (issue 11 item 3).

The JPEG reference and the multipart body need only the PNG and the job's request, both in hand before the staging
transition: they are built on a second thread meanwhile (libvips releases the GIL), and used only if the transition
succeeds. Checked with events, not timing: the fake transition waits until the build has started.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from omnireel.core.errors import JobConflict
from omnireel.jobs import staging
from omnireel.jobs.job import Artifacts, Job, JobStatus
from omnireel.jobs.request import parse_job_request

REQUEST = parse_job_request({"prompt": "a lighthouse at dusk", "seed": 7})
STAMP = "2026-12-02T00:00:00.000Z"


def job(status: JobStatus, **artifacts: str) -> Job:
    return Job(job_id="j-1", status=status, request=REQUEST, source="api", created_at=STAMP, updated_at=STAMP,
               artifacts=Artifacts(**artifacts))  # fmt: skip


class Artifacts_:
    def __init__(self) -> None:
        self.puts: list[str] = []

    def put(self, key: str, body: bytes, content_type: str) -> Any:
        from omnireel.core.s3uri import S3Uri

        self.puts.append(key)
        return S3Uri("artifacts", key)


class Jobs:
    def __init__(self, started: threading.Event, conflict: bool = False):
        self.started = started
        self.conflict = conflict
        self.build_running_during_transition: bool | None = None
        self.recorded: list[dict[str, Any]] = []

    def transition(self, job_id: str, target: JobStatus, **fields: Any) -> Job:
        self.build_running_during_transition = self.started.wait(5)
        if self.conflict:
            raise JobConflict("already rendering")
        return job(target, image="s3://artifacts/jobs/j-1/image.png")

    def set_fields(self, job_id: str, **fields: Any) -> None:
        self.recorded.append(fields)

    def get(self, job_id: str) -> Job:
        return job(JobStatus.RENDERING_VIDEO, video_request="s3://artifacts/jobs/j-1/video-request.multipart")


@pytest.fixture
def build_started(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    started = threading.Event()
    real_build = staging._build

    def build(*args: Any) -> Any:
        started.set()
        return real_build(*args)

    monkeypatch.setattr(staging, "_build", build)
    return started


def png() -> bytes:
    import pyvips

    return pyvips.Image.black(64, 64, bands=3).pngsave_buffer()


def test_the_request_is_built_while_the_staging_transition_is_written(build_started: threading.Event) -> None:
    jobs, artifacts = Jobs(build_started), Artifacts_()
    staged = staging.stage_video_request("j-1", png=png(), jobs=jobs, artifacts=artifacts, model_id="m",
                                         request=REQUEST)  # type: ignore[arg-type]  # fmt: skip
    assert jobs.build_running_during_transition is True
    assert artifacts.puts == ["jobs/j-1/video-request.multipart"]
    assert staged.content_type and staged.content_type.startswith("multipart/form-data; boundary=")
    # Recorded before GenerateImage's state ends: InvokeVideo, the next state, reads it from the job (issue 26).
    assert jobs.recorded == [
        {
            "artifacts": {
                "image": "s3://artifacts/jobs/j-1/image.png",
                "video_request": "s3://artifacts/jobs/j-1/video-request.multipart",
            }
        }
    ]


def test_a_build_for_a_job_already_rendering_is_discarded(build_started: threading.Event) -> None:
    jobs, artifacts = Jobs(build_started, conflict=True), Artifacts_()
    staged = staging.stage_video_request("j-1", png=png(), jobs=jobs, artifacts=artifacts, model_id="m",
                                         request=REQUEST)  # type: ignore[arg-type]  # fmt: skip
    assert staged.uri.endswith("video-request.multipart") and staged.content_type is None
    assert artifacts.puts == [] and jobs.recorded == []  # nothing staged twice
