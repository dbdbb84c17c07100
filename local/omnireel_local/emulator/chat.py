"""``POST /v1/chat/completions`` of a diffusion model, as vLLM-Omni 0.26.0 answers it.

Read from the 0.26.0 wheel (``entrypoints/openai/api_server.py`` ``create_chat_completion``, ``serving_chat.py``
``_create_diffusion_chat_completion`` and ``_extract_diffusion_prompt_and_media``):

- the route takes ``application/json`` only (vLLM's ``validate_json_request``: 400 otherwise), a body with ``messages``;
- the prompt is the text of every ``user`` message joined with spaces (string content, ``{"type": "text"}`` parts);
  ``data:image`` ``image_url`` parts are reference images;
- generation parameters come from the root of the body or from a nested ``extra_body`` object (the way the examples
  send them): ``height``/``width`` (or ``size`` "WxH"), ``num_inference_steps``, ``seed``, ``negative_prompt``,
  ``num_outputs_per_prompt``, ``num_frames``, ``fps``;
- an image model answers a ``chat.completion`` whose assistant message content is a list of
  ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`` parts, one per image;
- a video model's output is not a list of images but a NumPy video array, which that handler passes to PIL's
  ``save``: 0.26.0 answers 500 "Image generation failed: 'numpy.ndarray' object has no attribute 'save'". The
  emulator answers the same (after validating the request as the server would, without rendering), so that a client
  written for a later vLLM-Omni that returns ``video_url`` parts learns here, not on SageMaker, that the pinned
  container makes videos through ``/v1/videos/sync`` only (local/README.md, "Known differences").
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .artwork import encode_image, render_prompt_image
from .errors import EmulatorError
from .faults import apply_http_faults, raise_if_throttled
from .images import DEFAULT_SIZE, check_image_size, parse_size
from .state import EmulatorState, get_state, json_request
from .videos import video_params

# What 0.26.0's diffusion chat handler answers for a Wan video model (see the module docstring).
VIDEO_MODEL_CHAT_FAILURE = "Image generation failed: 'numpy.ndarray' object has no attribute 'save'"
NOT_SUPPORTED = "The model does not support Chat Completions API"


class ChatCompletionRequest(BaseModel):
    """The part of vLLM's ``ChatCompletionRequest`` a diffusion model reads (other fields are accepted)."""

    model_config = ConfigDict(extra="allow")

    messages: list[dict[str, Any]]
    model: str | None = None
    seed: int | None = None
    extra_body: dict[str, Any] | None = None


class DiffusionArgs(BaseModel):
    """Generation parameters (root or ``extra_body``); unknown keys are ignored as the handler ignores them."""

    model_config = ConfigDict(extra="ignore")

    height: int | None = Field(default=None, ge=1)
    width: int | None = Field(default=None, ge=1)
    size: str | None = None
    num_inference_steps: int | None = Field(default=None, ge=1)
    seed: int | None = None
    negative_prompt: str | None = None
    num_outputs_per_prompt: int = Field(default=1, ge=1, le=10)
    num_frames: int | None = Field(default=None, ge=1)
    fps: int | None = Field(default=None, ge=1)


def prompt_of(messages: list[dict[str, Any]]) -> str:
    """``_extract_diffusion_prompt_and_media``: the text of every user message, joined with spaces."""
    parts: list[str] = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content", "")
        if isinstance(content, str):
            parts.append(content)
            continue
        for item in content if isinstance(content, list) else []:
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, dict) and (item.get("type") == "text" or ("text" in item and "type" not in item)):
                parts.append(str(item.get("text", "")))
    return " ".join(parts).strip()


def _arguments(req: ChatCompletionRequest) -> DiffusionArgs:
    root = {k: v for k, v in (req.model_extra or {}).items()}
    if req.seed is not None:
        root["seed"] = req.seed
    merged = {**root, **(req.extra_body or {})}
    try:
        return DiffusionArgs.model_validate(merged)
    except ValueError as exc:
        raise EmulatorError(400, str(exc)) from exc


async def create_chat_completion(request: Request) -> Response:
    state = get_state(request)
    req = await json_request(request, ChatCompletionRequest)
    config = state.config
    args = _arguments(req)
    prompt = prompt_of(req.messages)
    if config.serves("images"):
        return await _image_completion(state, prompt, args, request)
    if config.serves("videos"):
        # The geometry is checked as the video routes check it (a bad size is the same 400 there).
        video_params(state, args.width, args.height, args.size, args.num_frames, None, args.fps, args.seed)
        raise EmulatorError(500, VIDEO_MODEL_CHAT_FAILURE)
    raise EmulatorError(404, NOT_SUPPORTED)


async def _image_completion(state: EmulatorState, prompt: str, args: DiffusionArgs, request: Request) -> Response:
    config = state.config
    if args.width and args.height:
        width, height = args.width, args.height
    elif args.size:
        width, height = parse_size(args.size.lower())
    else:
        width, height = DEFAULT_SIZE
    check_image_size(config, width, height)
    seed = args.seed if args.seed is not None else state.injector.random_seed()
    decision = state.injector.decide(config, "images", args.num_inference_steps)
    raise_if_throttled(decision)
    async with state.gate.slot("images", config.concurrency_per_instance, request):  # the same GPU as the image route
        started = time.perf_counter()
        await apply_http_faults(decision, "Image generation failed")
        pngs = await asyncio.to_thread(
            lambda: [
                encode_image(render_prompt_image(prompt, seed + index, width, height), "png")
                for index in range(args.num_outputs_per_prompt)
            ]
        )
        elapsed = round(time.perf_counter() - started, 4)
    words = len(prompt.split())
    content = [
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode("ascii")},
            "stage_durations": {"diffusion": elapsed},
            "peak_memory_mb": 0.0,
        }
        for png in pngs
    ]
    return JSONResponse(
        {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": config.served_model_name("images"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                    "logprobs": None,
                    "stop_reason": None,
                }
            ],
            "usage": {"prompt_tokens": words, "completion_tokens": 1, "total_tokens": words + 1},
            "metrics": None,
        }
    )
