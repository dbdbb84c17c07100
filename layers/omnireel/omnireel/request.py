"""The job request: what an app asks for, validated with messages a person can act on."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from omnireel.bounded import MAX_ECHO_CHARS, bounded
from omnireel.errors import InvalidRequest

MAX_PROMPT_CHARS = 2000
_SIZE = re.compile(r"^(\d{2,4})x(\d{2,4})$")


class ImageOptions(BaseModel):
    """Parameters of the real-time image call (FLUX.2-klein)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    size: str = Field(default="1024x1024", description="WIDTHxHEIGHT, each 256..2048 and a multiple of 16")
    num_inference_steps: int = Field(default=4, ge=1, le=50)

    @field_validator("size")
    @classmethod
    def _check_size(cls, value: str) -> str:
        match = _SIZE.fullmatch(value)
        if not match:
            raise ValueError("must look like 1024x1024")
        width, height = int(match[1]), int(match[2])
        for side in (width, height):
            if not 256 <= side <= 2048 or side % 16:
                raise ValueError("each side must be 256..2048 and a multiple of 16")
        return value

    @property
    def width(self) -> int:
        return int(self.size.split("x")[0])

    @property
    def height(self) -> int:
        return int(self.size.split("x")[1])


_INVISIBLE = {"Cc", "Cf", "Zs", "Zl", "Zp"}


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def _check_prompt(value: str) -> str:
    # Blank includes invisible-only text (zero-width spaces, BOMs, control characters).
    if all(ch.isspace() or unicodedata.category(ch) in _INVISIBLE for ch in value):
        raise ValueError("must not be blank")
    return _no_nul(value)


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
        if (value - 1) % 4:
            raise ValueError("must be 4k+1 (5, 9, 13, 17, ..., 161)")
        return value


Prompt = Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS)]


class JobRequest(BaseModel):
    """A prompt and everything that shapes the image and the video made from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: Prompt
    negative_prompt: Annotated[str, Field(max_length=MAX_PROMPT_CHARS)] | None = None
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    guidance_scale: float = Field(default=5.0, ge=0.0, le=20.0, allow_inf_nan=False)
    image: ImageOptions = Field(default_factory=ImageOptions)
    video: VideoOptions = Field(default_factory=VideoOptions)

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
    """Validate a JSON document (API body or inbox ``.json`` file)."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(f"the request is not valid UTF-8 (byte {exc.start})") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidRequest(bounded(f"the request is not valid JSON: {exc}")) from exc
    except RecursionError:
        raise InvalidRequest("the request is not valid JSON: nested too deeply") from None
    return parse_job_request(data, default_video_steps=default_video_steps)
