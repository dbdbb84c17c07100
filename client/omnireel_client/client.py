"""The blocking client: ``Client``, ``Job`` and ``Batch``.

Every call is one signed request (``transport.py``); a ``submit`` carries an ``Idempotency-Key`` (generated when the
app gives none) that the client reuses on its own retries after 5xx answers and timeouts, so a retry never makes a
second job.

Every answer is read into typed values through ``parse_answer``: an answer that is not the API's (a missing field, a
list for an object) is an ``UnexpectedResponseError``, never a ``KeyError`` or ``TypeError``.
"""

from __future__ import annotations

import http.client
import os
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from . import stacks
from .errors import ConflictError, JobFailedError, TransportError, WaitTimeout
from .models import TERMINAL, BatchState, Cancellation, JobPage, JobState, JobSummary, WebhookSecret, parse_time
from .transport import Transport, parse_answer
from .webhooks import DEFAULT_REFRESH_INTERVAL_S, WebhookVerifier, verify_webhook

FILE_NAMES = {"image": "image.png", "video": "video.mp4"}
DEFAULT_WAIT_S = 900.0


def new_idempotency_key() -> str:
    return f"client-{uuid.uuid4()}"


def job_body(prompt: str, fields: Mapping[str, Any], webhook: str | None) -> dict[str, Any]:
    """The ``POST /jobs`` body: ``prompt``, the request's other fields as given (``seed``, ``image={...}``,
    ``video={...}``, ``webhook_events``...), and ``webhook``."""
    body: dict[str, Any] = {"prompt": prompt, **fields}
    if webhook is not None:
        body["webhook"] = webhook
    return body


def batch_body(requests: Iterable[Mapping[str, Any] | str], webhook: str | None) -> dict[str, Any]:
    jobs = [{"prompt": r} if isinstance(r, str) else dict(r) for r in requests]
    return {"jobs": jobs, **({"webhook": webhook} if webhook is not None else {})}


def poll_delays(first: float = 0.5, factor: float = 1.5, most: float = 5.0) -> Iterator[float]:
    """The pause between polls: quick at first (a stage change shows within half a second), then at most ``most``."""
    delay = first
    while True:
        yield delay
        delay = min(delay * factor, most)


def progress_key(job: JobState) -> tuple[Any, ...]:
    return job.status, len(job.stage_times)


def batch_progress_key(batch: BatchState) -> tuple[Any, ...]:
    return batch.status, batch.counts


def still(what: str, item: Any, timeout: float) -> str:
    """The message of a wait that ran out: the status, and for an ended job that its terminal event is not out yet."""
    note = " (its terminal event is not out yet)" if item.status in TERMINAL else ""
    return f"{what} is still {item.status}{note} after {timeout:g} s"


def follow(item: Any, key: Callable[[Any], tuple[Any, ...]], on_progress: Callable[[Any], None] | None,
           timeout: float, first: float, what: str) -> None:  # fmt: skip
    """Poll ``item.refresh()`` until ``item.done`` (bounded by ``timeout``: then ``WaitTimeout``), calling
    ``on_progress(item)`` whenever ``key(item)`` changes. The one wait loop of ``Job.wait`` and ``Batch.wait``."""
    deadline = time.monotonic() + timeout
    seen: tuple[Any, ...] | None = None
    for delay in poll_delays(first=first):
        item.refresh()
        if on_progress is not None and key(item) != seen:
            seen = key(item)
            on_progress(item)
        if item.done:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(still(what, item, timeout), item)
        time.sleep(min(delay, left))


def send_cancel(transport: Transport, job_id: str) -> Cancellation:
    """``DELETE /jobs/{id}``; a 409 whose body says the job is already ``cancelled`` counts as done."""
    try:
        return parse_answer(transport.request("DELETE", f"/jobs/{job_id}"), Cancellation.from_api)
    except ConflictError as exc:
        if not (isinstance(exc.body, dict) and exc.body.get("status") == "cancelled"):
            raise
        return Cancellation.from_api(None)


def secret_of(body: dict[str, Any]) -> WebhookSecret:
    previous = body.get("previous_secret")
    if not isinstance(body["secret"], str) or not isinstance(previous, (str, type(None))):
        raise TypeError("a secret is not a text")
    return WebhookSecret(body["secret"], previous, parse_time(body.get("previous_until")), raw=body)


def text_field(body: dict[str, Any], name: str) -> str:
    """``body[name]``, a non-empty text (an id the client puts in the next request's path)."""
    value = body[name]
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name} is not a text: {value!r}"[:200])
    return value


def download_to(url: str, path: Path, timeout: float = 60.0) -> Path:
    """GET a presigned URL into ``path`` (written beside it first, then renamed: no half-written file)."""
    if not url.startswith(("http://", "https://")):
        raise TransportError(f"not an http(s) URL: {url[:100]!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, partial.open("wb") as out:  # noqa: S310
            while chunk := response.read(1 << 20):
                out.write(chunk)
            if response.length:  # http.client's read(n) ends quietly on a body shorter than its Content-Length
                raise http.client.IncompleteRead(b"", response.length)
    except (OSError, http.client.HTTPException) as exc:  # refused, timeout, cut short, not HTTP
        partial.unlink(missing_ok=True)
        raise TransportError(f"cannot download {path.name}: {exc}") from exc
    os.replace(partial, path)
    return path


class Client:
    """A client of one omnireel API.

    ``Client.local()`` (the running local stack), ``Client.for_stack(name, region)`` (a deployed stack, signed with
    the standard AWS credential chain), or ``Client(api_url, region, credentials=...)`` (botocore credentials; default:
    the standard chain).
    """

    def __init__(self, api_url: str, region: str, credentials: Any = None, *, timeout: float = 35.0,
                 attempts: int = 4) -> None:  # fmt: skip
        credentials = credentials if credentials is not None else stacks.default_credentials()
        self.transport = Transport(api_url, region, credentials, timeout=timeout, attempts=attempts)
        self.api_url = self.transport.api_url
        self.region = region
        self.outputs: dict[str, str] = {}

    @classmethod
    def local(cls, home: str | os.PathLike[str] | None = None, **options: Any) -> Client:
        endpoint = stacks.local_endpoint(home)
        client = cls(endpoint.api_url, endpoint.region, endpoint.credentials, **options)
        client.outputs = endpoint.outputs
        return client

    @classmethod
    def for_stack(cls, name: str, region: str | None = None, *, profile: str | None = None, **options: Any) -> Client:
        endpoint = stacks.stack_endpoint(name, region, profile)
        client = cls(endpoint.api_url, endpoint.region, endpoint.credentials, **options)
        client.outputs = endpoint.outputs
        return client

    # ---------------------------------------------------------------- jobs
    def submit(self, /, prompt: str, *, webhook: str | None = None, idempotency_key: str | None = None,
               **fields: Any) -> Job:  # fmt: skip
        """``POST /jobs``: the accepted job (``status`` ``accepted``; ``refresh``/``wait`` follow it). ``fields`` go
        into the request as given, whatever their names (the API refuses one it does not know, ``self`` too)."""
        key = idempotency_key or new_idempotency_key()
        reply = self.transport.request(
            "POST", "/jobs", job_body(prompt, fields, webhook), {"Idempotency-Key": key}, ok=(202,)
        )
        job = parse_answer(reply, lambda b: Job(self, text_field(b, "job_id"), str(b.get("status", "accepted"))))
        job.idempotency_key = key
        job.raw = reply.body
        return job

    def run(self, /, prompt: str, *, timeout: float = DEFAULT_WAIT_S, on_progress: Callable[[Job], None] | None = None,
            webhook: str | None = None, idempotency_key: str | None = None, **fields: Any) -> Job:  # fmt: skip
        """``submit`` then ``wait``: the succeeded job; ``JobFailedError`` if it failed or was cancelled."""
        job = self.submit(prompt, webhook=webhook, idempotency_key=idempotency_key, **fields)
        return job.wait(timeout, on_progress=on_progress, raise_on_failure=True)

    def job(self, job_id: str) -> Job:
        """``GET /jobs/{id}`` (``NotFoundError`` for an unknown id or another caller's job)."""
        job = Job(self, job_id, "")
        return job.refresh()

    def jobs(self, status: str | None = None, *, page_size: int | None = None) -> Iterator[JobSummary]:
        """Every job of this caller, newest first, page after page (``GET /jobs`` with its cursor)."""
        cursor: str | None = None
        while True:
            page = self.jobs_page(status, limit=page_size, cursor=cursor)
            yield from page.jobs
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def jobs_page(self, status: str | None = None, *, limit: int | None = None, cursor: str | None = None) -> JobPage:
        """One page of ``GET /jobs`` (for an app that keeps the cursor itself, e.g. behind its own "more" button)."""
        query = {k: v for k, v in (("status", status), ("limit", limit), ("cursor", cursor)) if v is not None}
        reply = self.transport.request("GET", "/jobs" + ("?" + urllib.parse.urlencode(query) if query else ""))

        def page(body: dict[str, Any]) -> JobPage:
            items = tuple(JobSummary.from_api(item) for item in body.get("jobs") or [])
            cursor = body.get("next_cursor")
            if not isinstance(cursor, (str, type(None))):
                raise TypeError("next_cursor is not a text")
            return JobPage(items, cursor, raw=body)

        return parse_answer(reply, page)

    def cancel(self, job_id: str) -> Job:
        """``DELETE /jobs/{id}``: the job as it stands after the cancel. A job already cancelled (e.g. this client's
        own retry after a lost answer) is not an error; one that had succeeded or failed is (``ConflictError``)."""
        return Job(self, job_id, "").cancel()

    # ---------------------------------------------------------------- batches
    def submit_batch(self, requests: Iterable[Mapping[str, Any] | str], *, webhook: str | None = None,
                     idempotency_key: str | None = None) -> Batch:  # fmt: skip
        """``POST /batches`` (at most 1,000 jobs; a prompt string is ``{"prompt": ...}``); ``webhook`` receives
        ``batch.completed``."""
        key = idempotency_key or new_idempotency_key()
        reply = self.transport.request(
            "POST", "/batches", batch_body(requests, webhook), {"Idempotency-Key": key}, ok=(202,)
        )

        def accepted(body: dict[str, Any]) -> Batch:
            batch = Batch(self, text_field(body, "batch_id"), str(body.get("status", "")))
            batch._update(body)
            return batch

        batch = parse_answer(reply, accepted)
        batch.idempotency_key = key
        return batch

    def batch(self, batch_id: str) -> Batch:
        return Batch(self, batch_id, "").refresh()

    # ---------------------------------------------------------------- usage
    def usage(self, from_date: str | None = None, to_date: str | None = None) -> dict[str, Any]:
        """``GET /usage``: this caller's own usage per UTC day (``from_date``/``to_date`` as YYYY-MM-DD, both
        included; default the last 30 days), its totals, its pending jobs and its limit (``CallerMaxPendingJobs``).
        The costs are estimates (docs/operations.md, "Usage")."""
        query = {k: v for k, v in (("from", from_date), ("to", to_date)) if v}
        path = "/usage" + ("?" + urllib.parse.urlencode(query) if query else "")
        return dict(self.transport.request("GET", path).body)

    # ---------------------------------------------------------------- webhooks
    def webhook_secret(self) -> WebhookSecret:
        """``GET /webhooks/secret``: this caller's own secret (it signs the deliveries of this caller's jobs only)."""
        return parse_answer(self.transport.request("GET", "/webhooks/secret"), secret_of)

    def webhook_verifier(self, *, refresh_interval_s: float = DEFAULT_REFRESH_INTERVAL_S) -> WebhookVerifier:
        """A ``WebhookVerifier`` for a receiver: reads this caller's secret now, and again when a delivery verifies
        with none of the secrets it holds (a rotation), at most once per ``refresh_interval_s`` seconds."""
        return WebhookVerifier(self.webhook_secret, self.webhook_secret(), refresh_interval_s=refresh_interval_s)

    verify_webhook = staticmethod(verify_webhook)


class Job(JobState):
    """A job of a ``Client``: its fields (``JobState``) and the calls that follow it."""

    def __init__(self, client: Client, job_id: str, status: str) -> None:
        super().__init__(job_id=job_id, status=status)
        self._client = client

    def refresh(self) -> Job:
        """Read the job again (``GET /jobs/{id}``); returns itself, updated."""
        parse_answer(self._client.transport.request("GET", f"/jobs/{self.job_id}"), self._update)
        return self

    def wait(self, timeout: float = DEFAULT_WAIT_S, *, on_progress: Callable[[Job], None] | None = None,
             raise_on_failure: bool = False) -> Job:  # fmt: skip
        """Poll until the job is succeeded, failed or cancelled (at most ``timeout`` seconds: then ``WaitTimeout``).
        ``on_progress(job)`` is called whenever a poll finds it in a new stage, the last one included (a stage shorter
        than the poll interval may fall between two polls: ``stage_times`` has every stage)."""
        follow(self, progress_key, on_progress, timeout, 0.5, f"job {self.job_id}")
        if raise_on_failure and not self.succeeded:
            raise JobFailedError(self)
        return self

    def event(self) -> dict[str, Any]:
        """The job's terminal event as consumers received it (``GET /jobs/{id}/event``: same ``event_id`` and
        ``occurred_at``, fresh presigned URLs); ``NotFoundError`` (code ``EventNotPublished``) until it is out."""
        return dict(self._client.transport.request("GET", f"/jobs/{self.job_id}/event").body)

    def cancel(self) -> Job:
        """Cancel this job (``Client.cancel``); returns itself, updated."""
        cancellation = send_cancel(self._client.transport, self.job_id)
        self.refresh()
        self.cancellation = cancellation
        return self

    def download(self, directory: str | os.PathLike[str], names: Iterable[str] = ("image", "video")) -> dict[str, Path]:
        """Save the job's files into ``directory`` (``image.png``, ``video.mp4``); a presigned URL that has expired is
        renewed first (``refresh``)."""
        wanted = tuple(names)
        if any(a.expired for n, a in self.artifacts.items() if n in wanted) or not self.artifacts:
            self.refresh()
        saved: dict[str, Path] = {}
        for name in wanted:
            artifact = self.artifacts.get(name)
            if artifact is not None:
                filename = FILE_NAMES.get(name) or Path(urllib.parse.urlparse(artifact.s3_uri).path).name
                saved[name] = download_to(artifact.url, Path(directory) / filename)
        return saved


class Batch(BatchState):
    """A batch of a ``Client``: its counts (``BatchState``) and the calls that follow it."""

    def __init__(self, client: Client, batch_id: str, status: str) -> None:
        super().__init__(batch_id=batch_id, status=status)
        self._client = client

    def refresh(self) -> Batch:
        parse_answer(self._client.transport.request("GET", f"/batches/{self.batch_id}"), self._update)
        return self

    def wait(self, timeout: float = 3600.0, *, on_progress: Callable[[Batch], None] | None = None) -> Batch:
        """Poll until the batch is completed (every job ended and ``batch.completed`` published), at most
        ``timeout`` seconds; ``on_progress(batch)`` at every change of its counts."""
        follow(self, batch_progress_key, on_progress, timeout, 1.0, f"batch {self.batch_id}")
        return self


__all__ = ["Batch", "Client", "Job"]
