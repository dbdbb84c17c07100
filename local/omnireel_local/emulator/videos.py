"""Video routes: ``POST /v1/videos/sync`` (raw MP4) and the async job API ``/v1/videos``.

Both take ``multipart/form-data`` parsed with Starlette's ``request.form()`` at its default limits, exactly as the real
FastAPI server does (a non-file part over 1 MiB gives Starlette's 400 "Part exceeded maximum size of 1024KB.").
The MP4 is real H.264 (libx264, yuv420p) at ``fps``, animated from the reference image (slow zoom + pan + hue drift) or,
without one, from a prompt-derived picture. Its geometry is what vLLM-Omni 0.26.0's Wan pipelines render: width and
height rounded down to a multiple of 16, a frame count not of the form 4k+1 made ``4 * (n // 4) + 1``
(``wan_frame_geometry``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
import math
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import av
import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .artwork import render_prompt_image
from .errors import EmulatorError, error_body, validation_error
from .faults import Decision, apply_http_faults, raise_if_throttled
from .state import EmulatorState, get_state, media_type, require_kind

DEFAULT_WIDTH, DEFAULT_HEIGHT, DEFAULT_NUM_FRAMES, DEFAULT_FPS = 832, 480, 81, 24
JSON_FIELDS = ("lora", "extra_params", "image_reference", "video_reference", "audio_reference")
FILE_FIELDS = ("input_reference", "input_references")


class VideoGenerationRequest(BaseModel):
    """vLLM-Omni 0.26.0 ``VideoGenerationRequest`` as built by ``_parse_video_form`` (unknown fields ignored)."""

    model_config = ConfigDict(extra="ignore")

    prompt: str
    model: str | None = None
    seconds: str | None = Field(default=None, pattern=r"^[1-9]\d*$")
    size: str | None = Field(default=None, pattern=r"^\d+x\d+$")
    width: int | None = Field(default=None, gt=0)
    height: int | None = Field(default=None, gt=0)
    num_frames: int | None = Field(default=None, gt=0)
    fps: int | None = Field(default=None, gt=0)
    num_inference_steps: int | None = Field(default=None, ge=1, le=200)
    guidance_scale: float | None = Field(default=None, ge=0, le=20)
    guidance_scale_2: float | None = Field(default=None, ge=0, le=20)
    boundary_ratio: float | None = Field(default=None, ge=0, le=1)
    flow_shift: float | None = None
    true_cfg_scale: float | None = Field(default=None, ge=0, le=20)
    seed: int | None = None
    negative_prompt: str | None = None
    generate_sound: bool | None = None
    sound_duration: float | None = Field(default=None, gt=0)
    enable_frame_interpolation: bool | None = None
    frame_interpolation_exp: int | None = Field(default=None, ge=1)
    frame_interpolation_scale: float | None = Field(default=None, gt=0)
    frame_interpolation_model_path: str | None = None
    user: str | None = None
    lora: dict[str, Any] | None = None
    extra_params: dict[str, Any] | None = None
    image_reference: dict[str, Any] | None = None
    video_reference: dict[str, Any] | None = None
    audio_reference: dict[str, Any] | None = None


@dataclass(frozen=True)
class VideoParams:
    width: int
    height: int
    num_frames: int
    fps: int
    seed: int


@dataclass
class ParsedVideoForm:
    request: VideoGenerationRequest
    reference: Image.Image | None


# --------------------------------------------------------------------------------------------------------------------
# Form parsing and parameter resolution


async def parse_video_form(request: Request, state: EmulatorState) -> ParsedVideoForm:
    if media_type(request) not in ("multipart/form-data", "application/x-www-form-urlencoded"):
        raise EmulatorError(400, "Field required: prompt (the video routes take multipart/form-data)")
    form: FormData = await request.form()  # Starlette defaults: max_part_size 1 MiB, max_files/fields 1000
    data: dict[str, Any] = {}
    for key in form:
        if key in FILE_FIELDS:
            continue
        value = form.get(key)
        if isinstance(value, UploadFile):
            raise EmulatorError(400, f"{key}: Input should be a valid string (got a file part)")
        if value == "":
            continue  # FastAPI treats an empty optional form value as unset
        if key in JSON_FIELDS:
            data[key] = _parse_form_json(value)
        else:
            data[key] = value
    try:
        req = VideoGenerationRequest.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc) from exc

    input_reference = form.get("input_reference")
    if input_reference is not None and not isinstance(input_reference, UploadFile):
        if input_reference != "":
            raise EmulatorError(400, "input_reference: Expected UploadFile (send it as a file part with a filename)")
        input_reference = None
    provided = [
        name
        for name, present in (
            ("input_reference", input_reference is not None),
            ("image_reference", req.image_reference is not None),
            ("video_reference", req.video_reference is not None),
        )
        if present
    ]
    if len(provided) > 1:
        raise EmulatorError(
            400, f"Only one of input_reference, image_reference or video_reference may be provided (got {provided})."
        )
    reference: Image.Image | None = None
    if isinstance(input_reference, UploadFile):
        reference = _decode_media_bytes(await input_reference.read(), "input_reference")
    elif req.image_reference is not None:
        reference = _decode_image_reference(req.image_reference)
    elif req.video_reference is not None:
        reference = _decode_video_reference(req.video_reference)
    await form.close()
    return ParsedVideoForm(request=req, reference=reference)


def _parse_form_json(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError as exc:
        raise EmulatorError(400, "Invalid JSON in form field.") from exc


def _decode_data_url(url: str, prefix: str, field_name: str) -> bytes:
    if url.startswith(("http://", "https://")):
        raise EmulatorError(
            400, f"{field_name}: http(s) URLs are not supported by the emulator (it has no network); use a data: URL"
        )
    if not url.startswith(prefix) or "," not in url:
        raise EmulatorError(400, f"{field_name}: expected a '{prefix}...;base64,...' data URL or an http(s) URL")
    try:
        return base64.b64decode(url.split(",", 1)[1], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EmulatorError(400, f"{field_name}: invalid base64 data") from exc


def _decode_image_reference(ref: dict[str, Any]) -> Image.Image:
    if "file_id" in ref and not ref.get("image_url"):
        raise EmulatorError(400, "image_reference.file_id is not supported yet; pass image_reference.image_url")
    url = ref.get("image_url")
    if not isinstance(url, str) or not url:
        raise EmulatorError(400, "image_reference must be a JSON object with an 'image_url' string")
    return _decode_media_bytes(_decode_data_url(url, "data:image", "image_reference.image_url"), "image_reference")


def _decode_video_reference(ref: dict[str, Any]) -> Image.Image:
    url = ref.get("video_url")
    if not isinstance(url, str) or not url:
        raise EmulatorError(400, "video_reference must be a JSON object with a 'video_url' string")
    return _decode_media_bytes(_decode_data_url(url, "data:video", "video_reference.video_url"), "video_reference")


def _decode_media_bytes(data: bytes, field_name: str) -> Image.Image:
    """An image, or the first frame of a video (the server auto-detects the kind of ``input_reference``)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError):
        pass
    try:
        with av.open(io.BytesIO(data)) as container:
            for frame in container.decode(video=0):
                return frame.to_image().convert("RGB")
    except (av.FFmpegError, ValueError, IndexError, StopIteration):
        pass
    raise EmulatorError(400, f"{field_name}: could not decode the data as an image or a video")


SPATIAL_MULTIPLE = 16  # Wan pipelines: vae_scale_factor_spatial (8) x 2
TEMPORAL_FACTOR = 4  # Wan VAE's vae_scale_factor_temporal: frame counts are 4k+1


def wan_frame_geometry(width: int, height: int, num_frames: int) -> tuple[int, int, int]:
    """What vLLM-Omni 0.26.0's Wan pipelines make of a request (``pipeline_wan2_2_vace.py`` ``forward``): width and
    height rounded *down* to a multiple of 16; a frame count that is not 4k+1 becomes ``4 * (n // 4) + 1``
    (16 -> 17, 18 -> 17, 2 -> 1), at least 1. No error: the server renders the rounded geometry."""
    width = width // SPATIAL_MULTIPLE * SPATIAL_MULTIPLE
    height = height // SPATIAL_MULTIPLE * SPATIAL_MULTIPLE
    if num_frames % TEMPORAL_FACTOR != 1:
        num_frames = num_frames // TEMPORAL_FACTOR * TEMPORAL_FACTOR + 1
    return width, height, max(num_frames, 1)


def resolve_params(req: VideoGenerationRequest, state: EmulatorState) -> VideoParams:
    """``resolve_video_params`` (size overrides width/height, fps defaults to 24, num_frames from seconds*fps), then
    the Wan pipeline's rounding (``wan_frame_geometry``)."""
    return video_params(state, req.width, req.height, req.size, req.num_frames, req.seconds, req.fps, req.seed)


def video_params(
    state: EmulatorState,
    width: int | None,
    height: int | None,
    size: str | None,
    num_frames: int | None,
    seconds: str | None,
    fps: int | None,
    seed: int | None,
) -> VideoParams:
    config = state.config
    if size:
        width, height = (int(v) for v in size.split("x"))
    fps = fps or DEFAULT_FPS
    if num_frames is None:
        num_frames = int(seconds) * fps if seconds else DEFAULT_NUM_FRAMES
    asked = f"{width or DEFAULT_WIDTH}x{height or DEFAULT_HEIGHT}"
    width, height, num_frames = wan_frame_geometry(width or DEFAULT_WIDTH, height or DEFAULT_HEIGHT, num_frames)
    if not width or not height:
        # The real pipeline builds a zero-sized latent and fails inside torch (a 500 with a framework message); the
        # emulator refuses up front and says why (local/README.md, "Known differences").
        raise EmulatorError(
            400, f"Requested video size {asked} rounds down to {width}x{height}: width and height must be at least 16"
        )
    if width * height > config.max_video_pixels:
        raise EmulatorError(
            400,
            f"Requested video size {width}x{height} exceeds the emulator maximum of {config.max_video_pixels} pixels",
        )
    if num_frames > config.max_video_frames:
        raise EmulatorError(
            400, f"num_frames={num_frames} exceeds the emulator maximum of {config.max_video_frames} frames"
        )
    seed = seed if seed is not None else state.injector.random_seed()
    return VideoParams(width=width, height=height, num_frames=num_frames, fps=fps, seed=seed)


# --------------------------------------------------------------------------------------------------------------------
# Rendering


def _hue_matrix(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array(
        [
            [0.299 + 0.701 * c + 0.168 * s, 0.587 - 0.587 * c + 0.330 * s, 0.114 - 0.114 * c - 0.497 * s],
            [0.299 - 0.299 * c - 0.328 * s, 0.587 + 0.413 * c + 0.035 * s, 0.114 - 0.114 * c + 0.292 * s],
            [0.299 - 0.300 * c + 1.250 * s, 0.587 - 0.588 * c - 1.050 * s, 0.114 + 0.886 * c - 0.203 * s],
        ],
        dtype=np.float32,
    )


def animate(base: Image.Image, params: VideoParams) -> Iterator[np.ndarray]:
    """Frames of a slow zoom-in with a seed-chosen pan direction and a gentle hue drift."""
    w, h = params.width, params.height
    rng = np.random.default_rng(params.seed)
    pan_x, pan_y = rng.uniform(-1, 1, 2)
    hue_span = float(rng.uniform(0.15, 0.45)) * (1 if rng.random() < 0.5 else -1)
    last = max(params.num_frames - 1, 1)
    for index in range(params.num_frames):
        t = index / last
        zoom = 1.0 + 0.15 * t
        cw, ch = w / zoom, h / zoom
        cx = w / 2 + pan_x * (w - cw) / 2
        cy = h / 2 + pan_y * (h - ch) / 2
        box = (cx - cw / 2, cy - ch / 2, cx + cw / 2, cy + ch / 2)
        frame = np.asarray(base.resize((w, h), Image.Resampling.BILINEAR, box=box), dtype=np.float32)
        frame = frame @ _hue_matrix(hue_span * t).T
        yield np.clip(frame, 0, 255).astype(np.uint8)


def encode_mp4(frames: Iterator[np.ndarray], width: int, height: int, fps: int) -> bytes:
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        # No macroblock tree / rate-control lookahead: with them libx264 gave different bytes for the same frames when
        # encoders ran in other threads at small sizes (64x48: 4 different outputs in 80 encodes), so "same request,
        # same video" failed under load. Without them every encode tested was identical (64x48 to 480x320).
        # The fastest preset on one encoder thread: the emulator's video is a stand-in whose size and quality matter
        # less than the CPU every test job spends on it (the pipeline's 17 frames at 480x320: 0.078 -> 0.026 CPU-s,
        # 32 -> 64 KB; still H.264 in MP4, yuv420p).
        stream.options = {"preset": "ultrafast", "crf": "23", "x264-params": "rc-lookahead=0:mbtree=0"}
        stream.thread_count = 1
        for index, array in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(array, format="rgb24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))  # flush: libx264 buffers frames (lookahead / B-frames)
    return buf.getvalue()


def render_video(prompt: str, reference: Image.Image | None, params: VideoParams) -> bytes:
    if reference is not None:
        base = ImageOps.fit(reference, (params.width, params.height), Image.Resampling.LANCZOS)
    else:
        base = render_prompt_image(prompt, params.seed, params.width, params.height)
    return encode_mp4(animate(base, params), params.width, params.height, params.fps)


def malformed_mp4(mp4: bytes) -> bytes:
    """A truncated MP4: still starts with ``....ftyp`` (passes naive checks) but does not decode."""
    return mp4[: max(64, len(mp4) // 3)]


async def _generate(state: EmulatorState, parsed: ParsedVideoForm, params: VideoParams, decision: Decision) -> bytes:
    await apply_http_faults(decision, "Video generation failed")
    mp4 = await asyncio.to_thread(render_video, parsed.request.prompt, parsed.reference, params)
    return malformed_mp4(mp4) if decision.malformed else mp4


# --------------------------------------------------------------------------------------------------------------------
# POST /v1/videos/sync


async def create_video_sync(request: Request) -> Response:
    state = get_state(request)
    parsed = await parse_video_form(request, state)
    require_kind(state, "videos")
    params = resolve_params(parsed.request, state)
    decision = state.injector.decide(state.config, "videos", parsed.request.num_inference_steps)
    raise_if_throttled(decision)
    timeout = state.config.video_sync_timeout_s
    timing: dict[str, float] = {}

    async def gated() -> bytes:
        # The server's timeout covers the wait for the GPU too (the request is queued in its engine meanwhile).
        async with state.gate.slot("videos", state.config.concurrency_per_instance, request):
            timing["started"] = time.perf_counter()
            return await _generate(state, parsed, params, decision)

    try:
        content = await asyncio.wait_for(gated(), timeout=timeout)
    except TimeoutError as exc:
        raise EmulatorError(504, f"Video generation timed out after {timeout:g}s") from exc
    elapsed = time.perf_counter() - timing["started"]
    return Response(
        content,
        media_type="video/mp4",
        headers={
            "X-Request-Id": f"video_sync-{uuid.uuid4()}",
            "X-Model": state.config.served_model_name("videos"),
            "X-Inference-Time-S": f"{elapsed:.3f}",
            "X-Stage-Durations": json.dumps({"diffusion": round(elapsed, 4)}),
            "X-Peak-Memory-MB": "0.0",
        },
    )


# --------------------------------------------------------------------------------------------------------------------
# Async job API: POST /v1/videos, GET /v1/videos, GET/DELETE /v1/videos/{id}, GET /v1/videos/{id}/content


@dataclass
class VideoJob:
    id: str
    model: str
    prompt: str
    size: str | None  # VideoResponse.size: the requested ``size`` as sent (None without one), not the rendered one
    seconds: str
    created_at: int
    status: str = "queued"
    progress: int = 0
    completed_at: int | None = None
    error: dict[str, Any] | None = None
    inference_time_s: float | None = None
    stage_durations: dict[str, float] | None = None
    peak_memory_mb: float | None = None
    content: bytes | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def to_response(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "video",
            "status": self.status,
            "model": self.model,
            "prompt": self.prompt,
            "size": self.size,
            "seconds": self.seconds,
            "progress": self.progress,
            "quality": "default",
            "created_at": self.created_at,
            "completed_at": self.completed_at,
            "error": self.error,
            "media_type": "video/mp4",
            "file_name": f"{self.id}.mp4",
            "inference_time_s": self.inference_time_s,
            "stage_durations": self.stage_durations,
            "peak_memory_mb": self.peak_memory_mb,
            "expires_at": None,
            "remixed_from_video_id": None,
        }


class VideoJobStore:
    """In-memory job store (insertion-ordered), like the single-process server's."""

    def __init__(self) -> None:
        self.jobs: dict[str, VideoJob] = {}

    async def run(
        self, job: VideoJob, state: EmulatorState, parsed: ParsedVideoForm, params: VideoParams, decision: Decision
    ) -> None:
        job.status, job.progress = "in_progress", 1
        started = time.perf_counter()
        try:
            job.content = await _generate(state, parsed, params, decision)
        except EmulatorError as exc:
            job.status, job.error = "failed", {"code": str(exc.status), "message": exc.message}
        except asyncio.CancelledError:
            job.status, job.error = "failed", {"code": "cancelled", "message": "Video generation was cancelled"}
            raise
        else:
            elapsed = time.perf_counter() - started
            job.status, job.progress = "completed", 100
            job.inference_time_s = round(elapsed, 4)
            job.stage_durations = {"diffusion": round(elapsed, 4)}
            job.peak_memory_mb = 0.0
        finally:
            job.completed_at = int(time.time())

    def shutdown(self) -> None:
        for job in self.jobs.values():
            if job.task is not None and not job.task.done():
                job.task.cancel()


def job_store(state: EmulatorState) -> VideoJobStore:
    store = state.video_jobs
    assert isinstance(store, VideoJobStore)
    return store


async def create_video(request: Request) -> Response:
    state = get_state(request)
    parsed = await parse_video_form(request, state)
    require_kind(state, "videos")
    params = resolve_params(parsed.request, state)
    decision = state.injector.decide(state.config, "videos", parsed.request.num_inference_steps)
    if decision.outcome == "throttle":
        raise EmulatorError(429, "Too many requests: injected throttle (emulator)")
    job = VideoJob(
        id=f"video_gen_{uuid.uuid4().hex}",
        model=state.config.served_model_name("videos"),
        prompt=parsed.request.prompt,
        size=parsed.request.size,
        seconds=parsed.request.seconds or "4",
        created_at=int(time.time()),
    )
    store = job_store(state)
    store.jobs[job.id] = job
    job.task = asyncio.get_running_loop().create_task(store.run(job, state, parsed, params, decision))
    return JSONResponse(job.to_response())


def _job(request: Request) -> VideoJob:
    job = job_store(get_state(request)).jobs.get(request.path_params["video_id"])
    if job is None:
        raise EmulatorError(404, "Video not found")
    return job


async def retrieve_video(request: Request) -> Response:
    job = _job(request)
    if job.status == "failed":
        return JSONResponse(job.to_response(), status_code=500)
    return JSONResponse(job.to_response())


async def video_content(request: Request) -> Response:
    job = _job(request)
    if job.status == "failed":
        message = (job.error or {}).get("message", "Video generation failed")
        return JSONResponse(error_body(422, message), status_code=422)
    if job.status != "completed" or job.content is None:
        raise EmulatorError(404, "Generation is still in-progress")
    return Response(
        job.content,
        media_type="video/mp4",
        headers={"Content-Disposition": f'attachment; filename="{job.id}.mp4"'},
    )


async def delete_video(request: Request) -> Response:
    job = _job(request)
    if job.task is not None and not job.task.done():
        job.task.cancel()
    job_store(get_state(request)).jobs.pop(job.id, None)
    return JSONResponse({"id": job.id, "deleted": True, "object": "video.deleted"})


async def list_videos(request: Request) -> Response:
    params = request.query_params
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise EmulatorError(400, "order must be 'asc' or 'desc'")
    try:
        limit = int(params.get("limit", "20"))
    except ValueError as exc:
        raise EmulatorError(400, "limit must be an integer") from exc
    if not 0 <= limit <= 100:
        raise EmulatorError(400, "limit must be between 0 and 100")
    jobs = list(job_store(get_state(request)).jobs.values())
    if order == "desc":
        jobs.reverse()
    if after := params.get("after"):
        ids = [job.id for job in jobs]
        jobs = jobs[ids.index(after) + 1 :] if after in ids else []
    page = jobs[:limit]
    return JSONResponse(
        {
            "object": "list",
            "data": [job.to_response() for job in page],
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
            "has_more": len(jobs) > len(page),
        }
    )
