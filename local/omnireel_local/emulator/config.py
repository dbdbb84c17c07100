"""Emulator configuration: which model it pretends to be, what it serves, latency and faults.

Environment variables (all optional; CLI flags of ``python -m omnireel_local.emulator`` take precedence):

- ``SM_VLLM_MODEL`` -- the model the emulated container serves, as on SageMaker. Decides which handlers are
  "initialized": FLUX-like names serve images, Wan-like names serve video, TTS-like names serve speech.
  ``*`` (the default) serves everything.
- ``OMNIREEL_EMULATOR_MODEL`` -- same as ``SM_VLLM_MODEL`` (used when that one is unset).
- ``OMNIREEL_EMULATOR_ROUTES`` -- comma list overriding the served kinds: ``images,videos,speech``.
- ``OMNIREEL_EMULATOR_SEED`` -- integer seed for fault-injection RNGs and for "random" request seeds.
- ``OMNIREEL_EMULATOR_FAULTS`` -- JSON object per route kind, e.g.
  ``{"images": {"error_rate": 0.5, "latency_s": 0.2}, "videos": {"hang": true}, "speech": {"malformed": true}}``.
  Keys per route: ``latency_s``, ``latency_per_step_s``, ``error_rate``, ``throttle_rate``, ``malformed_rate``
  (or ``malformed: true``), ``hang_rate`` (or ``hang: true``), ``hang_max_s``.
- ``OMNIREEL_EMULATOR_LATENCY`` -- JSON object of per-route latency seconds, e.g. ``{"images": 0.5, "videos": 3}``
  (shorthand for ``latency_s`` in the faults).
- ``OMNIREEL_EMULATOR_SPEECH_REALTIME_FACTOR`` -- how much faster than real time PCM chunks are produced
  (1.0 = real time, 10 = ten times faster, 0 = no pacing at all).
- ``OMNIREEL_EMULATOR_SPEECH_CHUNK_MS`` -- audio per streamed PCM chunk (default 80 ms).
- ``OMNIREEL_EMULATOR_WS_CONFIG_TIMEOUT_S`` / ``OMNIREEL_EMULATOR_WS_IDLE_TIMEOUT_S`` -- WebSocket timeouts (10 / 30 s).
- ``OMNIREEL_EMULATOR_MAX_GENERATED_IMAGE_SIZE`` -- max width*height of a generated image (server flag
  ``--max-generated-image-size``; the emulator defaults to 2048*2048).
- ``OMNIREEL_EMULATOR_CONCURRENCY_PER_INSTANCE`` -- generation requests (images, videos) one instance runs at once
  (default 1: a diffusion pipeline denoises one request at a time); more wait in the container (``capacity``). The
  local stack sets it from the template (``ImageConcurrencyPerInstance``, ``VideoMaxConcurrentInvocationsPerInstance``).
- ``VLLM_OMNI_VIDEO_SYNC_TIMEOUT`` -- server-side timeout of ``/v1/videos/sync`` in seconds (default 600),
  as in the DLC.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

RouteKind = Literal["images", "videos", "speech"]
ROUTE_KINDS: tuple[RouteKind, ...] = ("images", "videos", "speech")

# The variant's current instance count, sent by the local SageMaker hosting (omnireel_local.sagemaker_hosting) on its
# requests to the container: one emulator process plays every instance (``capacity``). Defined here because the local
# stack (.venv, no Starlette) imports this module and not the app.
INSTANCE_COUNT_HEADER = "x-omnireel-instance-count"

ALL_MODELS = "*"
DEFAULT_MODELS: dict[RouteKind, str] = {
    "images": "black-forest-labs/FLUX.2-klein-4B",
    "videos": "Wan-AI/Wan2.1-VACE-1.3B-diffusers",
    "speech": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
}

_IMAGE_HINTS = ("flux", "stable-diffusion", "sdxl", "qwen-image", "z-image", "hunyuanimage", "bagel", "glm-image")
_VIDEO_HINTS = ("wan", "vace", "ltx", "hunyuanvideo", "cogvideo", "mochi")
_SPEECH_HINTS = ("tts", "cosyvoice", "speech", "fish-speech", "voxtral")


def kinds_for_model(model: str) -> frozenset[RouteKind]:
    """Which handlers a real vLLM-Omni server would initialize for ``model`` (by name heuristics)."""
    if model.strip() == ALL_MODELS:
        return frozenset(ROUTE_KINDS)
    name = model.lower()
    if any(hint in name for hint in _SPEECH_HINTS):
        return frozenset({"speech"})
    if any(hint in name for hint in _VIDEO_HINTS):
        return frozenset({"videos"})
    if any(hint in name for hint in _IMAGE_HINTS):
        return frozenset({"images"})
    return frozenset()


class RouteFaults(BaseModel):
    """Latency and fault injection for one route kind. Rates are probabilities in 0..1, drawn per request."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    latency_s: float = Field(default=0.0, ge=0, le=3600)
    latency_per_step_s: float = Field(default=0.0, ge=0, le=60)
    error_rate: float = Field(default=0.0, ge=0, le=1)
    throttle_rate: float = Field(default=0.0, ge=0, le=1)
    malformed_rate: float = Field(default=0.0, ge=0, le=1)
    hang_rate: float = Field(default=0.0, ge=0, le=1)
    hang_max_s: float = Field(default=3600.0, gt=0, le=3600)

    @model_validator(mode="before")
    @classmethod
    def _boolean_shorthands(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            for short, rate in (("hang", "hang_rate"), ("malformed", "malformed_rate")):
                if short in data:
                    value = data.pop(short)
                    data[rate] = 1.0 if value is True else 0.0 if value is False else value
        return data


class EmulatorConfig(BaseModel):
    """Everything the emulator can be told. Mutable at runtime through ``PUT /_emulator/config``."""

    model_config = ConfigDict(extra="forbid")

    model: str = ALL_MODELS
    routes: list[RouteKind] | None = Field(default=None, description="Override the served kinds (else from model).")
    seed: int | None = None
    faults: dict[RouteKind, RouteFaults] = Field(default_factory=dict)
    speech_realtime_factor: float = Field(default=1.0, ge=0, le=10_000)
    speech_chunk_ms: int = Field(default=80, ge=10, le=2000)
    ws_config_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    ws_idle_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    max_generated_image_size: int = Field(default=2048 * 2048, gt=0)
    max_video_pixels: int = Field(default=1920 * 1088, gt=0)
    max_video_frames: int = Field(default=481, gt=0)
    video_sync_timeout_s: float = Field(default=600.0, gt=0)
    concurrency_per_instance: int = Field(default=1, ge=1, le=1000)

    def served_kinds(self) -> frozenset[RouteKind]:
        if self.routes is not None:
            return frozenset(self.routes)
        return kinds_for_model(self.model)

    def serves(self, kind: RouteKind) -> bool:
        return kind in self.served_kinds()

    def served_model_name(self, kind: RouteKind) -> str:
        """The model name the server reports for ``kind`` (the real one, or a typical one in ``*`` mode)."""
        return DEFAULT_MODELS[kind] if self.model.strip() == ALL_MODELS else self.model

    def accepts_model(self, requested: str | None) -> bool:
        return requested is None or self.model.strip() == ALL_MODELS or requested == self.model

    def faults_for(self, kind: RouteKind) -> RouteFaults:
        return self.faults.get(kind) or RouteFaults()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> EmulatorConfig:
        """From ``SM_VLLM_MODEL`` / ``OMNIREEL_EMULATOR_*`` / ``VLLM_OMNI_VIDEO_SYNC_TIMEOUT``; ``overrides`` win."""
        env = os.environ if environ is None else environ
        data: dict[str, Any] = {}
        model = env.get("SM_VLLM_MODEL") or env.get("OMNIREEL_EMULATOR_MODEL")
        if model:
            data["model"] = model
        if routes := env.get("OMNIREEL_EMULATOR_ROUTES"):
            data["routes"] = [r.strip() for r in routes.split(",") if r.strip()]
        if seed := env.get("OMNIREEL_EMULATOR_SEED"):
            data["seed"] = int(seed)
        faults: dict[str, dict[str, Any]] = {}
        if raw := env.get("OMNIREEL_EMULATOR_FAULTS"):
            faults = {k: dict(v) for k, v in json.loads(raw).items()}
        if raw := env.get("OMNIREEL_EMULATOR_LATENCY"):
            for kind, seconds in json.loads(raw).items():
                faults.setdefault(kind, {})["latency_s"] = seconds
        if faults:
            data["faults"] = faults
        for env_name, field in (
            ("OMNIREEL_EMULATOR_SPEECH_REALTIME_FACTOR", "speech_realtime_factor"),
            ("OMNIREEL_EMULATOR_SPEECH_CHUNK_MS", "speech_chunk_ms"),
            ("OMNIREEL_EMULATOR_WS_CONFIG_TIMEOUT_S", "ws_config_timeout_s"),
            ("OMNIREEL_EMULATOR_WS_IDLE_TIMEOUT_S", "ws_idle_timeout_s"),
            ("OMNIREEL_EMULATOR_MAX_GENERATED_IMAGE_SIZE", "max_generated_image_size"),
            ("VLLM_OMNI_VIDEO_SYNC_TIMEOUT", "video_sync_timeout_s"),
            ("OMNIREEL_EMULATOR_CONCURRENCY_PER_INSTANCE", "concurrency_per_instance"),
        ):
            if value := env.get(env_name):
                data[field] = value
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)

    def merged(self, patch: Mapping[str, Any]) -> EmulatorConfig:
        """A new config with ``patch`` applied; ``faults`` are merged per route and per key."""
        data = self.model_dump()
        for key, value in patch.items():
            if key == "faults" and isinstance(value, Mapping):
                for kind, route_patch in value.items():
                    if route_patch is None:
                        data["faults"].pop(kind, None)
                        continue
                    current = data["faults"].get(kind)
                    if current and isinstance(route_patch, Mapping):
                        route_patch = RouteFaults.model_validate({**current, **route_patch}).model_dump()
                    data["faults"][kind] = route_patch
            else:
                data[key] = value
        return EmulatorConfig.model_validate(data)
