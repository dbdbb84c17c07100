"""Progress for long waits, on stderr: one rewritten line on a terminal, a line per change otherwise."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, enabled: bool = True, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self._last = ""
        self._width = 0

    def update(self, text: str, elapsed: float | None = None) -> None:
        if not self.enabled:
            return
        if self.tty:
            line = f"{text} ({elapsed:.0f} s)" if elapsed is not None else text
            self.stream.write("\r" + line.ljust(self._width))
            self._width = len(line)
            self.stream.flush()
        elif text != self._last:
            self.stream.write((f"[{elapsed:5.1f}s] " if elapsed is not None else "") + text + "\n")
            self.stream.flush()
        self._last = text

    def clear(self) -> None:
        if self.enabled and self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def done(self, text: str) -> None:
        if not self.enabled:
            return
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()
