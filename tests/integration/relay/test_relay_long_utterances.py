"""Long utterances through the relay to the REAL uvicorn-served container emulator (issue 10, item 1).

uvicorn pauses reading a WebSocket after each message until the app asks for the next one, and vLLM-Omni (like the
emulator) does not read while it streams an utterance. A client-side keepalive ping sent then is never answered, so
the relay's old upstream ``ping_interval=20, ping_timeout=20`` closed healthy sessions with 1011 at ~40 s.

To see that in seconds instead of 40, these tests shorten every keepalive the relay asks the upstream connection for
(``ping_interval`` / ``ping_timeout`` → 0.3 s). The fixed relay asks for none, so the shortening changes nothing.

The same pause also hides the relay's pongs from uvicorn's OWN keepalive pings (20 s / 20 s by default), so uvicorn
closed the connection itself ("received 1011 keepalive ping timeout", found by the soak bench). The relay therefore
forwards nothing while an utterance is in flight; the ``uvicorn_pings_fast`` tests run the emulator with its pings
shortened to 0.3 s to show that in seconds.
The 5-minute, many-utterance soak is ``bench/relay_soak.py`` (docs/benchmarks/relay-soak.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import omnireel_relay.upstream_websocket as upstream_websocket
from tests.integration.relay.relay_stack import emulator
from tests.support.relay.relay_harness import CONFIG, open_client, relay_stack, run

RTF = 25.0  # emulator pacing: 25x real time, so 70 s of audio streams in under 3 s
LONG_TEXT = ("The relay must hold a long utterance while the server streams it. " * 16)[:1000]  # ~70 s of audio


@pytest.fixture(scope="module")
def upstream_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with emulator(tmp_path_factory.mktemp("emulator-long"), RTF) as url:
        yield url


@pytest.fixture(scope="module")
def fast_pinging_upstream_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    extra = ("--ws-ping-interval", "0.3", "--ws-ping-timeout", "0.3")
    with emulator(tmp_path_factory.mktemp("emulator-pings"), RTF, *extra) as url:
        yield url


@pytest.fixture
def short_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = upstream_websocket.connect

    def connect(*args: Any, **kwargs: Any) -> Any:
        for key in ("ping_interval", "ping_timeout"):
            if kwargs.get(key) is not None:
                kwargs[key] = 0.3
        if "ping_interval" not in kwargs:  # websockets' own default is 20 s
            kwargs["ping_interval"] = 0.3
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(upstream_websocket, "connect", connect)


async def _collect(ws: Any, utterances: int, *, on_audio: Any = None) -> tuple[list[dict[str, Any]], list[int]]:
    """Events (JSON) and PCM byte counts per utterance until ``utterances`` session.done arrived."""
    events: list[dict[str, Any]] = []
    pcm = [0] * utterances
    done = 0
    while done < utterances:
        frame = await ws.recv()
        if isinstance(frame, bytes):
            pcm[done] += len(frame)
            if on_audio is not None:
                await on_audio(pcm[done])
            continue
        event = json.loads(frame)
        events.append(event)
        assert event["type"] != "error", event
        if event["type"] == "session.done":
            done += 1
    return events, pcm


def test_long_utterance_then_another_sent_while_it_streams(upstream_url: str, short_keepalive: None) -> None:
    _long_then_another(upstream_url)


def test_long_utterance_then_another_uvicorn_pings_fast(fast_pinging_upstream_url: str) -> None:
    _long_then_another(fast_pinging_upstream_url)


def _long_then_another(upstream_url: str) -> None:
    async def main() -> None:
        async with relay_stack(upstream_url=upstream_url) as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": LONG_TEXT}))
            await ws.send(json.dumps({"type": "input.done"}))
            sent_next = False

            async def on_audio(received: int) -> None:
                nonlocal sent_next
                if not sent_next and received >= 2 * 24000 * 2:  # 2 s of audio into the long one
                    sent_next = True
                    await ws.send(json.dumps({"type": "input.text", "text": "And one more, sent mid-stream."}))
                    await ws.send(json.dumps({"type": "input.done"}))

            events, pcm = await _collect(ws, 2, on_audio=on_audio)
            done = [e for e in events if e["type"] == "audio.done"]
            assert [e["utterance_index"] for e in done] == [0, 1] and [e["error"] for e in done] == [False, False]
            assert [e["total_bytes"] for e in done] == pcm
            assert pcm[0] / 2 / 24000 > 60  # more than a minute of audio in one utterance
            assert ws.close_code is None  # still open: no 1011 "upstream failed"
            assert server.metrics.errors == {}, server.metrics.errors
            await ws.close()

    run(main(), timeout=60)


def test_five_queued_utterances_all_finish(upstream_url: str, short_keepalive: None) -> None:
    _five_queued(upstream_url)


def test_five_queued_utterances_uvicorn_pings_fast(fast_pinging_upstream_url: str) -> None:
    _five_queued(fast_pinging_upstream_url)


def _five_queued(upstream_url: str) -> None:
    async def main() -> None:
        async with relay_stack(upstream_url=upstream_url) as (server, _):
            ws = await open_client(server)
            await ws.send(json.dumps(CONFIG))
            for i in range(5):
                await ws.send(json.dumps({"type": "input.text", "text": f"Utterance {i}. " + LONG_TEXT[:285]}))
                await ws.send(json.dumps({"type": "input.done"}))
            events, pcm = await _collect(ws, 5)
            assert [e["utterance_index"] for e in events if e["type"] == "session.done"] == [0, 1, 2, 3, 4]
            assert all(n > 0 for n in pcm), pcm
            assert server.metrics.errors == {}, server.metrics.errors
            await ws.close()

    run(main(), timeout=60)


def test_progress_timeout_setting_is_read_from_the_environment() -> None:
    from omnireel_relay.settings import Settings

    settings = Settings.from_env({"OMNIREEL_RELAY_TOKEN": "x" * 20, "OMNIREEL_RELAY_UPSTREAM_PROGRESS_TIMEOUT": "7.5"})
    assert settings.upstream_progress_timeout == 7.5
