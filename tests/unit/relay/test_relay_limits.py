"""Limits: message size, text per utterance, session length, concurrent sessions, slow client (backpressure)."""

from __future__ import annotations

import asyncio
import json

from websockets.exceptions import ConnectionClosed

from tests.support.relay.fake_tts_upstream import FakeTTS
from tests.support.relay.relay_harness import CONFIG, events, open_client, relay_stack, run, speak


async def _closed(ws, timeout: float = 5.0) -> tuple[int | None, str | None]:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        try:
            while True:
                await ws.recv()
        except ConnectionClosed:
            pass
    return ws.close_code, ws.close_reason


def test_frame_larger_than_max_message_bytes_closes_1009() -> None:
    async def main() -> None:
        async with relay_stack(max_message_bytes=64 * 1024) as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps({**CONFIG, "ref_text": "x" * 70_000}))
            code, _ = await _closed(ws)
            assert code == 1009

    run(main())


def test_non_config_event_larger_than_max_event_bytes_closes_1009_but_config_may_be_large() -> None:
    async def main() -> None:
        async with relay_stack(max_event_bytes=1024) as (server, fake):
            ws = await open_client(server)
            await ws.send(json.dumps({**CONFIG, "ref_text": "x" * 5000}))  # session.config: up to max_message_bytes
            await ws.send(json.dumps({"type": "input.text", "text": "y" * 2000}))
            code, reason = await _closed(ws)
            assert code == 1009 and "input.text" in reason
            assert [json.loads(m)["type"] for m in fake.received] == ["session.config"]

    run(main())


def test_text_per_utterance_limit_returns_error_and_drops_only_that_event() -> None:
    async def main() -> None:
        async with relay_stack(max_text_chars=20) as (server, _fake):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": "0123456789"}))
            await ws.send(json.dumps({"type": "input.text", "text": "0123456789AB"}))  # 22 > 20: refused
            err = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert err["type"] == "error" and err["code"] == "text_limit"
            frames = await speak(ws, "")  # input.done flushes the 10 accepted characters
            assert events(frames)[0] == "audio.start"
            assert json.loads(frames[0])["sentence_text"] == "0123456789"
            # the budget resets per utterance
            frames = await speak(ws, "x" * 20)
            assert events(frames)[-1] == "session.done"
            await ws.close()

    run(main())


def test_invalid_events_get_error_events_and_are_not_forwarded() -> None:
    async def main() -> None:
        async with relay_stack() as (server, fake):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            for bad, code in (
                ("not json", "invalid_json"),
                ("[1,2]", "invalid_event"),
                ('{"type": "bogus"}', "unknown_event"),
                ('{"type": "input.text"}', "invalid_event"),
                (b"\x00\x01", "binary_not_accepted"),
            ):
                await ws.send(bad)
                err = json.loads(await asyncio.wait_for(ws.recv(), 5))
                assert err["type"] == "error" and err["code"] == code
            frames = await speak(ws, "still alive")
            assert events(frames)[-1] == "session.done"
            assert [json.loads(m)["type"] for m in fake.received] == ["session.config", "input.text", "input.done"]
            await ws.close()

    run(main())


def test_oversized_client_values_are_neither_echoed_nor_logged_whole(caplog) -> None:  # type: ignore[no-untyped-def]
    """A 3 MB ``type`` (under the 4 MiB frame limit) used to come back as a 3 MB error event and a 3 MB log line."""
    from omnireel_relay.logging import JsonFormatter

    huge = "x" * 3_000_000

    async def main() -> None:
        async with relay_stack() as (server, fake):
            ws = await open_client(server, max_size=None)
            await ws.send(json.dumps(CONFIG))
            for bad in ({"type": huge}, {"type": "input.text", "text": 7, "junk": huge}, {"type": huge + "\u00e9"}):
                await ws.send(json.dumps(bad))
                reply = await asyncio.wait_for(ws.recv(), 10)
                assert len(reply) < 2048, len(reply)
                err = json.loads(reply)
                assert err["type"] == "error" and err["code"] in ("unknown_event", "invalid_event")
            assert "(3000000 characters)" in json.loads(reply)["message"] or "3000001" in json.loads(reply)["message"]
            assert events(await speak(ws, "still alive"))[-1] == "session.done"
            assert [json.loads(m)["type"] for m in fake.received] == ["session.config", "input.text", "input.done"]
            await ws.close()

    with caplog.at_level("DEBUG"):
        run(main())
    formatter = JsonFormatter()
    lines = [formatter.format(record) for record in caplog.records]
    assert lines and max(len(line) for line in lines) < 8192, max(len(line) for line in lines)


def test_json_log_lines_cap_every_value() -> None:
    import logging

    from omnireel_relay.logging import JsonFormatter

    record = logging.LogRecord("relay", logging.INFO, __file__, 1, "m" * 100_000, (), None)
    record.error = "e" * 100_000
    record.items = ["i" * 100_000] * 1000
    line = JsonFormatter().format(record)
    assert len(line) < 300_000 and '"(100000 characters)' not in line
    out = json.loads(line)
    assert out["msg"].endswith("... (100000 characters)") and out["error"].endswith("... (100000 characters)")
    assert out["items"][-1] == "... (1000 items)" and len(out["items"]) == 101


def test_session_time_limit_sends_error_then_closes_1008() -> None:
    async def main() -> None:
        async with relay_stack(max_session_seconds=0.5) as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            t0 = asyncio.get_running_loop().time()
            err = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert err["type"] == "error" and err["code"] == "session_time_limit"
            code, reason = await _closed(ws)
            assert code == 1008 and reason == "session time limit"
            assert 0.4 < asyncio.get_running_loop().time() - t0 < 3

    run(main())


def test_concurrent_sessions_limit_closes_1013() -> None:
    async def main() -> None:
        async with relay_stack(max_sessions=2) as (server, _):
            a = await open_client(server)
            b = await open_client(server)
            await a.send(json.dumps(CONFIG))
            await b.send(json.dumps(CONFIG))
            await speak(a, "a")  # both sessions are really open
            await speak(b, "b")
            c = await open_client(server)
            code, reason = await _closed(c)
            assert code == 1013 and reason == "relay at capacity"
            await a.close()
            async with asyncio.timeout(5):
                while len(server.sessions) > 1:
                    await asyncio.sleep(0.01)
            d = await open_client(server)  # capacity is released when a session ends
            await d.send(json.dumps(CONFIG))
            assert events(await speak(d, "d"))[-1] == "session.done"
            await b.close()
            await d.close()

    run(main())


def test_slow_client_is_closed_1008_and_the_queue_stays_bounded() -> None:
    """A client that stops reading while the upstream floods: the relay must not buffer without bound."""

    async def main() -> None:
        fake = FakeTTS(chunk_samples=24000, flood_chunks=2000)  # 2000 x 48 KB = 96 MB if nothing stopped it
        async with relay_stack(fake, send_queue_frames=64, send_queue_bytes=1024 * 1024, close_timeout=5) as (
            server,
            _,
        ):
            # max_queue=1: the client library stops reading its socket once one message is pending
            ws = await open_client(server, max_queue=1, max_size=None)
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": "FLOOD"}))
            await ws.send(json.dumps({"type": "input.done"}))
            async with asyncio.timeout(10):
                while server.metrics.errors["client_too_slow"] == 0:
                    await asyncio.sleep(0.02)
            [session] = server.sessions.ever  # checked whether or not the relay has closed it yet
            assert session.max_queued_bytes <= 1024 * 1024 and session.max_queued_frames <= 64
            assert session.max_queued_frames > 1, "the queue never filled: the client was not slow"
            # now read what was in flight: the close frame with the reason follows it
            received = 0
            async with asyncio.timeout(10):
                try:
                    while True:
                        f = await ws.recv()
                        received += len(f)
                except ConnectionClosed:
                    pass
            assert ws.close_code == 1008 and ws.close_reason == "client too slow: send queue full"
            assert received < 40 * 1024 * 1024  # far less than the 96 MB the upstream wanted to send
            async with asyncio.timeout(5):
                while server.sessions:
                    await asyncio.sleep(0.02)

    run(main(), timeout=30)
