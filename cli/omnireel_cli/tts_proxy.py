"""``omnireel tts-proxy``: a loopback WebSocket forwarder that adds the relay's bearer token.

For vLLM-Omni clients that cannot set headers (the stock example client calls plain ``websockets.connect(url)``):
point them at ``ws://127.0.0.1:8091/v1/audio/speech/stream`` and every connection is forwarded to the relay with
``Authorization: Bearer <token>`` added. Frames pass unchanged both ways (text as text, binary as binary); a close
from either side is passed on (codes 1005/1006, which cannot be sent, become 1000/1011). It listens on loopback only:
whatever can reach it speaks with your token.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import Any

from .listen import parse_loopback
from .tts import Relay

DEFAULT_LISTEN = "127.0.0.1:8091"
PATH = "/v1/audio/speech/stream"
MAX_FRAME_BYTES = 16 * 1024 * 1024


def parse_listen(value: str) -> tuple[str, int]:
    return parse_loopback(value, "the proxy adds your token to every connection")


def _sendable(code: int | None, fallback: int) -> int:
    return code if code is not None and 1000 <= code <= 4999 and code not in (1005, 1006, 1015) else fallback


async def _pump(source: Any, sink: Any) -> None:
    async for message in source:
        await sink.send(message)


async def _forward(client: Any, relay: Relay) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

    try:
        upstream = await connect(
            relay.url,
            additional_headers={"Authorization": f"Bearer {relay.token}"},
            open_timeout=10,
            close_timeout=3,
            max_size=MAX_FRAME_BYTES,
            compression=None,
        )
    except InvalidStatus as exc:
        status = exc.response.status_code
        print(f"the relay refused the connection: HTTP {status}", file=sys.stderr, flush=True)
        await client.close(1008 if status in (401, 403) else 1011, f"relay refused: HTTP {status}")
        return
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        print(f"the relay at {relay.url} is unreachable: {exc}", file=sys.stderr, flush=True)
        await client.close(1011, "relay unreachable")
        return
    tasks = [asyncio.create_task(_pump(client, upstream)), asyncio.create_task(_pump(upstream, client))]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    with contextlib.suppress(ConnectionClosed):
        if tasks[1] in done:  # the relay ended the session: tell the client how
            await client.close(_sendable(upstream.close_code, 1011), upstream.close_reason or "")
        else:  # the client left: end the relay session the same way
            await upstream.close(_sendable(client.close_code, 1000), client.close_reason or "")
    await upstream.close()


async def serve_proxy(relay: Relay, host: str, port: int, stop: asyncio.Event) -> None:
    from websockets.asyncio.server import serve

    async def handler(client: Any) -> None:
        await _forward(client, relay)

    async with serve(handler, host, port, max_size=MAX_FRAME_BYTES, compression=None) as server:
        bound = server.sockets[0].getsockname()[1]
        print(f"forwarding ws://{host}:{bound}{PATH} -> {relay.url} (token added); Ctrl-C stops", flush=True)
        await stop.wait()


def run(relay: Relay, listen: str) -> int:
    host, port = parse_listen(listen)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve_proxy(relay, host, port, stop)

    asyncio.run(main())
    return 0
