"""Starting a batch: the batch record, then the fan-out's first work items on the batch queue.

A dropped ``prompts/*.jsonl`` file is counted here (its job lines are the batch's ``total``) and handed to the
splitter as one ``split`` message; the splitter (``batch_fanout.split_step``) reads the file in checkpointed steps.
A ``POST /batches`` body is small (<= 1,000 jobs) and already in memory: its lines go to the queue as chunks at once.
Both are idempotent: the batch id derives from the natural key (object version, or caller + Idempotency-Key), the
record is a conditional put, and re-sent work items are harmless (each line's job id derives from its line).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from omnireel.aws.batch_queue import BatchQueue
from omnireel.aws.batch_store import BatchStore
from omnireel.aws.inbox_store import InboxStore
from omnireel.batches.batch import MAX_API_JOBS, MAX_FILE_BYTES, MAX_LINE_BYTES, Line, batch_id_for, check_file
from omnireel.batches.record import Batch
from omnireel.core.clock import iso, now
from omnireel.core.errors import BatchIntakeFailed, IdempotencyConflict, InvalidRequest
from omnireel.core.ids import new_job_id
from omnireel.core.s3uri import SourceVersion


class BatchIntake:
    def __init__(self, store: BatchStore, queue: BatchQueue):
        self.store = store
        self.queue = queue

    def start_file_batch(
        self, *, bucket: str, key: str, version: SourceVersion, size: int | None, natural_key: str, inbox: InboxStore,
        owner: str | None = None, owner_arn: str | None = None, webhook: str | None = None,
    ) -> str:  # fmt: skip
        """A dropped file version -> its batch id (``InvalidRequest`` for a file that is not a readable batch).
        ``owner``/``webhook``: a file uploaded through POST /batches/uploads (``batches.uploads``) is its caller's."""
        if size is not None and size > MAX_FILE_BYTES:
            raise InvalidRequest(f"the batch file is larger than {MAX_FILE_BYTES} bytes ({size})")
        data = inbox.read(bucket, key, MAX_FILE_BYTES, version)
        total = check_file(data)
        stamp = iso(now())
        batch, created = self.store.create(
            Batch(
                batch_id=batch_id_for(natural_key),
                source=f"s3://{bucket}/{key}",
                source_version=version,
                owner=owner,
                owner_arn=owner_arn,
                natural_key=natural_key,
                webhook=webhook,
                created_at=stamp,
                updated_at=stamp,
                total=total,
                size=len(data),
            )
        )
        # A redelivered event (or a retry after a crash before the send) finds the splitter not started: start it.
        # Once it has moved, its own checkpoints carry it (a second start would be refused by the cursor check).
        if created or (batch.split_offset == 0 and not batch.split_done):
            self.queue.send_split(batch.batch_id, 0, 0)
        return batch.batch_id

    def start_api_batch(
        self,
        jobs: Any,
        *,
        owner: str,
        idempotency_key: str | None,
        webhook: str | None = None,
        owner_arn: str | None = None,
    ) -> tuple[Batch, bool]:
        """``POST /batches``: validate the envelope (each job is validated later, on its own line), record the
        batch and queue its lines. Returns (batch, created)."""
        if not isinstance(jobs, list) or not jobs:
            raise InvalidRequest('send {"jobs": [ ... ]} with 1 to 1000 job requests')
        if len(jobs) > MAX_API_JOBS:
            raise InvalidRequest(f"a batch has at most {MAX_API_JOBS} jobs ({len(jobs)} sent)")
        texts = [_job_text(job) for job in jobs]
        digest = hashlib.sha256("\n".join([webhook or "", *texts]).encode()).hexdigest()
        lines = [_api_line(n, text) for n, text in enumerate(texts, start=1)]
        natural_key = f"api:{owner}:batch:{idempotency_key}" if idempotency_key else f"api:{owner}:batch:{new_job_id()}"
        stamp = iso(now())
        batch, created = self.store.create(
            Batch(
                batch_id=batch_id_for(natural_key),
                source="api",
                owner=owner,
                owner_arn=owner_arn,
                natural_key=natural_key,
                fingerprint=digest,
                webhook=webhook,
                created_at=stamp,
                updated_at=stamp,
                total=len(lines),
            )
        )
        if not created and batch.fingerprint != digest:
            raise IdempotencyConflict(
                f"this idempotency key was already used for a different batch (batch {batch.batch_id})"
            )
        if not batch.split_done:  # a retry after a crash before the lines were queued queues them (again)
            try:
                self.queue.send_lines(batch.batch_id, lines, queued_at=int(time.time()))
            except Exception as exc:
                # The record exists and says so: the answer names it (503, retryable). Resent with the same
                # Idempotency-Key, the lines are queued again; otherwise the reconciler ends the batch after four
                # times BatchReconcileGraceSeconds, every line not yet submitted failing with its reason.
                raise BatchIntakeFailed(
                    f"batch {batch.batch_id} is recorded but its jobs could not all be queued ({type(exc).__name__}); "
                    "send the same request again with the same Idempotency-Key, or the batch completes with its "
                    "unqueued lines failed",
                    batch_id=batch.batch_id,
                ) from exc
            self.store.advance_split(batch.batch_id, offset=0, to_offset=0, to_line=len(lines), done=True)
            batch = self.store.find(batch.batch_id) or batch
        return batch, created


def _job_text(job: Any) -> str:
    """A POST /batches job as its line's text: UTF-8 as sent (the fingerprint's input). A job with a lone surrogate
    (JSON ``"\\ud800"``) is not UTF-8 text: it is kept ASCII-escaped, so the line reaches validation and is refused
    there as one failed job, instead of failing the whole request."""
    text = json.dumps(job, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(job)
    return text


def _api_line(number: int, text: str) -> Line:
    size = len(text.encode("utf-8"))
    if size > MAX_LINE_BYTES:  # the bound a dropped file's line has (batch.MAX_LINE_BYTES): its own failed job
        return Line(number, None, f"the job request is larger than {MAX_LINE_BYTES} bytes ({size})")
    return Line(number, text)
