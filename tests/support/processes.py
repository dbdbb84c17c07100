"""Processes a test starts (the container emulator, the relay, Chromium...): waiting until one serves, and stopping it,
so that no test process outlives its test."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.support.loopback import http
from tests.support.waiting import wait_for


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM, wait ``grace_s``, then SIGKILL: no test process outlives its test."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def answers_ping(url: str, timeout_s: float = 2.0) -> bool:
    """``GET {url}/ping`` answers 200 (a container emulator): False while nothing listens or it errs."""
    try:
        return http().get(f"{url}/ping", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until_serving(proc: Any, url: str, timeout_s: float, log: str = "") -> None:
    """Wait (bounded) until ``proc`` (a ``Popen`` or a forked child) answers ``/ping`` at ``url``; fail, with ``log``'s
    text when given, if it exits first or does not answer within ``timeout_s``."""
    wait_for(lambda: proc.poll() is not None or answers_ping(url, 1.0), timeout_s, f"{url}/ping")
    assert proc.poll() is None, Path(log).read_text() if log else f"the process serving {url} exited"
