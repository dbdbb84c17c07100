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
    with calling(target, "the batch was not accepted"):
        batch = target.api_client.submit_batch(jobs, idempotency_key=new_idempotency_key())
    return {**batch.raw, "source": "api", "idempotency_key": batch.idempotency_key}


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
