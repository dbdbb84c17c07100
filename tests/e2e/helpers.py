"""Shared checks for the e2e tests."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path

import av
from PIL import Image


def decode_mp4(path: Path) -> tuple[int, int, int]:
    """(frames, width, height) decoded with a real decoder (PyAV / FFmpeg)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = [frame for frame in container.decode(stream)]
        return len(frames), frames[0].width, frames[0].height


def png_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return image.size


class LineReader:
    """Reads a subprocess's stdout lines on a thread so tests can wait for one with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]):
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for_json(self, predicate, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if predicate(data):
                return data
        return None


def drain_events_until(stack, predicate, timeout: float = 30) -> dict | None:
    """Consume `omnireel events --json` batches until an event matches (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = stack.cli("events", "--json", timeout=60)
        assert result.returncode == 0, result.stderr
        for line in result.stdout.splitlines():
            event = json.loads(line)
            if predicate(event):
                return event
        time.sleep(0.5)
    return None
