"""The emulator's uvicorn server checks for a stop once a second when idle, not ten times (emulator/server.py), yet a
stop signal still ends it at once, and its ``Date`` header is refreshed at every check."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest
import uvicorn

from omnireel_local.emulator import server as emulator_server

BOUND_S = 10.0


async def _app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    pass


def _server() -> emulator_server.QuietServer:
    return emulator_server.QuietServer(uvicorn.Config(_app, log_level="warning"))


def _run_main_loop(server: emulator_server.QuietServer) -> threading.Thread:
    done = threading.Event()

    def run() -> None:
        asyncio.run(server.main_loop())
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.done = done  # type: ignore[attr-defined]
    return thread


def test_a_stop_signal_wakes_the_idle_loop_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # An hour between checks: only the signal's wake-up can end the loop within the bound.
    monkeypatch.setattr(emulator_server, "CHECK_INTERVAL_S", 3600.0)
    server = _server()
    server.server_state.default_headers = []
    thread = _run_main_loop(server)
    for _ in range(1000):  # bounded: the loop has started when its first check refreshed the Date header
        if server.server_state.default_headers:
            break
        thread.done.wait(0.01)  # type: ignore[attr-defined]
    assert server.server_state.default_headers, "the loop never made its first check"
    server.handle_exit(signal.SIGTERM, None)  # what uvicorn's signal handler calls
    assert thread.done.wait(BOUND_S), "SIGTERM did not wake the loop"  # type: ignore[attr-defined]
    assert server.should_exit


def test_every_check_refreshes_the_date_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emulator_server, "CHECK_INTERVAL_S", 0.001)
    server = _server()
    counters: list[int] = []
    original = server.on_tick

    async def on_tick(counter: int) -> bool:
        counters.append(counter)
        if len(counters) == 5:
            server.should_exit = True
        return await original(counter)

    server.on_tick = on_tick  # type: ignore[method-assign]
    thread = _run_main_loop(server)
    assert thread.done.wait(BOUND_S)  # type: ignore[attr-defined]
    # uvicorn refreshes its default headers (Date) when the tick counter is a multiple of 10
    assert len(counters) == 5 and all(counter % 10 == 0 for counter in counters)
    assert any(name == b"date" for name, _ in server.server_state.default_headers)
