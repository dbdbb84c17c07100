"""Every error the client raises derives from ``OmnireelClientError``.

``ApiError`` carries what the API said: the HTTP status, its error ``code`` (``InvalidRequest``, ``JobNotFound``, ...),
the ``message``, and for a 400 every problem it listed (``problems``: ``Problem(field, message)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import BatchState, JobState


class OmnireelClientError(Exception):
    """Base class of every error of this package."""


@dataclass(frozen=True)
class Problem:
    """One problem of a refused request: the field (``video.num_frames``, ``request``) and what is wrong with it."""

    field: str
    message: str


class ApiError(OmnireelClientError):
    """The API answered an error: ``status``, ``code``, ``message``, ``problems`` and the decoded ``body``."""

    def __init__(self, status: int, code: str, message: str, problems: tuple[Problem, ...] = (), body: Any = None):
        listed = "".join(f"\n  - {p.field}: {p.message}" for p in problems)
        super().__init__(f"HTTP {status} {code}: {message}" if not listed else f"HTTP {status} {code}:{listed}")
        self.status, self.code, self.message, self.problems, self.body = status, code, message, problems, body


class InvalidRequestError(ApiError):
    """400: the request was refused; ``problems`` lists every problem."""


class ForbiddenError(ApiError):
    """403: the signature was refused, the identity may not call the API, or the job is not yours to cancel."""


class NotFoundError(ApiError):
    """404: no such job or batch for this caller (another caller's job is not found either)."""


class ConflictError(ApiError):
    """409: the idempotency key was used for another request, or the job had already ended."""


class RateLimitedError(ApiError):
    """429: e.g. ``TooManyPendingJobs`` (the caller has CallerMaxPendingJobs jobs not finished yet), still refused after
    the client's retries. ``retry_after_s``: the API's ``Retry-After`` (None if it sent none)."""

    retry_after_s: float | None = None


class ServerError(ApiError):
    """5xx after the client's retries (a 503 carries ``Retry-After``)."""


class TransportError(OmnireelClientError):
    """The API could not be reached, or the exchange broke off (connection refused or reset, timeout, a malformed status
    line, a body shorter than its ``Content-Length``) after the client's retries."""


class UnexpectedResponseError(OmnireelClientError):
    """An answer that is not the API's: a success whose body is not the JSON object the API sends (an HTML page, an
    empty body, a JSON array, a missing field...), or a redirect. ``status``, ``headers`` and the decoded ``body``."""

    def __init__(self, message: str, status: int, headers: dict[str, str], body: Any):
        super().__init__(message)
        self.status, self.headers, self.body = status, headers, body


class RedirectError(UnexpectedResponseError):
    """A 3xx answer. The client never follows a redirect: the request would carry its signature (``Authorization``)
    and ``Idempotency-Key`` to ``location`` (where the answer pointed; None if it did not say)."""

    def __init__(self, message: str, status: int, headers: dict[str, str], body: Any, location: str | None):
        super().__init__(message, status, headers, body)
        self.location = location


class CredentialsError(OmnireelClientError):
    """No AWS credentials to sign with, or no stack to talk to."""


class WaitTimeout(OmnireelClientError):
    """``wait`` ran out of time; ``last`` is the job or batch as last seen (still running)."""

    def __init__(self, message: str, last: JobState | BatchState):
        super().__init__(message)
        self.last = last


class JobFailedError(OmnireelClientError):
    """``run`` (or ``Job.wait(raise_on_failure=True)``) saw the job end ``failed`` or ``cancelled``."""

    def __init__(self, job: JobState):
        error = job.error
        detail = f" at {error.stage}: {error.code}: {error.message}" if error else ""
        super().__init__(f"job {job.job_id} {job.status}{detail}")
        self.job = job


def api_error(status: int, body: Any, retry_after_s: float | None = None) -> ApiError:
    """The exception for an error answer (``{"error": {"code", "message", "problems"?}}`` or API Gateway's
    ``{"message"}``)."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code, message = str(error.get("code") or "Error"), str(error.get("message") or "")
        problems = tuple(
            Problem(str(p.get("field", "")), str(p.get("message", "")))
            for p in error.get("problems") or ()
            if isinstance(p, dict)
        )
    else:
        code = "Forbidden" if status == 403 else "HttpError"
        message = str(body.get("message")) if isinstance(body, dict) and "message" in body else str(body)[:500]
        problems = ()
    kind = {400: InvalidRequestError, 403: ForbiddenError, 404: NotFoundError, 409: ConflictError,
            429: RateLimitedError}.get(status)  # fmt: skip
    if kind is None:
        kind = ServerError if status >= 500 else ApiError
    error = kind(status, code, message, problems, body)
    if isinstance(error, RateLimitedError):
        error.retry_after_s = retry_after_s
    return error
