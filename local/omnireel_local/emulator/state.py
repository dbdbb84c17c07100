"""Per-app mutable state: the live config, the fault injector, the async video job store and the capacity gate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError
from starlette.requests import HTTPConnection, Request

from .capacity import CapacityGate
from .config import EmulatorConfig, RouteKind
from .errors import EmulatorError, validation_error
from .faults import FaultInjector


class JobStore(Protocol):
    """The async video job store (``videos.VideoJobStore``), held here without importing the video routes."""

    jobs: dict[str, Any]

    def shutdown(self) -> None: ...


@dataclass
class EmulatorState:
    config: EmulatorConfig
    injector: FaultInjector
    video_jobs: JobStore
    gate: CapacityGate = field(default_factory=CapacityGate)
    extra: dict[str, Any] = field(default_factory=dict)

    def replace_config(self, config: EmulatorConfig) -> None:
        if config.seed != self.config.seed:
            self.injector.reseed(config.seed)
        self.config = config


def get_state(conn: HTTPConnection) -> EmulatorState:
    return conn.app.state.emulator


NOT_INITIALIZED = {
    "images": "Image generation handler not initialized.",
    "videos": "Video generation handler not initialized.",
    "speech": "Speech generation handler not initialized.",
}


def require_kind(state: EmulatorState, kind: RouteKind) -> None:
    """The real server's 503 when the served model has no handler for this kind."""
    if not state.config.serves(kind):
        raise EmulatorError(503, NOT_INITIALIZED[kind])


def media_type(conn: HTTPConnection) -> str:
    return conn.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def require_json(conn: HTTPConnection) -> None:
    """vLLM's ``validate_json_request``: the media type must be exactly application/json (400 otherwise)."""
    if media_type(conn) != "application/json":
        raise EmulatorError(400, "Unsupported Media Type: Only 'application/json' is allowed")


async def json_request[ModelT: BaseModel](request: Request, model: type[ModelT]) -> ModelT:
    """A JSON route's body: application/json only, a JSON object, validated by ``model`` (vLLM's error texts)."""
    require_json(request)
    try:
        body = await request.json()
    except ValueError as exc:
        raise EmulatorError(400, f"JSON decode error: {exc}") from exc
    if not isinstance(body, dict):
        raise EmulatorError(400, "Input should be a valid dictionary or object to extract fields from")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc) from exc
