"""CPU seconds per test file: the test process's own (with the commands it ran) and that of the local stacks it
started, for ``make test-durations`` (tests/durations.json's ``cpu_seconds``; tests/support/run_order.py uses them).

Switched on by ``OMNIREEL_FILE_CPU_LOG`` (a path): at each change of file, and at the end, a test process appends
``{"file", "wall", "cpu"}`` for the file it just finished (read by scripts/test_durations.py). A stack is a process
tree of its own (the CLI that started it has exited), so its CPU is read from /proc: every process of the tree of each
local stack whose home lies in this process's base temporary folder, each with the CPU of the children it has reaped
(a Lambda worker that ended is counted in its template). A stack is read once more just before it is stopped
(``before_stop``, from tests/support/stack.py), so only its stop itself is not counted.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

ENV = "OMNIREEL_FILE_CPU_LOG"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _processes() -> dict[int, tuple[int, float, str]]:
    """pid -> (parent pid, CPU seconds with reaped children, command line) of every process that can be read."""
    found: dict[int, tuple[int, float, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        found[int(entry)] = (int(fields[1]), ticks / _TICKS, command)
    return found


def stack_trees(base: Path) -> dict[int, float]:
    """Each local stack started under ``base`` (its pid) -> the CPU seconds of its process tree now."""
    processes = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    marker = f"--home {base}"
    trees: dict[int, float] = {}
    for pid, (_, _, command) in processes.items():
        if "omnireel_local.stack" in command and marker in command:
            total, pending = 0.0, [pid]
            while pending:
                current = pending.pop()
                total += processes[current][1]
                pending.extend(children.get(current, ()))
            trees[pid] = total
    return trees


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class FileCpu:
    """Readings at file boundaries; ``boundary(next_file)`` writes the finished file's line."""

    def __init__(self, log: Path, base: Path):
        self._log, self._base = log, base
        self._file: str | None = None
        self._since: tuple[float, float, dict[int, float]] = (0.0, 0.0, {})  # wall, own CPU, trees at the file's start
        self._last: dict[int, float] = {}  # each stack's latest reading (kept for a stack that stopped since)

    def note_stacks(self) -> None:
        """Read the stacks now (before one of them stops)."""
        self._last.update(stack_trees(self._base))

    def boundary(self, next_file: str | None) -> None:
        if next_file == self._file:
            return
        now = (time.monotonic(), own_cpu(), stack_trees(self._base))
        if self._file is not None:
            wall, own, trees = self._since
            latest = {**self._last, **now[2]}
            stacks = sum(cpu - trees.get(pid, 0.0) for pid, cpu in latest.items())
            line = {"file": self._file, "wall": round(now[0] - wall, 2), "cpu": round(now[1] - own + stacks, 2)}
            with open(self._log, "a") as out:
                out.write(json.dumps(line) + "\n")
        self._file, self._since, self._last = next_file, now, {}


_active: FileCpu | None = None


def start(log: Path, base: Path) -> FileCpu:
    global _active
    _active = FileCpu(log, base)
    return _active


def before_stop() -> None:
    """A local stack of this process is about to stop: read it while it runs (a no-op unless measuring)."""
    if _active is not None:
        _active.note_stacks()
