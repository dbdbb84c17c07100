"""HTTP + WebSocket front door: ``/v1/audio/speech/stream``, ``/healthz``, ``/metrics``, ``/``.

Handshake policy (all decided before the WebSocket upgrade, as plain HTTP responses):
- unknown path → 404; missing or wrong token → 401 (``WWW-Authenticate: Bearer``);
- ``/healthz`` is open (the load balancer's health check); ``/metrics`` needs the bearer token unless
  ``OMNIREEL_RELAY_METRICS_PUBLIC=true`` (and the public ALB listener answers ``/metrics`` with 404 itself);
- ``/auth/check`` answers 204 for a valid ``Authorization: Bearer`` token, else 401: the relay page asks it first,
  because a browser's WebSocket only ever reports "1006" for a refused handshake;
- draining after SIGTERM → 503 (and ``/healthz`` → 503 so the ALB stops routing here).
After the upgrade: more than ``max_sessions`` open sessions → close 1013 "relay at capacity".
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import importlib.resources
import json
import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from .auth import Authenticator
from .metrics import Metrics
from .protocol import PATH, SUBPROTOCOL, Close
from .session import Session
from .settings import Settings
from .upstream import UpstreamFactory

log = logging.getLogger(__name__)
AUTH_CHECK_PATH = "/auth/check"


def _response(status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> Response:
    headers = Headers()
    headers["Content-Type"] = content_type
    headers["Content-Length"] = str(len(body))
    headers["Cache-Control"] = "no-store"
    headers["Connection"] = "close"
    for k, v in (extra or {}).items():
        headers[k] = v
    return Response(status, http.HTTPStatus(status).phrase, headers, body)


def _index_html() -> bytes:
    return importlib.resources.files("omnireel_relay").joinpath("static/index.html").read_bytes()


class RelayServer:
    def __init__(self, settings: Settings, authenticator: Authenticator, factory: UpstreamFactory) -> None:
        self.settings = settings
        self.auth = authenticator
        self.factory = factory
        self.metrics = Metrics()
        self.sessions: set[Session] = set()
        self.draining = False
        self._server: Server | None = None
        self._index = _index_html()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        s = self.settings
        self._server = await serve(
            self._handler,
            s.host,
            s.port,
            process_request=self._process_request,
            select_subprotocol=self._select_subprotocol,
            max_size=s.max_message_bytes,
            max_queue=16,
            write_limit=s.write_limit,
            compression=None,
            close_timeout=s.close_timeout,
            ping_interval=20,
            ping_timeout=20,
            server_header="omnireel-relay",
        )
        log.info("relay listening", extra={"host": s.host, "port": self.port, "upstream": s.upstream})

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def drain(self, deadline_s: float | None = None) -> None:
        """Stop accepting sessions, wait for open ones up to the deadline, then close the rest with 1001."""
        deadline_s = self.settings.drain_seconds if deadline_s is None else deadline_s
        self.draining = True
        self.metrics.draining = True
        log.info("draining", extra={"open_sessions": len(self.sessions), "deadline_s": deadline_s})
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        while self.sessions and loop.time() < end:
            await asyncio.sleep(0.05)
        for session in list(self.sessions):
            session.finish(Close.GOING_AWAY, "relay shutting down")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.settings.close_timeout + 2):
                while self.sessions:
                    await asyncio.sleep(0.02)
        await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close(close_connections=True, code=Close.GOING_AWAY, reason="relay shutting down")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.close_timeout + 2):
                    await self._server.wait_closed()
        await self.factory.aclose()

    # ------------------------------------------------------------------ handshake
    def _select_subprotocol(
        self, connection: ServerConnection, subprotocols: Sequence[Subprotocol]
    ) -> Subprotocol | None:
        return Subprotocol(SUBPROTOCOL) if SUBPROTOCOL in subprotocols else None

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        if path == "/healthz":
            if self.draining:
                return _response(503, b'{"status":"draining"}\n', "application/json")
            body = {"status": "ok", "active_sessions": len(self.sessions), "max_sessions": self.settings.max_sessions}
            return _response(200, json.dumps(body).encode() + b"\n", "application/json")
        if path == "/metrics":
            if not self.settings.metrics_public and not self.auth.check(request.headers.get("Authorization"), []):
                self.metrics.rejected["unauthorized"] += 1
                text = b"/metrics needs the bearer token\n"
                return _response(401, text, "text/plain", {"WWW-Authenticate": "Bearer"})
            return _response(200, self.metrics.render_prometheus().encode(), "text/plain; version=0.0.4")
        if path == AUTH_CHECK_PATH:
            if self.auth.check(request.headers.get("Authorization"), []):
                return _response(204, b"", "text/plain")
            self.metrics.rejected["unauthorized"] += 1
            return _response(401, b"missing or invalid bearer token\n", "text/plain", {"WWW-Authenticate": "Bearer"})
        if path in ("/", "/index.html"):
            return _response(200, self._index, "text/html; charset=utf-8")
        if path != PATH:
            self.metrics.rejected["not_found"] += 1
            return _response(404, b"not found\n", "text/plain")
        subprotocols = [
            p.strip() for value in request.headers.get_all("Sec-WebSocket-Protocol") for p in value.split(",")
        ]
        if not self.auth.check(request.headers.get("Authorization"), subprotocols):
            self.metrics.rejected["unauthorized"] += 1
            return _response(401, b"missing or invalid bearer token\n", "text/plain", {"WWW-Authenticate": "Bearer"})
        if self.draining:
            self.metrics.rejected["draining"] += 1
            return _response(503, b"relay is draining\n", "text/plain", {"Retry-After": "1"})
        return None

    # ------------------------------------------------------------------ sessions
    async def _handler(self, ws: ServerConnection) -> None:
        if len(self.sessions) >= self.settings.max_sessions:
            self.metrics.rejected["capacity"] += 1
            self.metrics.closes[Close.TRY_AGAIN_LATER] += 1
            await ws.close(Close.TRY_AGAIN_LATER, "relay at capacity")
            return
        session = Session(ws, self.factory, self.settings, self.metrics)
        self.sessions.add(session)
        self.metrics.active_sessions = len(self.sessions)
        self.metrics.sessions_total += 1
        try:
            await session.run()
        finally:
            self.sessions.discard(session)
            self.metrics.active_sessions = len(self.sessions)
