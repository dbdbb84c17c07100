"""HTTP API (IAM auth): POST /jobs submits a prompt, GET /jobs/{job_id} reports a job, GET /jobs lists the caller's
jobs, DELETE /jobs/{job_id} cancels one, GET /webhooks/secret serves the caller's own webhook signing secret; POST
/batches submits up to 1,000 jobs at once, GET /batches/{batch_id} reports their counts and, once complete, the
manifest.

An ``Idempotency-Key`` header makes retries return the same job: the job id is derived from the
caller's scope (``omnireel.core.caller``: the user's or the role's unique id, or the session's) and the key, and a
reused key with a different body is a 409. Routes read as the happy path: they raise domain errors, and one
exception handler maps each to its status through one table, ``ERROR_STATUS`` (400, 403, 404, 409; 500 for a job whose
execution name is taken; 503 while a batch's intake or the signing key is unavailable), with a bounded message
(``omnireel.core.bounded``).
"""

import base64
import json
import re
from datetime import UTC, datetime

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.admission.gate import Gate
from omnireel.aws import adapters
from omnireel.batches.intake import BatchIntake
from omnireel.batches.progress import batch_view
from omnireel.batches.uploads import start_upload
from omnireel.core.bounded import MAX_ECHO_CHARS, bounded
from omnireel.core.caller import caller_scope
from omnireel.core.errors import (
    ArtifactAccessDenied,
    BatchIntakeFailed,
    BatchNotFound,
    ExecutionNameTaken,
    IdempotencyConflict,
    InvalidRequest,
    JobConflict,
    JobFinished,
    JobNotFound,
    NotJobOwner,
    OmnireelError,
    PublishFailed,
    SigningKeyUnavailable,
    TooManyPendingJobs,
    WebhookOwnerUnknown,
)
from omnireel.jobs.cancellation import cancel_job, cancellation_view
from omnireel.jobs.job import Job
from omnireel.jobs.job_view import job_view, terminal_event_view
from omnireel.jobs.listing import job_summary, list_jobs, parse_list_query
from omnireel.jobs.request import check_webhook_url, parse_job_request_json
from omnireel.jobs.submission import submit_api_job
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, logger, metrics
from omnireel.runtime.settings import ApiSettings
from omnireel.usage.limits import RETRY_AFTER_S, ratelimit_fields
from omnireel.usage.report import parse_usage_query, usage_report
from omnireel.webhooks.signing import secret_view
from omnireel.webhooks.submit_check import check_webhook_target

settings = ApiSettings.from_env()
jobs = adapters.job_store(settings)
artifacts = adapters.artifact_store(settings)
workflow = adapters.workflow(settings)
publisher = adapters.event_publisher(settings)
batch_store = adapters.batch_store(settings) if settings.batches_table else None
batches = BatchIntake(batch_store, adapters.batch_queue(settings)) if batch_store and settings.batch_queue_url else None
master_key = adapters.webhook_master_key(settings)
# admission (issue 34): a waiting job's queue position; a cancel takes the job out of the queue and frees its slots
gate = Gate(store=adapters.admission_store(settings), jobs=jobs, callbacks=adapters.task_callbacks())
# Per-caller accounting (omnireel.usage): the pending counters behind RateLimit and 429, and GET /usage's days.
usage = adapters.usage_store(settings)
# POST /batches/uploads: presigned PUTs to the inbox bucket's prompts/uploads/ (reservations in the batches table).
uploads = adapters.batch_uploads(settings) if batches and settings.batches_table and settings.inbox_bucket else None
app = APIGatewayHttpResolver()

_IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:~-]{1,128}$")
_JOB_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _error(status: int, code: str, message: str) -> Response:
    return Response(status, content_types.APPLICATION_JSON, {"error": {"code": code, "message": bounded(message)}})


def _idempotency_key() -> str | None:
    key = app.current_event.headers.get("idempotency-key")
    if key is not None and not _IDEMPOTENCY_KEY.match(key):
        raise InvalidRequest(
            "Idempotency-Key must be 1-128 characters of [A-Za-z0-9._:~-]", code="InvalidIdempotencyKey"
        )
    return key


def _body() -> str | bytes | None:
    """The request body; bytes when API Gateway base64-encoded it (the parsers report invalid UTF-8 as a 400)."""
    body: str | bytes | None = app.current_event.body
    if body and app.current_event.is_base64_encoded:
        body = base64.b64decode(body)
    return body


def _caller() -> str:
    """The caller's scope (``omnireel.core.caller``): its unique id, per role or per session (``CallerScope``)."""
    iam = app.current_event.request_context.authorizer.iam
    scope = caller_scope(
        iam.user_id, user_arn=iam.user_arn, per=settings.caller_scope, cognito_identity_id=iam.cognito_identity_id
    )
    if not scope:  # handler() refuses such a request before routing
        raise RuntimeError("the request has no IAM userId")
    return scope


def _caller_arn() -> str | None:
    """Who submitted, for people reading the record (``owner_arn``): the ARN API Gateway reports. Never a key."""
    return app.current_event.request_context.authorizer.iam.user_arn or None


@app.post("/jobs")
def create_job() -> Response:
    key = _idempotency_key()
    body = _body()
    if not body:
        raise InvalidRequest("the request body is empty: send a JSON object with at least a prompt")
    request = parse_job_request_json(body, default_video_steps=settings.default_video_steps)
    if request.webhook:  # where it may be sent (https, public addresses only), its DNS lookup bounded (submit_check)
        check_webhook_target(request.webhook, allow_loopback_http=settings.webhook_allow_loopback_http)
    # A job whose execution name is taken is failed there (ExecutionNameTaken, mapped below).
    job, created = submit_api_job(
        request,
        owner=_caller(),
        owner_arn=_caller_arn(),
        idempotency_key=key,
        jobs=jobs,
        workflow=workflow,
        artifacts=artifacts,
        publisher=publisher,
        presign_seconds=settings.presign_seconds,
    )
    if created:
        metrics.add_metric(name="jobs_accepted", unit=MetricUnit.Count, value=1)
    status_url = f"/jobs/{job.job_id}"
    return Response(
        202,
        content_types.APPLICATION_JSON,
        {"job_id": job.job_id, "status": job.status.value, "status_url": status_url},
        headers={"Location": status_url, "Idempotent-Replayed": "false" if created else "true"},
    )


def _visible_job(job_id: str) -> Job:
    """The job if this caller may see it. A job submitted through the API is visible to its submitter only (inbox
    drops have no owner): another caller gets the same 404 as for an unknown id, so ids reveal nothing."""
    if not _JOB_ID.match(job_id):
        raise JobNotFound(f"no job with id {bounded(job_id, MAX_ECHO_CHARS)}")
    job = jobs.find(job_id)
    if job is None or (job.owner is not None and job.owner != _caller()):
        raise JobNotFound(f"no job with id {job_id}")
    return job


@app.get("/usage")
def get_usage() -> Response:
    """The caller's own usage per UTC day (``from``/``to``, bounded), its pending jobs and its limit."""
    if usage is None:
        raise JobNotFound("usage accounting is not enabled on this stack", code="NotFound")
    first, last = parse_usage_query(app.current_event.query_string_parameters)
    report = usage_report(_caller(), first, last, store=usage, limit=settings.caller_max_pending_jobs)
    return Response(200, content_types.APPLICATION_JSON, report, headers={"Cache-Control": "no-store"})


@app.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response:
    job = _visible_job(job_id)
    return Response(200, content_types.APPLICATION_JSON, job_view(job, artifacts, settings.presign_seconds, gate))


@app.get("/jobs/<job_id>/event")
def get_job_event(job_id: str) -> Response:
    event = terminal_event_view(_visible_job(job_id), artifacts, settings.presign_seconds)
    return Response(200, content_types.APPLICATION_JSON, event)


@app.get("/jobs")
def list_caller_jobs() -> Response:
    status, limit, cursor = parse_list_query(app.current_event.query_string_parameters)
    page, next_cursor = list_jobs(_caller(), status, limit, cursor, jobs=jobs)
    body = {"jobs": [job_summary(job) for job in page], "next_cursor": next_cursor}
    return Response(200, content_types.APPLICATION_JSON, body)


@app.delete("/jobs/<job_id>")
def delete_job(job_id: str) -> Response:
    job = _visible_job(job_id)
    if job.owner is None:  # a dropped file's job is visible to every caller and cancellable by none
        raise NotJobOwner("a job made from a dropped file has no owner and cannot be cancelled")
    cancelled = cancel_job(
        job, jobs=jobs, workflow=workflow, artifacts=artifacts, publisher=publisher,
        presign_seconds=settings.presign_seconds, gate=gate,
    )  # fmt: skip
    metrics.add_metric(name="jobs_cancelled", unit=MetricUnit.Count, value=1)
    return Response(200, content_types.APPLICATION_JSON, cancellation_view(cancelled))


@app.get("/webhooks/secret")
def webhook_secret() -> Response:
    """The caller's own whsec_ secret (derived from the master key and the caller's scope): it signs the deliveries of
    the caller's jobs and batches, and no other caller's (Standard Webhooks). During a rotation, also the previous one
    and when it stops signing, which of them sign a delivery made now (``signing``) and from when the new one does
    (``secret_signs_from``: once every function has read the rotation, omnireel.webhooks.secrets). Never cached by
    intermediaries."""
    body = secret_view(master_key.keys(), _caller(), datetime.now(UTC))
    return Response(200, content_types.APPLICATION_JSON, body, headers={"Cache-Control": "no-store"})


def _json_object(what: str) -> dict:
    body = _body()
    try:
        data = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidRequest(what)
    return data


def _batch_webhook(data: dict) -> str | None:
    """batch.completed's webhook, if any: checked as a job's (omnireel.webhooks.target)."""
    webhook = data.get("webhook")
    if webhook is not None:
        if not isinstance(webhook, str):
            raise InvalidRequest("webhook: must be an https:// URL")
        try:
            check_webhook_url(webhook)
        except ValueError as exc:
            raise InvalidRequest(f"webhook: {exc}") from None
        check_webhook_target(webhook, allow_loopback_http=settings.webhook_allow_loopback_http)
    return webhook


@app.post("/batches/uploads")
def create_batch_upload() -> Response:
    """A batch larger than a Lambda request (6 MB): a presigned PUT URL for the JSONL file (``batches.uploads``),
    which then runs as a dropped file owned by this caller."""
    if uploads is None:
        raise BatchNotFound("batch uploads are not enabled on this stack", code="NotFound")
    usage = 'send {"size": the JSONL file\'s exact bytes} (and optionally "webhook": a URL for batch.completed)'
    data = _json_object(usage)
    if "size" not in data or not set(data) <= {"size", "webhook"}:
        raise InvalidRequest(usage)
    answer = start_upload(owner=_caller(), owner_arn=_caller_arn(), size=data["size"], webhook=_batch_webhook(data),
                          uploads=uploads)  # fmt: skip
    metrics.add_metric(name="batch_uploads_issued", unit=MetricUnit.Count, value=1)
    return Response(201, content_types.APPLICATION_JSON, answer, headers={"Cache-Control": "no-store"})


@app.post("/batches")
def create_batch() -> Response:
    if batches is None:
        raise BatchNotFound("batches are not enabled on this stack", code="NotFound")
    key = _idempotency_key()
    body = _body()
    try:
        data = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict) or "jobs" not in data or not set(data) <= {"jobs", "webhook"}:
        raise InvalidRequest('send {"jobs": [ ... ]} (and optionally "webhook": a URL for batch.completed)')
    webhook = _batch_webhook(data)
    # InvalidRequest (400) and IdempotencyConflict (409) reach the exception handlers below.
    batch, created = batches.start_api_batch(
        data["jobs"], owner=_caller(), owner_arn=_caller_arn(), idempotency_key=key, webhook=webhook
    )
    if created:
        metrics.add_metric(name="batches_accepted", unit=MetricUnit.Count, value=1)
    status_url = f"/batches/{batch.batch_id}"
    return Response(
        202,
        content_types.APPLICATION_JSON,
        {"batch_id": batch.batch_id, "status": batch.status, "total": batch.total, "status_url": status_url},
        headers={"Location": status_url, "Idempotent-Replayed": "false" if created else "true"},
    )


@app.get("/batches/<batch_id>")
def get_batch(batch_id: str) -> Response:
    found = batch_store.find(batch_id) if batch_store and _JOB_ID.match(batch_id) else None
    # As for jobs: an API batch is visible to its submitter only; another caller gets the same 404 as an unknown id.
    if found is None or (found.owner is not None and found.owner != _caller()):
        raise BatchNotFound(f"no batch with id {bounded(batch_id, MAX_ECHO_CHARS)}")
    return Response(200, content_types.APPLICATION_JSON, batch_view(found, artifacts, settings.presign_seconds))


# One error -> status table: every domain error a route may raise, and its status. A subclass takes its nearest
# listed ancestor's status (tests/unit/architecture/test_boundaries.py: every error a route can raise is covered,
# derived from the code).
ERROR_STATUS: dict[type[OmnireelError], int] = {
    InvalidRequest: 400,
    NotJobOwner: 403,
    JobNotFound: 404,
    BatchNotFound: 404,
    IdempotencyConflict: 409,
    TooManyPendingJobs: 429,  # CallerMaxPendingJobs: Retry-After, and the RateLimit fields say r=0
    JobFinished: 409,  # the cancel came after the job had ended: the body names its status
    ExecutionNameTaken: 500,  # the job is recorded but can never start under its name: failed now, the body names it
    BatchIntakeFailed: 503,  # the batch is recorded (GET /batches/{id} shows it) and ends completed either way
    SigningKeyUnavailable: 503,  # GET /webhooks/secret while the master key cannot be read (docs/operations.md)
    JobConflict: 409,  # the job changed under the request (a cancel racing the job's own end)
    PublishFailed: 503,  # the event could not be published: the request may be retried
    ArtifactAccessDenied: 500,  # the function may not read an artifact: an operator's problem (docs/operations.md)
    WebhookOwnerUnknown: 500,
    OmnireelError: 500,  # any other domain error: still a JSON body with its code, never a bare 500
}


def status_of(exc: OmnireelError) -> int:
    return next(ERROR_STATUS[cls] for cls in type(exc).__mro__ if cls in ERROR_STATUS)


@app.exception_handler(list(ERROR_STATUS))
def domain_error(exc: OmnireelError) -> Response:
    """Every domain error a route raises: ``{"error": {"code", "message"}}`` with its status from ``ERROR_STATUS``,
    and, for the errors that name a resource, where it stands. It maps errors and starts nothing (the use cases
    already did what an error calls for: tests/unit/architecture/test_handlers_only_wire.py)."""
    error: dict[str, object] = {"code": exc.code, "message": bounded(exc.message)}
    if isinstance(exc, InvalidRequest) and exc.problems:
        error["problems"] = exc.problems  # each problem as {"field", "message"}, within a byte budget
        if exc.problems_omitted:
            error["problems_omitted"] = exc.problems_omitted
    body: dict[str, object] = {"error": error}
    headers: dict[str, str] = {"Retry-After": "5"} if status_of(exc) == 503 else {}
    if isinstance(exc, TooManyPendingJobs):
        headers["Retry-After"] = str(RETRY_AFTER_S)
    if isinstance(exc, JobFinished):
        body["status"] = exc.status
    elif isinstance(exc, ExecutionNameTaken):  # submit_api_job failed the job already: the body says so
        body.update(job_id=exc.job_id, status="failed")
    elif isinstance(exc, BatchIntakeFailed):
        body["batch_id"] = exc.batch_id
        headers["Location"] = f"/batches/{exc.batch_id}"
    return Response(status_of(exc), content_types.APPLICATION_JSON, body, headers=headers or None)


@app.not_found
def not_found(exc: Exception) -> Response:
    return _error(404, "NotFound", bounded(str(exc), MAX_ECHO_CHARS) or "no such route")


@lambda_handler(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def handler(event: dict, context: LambdaContext) -> dict:
    # API Gateway (AWS_IAM) always sets the caller and its unique id; without them, refuse rather than guess a scope.
    if not ((((event.get("requestContext") or {}).get("authorizer") or {}).get("iam")) or {}).get("userId"):
        body = {"error": {"code": "MissingIdentity", "message": "the request has no IAM identity (sign it with SigV4)"}}
        return {"statusCode": 403, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}
    answer = app.resolve(event, context)
    if usage is not None and _is_submission(event):
        answer["headers"] = {**(answer.get("headers") or {}), **_ratelimit(answer.get("statusCode"))}
    return answer


def _is_submission(event: dict) -> bool:
    http = (event.get("requestContext") or {}).get("http") or {}
    return http.get("method") == "POST" and (event.get("rawPath") or http.get("path")) == "/jobs"


def _ratelimit(status: object) -> dict[str, str]:
    """Every POST /jobs answer says the caller's pending-jobs quota and what is left of it (IETF RateLimit fields,
    omnireel.usage.limits): after a 429 nothing is left; otherwise the counter as it is now (one read)."""
    assert usage is not None
    limit = settings.caller_max_pending_jobs
    try:
        pending = limit if status == 429 else usage.pending(_caller())
    except Exception:  # noqa: BLE001 - advice only: an answer is never failed for it (the policy still goes out)
        logger.warning("pending count unavailable for the RateLimit field", exc_info=True)
        pending = None
    return ratelimit_fields(limit, pending)
