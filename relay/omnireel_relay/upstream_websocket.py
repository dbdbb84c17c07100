"""Upstream over plain WebSocket to a vLLM-Omni server (self-hosting, the local emulator).

Liveness without WebSocket pings. uvicorn (which serves vLLM-Omni and the local emulator) pauses reading a WebSocket
after each message until the app asks for the next one, and vLLM-Omni does not read while it synthesises an
utterance. A keepalive ping sent during a long utterance therefore waits unanswered in the server's socket buffer,
and a client-side ping timeout (websockets' default 20 s) closed healthy sessions with 1011 "keepalive ping timeout"
(issue 10, item 1). So the relay sends no pings upstream (``ping_interval=None``) and detects a dead or hung server
instead by:

- TCP keepalive on the socket (the kernel answers probes even while the app is not reading): a vanished host or a
  broken path fails the connection after about ``TCP_KEEPIDLE + TCP_KEEPINTVL * TCP_KEEPCNT`` = 60 s of silence;
- the session's per-utterance progress timeout (``OMNIREEL_RELAY_UPSTREAM_PROGRESS_TIMEOUT``, see session.py): a
  server process that is alive but stuck mid-utterance ends the session with 1011.
The server's own pings (uvicorn sends one every 20 s) are still answered by the relay, which keeps idle
connections warm through NATs and load balancers.
"""

from __future__ import annotations

import logging
import socket

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


TCP_KEEPIDLE_S = 30
TCP_KEEPINTVL_S = 10
TCP_KEEPCNT = 3


def enable_tcp_keepalive(sock: socket.socket | None) -> None:
    """Kernel-level dead-peer detection that needs no cooperation from the (possibly busy) server application."""
    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    options = (("TCP_KEEPIDLE", TCP_KEEPIDLE_S), ("TCP_KEEPINTVL", TCP_KEEPINTVL_S), ("TCP_KEEPCNT", TCP_KEEPCNT))
    for name, value in options:
        option = getattr(socket, name, None)  # Linux; macOS lacks some of them
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


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
                ping_interval=None,  # see the module docstring: a busy uvicorn server never answers
                close_timeout=2,
                additional_headers={"X-Omnireel-Session": session_id},
            )
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise UpstreamError("connect", f"cannot connect to the TTS upstream: {exc}") from None
        enable_tcp_keepalive(ws.transport.get_extra_info("socket"))
        return WebSocketUpstream(ws)

    async def aclose(self) -> None:
        return None
