"""Upstream failures become ``error`` events; transport failures then end the session with 1011."""

from __future__ import annotations

import asyncio
import json

from omnireel_local.home import free_port as _free_port
from tests.support.relay.relay_harness import CONFIG, events, frames_until_closed, open_client, relay_stack, run, speak


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


def test_upstream_silent_mid_utterance_ends_the_session_with_1011_but_idle_sessions_stay() -> None:
    """No WebSocket pings upstream (a busy uvicorn never answers them): a hung server is caught by the progress
    timeout instead, and only while an utterance is in flight."""

    async def main() -> None:
        async with relay_stack(upstream_progress_timeout=0.5) as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            assert events(await speak(ws, "first"))[-1] == "session.done"
            idle_until = asyncio.get_running_loop().time() + 1.5  # idle for 3x the timeout: must not trip
            while asyncio.get_running_loop().time() < idle_until:
                await asyncio.sleep(0.1)
            assert ws.close_code is None and server.metrics.errors == {}
            assert events(await speak(ws, "second"))[-1] == "session.done"
            await ws.send(json.dumps({"type": "input.text", "text": "STALL now"}))
            await ws.send(json.dumps({"type": "input.done"}))
            frames = await frames_until_closed(ws)
            assert events(frames) == ["audio.start", "error"]
            err = json.loads(frames[-1])
            assert err["code"] == "upstream_stalled" and "sent nothing for 0.5 s" in err["message"]
            assert ws.close_code == 1011
            assert server.metrics.errors["upstream_stalled"] == 1

    run(main())


def test_websocket_upstream_sends_no_keepalive_pings_and_uses_tcp_keepalive() -> None:
    import socket as socketlib

    from omnireel_relay.upstream_websocket import WebSocketUpstreamFactory
    from tests.support.relay.fake_tts_upstream import FakeTTS

    async def main() -> None:
        fake = FakeTTS()
        url = await fake.start()
        try:
            upstream = await WebSocketUpstreamFactory(url).open("s1")
            ws = upstream._ws
            assert ws.ping_interval is None
            sock = ws.transport.get_extra_info("socket")
            assert sock.getsockopt(socketlib.SOL_SOCKET, socketlib.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socketlib.IPPROTO_TCP, socketlib.TCP_KEEPIDLE) == 30
            await upstream.close()
        finally:
            await fake.stop()

    run(main())
