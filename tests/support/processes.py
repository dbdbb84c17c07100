"""Stopping a process a test started (the container emulator, the relay, Chromium...): no test process outlives its
test."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM, wait ``grace_s``, then SIGKILL: no test process outlives its test."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
