"""The uvicorn-served container emulator stops synthesising for clients that left (issue 10, item 5).

Before: every abandoned utterance was synthesised to the end in the thread pool (and its audio paced out), so a
later short utterance waited behind all of them (52 s after 200 abandoned ones).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import connect

from tests.integration.relay.relay_stack import emulator
from tests.support.relay.relay_harness import CONFIG, run

ABANDONED = 24
LONG_TEXT = ("Nobody will listen to the end of this sentence, so it must not be synthesised. " * 40)[:2500]


@pytest.fixture(scope="module")
def upstream_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with emulator(tmp_path_factory.mktemp("emulator-abandoned"), 4.0) as url:
        yield url


async def _abandon(url: str) -> None:
    ws = await connect(url, open_timeout=10, max_size=None)
    await ws.send(json.dumps(CONFIG))
    await ws.send(json.dumps({"type": "input.text", "text": LONG_TEXT}))
    await ws.send(json.dumps({"type": "input.done"}))
    assert json.loads(await ws.recv())["type"] == "audio.start"  # synthesis is under way
    ws.transport.abort()  # the client vanishes (TCP reset), as a crashed app or a dropped relay session does


def test_short_utterance_is_not_stuck_behind_abandoned_ones(upstream_url: str) -> None:
    async def main() -> float:
        await asyncio.gather(*(_abandon(upstream_url) for _ in range(ABANDONED)))
        async with connect(upstream_url, open_timeout=10, max_size=None) as ws:
            await ws.send(json.dumps(CONFIG))
            t0 = time.monotonic()
            await ws.send(json.dumps({"type": "input.text", "text": "Hello there."}))
            await ws.send(json.dumps({"type": "input.done"}))
            async with asyncio.timeout(60):
                while True:
                    frame = await ws.recv()
                    if isinstance(frame, str) and json.loads(frame)["type"] == "session.done":
                        return time.monotonic() - t0

    elapsed = run(main(), timeout=90)
    # 12 characters = ~0.85 s of audio, paced at 4x real time: ~0.2 s when nothing else is being synthesised.
    assert elapsed < 3.0, f"a 12-character utterance took {elapsed:.1f} s behind {ABANDONED} abandoned ones"
