"""The job request as the pydantic models described it before the layer dropped pydantic (commit 4c3e524): a
test-only oracle. ``test_request_oracle.py`` runs inputs through it and through ``omnireel.jobs.request`` and checks
that both accept the same requests, with the same values, and refuse the rest with the same messages.

What the oracle stands for is pydantic's side: types in strict mode, bounds, lengths, the order of the checks and the
wording of each message. The value rules pydantic called as validators (prompt not blank, no NUL, the size's shape,
4k+1 frames, the webhook URL's shape) were plain functions then and are the same functions now: they are imported
from ``omnireel.jobs.request``, not copied, and so are the webhook event types (``omnireel.events.event_types``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from omnireel.core.bounded import MAX_ECHO_CHARS, bounded
from omnireel.core.errors import InvalidRequest
from omnireel.events.event_types import WEBHOOK_EVENT_TYPES, WebhookEventType
from omnireel.jobs.request import (
    MAX_PROMPT_CHARS,
    MAX_WEBHOOK_URL_CHARS,
    _check_prompt,
    _check_size,
    _distinct_events,
    _no_nul,
    _wan_frame_count,
    check_webhook_url,
    decode_json_document,
)


class ImageOptions(BaseModel):
    """Parameters of the real-time image call (FLUX.2-klein)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    size: str = Field(default="1024x1024", description="WIDTHxHEIGHT, each 256..2048 and a multiple of 16")
    num_inference_steps: int = Field(default=4, ge=1, le=50)

    @field_validator("size")
    @classmethod
    def _check_size(cls, value: str) -> str:
        return _check_size(value)


class VideoOptions(BaseModel):
    """Parameters of the async video call (Wan2.1-VACE), sent as multipart text parts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    width: int = Field(default=480, ge=128, le=1280, multiple_of=16)
    height: int = Field(default=320, ge=128, le=1280, multiple_of=16)
    num_frames: int = Field(default=17, ge=5, le=161, description="4k+1 frames, as Wan2.1 expects")
    fps: int = Field(default=8, ge=1, le=30)
    num_inference_steps: int = Field(default=30, ge=1, le=100)
    prompt: Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS)] | None = Field(
        default=None, description="the motion prompt of the video call (default: the job's prompt)"
    )
    negative_prompt: Annotated[str, Field(max_length=MAX_PROMPT_CHARS)] | None = Field(
        default=None, description="the video call's negative prompt (default: the job's negative_prompt)"
    )

    @field_validator("prompt")
    @classmethod
    def _motion_not_blank(cls, value: str | None) -> str | None:
        return None if value is None else _check_prompt(value)

    @field_validator("negative_prompt")
    @classmethod
    def _motion_negative_no_nul(cls, value: str | None) -> str | None:
        return None if value is None else _no_nul(value)

    @field_validator("num_frames")
    @classmethod
    def _wan_frame_count(cls, value: int) -> int:
        return _wan_frame_count(value)


Prompt = Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS)]
WebhookEvents = Annotated[list[WebhookEventType], Field(min_length=1, max_length=len(WEBHOOK_EVENT_TYPES))]


class JobRequest(BaseModel):
    """A prompt and everything that shapes the image and the video made from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: Prompt
    negative_prompt: Annotated[str, Field(max_length=MAX_PROMPT_CHARS)] | None = None
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    guidance_scale: float = Field(default=5.0, ge=0.0, le=20.0, allow_inf_nan=False)
    image: ImageOptions = Field(default_factory=ImageOptions)
    video: VideoOptions = Field(default_factory=VideoOptions)
    webhook: Annotated[str, Field(max_length=MAX_WEBHOOK_URL_CHARS)] | None = Field(
        default=None, description="https URL that receives this job's events, signed (Standard Webhooks)"
    )
    webhook_events: WebhookEvents | None = Field(
        default=None,
        description="which events the webhook receives (default: job.succeeded, job.failed, job.cancelled)",
    )
    max_queue_seconds: int | None = Field(default=None, ge=1, le=86400)

    @field_validator("webhook")
    @classmethod
    def _webhook_url(cls, value: str | None) -> str | None:
        return None if value is None else check_webhook_url(value)

    @field_validator("webhook_events")
    @classmethod
    def _distinct_events(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else _distinct_events(value)

    @model_validator(mode="after")
    def _events_need_a_webhook(self) -> JobRequest:
        if self.webhook_events is not None and self.webhook is None:
            raise ValueError("webhook_events needs a webhook")
        return self

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return _check_prompt(value)

    @field_validator("negative_prompt")
    @classmethod
    def _negative_no_nul(cls, value: str | None) -> str | None:
        return None if value is None else _no_nul(value)

    @model_validator(mode="before")
    @classmethod
    def _must_be_object(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("the request must be a JSON object")
        return data


def _describe(exc: ValidationError) -> str:
    """Every problem, ``path: message``; field names (caller input) and the whole text are bounded."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(bounded(str(p), MAX_ECHO_CHARS) for p in err["loc"]) or "request"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        parts.append(f"{where}: {bounded(message, 200)}")
    return bounded("; ".join(parts))


def parse_job_request(data: Any, *, default_video_steps: int | None = None) -> JobRequest:
    """Validate a decoded JSON value; raise ``InvalidRequest`` with every problem listed.

    ``default_video_steps`` (the deployment profile's ``DEFAULT_VIDEO_STEPS``) fills
    ``video.num_inference_steps`` when the request does not set it.
    """
    if default_video_steps is not None and isinstance(data, dict):
        video = data.get("video", {})
        if isinstance(video, dict) and "num_inference_steps" not in video:
            data = {**data, "video": {**video, "num_inference_steps": default_video_steps}}
    try:
        return JobRequest.model_validate(data, strict=True)
    except ValidationError as exc:
        raise InvalidRequest(_describe(exc)) from exc


def parse_job_request_json(raw: str | bytes, *, default_video_steps: int | None = None) -> JobRequest:
    """Validate a JSON document (decoded as the layer decodes it: that step did not change)."""
    return parse_job_request(decode_json_document(raw), default_video_steps=default_video_steps)
