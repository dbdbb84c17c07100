"""SIGTERM drain of the real relay process (``python -m omnireel_relay``) in front of a fake upstream."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from omnireel_local.home import free_port as _free_port
from tests.support.relay.fake_tts_upstream import FakeTTS
from tests.support.relay.relay_harness import CONFIG, TOKEN, run

REPO = Path(__file__).resolve().parents[3]


def _status(port: int, path: str = "/healthz") -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


async def _start_relay(upstream_url: str, drain_seconds: float) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OMNIREEL_RELAY_")},
        "PYTHONPATH": str(REPO / "relay"),
        "OMNIREEL_RELAY_TOKEN": TOKEN,
        "OMNIREEL_RELAY_HOST": "127.0.0.1",
        "OMNIREEL_RELAY_PORT": str(port),
        "OMNIREEL_RELAY_UPSTREAM_URL": upstream_url,
        "OMNIREEL_RELAY_DRAIN_SECONDS": str(drain_seconds),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "omnireel_relay"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    async with asyncio.timeout(10):
        while await asyncio.to_thread(_status, port) != 200:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            await asyncio.sleep(0.05)
    return proc, port


async def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int:
    async with asyncio.timeout(timeout):
        while proc.poll() is None:
            await asyncio.sleep(0.05)
    return proc.returncode


def _kill(proc: subprocess.Popen[bytes]) -> str:
    if proc.poll() is None:
        proc.kill()
    out, _ = proc.communicate(timeout=5)
    return out.decode()


def test_sigterm_lets_open_session_finish_refuses_new_ones_and_exits() -> None:
    async def main() -> str:
        from websockets.asyncio.client import connect

        fake = FakeTTS(chunks=12, interval=0.1)  # ~1.2 s of synthesis
        url = await fake.start()
        proc, port = await _start_relay(url, drain_seconds=10)
        try:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            ws = await connect(
                f"ws://127.0.0.1:{port}/v1/audio/speech/stream", additional_headers=headers, open_timeout=5
            )
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": "finish me"}))
            await ws.send(json.dumps({"type": "input.done"}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "audio.start"

            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(5):
                while await asyncio.to_thread(_status, port) != 503:
                    await asyncio.sleep(0.02)
            with pytest.raises(InvalidStatus) as info:
                await connect(
                    f"ws://127.0.0.1:{port}/v1/audio/speech/stream", additional_headers=headers, open_timeout=5
                )
            assert info.value.response.status_code == 503

            kinds = []
            async with asyncio.timeout(10):
                while True:
                    f = await ws.recv()
                    kinds.append("pcm" if isinstance(f, bytes) else json.loads(f)["type"])
                    if kinds[-1] == "session.done":
                        break
            assert kinds.count("pcm") == 12 and kinds[-2] == "audio.done"
            await ws.send(json.dumps({"type": "session.close"}))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 5)
            assert ws.close_code == 1000
            assert await _wait_exit(proc, 8) == 0
        finally:
            out = _kill(proc)
            await fake.stop()
        return out

    out = run(main(), timeout=30)
    logs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    closed = [r for r in logs if r["msg"] == "session closed"]
    assert closed and closed[0]["session_id"] and closed[0]["audio_chunks"] == 12
    assert any(r["msg"] == "draining" for r in logs)


def test_drain_deadline_closes_lingering_sessions_with_1001() -> None:
    async def main() -> None:
        from websockets.asyncio.client import connect

        fake = FakeTTS()
        url = await fake.start()
        proc, port = await _start_relay(url, drain_seconds=0.5)
        try:
            ws = await connect(
                f"ws://127.0.0.1:{port}/v1/audio/speech/stream",
                additional_headers={"Authorization": f"Bearer {TOKEN}"},
                open_timeout=5,
            )
            await ws.send(json.dumps(CONFIG))
            # The session is open and configured once one utterance went through (not after a guessed delay).
            await ws.send(json.dumps({"type": "input.text", "text": "hello"}))
            await ws.send(json.dumps({"type": "input.done"}))
            async with asyncio.timeout(10):
                while not (isinstance(f := await ws.recv(), str) and json.loads(f)["type"] == "session.done"):
                    pass
            t0 = asyncio.get_running_loop().time()
            proc.send_signal(signal.SIGTERM)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 8)
            assert ws.close_code == 1001 and ws.close_reason == "relay shutting down"
            assert 0.4 < asyncio.get_running_loop().time() - t0 < 5
            assert await _wait_exit(proc, 8) == 0
        finally:
            _kill(proc)
            await fake.stop()

    run(main(), timeout=30)
