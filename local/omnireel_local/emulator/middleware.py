"""ASGI middleware: the DLC's SageMaker route middleware, and the emulator's identifying header.

``SageMakerRouteMiddleware`` reproduces ``omni_sagemaker_serve.SageMakerRouteMiddleware`` of the
``vllm:omni-sagemaker-cuda`` DLC:

- HTTP requests to exactly ``/invocations`` are re-routed by the *first* ``X-Amzn-SageMaker-Custom-Attributes``
  header, regex ``route=(/[^\\s,]+)`` (so ``adapter=x,route=/v1/audio/speech`` works and ``;`` is not a separator);
  ``path`` and ``raw_path`` are rewritten. Without a route the request reaches the app's own ``/invocations``.
- For ``/v1/videos`` and ``/v1/videos/sync`` a JSON-object body is converted to ``multipart/form-data``: each
  top-level key becomes a text part (str as-is, bool ``true``/``false``, numbers via ``str()``, dict/list re-encoded
  as JSON, ``null`` dropped), with a fresh uuid-hex boundary and a recomputed ``content-length``. Invalid JSON or a
  non-object is replayed unchanged; multipart bodies pass through byte for byte.
- WebSocket scopes are allowed only on the vLLM-Omni streaming paths; any other path (including SageMaker's default
  ``/invocations-bidirectional-stream``) is closed with code 1008 before accept.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .faults import FaultInjector

CUSTOM_ATTRIBUTES_HEADER = b"x-amzn-sagemaker-custom-attributes"
ROUTE_PATTERN = re.compile(r"route=(/[^\s,]+)")
FORM_DATA_ROUTES = frozenset({"/v1/videos", "/v1/videos/sync"})
WEBSOCKET_ROUTES = frozenset(
    {
        "/v1/audio/speech/stream",
        "/v1/realtime",
        "/v1/realtime/video",
        "/v1/video/chat/stream",
        "/v1/duplex",
        "/v1/realtime/robot/openpi",
    }
)

ROUTED_PATH_KEY = "omnireel.routed_path"
EMULATOR_HEADER = "X-Omnireel-Emulator"
EMULATOR_HEADER_VALUE = "vllm-omni-emulator"


def route_from_headers(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The ``route=`` of the first custom-attributes header, or None."""
    for name, value in headers:
        if name.lower() == CUSTOM_ATTRIBUTES_HEADER:
            match = ROUTE_PATTERN.search(value.decode("latin-1"))
            return match.group(1) if match else None
    return None


def _media_type(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name.lower() == b"content-type":
            return value.decode("latin-1").split(";", 1)[0].strip().lower()
    return ""


def _escape_name(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def _part_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value)


def json_to_multipart(body: bytes) -> tuple[bytes, str] | None:
    """Convert a JSON-object body to multipart; None when the body is not a JSON object (replay unchanged)."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(payload, dict):
        return None
    boundary = uuid.uuid4().hex
    chunks: list[bytes] = []
    for key, value in payload.items():
        if value is None:
            continue
        chunks.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{_escape_name(str(key))}"\r\n\r\n'.encode()
            + _part_value(value).encode()
            + b"\r\n"
        )
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


class SageMakerRouteMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            if scope["path"] not in WEBSOCKET_ROUTES:
                await send({"type": "websocket.close", "code": 1008, "reason": ""})
                return
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http" or scope["path"] != "/invocations":
            await self.app(scope, receive, send)
            return
        route = route_from_headers(scope.get("headers", []))
        if route is None:
            await self.app(scope, receive, send)
            return
        scope[ROUTED_PATH_KEY] = route  # lets the outer header middleware count the routed path
        scope = dict(scope)
        scope["path"] = route
        scope["raw_path"] = route.encode("latin-1", errors="replace")
        if route in FORM_DATA_ROUTES and _media_type(scope.get("headers", [])) == "application/json":
            scope, receive = await self._convert_json_body(scope, receive)
        await self.app(scope, receive, send)

    @staticmethod
    async def _convert_json_body(scope: Scope, receive: Receive) -> tuple[Scope, Receive]:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            body.extend(message.get("body", b""))
            if not message.get("more_body", False):
                break
        converted = json_to_multipart(bytes(body))
        if converted is not None:
            new_body, content_type = converted
            headers = [(k, v) for k, v in scope["headers"] if k.lower() not in (b"content-type", b"content-length")]
            headers += [(b"content-type", content_type.encode()), (b"content-length", str(len(new_body)).encode())]
            scope["headers"] = headers
        else:
            new_body = bytes(body)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": new_body, "more_body": False}
            return await receive()

        return scope, replay


class EmulatorHeaderMiddleware:
    """Adds ``X-Omnireel-Emulator`` to every HTTP response, counts responses per path and status, and records each
    POST's service time (request received -> last response byte sent; ``GET /_emulator/stats``) with the SHA-256 of
    the body as received, so a client that knows what it sent can tell its request from others served at once."""

    def __init__(self, app: ASGIApp, injector: FaultInjector) -> None:
        self.app = app
        self.injector = injector

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        started = time.time()
        status = 0
        body_digest = hashlib.sha256()

        async def receive_hashing() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body_digest.update(message.get("body", b""))
            return message

        async def send_with_header(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((EMULATOR_HEADER.lower().encode(), EMULATOR_HEADER_VALUE.encode()))
                message = {**message, "headers": headers}
                path = scope.get(ROUTED_PATH_KEY) or scope["path"]
                status = message["status"]
                self.injector.count_response(method, path, status)
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body") and method == "POST":
                path = scope.get(ROUTED_PATH_KEY) or scope["path"]
                self.injector.record_service_time(path, status, started, time.time(), body_digest.hexdigest())

        await self.app(scope, receive_hashing if method == "POST" else receive, send_with_header)
