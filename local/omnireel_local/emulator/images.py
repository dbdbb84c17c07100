"""``POST /v1/images/generations``: vLLM-Omni's image API, answered with real, prompt-derived PNG/JPEG/WebP images."""

from __future__ import annotations

import asyncio
import base64
import io
import time
import zipfile
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .artwork import encode_image, render_prompt_image
from .config import EmulatorConfig
from .errors import EmulatorError
from .faults import apply_http_faults, raise_if_throttled
from .state import get_state, json_request, require_kind

DEFAULT_SIZE = (1024, 1024)
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
# Bytes that look like an image response but are not a PNG (fault "malformed").
MALFORMED_IMAGE = b"<html><body>upstream returned garbage instead of a PNG</body></html>"


class ImageGenerationRequest(BaseModel):
    """vLLM-Omni 0.26.0 ``ImageGenerationRequest`` (unknown keys are ignored)."""

    model_config = ConfigDict(extra="ignore")

    prompt: str
    model: str | None = None
    n: int = Field(default=1, ge=1, le=10)
    size: str | None = None
    response_format: Literal["b64_json", "file"] = "b64_json"
    user: str | None = None
    negative_prompt: str | None = None
    num_inference_steps: int | None = Field(default=None, ge=1, le=200)
    guidance_scale: float | None = Field(default=None, ge=0, le=20)
    true_cfg_scale: float | None = Field(default=None, ge=0, le=20)
    flow_shift: float | None = None
    seed: int | None = None
    output_format: Literal["png", "jpeg", "webp"] = "png"
    layers: int | None = Field(default=None, ge=2, le=10)
    lora: dict[str, Any] | None = None
    extra_params: dict[str, Any] | None = None
    generator_device: str | None = None
    bot_task: str | None = None
    system_prompt: str | None = None
    use_system_prompt: bool | None = None
    vae_use_slicing: bool | None = None
    vae_use_tiling: bool | None = None

    @field_validator("size")
    @classmethod
    def _size_has_x(cls, value: str | None) -> str | None:
        if value is not None and "x" not in value:
            raise ValueError("size must be in the format 'WIDTHxHEIGHT', e.g. '1024x1024'")
        return value


def parse_size(size: str) -> tuple[int, int]:
    try:
        width_s, height_s = size.split("x")
        width, height = int(width_s), int(height_s)
    except ValueError as exc:
        raise EmulatorError(400, f"Invalid size format: {size!r}. Expected 'WIDTHxHEIGHT', e.g. '1024x1024'") from exc
    if width <= 0 or height <= 0:
        raise EmulatorError(400, f"Invalid size {size!r}: width and height must be positive")
    return width, height


def check_image_size(config: EmulatorConfig, width: int, height: int) -> None:
    """The server's ``--max-generated-image-size`` (width * height), for every route that renders images."""
    if width * height > config.max_generated_image_size:
        raise EmulatorError(
            400,
            f"Requested image size {width}x{height} ({width * height} pixels) exceeds the maximum allowed "
            f"generated image size of {config.max_generated_image_size} pixels",
        )


async def generate_images(request: Request) -> Response:
    state = get_state(request)
    req = await json_request(request, ImageGenerationRequest)
    require_kind(state, "images")
    config = state.config
    served = config.served_model_name("images")
    if not config.accepts_model(req.model):
        raise EmulatorError(400, f"Model mismatch: requested '{req.model}', but server is serving '{served}'")
    width, height = parse_size(req.size) if req.size else DEFAULT_SIZE
    check_image_size(config, width, height)
    seed = req.seed if req.seed is not None else state.injector.random_seed()
    decision = state.injector.decide(config, "images", req.num_inference_steps)
    raise_if_throttled(decision)
    async with state.gate.slot("images", config.concurrency_per_instance, request):  # waits while the GPU is busy
        started = time.perf_counter()
        await apply_http_faults(decision, "Image generation failed")
        rendered = await asyncio.to_thread(_render_all, req, seed, width, height)
        elapsed = time.perf_counter() - started
    if decision.malformed:
        rendered = [MALFORMED_IMAGE for _ in rendered]
    if req.response_format == "file":
        return _file_response(rendered, req.output_format)
    return JSONResponse(
        {
            "created": int(time.time()),
            "data": [
                {"b64_json": base64.b64encode(data).decode("ascii"), "url": None, "revised_prompt": None}
                for data in rendered
            ],
            "output_format": req.output_format,
            "size": req.size,
            "cot_output": None,
            "metrics": {"stage_durations": {"diffusion": round(elapsed, 4)}, "peak_memory_mb": 0.0},
        }
    )


def _render_all(req: ImageGenerationRequest, seed: int, width: int, height: int) -> list[bytes]:
    # One generator seed yields n different images in diffusers; the emulator uses seed + index.
    return [
        encode_image(render_prompt_image(req.prompt, seed + index, width, height), req.output_format)
        for index in range(req.n)
    ]


def _file_response(images: list[bytes], output_format: str) -> Response:
    if len(images) == 1:
        return Response(
            images[0],
            media_type=MEDIA_TYPES[output_format],
            headers={"Content-Disposition": f'attachment; filename="image.{output_format}"'},
        )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as archive:
        for index, data in enumerate(images):
            archive.writestr(f"image_{index}.{output_format}", data)
    return Response(
        buf.getvalue(),
        media_type="application/zip",
        headers={"Content-Disposition": 'attachment; filename="images.zip"'},
    )
