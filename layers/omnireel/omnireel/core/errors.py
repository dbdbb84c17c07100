"""Typed errors. Every domain error has a stable ``code`` and says whether retrying can help.

Step Functions sees a Lambda failure as ``Error = errorType`` (the exception class name) and
``Cause`` = the Lambda error payload. Handlers therefore re-raise domain errors as one of the two
step errors below, whose *class names* are what the state machine's Retry/Catch match on, and whose
message is a JSON object ``{"code", "message"}`` that the failure recorder decodes.
"""

from __future__ import annotations

import json


class OmnireelError(Exception):
    """Base class: ``code`` is machine-readable, ``message`` is for humans."""

    code = "InternalError"
    retryable = False

    def __init__(self, message: str, *, code: str | None = None, retryable: bool | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if retryable is not None:
            self.retryable = retryable

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class InvalidRequest(OmnireelError):
    """A request the API refuses (400). ``problems``: each problem as ``{"field", "message"}`` when the validator
    found several (the message lists them all too), so a client can show every one without parsing text."""

    code = "InvalidRequest"

    def __init__(self, message: str, *, problems: list[dict[str, str]] | None = None, problems_omitted: int = 0,
                 code: str | None = None) -> None:  # fmt: skip
        super().__init__(message, code=code)
        self.problems = problems or []
        self.problems_omitted = problems_omitted


class SourceVersionGone(InvalidRequest):
    """The S3 object version an inbox event names no longer exists (deleted, or overwritten in an unversioned
    bucket) when the inbox function reads it."""

    code = "SourceVersionGone"


class JobNotFound(OmnireelError):
    code = "JobNotFound"


class BatchNotFound(OmnireelError):
    code = "BatchNotFound"


class BatchIntakeFailed(OmnireelError):
    """POST /batches recorded the batch but could not queue all its lines (503: retry with the same key)."""

    code = "BatchIntakeFailed"
    retryable = True

    def __init__(self, message: str, *, batch_id: str):
        super().__init__(message)
        self.batch_id = batch_id


class JobConflict(OmnireelError):
    """A transition that is not allowed from the job's current state (stale or duplicate step)."""

    code = "JobConflict"


class JobFinished(OmnireelError):
    """A cancellation of a job that has already ended (``status`` says how)."""

    code = "JobFinished"

    def __init__(self, message: str, *, status: str):
        super().__init__(message)
        self.status = status


class TooManyPendingJobs(OmnireelError):
    """The caller has ``limit`` jobs accepted and not yet terminal (``CallerMaxPendingJobs``): POST /jobs answers 429
    with Retry-After; a dropped file and a batch line wait and are retried (omnireel.usage.limits)."""

    code = "TooManyPendingJobs"
    retryable = True

    def __init__(self, message: str, *, caller: str, limit: int):
        super().__init__(message)
        self.caller = caller
        self.limit = limit


class NotJobOwner(OmnireelError):
    """A cancellation of a job the caller may see but did not submit (a dropped file's job has no owner)."""

    code = "NotJobOwner"


class InvalidCursor(InvalidRequest):
    """A listing cursor that this API did not hand out to this caller (or for another filter)."""

    code = "InvalidCursor"


class IdempotencyConflict(OmnireelError):
    code = "IdempotencyKeyReused"


class EndpointError(OmnireelError):
    """The model endpoint answered with an error or could not be reached."""

    code = "EndpointError"


class EndpointThrottled(EndpointError):
    code = "EndpointThrottled"
    retryable = True


class EndpointUnavailable(EndpointError):
    """5xx, model not ready, connection problems: worth retrying with backoff."""

    code = "EndpointUnavailable"
    retryable = True


class EndpointRejected(EndpointError):
    """4xx from the model: the request itself is wrong; retrying cannot help."""

    code = "EndpointRejected"


class MalformedModelOutput(OmnireelError):
    code = "MalformedModelOutput"


class ReferenceTooLarge(OmnireelError):
    code = "ReferenceImageTooLarge"


class VideoRenderFailed(OmnireelError):
    code = "VideoRenderFailed"


class VideoExpired(OmnireelError):
    code = "VideoRequestExpired"


class VideoTimedOut(OmnireelError):
    code = "VideoTimedOut"


class ExecutionNameTaken(OmnireelError):
    """StartExecution refused the job's execution name and the execution holding it is not this job's.

    ``job_id`` names the recorded job that can never run under that name (the API fails it at once, with its one
    ``job.failed``, instead of leaving it ``accepted`` until the deadline sweep)."""

    code = "ExecutionNameTaken"

    def __init__(self, message: str, *, job_id: str):
        super().__init__(message)
        self.job_id = job_id


class WorkflowNotStarted(OmnireelError):
    """The job has been ``accepted`` for a while and its execution does not exist (StartExecution never succeeded)."""

    code = "WorkflowNotStarted"


class JobDeadlineExceeded(OmnireelError):
    """The safety net found the job still not terminal after its deadline (see ``omnireel/jobs/deadline.py``)."""

    code = "JobDeadlineExceeded"


class ArtifactAccessDenied(OmnireelError):
    """S3 refused to say whether an artifact exists (403): a missing permission, never a missing object."""

    code = "ArtifactAccessDenied"


class PublishFailed(OmnireelError):
    code = "PublishFailed"
    retryable = True


class SigningKeyUnavailable(OmnireelError):
    """The webhook master key could not be read (Secrets Manager error, or a value that is not a key document)."""

    code = "SigningKeyUnavailable"
    retryable = True


class WebhookOwnerUnknown(OmnireelError):
    """A queued webhook event whose job or batch record is gone (or that names neither): no owner to sign for, so it
    is not delivered (it ends in the webhook dead-letter queue)."""

    code = "WebhookOwnerUnknown"


# --- errors as Step Functions sees them -------------------------------------------------------------


class StepError(Exception):
    """Raised by a step handler for a failure that retrying will not fix (Catch -> job.failed)."""

    def __init__(self, code: str, message: str):
        super().__init__(json.dumps({"code": code, "message": message}))


class RetryableStepError(StepError):
    """Raised by a step handler for a transient failure (the state machine retries with backoff)."""


def as_step_error(error: OmnireelError) -> StepError:
    cls = RetryableStepError if error.retryable else StepError
    return cls(error.code, error.message)


def decode_step_failure(error_name: str | None, cause: str | None) -> dict[str, str]:
    """Turn a Step Functions ``{Error, Cause}`` pair into ``{"code", "message"}``.

    ``Cause`` is a Lambda error payload (JSON with ``errorMessage``), a SendTaskFailure cause
    (our JSON ``{"code","message"}``), or free text (``States.Timeout`` and friends).
    """
    name = error_name or "InternalError"
    text = cause or ""
    payload: object = None
    try:
        payload = json.loads(text) if text else None
    except ValueError:
        payload = None
    if isinstance(payload, dict) and "errorMessage" in payload:
        inner = payload.get("errorMessage")
        try:
            decoded = json.loads(inner) if isinstance(inner, str) else None
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and "code" in decoded:
            return {"code": str(decoded["code"]), "message": str(decoded.get("message", ""))}
        return {"code": str(payload.get("errorType") or name), "message": str(inner)}
    if isinstance(payload, dict) and "code" in payload:
        return {"code": str(payload["code"]), "message": str(payload.get("message", ""))}
    if name.startswith("States."):
        return {"code": name.removeprefix("States."), "message": text or name}
    return {"code": name, "message": text or name}
