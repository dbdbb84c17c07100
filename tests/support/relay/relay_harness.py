"""In-process relay + fake upstream for tests (bounded waits everywhere)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from omnireel_relay.auth import Authenticator
from omnireel_relay.server import RelayServer
from omnireel_relay.session import Session
from omnireel_relay.settings import Settings
from omnireel_relay.upstream_websocket import WebSocketUpstreamFactory
from tests.support.relay.fake_tts_upstream import FakeTTS

TOKEN = "test-token-0123456789abcdef"
CONFIG = {
    "type": "session.config",
    "voice": "Vivian",
    "language": "English",
    "response_format": "pcm",
    "stream_audio": True,
}


class SessionLog(set):
    """The relay's live sessions (what ``RelayServer.sessions`` is), also remembering every session it ever had:
    asserts about a session's queue bound must not depend on whether it has closed by the time they run."""

    def __init__(self) -> None:
        super().__init__()
        self.ever: list[Session] = []

    def add(self, session: Session) -> None:
        self.ever.append(session)
        super().add(session)


def run(coro: Any, timeout: float = 20.0) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


@contextlib.asynccontextmanager
async def relay_stack(
    fake: FakeTTS | None = None, upstream_url: str | None = None, **overrides: Any
) -> AsyncIterator[tuple[RelayServer, FakeTTS]]:
    fake = fake or FakeTTS()
    url = upstream_url or await fake.start()
    settings = Settings.from_env({}, token=TOKEN, host="127.0.0.1", port=0, upstream_url=url, **overrides)
    server = RelayServer(
        settings, Authenticator(TOKEN), WebSocketUpstreamFactory(url, settings.upstream_connect_timeout)
    )
    server.sessions = SessionLog()
    await server.start()
    try:
        yield server, fake
    finally:
        await server.close()
        await fake.stop()


def url_of(server: RelayServer, path: str = "/v1/audio/speech/stream") -> str:
    return f"ws://127.0.0.1:{server.port}{path}"


async def open_client(server: RelayServer, token: str | None = TOKEN, **kwargs: Any) -> ClientConnection:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return await connect(url_of(server), additional_headers=headers, open_timeout=5, close_timeout=2, **kwargs)


async def speak(ws: ClientConnection, text: str, timeout: float = 10.0) -> list[str | bytes]:
    """Send one utterance; return every frame up to and including session.done (or an error)."""
    await ws.send(json.dumps({"type": "input.text", "text": text}))
    await ws.send(json.dumps({"type": "input.done"}))
    frames: list[str | bytes] = []
    async with asyncio.timeout(timeout):
        while True:
            frame = await ws.recv()
            frames.append(frame)
            if isinstance(frame, str) and json.loads(frame)["type"] in ("session.done", "error"):
                return frames


async def frames_until_closed(ws: ClientConnection, timeout: float = 5.0) -> list[str | bytes]:
    """Every frame the relay still sends, until it closes the socket (bounded by ``timeout``)."""
    frames: list[str | bytes] = []
    async with asyncio.timeout(timeout):
        try:
            while True:
                frames.append(await ws.recv())
        except ConnectionClosed:
            return frames


def events(frames: list[str | bytes]) -> list[str]:
    return [json.loads(f)["type"] if isinstance(f, str) else "pcm" for f in frames]
