"""Starlette app factory for the vLLM-Omni DLC container emulator (a development tool, not the real model)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from . import chat, control, images, speech, speech_stream, videos
from .config import EmulatorConfig
from .errors import EXCEPTION_HANDLERS, EmulatorError, error_response
from .faults import FaultInjector
from .middleware import EmulatorHeaderMiddleware, SageMakerRouteMiddleware
from .peer import SERVER_SEND_SCOPE_KEY
from .state import EmulatorState, get_state, media_type

log = logging.getLogger("omnireel_local.emulator")

BANNER = "vLLM-Omni container EMULATOR — development tool, not the real model"


async def ping(_request: Request) -> Response:
    return Response(status_code=200)


async def health(_request: Request) -> Response:
    return JSONResponse({"status": "healthy"})


async def invocations(request: Request) -> Response:
    """vLLM's own ``/invocations`` (reached when no ``route=`` custom attribute is present): JSON only, and the
    chat/completion/embedding handlers it would dispatch to are not emulated."""
    if media_type(request) != "application/json":
        raise EmulatorError(400, "Unsupported Media Type: Only 'application/json' is allowed")
    raise EmulatorError(
        400,
        "The emulator does not serve chat/completions via /invocations; set the SageMaker custom attribute "
        "'route=/v1/images/generations', 'route=/v1/videos/sync' or 'route=/v1/audio/speech'",
    )


async def unhandled_error(_request: Request, exc: Exception) -> Response:
    log.exception("unhandled emulator error", exc_info=exc)
    return error_response(500, f"Internal emulator error: {type(exc).__name__}: {exc}")


class EmulatorApp(Starlette):
    """Starlette with the emulator header middleware and the SageMaker route middleware outside everything,
    so even 500s from ``ServerErrorMiddleware`` carry ``X-Omnireel-Emulator``."""

    def build_middleware_stack(self) -> ASGIApp:
        inner = super().build_middleware_stack()
        outer = EmulatorHeaderMiddleware(SageMakerRouteMiddleware(inner), self.state.emulator.injector)
        return _with_server_send(outer)


def _with_server_send(app: ASGIApp) -> ASGIApp:
    """Keep the server's own ``send`` in the WebSocket scope (middleware wraps it): ``peer.PeerWatch`` finds the
    connection's socket through it."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            scope = {**scope, SERVER_SEND_SCOPE_KEY: send}
        await app(scope, receive, send)

    return asgi


def create_app(config: EmulatorConfig | None = None) -> Starlette:
    """The emulator ASGI app. ``config`` defaults to ``EmulatorConfig.from_env()``."""
    config = config if config is not None else EmulatorConfig.from_env()
    state = EmulatorState(config=config, injector=FaultInjector(config), video_jobs=videos.VideoJobStore())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        current = get_state_from_app(app).config
        log.warning("%s (model=%s, serving=%s)", BANNER, current.model, ",".join(sorted(current.served_kinds())))
        try:
            yield
        finally:
            get_state_from_app(app).video_jobs.shutdown()

    routes = [
        Route("/ping", ping, methods=["GET", "POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/invocations", invocations, methods=["POST"]),
        Route("/v1/images/generations", images.generate_images, methods=["POST"]),
        Route("/v1/chat/completions", chat.create_chat_completion, methods=["POST"]),
        Route("/v1/videos/sync", videos.create_video_sync, methods=["POST"]),
        Route("/v1/videos", videos.create_video, methods=["POST"]),
        Route("/v1/videos", videos.list_videos, methods=["GET"]),
        Route("/v1/videos/{video_id}", videos.retrieve_video, methods=["GET"]),
        Route("/v1/videos/{video_id}", videos.delete_video, methods=["DELETE"]),
        Route("/v1/videos/{video_id}/content", videos.video_content, methods=["GET"]),
        Route("/v1/audio/speech", speech.create_speech, methods=["POST"]),
        Route("/v1/audio/voices", speech.list_voices, methods=["GET"]),
        WebSocketRoute("/v1/audio/speech/stream", speech_stream.speech_stream),
        Route("/_emulator/config", control.get_config, methods=["GET"]),
        Route("/_emulator/config", control.put_config, methods=["PUT"]),
        Route("/_emulator/stats", control.get_stats, methods=["GET"]),
        Route("/_emulator/stats", control.reset_stats, methods=["DELETE"]),
    ]
    app = EmulatorApp(
        routes=routes,
        exception_handlers={**EXCEPTION_HANDLERS, Exception: unhandled_error},
        lifespan=lifespan,
    )
    app.state.emulator = state
    return app


def get_state_from_app(app: Starlette) -> EmulatorState:
    return app.state.emulator


__all__ = ["BANNER", "EmulatorApp", "create_app", "get_state"]
