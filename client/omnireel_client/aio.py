"""The asyncio twin: ``AsyncClient``, ``AsyncJob`` and ``AsyncBatch``, with the blocking client's surface.

Each call runs the blocking client's signed request in a worker thread (``asyncio.to_thread``): one implementation of
signing, retries and errors, and an event loop that never blocks on the network. Waits sleep with ``asyncio.sleep``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .client import (
    DEFAULT_WAIT_S,
    Batch,
    Client,
    Job,
    batch_progress_key,
    poll_delays,
    progress_key,
    still,
)
from .errors import JobFailedError, WaitTimeout
from .models import BatchState, JobPage, JobState, JobSummary, WebhookSecret
from .webhooks import DEFAULT_REFRESH_INTERVAL_S, WebhookVerifier, verify_webhook

T = TypeVar("T")
Progress = Callable[[T], "Awaitable[None] | None"]


async def _report(callback: Progress[T] | None, value: T) -> None:
    if callback is not None:
        result = callback(value)
        if asyncio.iscoroutine(result):
            await result


async def _follow(item: Any, key: Callable[[Any], tuple[Any, ...]], on_progress: Progress[Any] | None,
                  timeout: float, first: float, what: str) -> None:  # fmt: skip
    """``client.follow``'s loop with ``await``: the one wait loop of ``AsyncJob.wait`` and ``AsyncBatch.wait``."""
    deadline = time.monotonic() + timeout
    seen: tuple[Any, ...] | None = None
    for delay in poll_delays(first=first):
        await item.refresh()
        if key(item) != seen:
            seen = key(item)
            await _report(on_progress, item)
        if item.done:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(still(what, item, timeout), item)
        await asyncio.sleep(min(delay, left))


class AsyncClient:
    """``AsyncClient.local()``, ``AsyncClient.for_stack(name, region)`` or ``AsyncClient(api_url, region, ...)``."""

    def __init__(self, api_url: str, region: str, credentials: Any = None, **options: Any) -> None:
        self._sync = Client(api_url, region, credentials, **options)

    @classmethod
    def _wrap(cls, sync: Client) -> AsyncClient:
        client = cls.__new__(cls)
        client._sync = sync
        return client

    @classmethod
    def local(cls, home: str | os.PathLike[str] | None = None, **options: Any) -> AsyncClient:
        return cls._wrap(Client.local(home, **options))

    @classmethod
    def for_stack(cls, name: str, region: str | None = None, **options: Any) -> AsyncClient:
        return cls._wrap(Client.for_stack(name, region, **options))

    @property
    def api_url(self) -> str:
        return self._sync.api_url

    async def submit(self, /, prompt: str, *, webhook: str | None = None, idempotency_key: str | None = None,
                     **fields: Any) -> AsyncJob:  # fmt: skip
        job = await asyncio.to_thread(self._sync.submit, prompt, webhook=webhook, idempotency_key=idempotency_key,
                                      **fields)  # fmt: skip
        return AsyncJob._from(self, job)

    async def run(self, /, prompt: str, *, timeout: float = DEFAULT_WAIT_S,
                  on_progress: Progress[AsyncJob] | None = None, webhook: str | None = None,
                  idempotency_key: str | None = None, **fields: Any) -> AsyncJob:  # fmt: skip
        job = await self.submit(prompt, webhook=webhook, idempotency_key=idempotency_key, **fields)
        return await job.wait(timeout, on_progress=on_progress, raise_on_failure=True)

    async def job(self, job_id: str) -> AsyncJob:
        return AsyncJob._from(self, await asyncio.to_thread(self._sync.job, job_id))

    async def jobs(self, status: str | None = None, *, page_size: int | None = None) -> AsyncIterator[JobSummary]:
        pages = self._sync.jobs(status, page_size=page_size)
        done = object()
        while (item := await asyncio.to_thread(next, pages, done)) is not done:
            assert isinstance(item, JobSummary)
            yield item

    async def jobs_page(self, status: str | None = None, *, limit: int | None = None, cursor: str | None = None
                        ) -> JobPage:  # fmt: skip
        return await asyncio.to_thread(self._sync.jobs_page, status, limit=limit, cursor=cursor)

    async def cancel(self, job_id: str) -> AsyncJob:
        return AsyncJob._from(self, await asyncio.to_thread(self._sync.cancel, job_id))

    async def submit_batch(self, requests: Iterable[Mapping[str, Any] | str], *, webhook: str | None = None,
                           idempotency_key: str | None = None) -> AsyncBatch:  # fmt: skip
        batch = await asyncio.to_thread(self._sync.submit_batch, list(requests), webhook=webhook,
                                        idempotency_key=idempotency_key)  # fmt: skip
        return AsyncBatch._from(self, batch)

    async def batch(self, batch_id: str) -> AsyncBatch:
        return AsyncBatch._from(self, await asyncio.to_thread(self._sync.batch, batch_id))

    async def webhook_secret(self) -> WebhookSecret:
        return await asyncio.to_thread(self._sync.webhook_secret)

    async def webhook_verifier(self, *, refresh_interval_s: float = DEFAULT_REFRESH_INTERVAL_S) -> WebhookVerifier:
        """``Client.webhook_verifier``: in a coroutine, verify with ``await verifier.verify_async(headers, body)``."""
        return await asyncio.to_thread(self._sync.webhook_verifier, refresh_interval_s=refresh_interval_s)

    verify_webhook = staticmethod(verify_webhook)


class AsyncJob(JobState):
    _client: AsyncClient
    _sync: Job

    @classmethod
    def _from(cls, client: AsyncClient, job: Job) -> AsyncJob:
        self = cls(job_id=job.job_id, status=job.status)
        self._client, self._sync = client, job
        self._copy()
        return self

    def _copy(self) -> None:
        for name in JobState.__dataclass_fields__:
            setattr(self, name, getattr(self._sync, name))

    async def refresh(self) -> AsyncJob:
        await asyncio.to_thread(self._sync.refresh)
        self._copy()
        return self

    async def wait(self, timeout: float = DEFAULT_WAIT_S, *, on_progress: Progress[AsyncJob] | None = None,
                   raise_on_failure: bool = False) -> AsyncJob:  # fmt: skip
        await _follow(self, progress_key, on_progress, timeout, 0.5, f"job {self.job_id}")
        if raise_on_failure and not self.succeeded:
            raise JobFailedError(self)
        return self

    async def event(self) -> dict[str, Any]:
        return await asyncio.to_thread(self._sync.event)

    async def cancel(self) -> AsyncJob:
        await asyncio.to_thread(self._sync.cancel)
        self._copy()
        return self

    async def download(self, directory: str | os.PathLike[str], names: Iterable[str] = ("image", "video")
                       ) -> dict[str, Path]:  # fmt: skip
        saved = await asyncio.to_thread(self._sync.download, directory, tuple(names))
        self._copy()
        return saved


class AsyncBatch(BatchState):
    _client: AsyncClient
    _sync: Batch

    @classmethod
    def _from(cls, client: AsyncClient, batch: Batch) -> AsyncBatch:
        self = cls(batch_id=batch.batch_id, status=batch.status)
        self._client, self._sync = client, batch
        self._copy()
        return self

    def _copy(self) -> None:
        for name in BatchState.__dataclass_fields__:
            setattr(self, name, getattr(self._sync, name))

    async def refresh(self) -> AsyncBatch:
        await asyncio.to_thread(self._sync.refresh)
        self._copy()
        return self

    async def wait(self, timeout: float = 3600.0, *, on_progress: Progress[AsyncBatch] | None = None) -> AsyncBatch:
        await _follow(self, batch_progress_key, on_progress, timeout, 1.0, f"batch {self.batch_id}")
        return self
