"""Upstream over plain WebSocket to a vLLM-Omni server (self-hosting, the local emulator)."""

from __future__ import annotations

import logging

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, InvalidHandshake, InvalidURI

from .upstream import UpstreamError

log = logging.getLogger(__name__)


class WebSocketUpstream:
    def __init__(self, ws: ClientConnection) -> None:
        self._ws = ws
        self.close_code: int | None = None
        self.close_reason = ""

    async def send_text(self, text: str) -> None:
        try:
            await self._ws.send(text)
        except ConnectionClosed as exc:
            raise UpstreamError("dropped", f"upstream connection lost while sending ({exc})") from None

    async def end_input(self) -> None:
        """WebSocket has no half-close: the server closes after ``session.close``."""

    async def receive(self) -> str | bytes | None:
        try:
            return await self._ws.recv()
        except ConnectionClosedOK as exc:
            rcvd = exc.rcvd
            self.close_code = rcvd.code if rcvd else 1000
            self.close_reason = rcvd.reason if rcvd else ""
            return None
        except ConnectionClosed as exc:
            raise UpstreamError("dropped", f"upstream connection lost ({exc})") from None

    async def close(self) -> None:
        try:
            await self._ws.close()
        except Exception:
            log.debug("upstream close failed", exc_info=True)


class WebSocketUpstreamFactory:
    def __init__(self, url: str, connect_timeout: float = 10.0, max_size: int | None = 16 * 1024 * 1024) -> None:
        self._url = url
        self._timeout = connect_timeout
        self._max_size = max_size

    async def open(self, session_id: str) -> WebSocketUpstream:
        try:
            ws = await connect(
                self._url,
                open_timeout=self._timeout,
                max_size=self._max_size,
                compression=None,
                ping_interval=20,
                ping_timeout=20,
                close_timeout=2,
                additional_headers={"X-Omnireel-Session": session_id},
            )
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise UpstreamError("connect", f"cannot connect to the TTS upstream: {exc}") from None
        return WebSocketUpstream(ws)

    async def aclose(self) -> None:
        return None
