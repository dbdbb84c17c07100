"""Turning a file dropped under prompts/ into a job (or into a failed job with a clear reason).

``accept_dropped_file`` is one S3 event record, first from S3 or again from the inbox retry queue: a drop whose caller
is at ``CallerMaxPendingJobs`` waits there with a growing delay (``wait_delay``), until a place is free or it has
waited ``BATCH_MAX_DEFERRAL_SECONDS``: then it fails with the reason (its job.failed), never silently.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import unquote_plus

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.batch_uploads import BatchUploads, Upload
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.inbox_retry import InboxRetryQueue
from omnireel.aws.inbox_store import InboxStore
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import Workflow
from omnireel.batches.intake import BatchIntake
from omnireel.batches.uploads import UPLOADS_PREFIX, upload_of
from omnireel.core.bounded import bounded
from omnireel.core.errors import InvalidRequest, SourceVersionGone, TooManyPendingJobs
from omnireel.core.ids import job_id_for
from omnireel.core.s3uri import SourceVersion
from omnireel.jobs.job import JobError, JobStatus
from omnireel.jobs.outcome import finish_job
from omnireel.jobs.request import JobRequest, parse_job_request, parse_job_request_json
from omnireel.jobs.submission import reject_submission, submit_job
from omnireel.runtime.observability import logger
from omnireel.webhooks.target import resolve_target

PREFIX = "prompts/"
MAX_FILE_BYTES = 64 * 1024
BATCH_SUFFIX = ".jsonl"  # one job request per line: a batch (batch_intake.py), up to batch.MAX_FILE_BYTES


@dataclass(frozen=True)
class InboxOutcome:
    key: str
    job_id: str
    status: str  # accepted | rejected | duplicate | ignored (folder markers) | waiting (its caller's pending limit)
    reason: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {"key": self.key, "job_id": self.job_id, "status": self.status, "reason": self.reason}


def parse_inbox_file(key: str, data: bytes, default_video_steps: int | None = None) -> JobRequest:
    """``.txt``: the whole file (UTF-8) is the prompt; ``.json``: a full job request (``.jsonl``: a batch)."""
    lowered = key.lower()
    if len(data) > MAX_FILE_BYTES:
        raise InvalidRequest(f"the file is larger than {MAX_FILE_BYTES} bytes")
    if not data.strip():
        raise InvalidRequest("the file is empty")
    if lowered.endswith(".json"):
        return parse_job_request_json(data.removeprefix(b"\xef\xbb\xbf"), default_video_steps=default_video_steps)
    if lowered.endswith(".txt"):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(f"the file is not UTF-8 text (byte {exc.start})") from exc
        return parse_job_request({"prompt": text.strip()}, default_video_steps=default_video_steps)
    raise InvalidRequest("unsupported file type: use .txt (a prompt), .json (a job request) or .jsonl (a batch)")


def inbox_natural_key(source: str, version: SourceVersion, sequencer: str) -> str:
    """The job's identity: one object version = one job. Two uploads of one key are two versions (two jobs); the
    same event delivered twice names the same version (one job). Without a version id (an unversioned bucket) each
    upload's event has its own ``sequencer``."""
    if version.version_id and version.version_id != "null":
        return f"inbox:{source}?versionId={version.version_id}"
    return f"inbox:{source}#{sequencer or version.etag or ''}"


def accept_inbox_object(
    *,
    bucket: str,
    key: str,
    version: SourceVersion,
    sequencer: str,
    size: int | None,
    inbox: InboxStore,
    jobs: JobStore,
    workflow: Workflow,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
    default_video_steps: int | None = None,
    allow_loopback_http: bool = False,
    batches: BatchIntake | None = None,
    uploads: BatchUploads | None = None,
    give_up_waiting: str | None = None,
) -> InboxOutcome:
    """Turn the object version one S3 event names into a job: read exactly that version (never "the key's latest"),
    so an overwrite that lands before the read cannot make this job run the newer file's prompt."""
    key = unquote_plus(key)
    if key.endswith("/") and not size:
        # A "folder" the S3 console creates (a 0-byte key ending in /) is not a submission.
        logger.info("inbox folder marker ignored", extra={"key": key})
        return InboxOutcome(key, "", "ignored", "a folder marker, not a file")
    source = f"s3://{bucket}/{key}"
    natural_key = inbox_natural_key(source, version, sequencer)
    upload: Upload | None = None
    try:
        if not key.startswith(PREFIX):
            raise InvalidRequest(f"files must be under {PREFIX}")
        if key.startswith(UPLOADS_PREFIX):  # POST /batches/uploads: the caller who reserved it owns it
            upload = upload_of(key, uploads)
        if key.lower().endswith(BATCH_SUFFIX):
            if batches is None:
                raise InvalidRequest("batch files (.jsonl) are not enabled here")
            batch_id = batches.start_file_batch(
                bucket=bucket, key=key, version=version, size=size, inbox=inbox,
                natural_key=upload.natural_key if upload else natural_key,
                owner=upload.owner if upload else None, webhook=upload.webhook if upload else None,
                owner_arn=upload.owner_arn if upload else None,
            )  # fmt: skip
            _tag(inbox, bucket, key, version, batch_id, "batch", None, id_tag="omnireel-batch-id")
            logger.info("inbox batch accepted", extra={"key": key, "batch_id": batch_id})
            return InboxOutcome(key, batch_id, "batch")
        if size is not None and size > MAX_FILE_BYTES:
            raise InvalidRequest(f"the file is larger than {MAX_FILE_BYTES} bytes ({size})")
        request = parse_inbox_file(key, inbox.read(bucket, key, MAX_FILE_BYTES, version), default_video_steps)
        if request.webhook:  # refused targets (SSRF checks) make a failed job, like any other bad request
            resolve_target(request.webhook, allow_loopback_http=allow_loopback_http)
        try:
            job, created = submit_job(
                request, source=source, source_version=version, natural_key=natural_key, jobs=jobs, workflow=workflow
            )
        except TooManyPendingJobs as exc:
            # Its caller (the inbox: omnireel.usage.limits) is at CallerMaxPendingJobs: the drop waits (the handler
            # takes it again later) until it has waited ``give_up_waiting`` says too long: then it fails, with why.
            if give_up_waiting:
                raise InvalidRequest(give_up_waiting, code=exc.code) from None
            job_id = job_id_for(natural_key)
            _tag(inbox, bucket, key, version, job_id, "waiting", exc.message)
            logger.info("inbox file waits for a pending place", extra={"key": key, "job_id": job_id})
            return InboxOutcome(key, job_id, "waiting", exc.message)
    except InvalidRequest as exc:
        reason = bounded(exc.message)
        job = reject_submission(
            natural_key=natural_key,
            source=source,
            source_version=version,
            error=JobError(stage="accept", code=exc.code, message=reason),
            jobs=jobs,
            owner=upload.owner if upload else None,  # an uploaded file that is no batch: its caller sees why
        )
        # Tag before the event goes out, so whoever receives job.failed finds the upload tagged too.
        if not isinstance(exc, SourceVersionGone):  # nothing of ours is left to tag
            _tag(inbox, bucket, key, version, job.job_id, "rejected", reason)
        finish_job(
            job.job_id,
            JobStatus.FAILED,
            step_error=None,
            jobs=jobs,
            artifacts=artifacts,
            publisher=publisher,
            presign_seconds=presign_seconds,
        )
        logger.warning("inbox file rejected", extra={"key": key, "job_id": job.job_id, "reason": reason})
        return InboxOutcome(key, job.job_id, "rejected", reason)
    _tag(inbox, bucket, key, version, job.job_id, "accepted", None)
    logger.info("inbox file accepted", extra={"key": key, "job_id": job.job_id, "new_job": created})
    return InboxOutcome(key, job.job_id, "accepted" if created else "duplicate")


def _tag(
    inbox: InboxStore,
    bucket: str,
    key: str,
    version: SourceVersion,
    job_id: str,
    status: str,
    reason: str | None,
    id_tag: str = "omnireel-job-id",
) -> None:
    tags = {id_tag: job_id, "omnireel-status": status}
    if reason:
        # S3 tag values: at most 256 characters of letters, digits, spaces and + - = . _ : / @
        tags["omnireel-reason"] = "".join(c if c.isalnum() or c in " +-=.:/@_" else " " for c in bounded(reason, 256))
    inbox.tag(bucket, key, version, tags)  # a courtesy: the job record and event are the truth


WAIT_BASE_S = 15
WAIT_MAX_S = 900  # SQS's longest DelaySeconds


def wait_delay(attempt: int) -> int:
    """How long a waiting drop waits before its next try: 15 s doubling to 15 min (``attempt`` counts from 1)."""
    return min(WAIT_MAX_S, WAIT_BASE_S * 2 ** max(0, min(attempt - 1, 10)))


def accept_dropped_file(
    record: dict,
    *,
    attempt: int,
    first_waited_at: int | None,
    retry: InboxRetryQueue | None,
    max_deferral_s: int,
    inbox: InboxStore,
    jobs: JobStore,
    workflow: Workflow,
    artifacts: ArtifactStore,
    publisher: EventPublisher,
    presign_seconds: int,
    default_video_steps: int | None = None,
    allow_loopback_http: bool = False,
    batches: BatchIntake | None = None,
    uploads: BatchUploads | None = None,
) -> InboxOutcome:
    """One S3 event record (the key still URL-encoded) after ``attempt`` waits (``first_waited_at``: epoch seconds of
    the first, None if it never waited): ``accept_inbox_object``; if its caller is at the pending limit, the record
    waits in the retry queue for ``wait_delay`` more. Without a retry queue, or after ``max_deferral_s`` of waiting,
    the drop fails with the reason instead."""
    waited = int(time.time()) - first_waited_at if first_waited_at else 0
    give_up = None
    if retry is None or waited > max_deferral_s:
        give_up = (
            f"its caller had CallerMaxPendingJobs jobs pending for {waited} s after the file was dropped "
            f"(it may wait {max_deferral_s} s: BatchMaxDeferralSeconds); drop it again"
        )
    s3 = record["s3"]
    obj = s3["object"]
    outcome = accept_inbox_object(
        bucket=s3["bucket"]["name"],
        key=obj["key"],
        version=SourceVersion(version_id=obj.get("versionId"), etag=obj.get("eTag") or None),
        sequencer=obj["sequencer"],
        size=int(obj["size"]),
        inbox=inbox,
        jobs=jobs,
        workflow=workflow,
        artifacts=artifacts,
        publisher=publisher,
        presign_seconds=presign_seconds,
        default_video_steps=default_video_steps,
        allow_loopback_http=allow_loopback_http,
        batches=batches,
        uploads=uploads,
        give_up_waiting=give_up,
    )
    if outcome.status == "waiting" and retry is not None:
        retry.wait(record, attempt=attempt + 1, first_waited_at=first_waited_at or int(time.time()),
                   delay_s=wait_delay(attempt + 1))  # fmt: skip
    return outcome
