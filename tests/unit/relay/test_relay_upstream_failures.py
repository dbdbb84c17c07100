"""Upstream failures become ``error`` events; transport failures then end the session with 1011."""

from __future__ import annotations

import asyncio
import json
import socket

from tests.unit.relay.relay_harness import CONFIG, events, frames_until_closed, open_client, relay_stack, run, speak


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_upstream_connection_refused_gives_error_event_and_1011() -> None:
    async def main() -> None:
        url = f"ws://127.0.0.1:{_free_port()}/v1/audio/speech/stream"
        async with relay_stack(upstream_url=url) as (server, _):
            ws = await open_client(server)
            frames = await frames_until_closed(ws)
            assert events(frames) == ["error"]
            err = json.loads(frames[0])
            assert err["code"] == "upstream_unavailable" and "cannot connect" in err["message"]
            assert ws.close_code == 1011 and ws.close_reason == "upstream unavailable"
            assert server.metrics.errors["upstream_connect"] == 1

    run(main())


def test_upstream_drop_mid_stream_gives_error_after_the_audio_already_received() -> None:
    async def main() -> None:
        async with relay_stack() as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            first = await speak(ws, "a good one")
            assert events(first)[-1] == "session.done"
            await ws.send(json.dumps({"type": "input.text", "text": "DROP here"}))
            await ws.send(json.dumps({"type": "input.done"}))
            frames = await frames_until_closed(ws)
            assert events(frames) == ["audio.start", "pcm", "pcm", "error"]
            err = json.loads(frames[-1])
            assert err["code"] == "upstream_dropped" and "upstream connection lost" in err["message"]
            assert ws.close_code == 1011 and ws.close_reason == "upstream failed"
            async with asyncio.timeout(5):
                while server.sessions:
                    await asyncio.sleep(0.01)
            assert server.metrics.closes[1011] == 1

    run(main())


def test_client_disconnect_closes_the_upstream() -> None:
    async def main() -> None:
        async with relay_stack() as (server, fake):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            await speak(ws, "x")
            await ws.close()
            async with asyncio.timeout(5):
                while server.sessions or fake.server is None or fake.server.connections:
                    await asyncio.sleep(0.01)

    run(main())
