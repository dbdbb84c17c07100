"""Typed configuration, read once from the environment at cold start.

Each function declares the settings model it needs; a missing or malformed variable fails the
cold start with a message naming it, instead of failing later mid-job. Field ``jobs_table`` is
read from ``JOBS_TABLE`` and so on (upper-case field name).
"""

from __future__ import annotations

import os
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _EnvModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        values = {name: env[name.upper()] for name in cls.model_fields if name.upper() in env}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            names = ", ".join(str(err["loc"][0]).upper() for err in exc.errors())
            raise RuntimeError(f"invalid or missing environment variables for {cls.__name__}: {names}") from exc


class JobStoreSettings(_EnvModel):
    jobs_table: str
    job_ttl_days: int = Field(default=30, ge=1, le=3650)


class ArtifactSettings(_EnvModel):
    artifacts_bucket: str
    presign_seconds: int = Field(default=3600, ge=60, le=43200)  # a role session lasts at most 12 h


class ApiSettings(JobStoreSettings, ArtifactSettings):
    state_machine_arn: str
    # The profile's default for video.num_inference_steps (dev: 4 for smoke tests, prod: 30).
    default_video_steps: int = Field(default=30, ge=1, le=100)
    job_events_topic_arn: str  # DELETE /jobs/{id} publishes job.cancelled
    event_bus_name: str = "default"
    webhook_secret_arn: str = ""  # GET /webhooks/secret
    # http:// to a loopback address is allowed for webhooks (the local stack only; template parameter, default false).
    webhook_allow_loopback_http: bool = False
    # Batches (POST /batches, .jsonl drops): unset disables them.
    batches_table: str | None = None
    batch_queue_url: str | None = None


class InboxSettings(ApiSettings):
    pass


class BatchSettings(InboxSettings):
    """BatchSubmit: the fan-out."""

    batches_table: str
    batch_queue_url: str
    # template.yaml BatchMaxInFlightJobs: batch jobs running at once, stack-wide (the backpressure bound).
    batch_max_in_flight_jobs: int = Field(default=100, ge=1, le=100000)
    batch_retry_base_seconds: int = Field(default=2, ge=1, le=60)


class VideoSettings(JobStoreSettings, ArtifactSettings):
    """The async video request (InvokeEndpointAsync), queued by GenerateImage."""

    video_endpoint_name: str
    # SageMaker: InvocationTimeoutSeconds <= 3600, RequestTTLSeconds 60..21600.
    video_invocation_timeout_seconds: int = Field(default=900, ge=1, le=3600)
    video_request_ttl_seconds: int = Field(default=3600, ge=60, le=21600)


class ImageSettings(VideoSettings):
    """GenerateImage: the image call, then the video request it stages and queues (so both model ids)."""

    image_endpoint_name: str
    job_events_topic_arn: str  # job.image_ready
    event_bus_name: str = "default"
    image_model_id: str = "black-forest-labs/FLUX.2-klein-4B"
    video_model_id: str = "Wan-AI/Wan2.1-VACE-1.3B-diffusers"


class ResultSettings(JobStoreSettings, ArtifactSettings):
    pass


class PublishSettings(JobStoreSettings, ArtifactSettings):
    job_events_topic_arn: str
    event_bus_name: str = "default"


class BatchProgressSettings(PublishSettings):
    batches_table: str


class DeadlineSettings(PublishSettings):
    # template.yaml JobDeadlineSeconds: longer than any execution can run (tests/unit/template derives the bound).
    job_deadline_seconds: int = Field(ge=1)
    state_machine_arn: str


class WebhookSettings(JobStoreSettings):
    webhook_secret_arn: str
    webhook_queue_url: str
    webhook_allow_loopback_http: bool = False
    # Exponential backoff between attempts (template: WebhookRetryBaseSeconds; SQS maxReceiveCount = max attempts).
    webhook_retry_base_seconds: int = Field(default=30, ge=1, le=43200)
    webhook_max_attempts: int = Field(default=13, ge=1, le=1000)
    webhook_connect_timeout_seconds: float = Field(default=3.0, gt=0, le=10)
    webhook_read_timeout_seconds: float = Field(default=10.0, gt=0, le=30)
