"""Headless Chromium (Debian ``chromium``) driven over the Chrome DevTools Protocol, for the tests of the relay's page
(tests/integration/relay/test_relay_page_chromium.py, tests/e2e/test_ui.py). The CDP client is a few lines over
``websockets`` (no Playwright download). ``CHROMIUM`` is None when it is not installed: the tests skip then.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection

from tests.support.processes import stop_process

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--autoplay-policy=no-user-gesture-required",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
]


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[str]:
    """Start headless Chromium; yield the DevTools WebSocket URL of its first page. Always stopped."""
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    log = (tmp_path / "chromium.log").open("wb")
    proc = subprocess.Popen(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"], stdout=log, stderr=log
    )
    log.close()
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start:\n{(tmp_path / 'chromium.log').read_text()[-3000:]}")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            if pages:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("chromium has no page target")
            time.sleep(0.05)
        yield pages[0]["webSocketDebuggerUrl"]
    finally:
        stop_process(proc)


class CDP:
    """Minimal Chrome DevTools Protocol client: request/response by id, events ignored."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        await self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        async with asyncio.timeout(10):
            while True:
                msg = json.loads(await self.ws.recv())
                if msg.get("id") == msg_id:
                    if "error" in msg:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    return msg["result"]

    async def eval(self, expression: str, *, gesture: bool = False) -> Any:
        result = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True, userGesture=gesture
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float) -> Any:
        async with asyncio.timeout(timeout):
            while not (value := await self.eval(expression)):
                await asyncio.sleep(0.05)
        return value
