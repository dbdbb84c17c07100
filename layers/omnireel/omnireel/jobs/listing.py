"""Listing a caller's jobs (``GET /jobs``): newest first, through the owner index, paginated by an opaque cursor.

The cursor carries only the position (the last job's ``created_at`` and id) and the status filter, never the owner:
the next page is always read under the caller's own owner key, so a cursor copied from another caller can only move
within the reader's own jobs. Anything that is not a cursor this API could have made is ``InvalidCursor``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from omnireel.aws.job_store import JobStore
from omnireel.core.errors import InvalidCursor, InvalidRequest
from omnireel.jobs.job import Job, JobStatus

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
_JOB_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_MAX_CURSOR_CHARS = 512


def parse_list_query(params: dict[str, str] | None) -> tuple[JobStatus | None, int, str | None]:
    params = params or {}
    unknown = sorted(set(params) - {"status", "limit", "cursor"})
    if unknown:
        raise InvalidRequest(f"unknown query parameter {unknown[0][:64]!r}: use status, limit, cursor")
    status = None
    if params.get("status"):
        try:
            status = JobStatus(params["status"])
        except ValueError:
            choices = ", ".join(s.value for s in JobStatus)
            raise InvalidRequest(f"status must be one of {choices}") from None
    limit = DEFAULT_LIMIT
    if params.get("limit") is not None:
        text = params["limit"]
        if not text.isascii() or not text.isdigit() or not 1 <= int(text[:4]) <= MAX_LIMIT or len(text) > 3:
            raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIMIT}")
        limit = int(text)
    return status, limit, params.get("cursor") or None


def encode_cursor(position: tuple[str, str], status: JobStatus | None) -> str:
    created_at, job_id = position
    raw = json.dumps({"c": created_at, "j": job_id, "s": status.value if status else ""}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, status: JobStatus | None) -> tuple[str, str]:
    """(created_at, job_id) of the position a cursor names; ``InvalidCursor`` for anything else."""
    try:
        if len(cursor) > _MAX_CURSOR_CHARS:
            raise ValueError("too long")
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        created_at, job_id, filtered = data["c"], data["j"], data["s"]
        if set(data) != {"c", "j", "s"} or not (_TIME.match(created_at) and _JOB_ID.match(job_id)):
            raise ValueError("not a position")
    except (ValueError, TypeError, KeyError, binascii.Error, UnicodeDecodeError):
        raise InvalidCursor("cursor is not one this API returned: pass next_cursor unchanged") from None
    if filtered != (status.value if status else ""):
        raise InvalidCursor("cursor belongs to another status filter: list again without it")
    return created_at, job_id


def list_jobs(
    owner: str, status: JobStatus | None, limit: int, cursor: str | None, *, jobs: JobStore
) -> tuple[list[Job], str | None]:
    """A page of the owner's jobs, newest first, and the cursor of the next page (None at the end)."""
    start = decode_cursor(cursor, status) if cursor else None
    page, position = jobs.list_owned(owner, status, limit, start)
    return page, (encode_cursor(position, status) if position else None)


def job_summary(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "status": job.status.value,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "prompt": job.request.prompt if job.request else None,
        "status_url": f"/jobs/{job.job_id}",
    }
