"""omnireel-client: a typed Python client for the omnireel HTTP API (see docs/client.md).

from omnireel_client import Client

client = Client.local()                      # or Client.for_stack("omnireel", "us-east-1")
job = client.run("a lighthouse at dusk", video={"num_frames": 17})
job.download("out/")                         # image.png, video.mp4
"""

from typing import TYPE_CHECKING

from .client import Batch, Client, Job
from .errors import (
    ApiError,
    ConflictError,
    CredentialsError,
    ForbiddenError,
    InvalidRequestError,
    JobFailedError,
    NotFoundError,
    OmnireelClientError,
    Problem,
    RateLimitedError,
    RedirectError,
    ServerError,
    TransportError,
    UnexpectedResponseError,
    WaitTimeout,
)
from .models import Artifact, BatchCounts, Cancellation, JobError, JobPage, JobSummary, WebhookEvent, WebhookSecret
from .webhooks import InvalidWebhookError, WebhookVerifier, verify_webhook

if TYPE_CHECKING:  # type checkers see the asyncio client's real classes; at run time __getattr__ imports them
    from .aio import AsyncBatch, AsyncClient, AsyncJob

__version__ = "0.1.0"
_ASYNC = ("AsyncBatch", "AsyncClient", "AsyncJob")


def __getattr__(name: str) -> object:
    """The asyncio client on first use (``from omnireel_client import AsyncClient`` works as before): importing the
    package for the blocking client, as the CLI does on every command, does not load asyncio (~30 ms of CPU)."""
    if name in _ASYNC:
        from . import aio

        return getattr(aio, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ApiError",
    "Artifact",
    "AsyncBatch",
    "AsyncClient",
    "AsyncJob",
    "Batch",
    "BatchCounts",
    "Cancellation",
    "Client",
    "ConflictError",
    "CredentialsError",
    "ForbiddenError",
    "InvalidRequestError",
    "InvalidWebhookError",
    "Job",
    "JobError",
    "JobFailedError",
    "JobPage",
    "JobSummary",
    "NotFoundError",
    "OmnireelClientError",
    "Problem",
    "RateLimitedError",
    "RedirectError",
    "ServerError",
    "TransportError",
    "UnexpectedResponseError",
    "WaitTimeout",
    "WebhookEvent",
    "WebhookSecret",
    "WebhookVerifier",
    "verify_webhook",
]
