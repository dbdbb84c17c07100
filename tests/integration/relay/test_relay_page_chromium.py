"""The relay's ``/`` page in headless Chromium (Debian ``chromium``), driven over the Chrome DevTools Protocol.

Stack: Chromium → relay process (browser auth: ``omnireel.v1`` + ``omnireel.bearer.<token>`` subprotocols) →
container emulator process. The page's Speak button opens the WebSocket, streams the text and hands every PCM
frame to Web Audio (``AudioBufferSourceNode.start`` on a running ``AudioContext``); the test reads the counters the
page keeps in ``window.omnireelStats``. The CDP client is a few lines over ``websockets`` (no Playwright download).
Skipped when ``chromium`` is not installed (CI installs it: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from tests.integration.relay.relay_stack import Stack, emulator_and_relay
from tests.support.chromium import CDP, CHROMIUM  # and the fixture `chromium` (tests/conftest.py's plugins)
from tests.support.omnireel_command import omnireel_command
from tests.support.relay.relay_harness import TOKEN, run

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with emulator_and_relay(tmp_path_factory.mktemp("relay-page"), realtime_factor=4.0) as s:
        yield s


def test_page_streams_pcm_from_relay_and_schedules_it_with_web_audio(stack: Stack, chromium: str) -> None:
    async def main() -> dict[str, Any]:
        async with connect(chromium, max_size=None, open_timeout=10, close_timeout=2) as ws:
            cdp = CDP(ws)
            await cdp.call("Page.enable")
            await cdp.call("Page.navigate", url=stack.relay_http + "/")
            await cdp.wait_for(
                "document.readyState === 'complete' && typeof window.omnireelStats === 'object'", timeout=10
            )
            await cdp.eval(f"document.getElementById('token').value = {json.dumps(TOKEN)}")
            await cdp.eval(
                "document.getElementById('text').value = "
                "'Streaming into a browser. Several chunks should be scheduled before synthesis ends.'"
            )
            await cdp.eval("document.getElementById('speak').click()", gesture=True)
            await cdp.wait_for("window.omnireelStats.events.includes('session.done')", timeout=20)
            stats = json.loads(await cdp.eval("JSON.stringify(window.omnireelStats)"))
            await cdp.eval("document.getElementById('close').click()", gesture=True)
            await cdp.wait_for("window.omnireelStats.closeCode !== null", timeout=10)
            stats["closeCode"] = await cdp.eval("window.omnireelStats.closeCode")
            stats["log"] = await cdp.eval("document.getElementById('log').textContent")
            return stats

    stats = run(main(), timeout=60)
    assert stats["errors"] == [], stats
    assert stats["events"] == ["audio.start", "audio.done", "session.done"], stats
    assert stats["chunks"] >= 5 and stats["bytes"] > 0 and stats["bytes"] % 2 == 0
    total = json.loads(next(line for line in stats["log"].splitlines() if '"audio.done"' in line))["total_bytes"]
    assert stats["bytes"] == total  # every PCM byte the relay forwarded reached the page
    # every chunk was handed to Web Audio, as it arrived, on a running AudioContext
    assert stats["scheduled"] == stats["chunks"] and stats["scheduledSamples"] * 2 == stats["bytes"]
    assert stats["audioState"] == "running", stats
    assert stats["scheduledUntil"] >= stats["bytes"] / 2 / 24000  # queued audio covers all of it
    assert stats["firstAudioMs"] is not None and 0 <= stats["firstAudioMs"] < 5000
    assert stats["closeCode"] == 1000


def _open_url(stack: Stack, tmp_path: Path, token: str) -> str:
    """The URL `omnireel tts --open` hands the browser (the real CLI, a recorder as $BROWSER)."""
    import os

    seen = tmp_path / "url.txt"
    recorder = tmp_path / "browser.sh"
    recorder.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {seen}\n')
    recorder.chmod(0o755)
    argv = omnireel_command()
    result = subprocess.run(
        [*argv, "tts", "--open", "--url", stack.relay_ws, "--token", token],
        env={**os.environ, "BROWSER": f"{recorder} %s"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return seen.read_text()


async def _load(cdp: CDP, url: str) -> None:
    await cdp.call("Page.enable")
    await cdp.call("Page.navigate", url=url)
    await cdp.wait_for("document.readyState === 'complete' && typeof window.omnireelStats === 'object'", timeout=10)


def test_page_opened_by_tts_open_takes_the_token_from_the_fragment(stack: Stack, chromium: str, tmp_path: Path) -> None:
    url = _open_url(stack, tmp_path, TOKEN)
    assert url.startswith(stack.relay_http + "/#token=") and "?" not in url  # nothing token-like in the request

    async def main() -> dict[str, Any]:
        async with connect(chromium, max_size=None, open_timeout=10, close_timeout=2) as ws:
            cdp = CDP(ws)
            await _load(cdp, url)
            out = {
                "hash": await cdp.eval("location.hash"),  # taken out of the address bar once read
                "filled": await cdp.eval(f"document.getElementById('token').value === {json.dumps(TOKEN)}"),
            }
            await cdp.eval("document.getElementById('speak').click()", gesture=True)  # nobody typed the token
            await cdp.wait_for("window.omnireelStats.events.includes('session.done')", timeout=20)
            out["stats"] = json.loads(await cdp.eval("JSON.stringify(window.omnireelStats)"))
            return out

    out = run(main(), timeout=60)
    assert out["hash"] == "" and out["filled"] is True
    assert out["stats"]["errors"] == [] and out["stats"]["authError"] is None
    assert out["stats"]["chunks"] >= 5


@pytest.mark.parametrize("token", ["wrong-token-0123456789", ""])
def test_page_says_when_the_token_is_refused_and_where_it_comes_from(
    stack: Stack, chromium: str, tmp_path: Path, token: str
) -> None:
    async def main() -> dict[str, Any]:
        async with connect(chromium, max_size=None, open_timeout=10, close_timeout=2) as ws:
            cdp = CDP(ws)
            await _load(cdp, stack.relay_http + "/")
            await cdp.eval(f"document.getElementById('token').value = {json.dumps(token)}")
            await cdp.eval("document.getElementById('speak').click()", gesture=True)
            await cdp.wait_for("window.omnireelStats.authError !== null", timeout=10)
            return {
                "status": await cdp.eval("document.getElementById('status').textContent"),
                "visible": await cdp.eval("getComputedStyle(document.getElementById('status')).display !== 'none'"),
                "connected": await cdp.eval("window.omnireelStats.connected"),
                "events": await cdp.eval("window.omnireelStats.events.length"),
            }

    out = run(main(), timeout=60)
    expected = "refused this token (HTTP 401)" if token else "Enter the relay token"
    assert expected in out["status"], out
    assert "omnireel tts --open" in out["status"] and "RelayTokenSecretArn" in out["status"]
    assert out["visible"] is True and out["connected"] is False and out["events"] == 0
