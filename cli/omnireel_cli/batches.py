"""Batches: a JSONL file of job requests, dropped into the inbox (or sent as POST /batches), and its progress."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .api import calling
from .errors import InfraError, JobFailed, UsageError
from .jobs import INBOX_PREFIX, drop, new_idempotency_key
from .progress import BatchDisplay
from .target import Target

if TYPE_CHECKING:
    from omnireel_client import Batch

MAX_API_JOBS = 1000
LAMBDA_MAX_REQUEST_BYTES = 6 * 1024 * 1024  # a Lambda request: the API's event, the body inside it
API_EVENT_HEADROOM = 64 * 1024  # the event's other fields: headers, request context


def submit_file(target: Target, file: Path, *, via_api: bool, key: str | None = None) -> dict[str, Any]:
    """Start a batch from ``file``: through the inbox (the default: up to 10,000 lines / 10 MB, line numbers are the
    file's) or through ``POST /batches`` (up to 1,000 lines; every non-blank line must be JSON)."""
    if not file.is_file():
        raise UsageError(f"no such file: {file}")
    if not via_api:
        key = key or f"{INBOX_PREFIX}{file.name}"
        if not key.startswith(INBOX_PREFIX) or not key.lower().endswith(".jsonl"):
            raise UsageError(
                f"a batch is dropped as {INBOX_PREFIX}<name>.jsonl (one JSON job request per line), got {key!r}"
            )
        uri, version_id = drop(target, file, key, checked=True)
        return {"batch_id": batch_of_dropped(target, uri, version_id, timeout=60), "source": uri}
    jobs = []
    for number, line in enumerate(file.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            jobs.append(json.loads(line))
        except ValueError as exc:
            raise UsageError(f"{file}:{number}: not JSON ({exc}); drop the file instead to get a failed job") from exc
    if len(jobs) > MAX_API_JOBS:
        raise UsageError(f"POST /batches takes at most {MAX_API_JOBS} jobs ({len(jobs)}): drop the file instead")
    # Inside the Lambda event the body is a JSON string (its quotes escaped): over Lambda's 6 MB the API answers 413,
    # so such a file goes through POST /batches/uploads (a presigned PUT, no S3 credentials needed) instead.
    if len(json.dumps(json.dumps({"jobs": jobs}))) + API_EVENT_HEADROOM > LAMBDA_MAX_REQUEST_BYTES:
        return upload_file(target, file)
    with calling(target, "the batch was not accepted"):
        batch = target.api_client.submit_batch(jobs, idempotency_key=new_idempotency_key())
    return {**batch.raw, "source": "api", "idempotency_key": batch.idempotency_key}


def upload_file(target: Target, file: Path, timeout: float = 60) -> dict[str, Any]:
    """``POST /batches/uploads``, then the file PUT to the presigned URL with plain HTTP; returns once the batch exists
    (the inbox function made it from the upload), or raises with why the file was refused."""
    import urllib.error
    import urllib.request

    from omnireel_client import NotFoundError

    data = file.read_bytes()
    with calling(target, "the batch upload was not accepted"):
        answer = target.api_client.transport.request("POST", "/batches/uploads", {"size": len(data)}, ok=(201,)).body
    upload = answer["upload"]
    if not str(upload["url"]).startswith(("https://", "http://")):
        raise InfraError(f"the API answered an upload URL that is not http(s): {str(upload['url'])[:80]!r}")
    request = urllib.request.Request(upload["url"], data=data, method=upload["method"], headers=upload["headers"])  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - the API's presigned URL
            response.read()
    except urllib.error.HTTPError as exc:
        raise InfraError(f"the upload of {file} was refused: HTTP {exc.code} {exc.read()[:300]!r}") from exc
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with calling(target, f"cannot read batch {answer['batch_id']}"):
            try:
                batch = target.api_client.batch(answer["batch_id"])
                return {**batch.raw, "upload_id": answer["upload_id"]}
            except NotFoundError:
                pass  # not made yet: the inbox function has not read the file
        time.sleep(0.5)
    raise InfraError(f"batch {answer['batch_id']} did not appear within {timeout:.0f} s of the upload (a file that is "
                     "no batch becomes a failed job: omnireel jobs --status failed)")  # fmt: skip


def batch_of_dropped(target: Target, uri: str, version_id: str | None, timeout: float) -> str:
    """The batch id the inbox function tagged the dropped version with (or the reason it refused the file)."""
    bucket, _, key = uri[5:].partition("/")
    s3 = target.client("s3")
    version = {"VersionId": version_id} if version_id and version_id != "null" else {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tags = {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=bucket, Key=key, **version)["TagSet"]}
        if "omnireel-batch-id" in tags:
            return tags["omnireel-batch-id"]
        if tags.get("omnireel-status") == "rejected":
            reason, job = tags.get("omnireel-reason", ""), tags.get("omnireel-job-id")
            raise UsageError(f"{uri} was refused: {reason} (job {job})")
        time.sleep(0.3)
    raise InfraError(f"{uri} was not picked up by the inbox function within {timeout:.0f} s")


def get_batch(target: Target, batch_id: str) -> Batch:
    with calling(target, f"cannot read batch {batch_id}"):
        return target.api_client.batch(batch_id)


def wait(target: Target, batch_id: str, timeout: float, quiet: bool = False) -> Batch:
    """Follow the batch until it is completed (every job terminal and batch.completed published), bounded by
    ``timeout``, showing its counts (``progress.BatchDisplay``)."""
    from omnireel_client import WaitTimeout

    display = BatchDisplay(batch_id, enabled=not quiet)
    try:
        with calling(target, f"cannot follow batch {batch_id}"):
            return get_batch(target, batch_id).wait(timeout, on_progress=display.update)
    except WaitTimeout:
        raise InfraError(f"batch {batch_id} is still running after {timeout:.0f} s (--timeout)") from None
    finally:
        display.close()


def describe(batch: Batch) -> list[str]:
    counts = batch.raw.get("counts") or {}
    lines = [f"batch {batch.batch_id}: {batch.status} ({batch.source})"]
    lines.append("  " + "  ".join(f"{name} {counts[name]}" for name in counts))
    if batch.manifest:
        lines.append(f"  manifest {batch.manifest.s3_uri}")
    return lines


def raise_if_failed(batch: Batch) -> None:
    counts = batch.counts
    if batch.done and counts.failed + counts.cancelled:
        raise JobFailed(
            f"batch {batch.batch_id}: {counts.failed} failed, {counts.cancelled} cancelled of "
            f"{counts.total} (the manifest lists each line's job and reason)"
        )
