"""A plain ``websockets`` client speaking vLLM-Omni's streaming-TTS protocol through the REAL relay process to the
REAL container emulator process (``python -m omnireel_local.emulator``, PCM paced at 4x real time)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import selectors
import subprocess
import time
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.integration.relay.relay_stack import Stack, emulator_and_relay, free_port
from tests.support.omnireel_command import omnireel_command
from tests.support.processes import stop_process
from tests.support.relay.relay_harness import TOKEN, run

RTF = 4.0
SAMPLE_RATE = 24000
CHUNK_BYTES = SAMPLE_RATE * 80 // 1000 * 2  # the emulator's default 80 ms chunks
CONFIG = {
    "type": "session.config",
    "voice": "Vivian",
    "language": "English",
    "response_format": "pcm",
    "stream_audio": True,
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with emulator_and_relay(tmp_path_factory.mktemp("relay-emulator"), realtime_factor=RTF) as s:
        yield s


async def _utterance(ws: ClientConnection, text: str) -> tuple[list[tuple[float, str | bytes]], float]:
    await ws.send(json.dumps({"type": "input.text", "text": text}))
    await ws.send(json.dumps({"type": "input.done"}))
    t0 = time.monotonic()
    frames: list[tuple[float, str | bytes]] = []
    async with asyncio.timeout(20):
        while True:
            frame = await ws.recv()
            frames.append((time.monotonic() - t0, frame))
            if isinstance(frame, str) and json.loads(frame)["type"] in ("session.done", "error"):
                return frames, t0


def _check_utterance(frames: list[tuple[float, str | bytes]], index: int) -> None:
    kinds = ["pcm" if isinstance(f, bytes) else json.loads(f)["type"] for _, f in frames]
    assert kinds[0] == "audio.start" and kinds[-2:] == ["audio.done", "session.done"], kinds
    assert set(kinds[1:-2]) == {"pcm"}, kinds  # every PCM frame between audio.start and audio.done
    start = json.loads(frames[0][1])
    assert start["sample_rate"] == SAMPLE_RATE and start["format"] == "pcm" and start["utterance_index"] == index
    pcm = [(t, f) for t, f in frames if isinstance(f, bytes)]
    assert len(pcm) >= 5
    assert all(len(f) % 2 == 0 and 0 < len(f) <= CHUNK_BYTES for _, f in pcm)  # PCM16 frames, not re-chunked
    done = json.loads(frames[-2][1])
    assert done["total_bytes"] == sum(len(f) for _, f in pcm) and done["error"] is False
    assert json.loads(frames[-1][1])["utterance_index"] == index
    # progressive: frames arrive paced as the emulator produces them, not in one burst at the end
    audio_s = done["total_bytes"] / 2 / SAMPLE_RATE
    spread = pcm[-1][0] - pcm[0][0]
    assert spread >= 0.5 * (audio_s / RTF) - 0.05, (spread, audio_s)
    assert pcm[0][0] < pcm[-1][0] - 0.5 * spread


def test_two_utterances_on_one_socket_through_relay_to_emulator(stack: Stack) -> None:
    async def main() -> None:
        async with connect(
            stack.relay_ws,
            additional_headers={"Authorization": f"Bearer {TOKEN}"},
            open_timeout=5,
            close_timeout=2,
        ) as ws:
            await ws.send(json.dumps(CONFIG))
            first, _ = await _utterance(ws, "Hello from the relay. This sentence is long enough for several chunks.")
            _check_utterance(first, 0)
            second, _ = await _utterance(ws, "And a second utterance on the same socket, also streamed.")
            _check_utterance(second, 1)
            await ws.send(json.dumps({"type": "session.close"}))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 5)
            assert ws.close_code == 1000

    run(main(), timeout=45)


def test_relay_rejects_missing_token_before_reaching_emulator(stack: Stack) -> None:
    from websockets.exceptions import InvalidStatus

    async def main() -> None:
        with pytest.raises(InvalidStatus) as info:
            await connect(stack.relay_ws, open_timeout=5)
        assert info.value.response.status_code == 401

    run(main(), timeout=15)


@contextlib.contextmanager
def _tts_proxy(stack: Stack, token: str) -> Iterator[str]:
    """`omnireel tts-proxy` (the real CLI) on a free loopback port; yields its WebSocket URL once it listens."""
    port = free_port()
    argv = omnireel_command()
    proc = subprocess.Popen(
        [*argv, "tts-proxy", "--listen", f"127.0.0.1:{port}", "--url", stack.relay_ws, "--token", token],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        assert selector.select(timeout=30), "tts-proxy printed nothing within 30 s"
        line = proc.stdout.readline()
        assert line.startswith(f"forwarding ws://127.0.0.1:{port}/v1/audio/speech/stream"), line
        yield f"ws://127.0.0.1:{port}/v1/audio/speech/stream"
    finally:
        stop_process(proc)  # type: ignore[arg-type]


def test_header_less_client_through_tts_proxy(stack: Stack) -> None:
    """The stock vLLM-Omni example client's call, `websockets.connect(url)` with nothing else, through the proxy."""

    async def main(url: str) -> None:
        async with connect(url, open_timeout=5, close_timeout=2) as ws:
            await ws.send(json.dumps(CONFIG))
            frames, _ = await _utterance(ws, "No headers here. The proxy adds the token on its own connection.")
            _check_utterance(frames, 0)
            await ws.send(json.dumps({"type": "session.close"}))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 5)
            assert ws.close_code == 1000  # the relay's close, passed on

    with _tts_proxy(stack, TOKEN) as url:
        run(main(url), timeout=45)


def test_tts_proxy_reports_a_refused_token_as_a_close_reason(stack: Stack) -> None:
    async def main(url: str) -> None:
        async with connect(url, open_timeout=5, close_timeout=2) as ws:
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            assert ws.close_code == 1008 and ws.close_reason == "relay refused: HTTP 401"

    with _tts_proxy(stack, "wrong-token-0123456789") as url:
        run(main(url), timeout=30)


def test_tts_proxy_binds_to_loopback_only() -> None:
    argv = omnireel_command()
    result = subprocess.run(
        [*argv, "tts-proxy", "--listen", "0.0.0.0:8091", "--url", "ws://127.0.0.1:1/x", "--token", "t"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "loopback only" in result.stderr
