"""Start the emulator as a real uvicorn process on a free loopback port; always stop it; every wait is bounded."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

from omnireel_local.home import free_port as _free_port
from tests.support.loopback import http
from tests.support.processes import stop_process, wait_until_serving

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    port = _free_port()
    log_path = tmp_path_factory.mktemp("emulator") / "emulator.log"
    env = {**os.environ, "PYTHONPATH": str(REPO / "local"), "OMNIREEL_EMULATOR_SPEECH_REALTIME_FACTOR": "20"}
    env.pop("SM_VLLM_MODEL", None)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "omnireel_local.emulator", "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(proc, base, 20, str(log_path))
            yield base, log_path
        finally:
            stop_process(proc, grace_s=10)


def test_process_serves_http_and_says_it_is_an_emulator(emulator):
    base, log_path = emulator
    r = http().post(
        f"{base}/invocations",
        json={"prompt": "a harbour", "size": "64x64", "seed": 1},
        headers={"X-Amzn-SageMaker-Custom-Attributes": "route=/v1/images/generations"},
        timeout=10,
    )
    assert r.status_code == 200 and r.headers["x-omnireel-emulator"] == "vllm-omni-emulator"
    assert "EMULATOR" in log_path.read_text() and "not the real model" in log_path.read_text()


def test_process_streams_pcm_over_a_real_websocket(emulator):
    base, _ = emulator

    async def session() -> tuple[list[str], int, int]:
        url = base.replace("http://", "ws://") + "/v1/audio/speech/stream"
        order, received, total = [], 0, -1
        async with websockets.connect(url, open_timeout=5) as ws:
            await ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True}))
            await ws.send(json.dumps({"type": "input.text", "text": "Hello from a real socket."}))
            await ws.send(json.dumps({"type": "input.done"}))
            while True:
                message = await asyncio.wait_for(ws.recv(), timeout=10)
                if isinstance(message, bytes):
                    received += len(message)
                    order.append("binary")
                    continue
                event = json.loads(message)
                order.append(event["type"])
                if event["type"] == "audio.done":
                    total = event["total_bytes"]
                if event["type"] == "session.done":
                    break
            await ws.send(json.dumps({"type": "session.close"}))
        return order, received, total

    order, received, total = asyncio.run(asyncio.wait_for(session(), timeout=30))
    assert order[0] == "audio.start" and order.count("binary") > 1 and order[-2:] == ["audio.done", "session.done"]
    assert received == total > 0


def test_process_refuses_default_bidi_path(emulator):
    base, _ = emulator

    async def connect() -> None:
        url = base.replace("http://", "ws://") + "/invocations-bidirectional-stream"
        async with websockets.connect(url, open_timeout=5):
            pass

    with pytest.raises(websockets.exceptions.InvalidStatus):
        asyncio.run(asyncio.wait_for(connect(), timeout=10))
