"""Jobs through the HTTP API, prompt files through the inbox bucket, events through an SQS subscription."""

from __future__ import annotations

import mimetypes
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import job_options
from .api import calling
from .errors import InfraError, JobFailed, UsageError
from .progress import JobDisplay
from .target import Target

if TYPE_CHECKING:
    from omnireel_client import Job

TERMINAL = {"succeeded", "failed", "cancelled", "expired"}
STAGES = (("image_s", "image"), ("staging_s", "staging"), ("video_queue_and_render_s", "video (queue + render)"))


def build_request(prompt: str, *, frames: int | None = None, steps: int | None = None, size: str | None = None,
                  seed: int | None = None, fps: int | None = None, image_size: str | None = None,
                  image_steps: int | None = None, video_prompt: str | None = None,
                  video_negative_prompt: str | None = None) -> dict[str, Any]:  # fmt: skip
    """A POST /jobs body for callers in code (smoke); the CLI's flags go through ``job_options``."""
    width = height = None
    if size:
        try:
            width, height = (int(x) for x in size.lower().split("x"))
        except ValueError as exc:
            raise UsageError(f"--size must look like 480x320, got {size!r}") from exc
    values = {
        ("seed",): seed,
        ("image", "size"): image_size,
        ("image", "num_inference_steps"): image_steps,
        ("video", "width"): width,
        ("video", "height"): height,
        ("video", "num_frames"): frames,
        ("video", "num_inference_steps"): steps,
        ("video", "fps"): fps,
        ("video", "prompt"): video_prompt,
        ("video", "negative_prompt"): video_negative_prompt,
    }
    return job_options.build_request(prompt, values)


def new_idempotency_key() -> str:
    """A fresh key per submit: the client retries POST /jobs on 5xx and timeouts with the same key, so a retry whose
    first attempt did reach the API is the same job, not a second one."""
    return f"cli-{uuid.uuid4()}"


def submit(target: Target, request: dict[str, Any], idempotency_key: str | None = None) -> Job:
    """POST /jobs with an Idempotency-Key (``idempotency_key`` or a generated one: ``job.idempotency_key``)."""
    with calling(target, "the job was not accepted"):
        return target.api_client.submit(**request, idempotency_key=idempotency_key or new_idempotency_key())


def accepted_view(job: Job) -> dict[str, Any]:
    """What ``omnireel submit --json`` prints: the API's 202 answer and the idempotency key it was sent with."""
    return {**job.raw, "idempotency_key": job.idempotency_key}


def get_job(target: Target, job_id: str) -> Job:
    with calling(target, f"cannot read job {job_id}"):
        return target.api_client.job(job_id)


def wait(target: Target, job: Job | str, timeout: float, quiet: bool = False) -> Job:
    """Follow the job until it is terminal (bounded by ``timeout``), showing its stages (``progress.JobDisplay``)."""
    from omnireel_client import WaitTimeout

    job = get_job(target, job) if isinstance(job, str) else job
    display = JobDisplay(job.job_id, enabled=not quiet)
    try:
        with calling(target, f"cannot follow job {job.job_id}"):
            return job.wait(timeout, on_progress=display.update)
    except WaitTimeout as exc:
        raise InfraError(f"job {job.job_id} is still {exc.last.status} after {timeout:.0f} s (--timeout)") from None
    finally:
        display.close()


def describe(job: Job) -> list[str]:
    lines = [f"job {job.job_id}: {job.status}"]
    for key, label in STAGES:
        if job.timings.get(key) is not None:
            lines.append(f"  {label:<24} {job.timings[key]:7.2f} s")
    if job.timings.get("total_s") is not None:
        lines.append(f"  {'total':<24} {job.timings['total_s']:7.2f} s")
    for name, artifact in job.artifacts.items():
        lines.append(f"  {name:<24} {artifact.s3_uri}")
    version = job.raw.get("source_version")
    if version:
        lines.append(f"  source {job.source} (version {version.get('version_id') or version.get('etag')})")
    if job.error:
        lines.append(f"  error: [{job.error.stage}] {job.error.code}: {job.error.message}")
    usage = job.raw.get("usage")
    if isinstance(usage, dict):  # issue 34 item 8: a finished job's usage, an estimate
        cost = usage.get("estimated_cost_usd")
        seconds = ", ".join(f"{k} {usage[f'{k}_seconds']} s" for k in ("queue", "image", "video")
                            if usage.get(f"{k}_seconds") is not None)  # fmt: skip
        price = f"~${cost:.4f} (estimate: model time only)" if isinstance(cost, int | float) else "cost not priced"
        lines.append(f"  usage: {seconds}; {price}")
    return lines


def failure_line(job: Job) -> str:
    error = job.error
    where = f" at {error.stage}: {error.code}: {error.message}" if error else ""
    return f"job {job.job_id} {'failed' if job.status == 'failed' else job.status}{where}"


def download(target: Target, job: Job, directory: Path, names: tuple[str, ...] = ("image", "video")) -> dict[str, Path]:
    """Download the job's image and video (presigned URLs from the API) into ``directory``."""
    with calling(target, f"cannot download the files of job {job.job_id}"):
        return job.download(directory, names)


# ---------------------------------------------------------------- inbox
INBOX_PREFIX = "prompts/"  # the inbox bucket's S3 trigger (template.yaml) and omnireel.jobs.inbox.PREFIX
INBOX_SUFFIXES = (".txt", ".json")  # what omnireel.jobs.inbox.parse_inbox_file reads (a unit test keeps them equal)


def check_drop(file: Path, key: str | None) -> str:
    """The object key for ``file``, or a UsageError before anything is uploaded: a file the inbox would reject for
    its type (or a key its trigger never sees) is refused here rather than made into a failed job."""
    if not file.is_file():
        raise UsageError(f"no such file: {file}")
    key = key or f"{INBOX_PREFIX}{file.name}"
    if not key.startswith(INBOX_PREFIX) or key == INBOX_PREFIX:
        raise UsageError(f"--key must be under {INBOX_PREFIX} (the inbox only reads keys there), got {key!r}")
    if not key.lower().endswith(INBOX_SUFFIXES):
        raise UsageError(
            f"unsupported file type {Path(key).suffix or '(none)'!r}: the inbox reads .txt (the file is the prompt) "
            "or .json (a full job request), and a .jsonl batch with `omnireel batch FILE`; nothing was uploaded"
        )
    return key


def drop(target: Target, file: Path, key: str | None = None, *, checked: bool = False) -> tuple[str, str | None]:
    """Upload the file; returns its S3 URI and the version the upload created (None in an unversioned bucket).
    ``checked``: the caller has validated ``key`` itself (``omnireel batch`` uploads .jsonl files)."""
    key = key if checked and key else check_drop(file, key)
    bucket = target.output("InboxBucketName")
    content_type = "application/json" if file.suffix == ".json" else mimetypes.guess_type(file.name)[0] or "text/plain"
    try:
        put = target.client("s3").put_object(Bucket=bucket, Key=key, Body=file.read_bytes(), ContentType=content_type)
    except Exception as exc:
        raise InfraError(f"cannot upload {file} to s3://{bucket}/{key}: {exc}") from exc
    return f"s3://{bucket}/{key}", put.get("VersionId")


def job_of_dropped(target: Target, uri: str, timeout: float, version_id: str | None = None) -> tuple[str, str]:
    """The job id (and inbox status) the inbox function tagged the dropped object version with: this upload's job,
    even if the key has been overwritten since (each upload is a version, and a job, of its own)."""
    bucket, _, key = uri[5:].partition("/")
    s3 = target.client("s3")
    version = {"VersionId": version_id} if version_id and version_id != "null" else {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tagging = s3.get_object_tagging(Bucket=bucket, Key=key, **version)
        tags = {t["Key"]: t["Value"] for t in tagging.get("TagSet", [])}
        if "omnireel-job-id" in tags:
            return tags["omnireel-job-id"], tags.get("omnireel-status", "")
        time.sleep(0.3)
    raise InfraError(f"{uri} was not picked up by the inbox function within {timeout:.0f} s")


def list_jobs(target: Target, status: str | None, limit: int | None, cursor: str | None) -> Any:
    """One page of GET /jobs (the caller's jobs, newest first): ``omnireel_client.JobPage``."""
    with calling(target, "cannot list jobs"):
        return target.api_client.jobs_page(status, limit=limit, cursor=cursor)


def cancel(target: Target, job_id: str) -> Job:
    """DELETE /jobs/{id}; ``job.cancellation`` says what was stopped (``already``: it had been cancelled before). A
    job that had succeeded or failed is an error."""
    with calling(target, f"cannot cancel job {job_id}"):
        return target.api_client.cancel(job_id)


def raise_if_failed(job: Job) -> None:
    if job.status in ("failed", "cancelled"):
        raise JobFailed(failure_line(job))
