"""omnireel-client: a typed Python client for the omnireel HTTP API (see docs/client.md).

from omnireel_client import Client

client = Client.local()                      # or Client.for_stack("omnireel", "us-east-1")
job = client.run("a lighthouse at dusk", video={"num_frames": 17})
job.download("out/")                         # image.png, video.mp4
"""

from .aio import AsyncBatch, AsyncClient, AsyncJob
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

__version__ = "0.1.0"
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
