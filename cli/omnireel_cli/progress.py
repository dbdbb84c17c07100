"""Progress of long waits, on stderr.

On a terminal: one line redrawn in place several times a second (a job's stages with their durations and the current
one ticking; a batch's counts with a bar and a rate). Otherwise (a pipe, a file, CI): one plain line per change, so a
log reads as a history. ``omnireel submit --wait``, ``omnireel drop --wait`` and ``omnireel batch --wait`` use them.
"""

from __future__ import annotations

import itertools
import shutil
import sys
import threading
import time
from typing import Any, TextIO

STAGE_LABELS = {
    "accepted": "accepted",
    "queued": "queued for a GPU",
    "generating_image": "generating image",
    "staging_video": "staging video",
    "rendering_video": "rendering video",
    "succeeded": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    "expired": "expired (never admitted)",
}
ORDER = ("accepted", "queued", "generating_image", "staging_video", "rendering_video")
TICK_S = 0.2
BAR_WIDTH = 24


def stage_durations(stage_times: dict[str, Any]) -> dict[str, float]:
    """Seconds each finished stage took: from its entry in ``stage_times`` to the next stage's entry."""
    entered = sorted((t, s) for s, t in stage_times.items() if t is not None)
    return {stage: (later - at).total_seconds() for (at, stage), (later, _) in itertools.pairwise(entered)}


def queue_text(queue: dict[str, Any] | None) -> str:
    """`` (2 of your jobs ahead, 3 callers waiting)`` for a job waiting for a GPU slot, else nothing."""
    if not queue:
        return ""
    kind = "" if queue.get("kind") == "image" else f" for the {queue.get('kind')} endpoint"
    return f" ({queue.get('position', 0)} of your jobs ahead{kind}, {queue.get('callers', 1)} callers waiting)"


def job_line(
    job_id: str, status: str, stage_times: dict[str, Any], current_s: float, queue: dict[str, Any] | None = None
) -> str:
    """``job 1a2b3c4d  accepted 0.1s > generating image 1.3s > rendering video 2.4s...``"""
    durations = stage_durations(stage_times)
    parts = [f"{STAGE_LABELS.get(s, s)} {durations[s]:.1f}s" for s in ORDER if s in durations]
    label = STAGE_LABELS.get(status, status) + queue_text(queue)
    parts.append(f"{label} {current_s:.1f}s..." if status in ORDER else label)
    return f"job {job_id[:8]}  " + " > ".join(parts)


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = round(width * done / total) if total else 0
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def batch_line(batch_id: str, counts: Any, elapsed_s: float, *, with_bar: bool) -> str:
    """``batch 1a2b3c4d [######------] 42/100 done: 40 succeeded, 2 failed, 0 cancelled; 3.1 jobs/s``"""
    done, total = counts.done, counts.total
    rate = f"; {done / elapsed_s:.1f} jobs/s" if elapsed_s > 0 and done else ""
    shown = f"{bar(done, total)} " if with_bar else ""
    detail = f"{counts.succeeded} succeeded, {counts.failed} failed, {counts.cancelled} cancelled"
    return f"batch {batch_id[:8]} {shown}{done}/{total} done: {detail}{rate}"


class _Display:
    """A line that a ticker thread redraws on a terminal (``render`` gives it), or plain lines on change."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._drawn = 0
        self._ticker: threading.Thread | None = None

    def render(self) -> str | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def changed(self, *plain: str) -> None:
        """A change: redraw now (terminal) or write each ``plain`` line (elsewhere)."""
        if not self.enabled:
            return
        if not self.tty:
            stamp = f"[{time.monotonic() - self.started:6.1f}s] "
            self.stream.write("".join(f"{stamp}{line}\n" for line in plain))
            self.stream.flush()
            return
        self._draw()
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self._draw()

    def _draw(self) -> None:
        line = self.render()
        if line is None:
            return
        width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
        line = line if len(line) <= width else line[: width - 3] + "..."
        with self._lock:
            if not self._stop.is_set():
                self.stream.write("\r" + line + "\x1b[K")  # carriage return, the line, erase what is left of it
                self.stream.flush()
                self._drawn = len(line)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        with self._lock:
            if self.tty and self._drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._drawn = 0


class JobDisplay(_Display):
    """``on_progress`` for ``Job.wait``: the job's stages as they happen."""

    def __init__(self, job_id: str, enabled: bool = True, stream: TextIO | None = None) -> None:
        super().__init__(enabled, stream)
        self.job_id = job_id
        self._status = ""
        self._stage_times: dict[str, Any] = {}
        self._queue: dict[str, Any] | None = None
        self._since = self.started

    def update(self, job: Any) -> None:
        if job.status != self._status:
            self._since = time.monotonic()
        # Every stage reached since the last update, in order (a short stage can fall between two polls), then the
        # current one: plain mode writes a line for each, so a log lists every stage.
        reached = [s for _, s in sorted((t, s) for s, t in job.stage_times.items() if t is not None)]
        new = [s for s in reached if s not in self._stage_times and s != job.status]
        self._status, self._stage_times = job.status, dict(job.stage_times)
        self._queue = getattr(job, "queue", None)
        lines = [f"job {self.job_id[:8]}: {STAGE_LABELS.get(stage, stage)}" for stage in new]
        current = f"job {self.job_id[:8]}: {STAGE_LABELS.get(job.status, job.status)}{queue_text(self._queue)}"
        self.changed(*lines, current)

    def render(self) -> str | None:
        if not self._status:
            return None
        return job_line(self.job_id, self._status, self._stage_times, time.monotonic() - self._since, self._queue)


class BatchDisplay(_Display):
    """``on_progress`` for ``Batch.wait``: the batch's counts, a bar and a rate."""

    def __init__(self, batch_id: str, enabled: bool = True, stream: TextIO | None = None) -> None:
        super().__init__(enabled, stream)
        self.batch_id = batch_id
        self._counts: Any = None

    def update(self, batch: Any) -> None:
        self._counts = batch.counts
        self.changed(batch_line(self.batch_id, batch.counts, time.monotonic() - self.started, with_bar=False))

    def render(self) -> str | None:
        if self._counts is None:
            return None
        return batch_line(self.batch_id, self._counts, time.monotonic() - self.started, with_bar=True)


class StatusDisplay(_Display):
    """A phase that changes now and then (``omnireel local up``): the phase and the time since the start."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        super().__init__(enabled, stream)
        self._text = ""

    def update(self, text: str) -> None:
        if text != self._text:
            self._text = text
            self.changed(text)

    def render(self) -> str | None:
        return f"{self._text} ({time.monotonic() - self.started:.0f} s)" if self._text else None

    def done(self, text: str) -> None:
        """Stop redrawing and write ``text`` as a line of its own."""
        self.close()
        if self.enabled:
            self.stream.write(text + "\n")
            self.stream.flush()
