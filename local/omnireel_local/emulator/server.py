"""The emulator's HTTP server: uvicorn's, woken once a second when idle instead of ten times.

uvicorn's main loop sleeps 0.1 s between checks for a shutdown (and refreshes its ``Date`` header every tenth check):
an idle emulator spent ~0.16 CPU-s a minute on those wake-ups (measured 2026-12-06, uvicorn 0.54: 0.118 -> 0.038 CPU-s
over 30 idle seconds, start included), and every local stack runs three emulators for as long as it is up (a test
run's stacks are up ~25 stack-minutes). Here the loop checks once a second and the ``Date`` header is refreshed at each
check, as uvicorn does once a second; a stop signal wakes it at once, so ``SIGTERM`` stops the emulator as soon as
before. ``should_exit`` set without a signal (not done here) is seen within the second.

A development tool's server only: nothing deployed runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import FrameType

import uvicorn

CHECK_INTERVAL_S = 1.0
_TICKS_PER_CHECK = 10  # uvicorn's on_tick refreshes the Date header when its counter is a multiple of 10


class QuietServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + _TICKS_PER_CHECK) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), CHECK_INTERVAL_S)
            should_exit = await self.on_tick(counter)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)  # safe in a signal handler: it writes the loop's pipe


def serve(app: object, **options: object) -> None:
    """``uvicorn.run(app, **options)`` for an application object (no reload, one worker), with ``QuietServer``."""
    config = uvicorn.Config(app, **options)  # type: ignore[arg-type]
    server = QuietServer(config)
    server.run()
    if not server.started:
        raise SystemExit(3)  # uvicorn's STARTUP_FAILURE (the port was taken, the app failed to start)
