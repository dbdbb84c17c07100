"""The order in which `make test` hands test files to the xdist workers (tests/conftest.py's collection hook).

`make test` runs files in parallel (pytest-xdist --dist loadfile --no-loadscope-reorder): a worker takes the next
file when it is done with one. The seconds are measured: tests/durations.json, written from a real run's JUnit
reports by `make test-durations`, with the CPU seconds each file used (its test process and the local stacks it
started: tests/support/file_cpu.py). Only the order depends on them, never what runs; tests/unit/test_test_order.py
checks that the file names every test file on disk and nothing else.

The files that use the shared local stack go before the others, so that a process's stack is stopped once, when its
last file that uses it ends (tests/support/shared_stack.py), instead of idling beside the unit tests until the end of
the run. Among them, files that mostly wait on their stack (a webhook's retry schedule, a batch's reconciler, a
caller's limits: ~0.15-0.3 of a core) are mixed with files that keep one busy (many jobs at once: ~0.6-1.1 of a core):
in the order of their length alone, the four longest -- all waiting -- started together and left the 2 cores a third
idle for most of a minute (measured 2026-12-06). Each group (below and from ``BUSY`` CPU seconds per second) goes
longest first, the longest waiting file first, and the two are merged in proportion to their seconds
(``stack_file_order``). That mix is measured but not in use: it saturated the first minute, but the waiting files
stretched under the load beside them, the stack phase grew, no wall time was gained in paired runs, and two of seven
runs with it failed on contention (test_capacity's image container saw a request wait; the webhook isolation test
never got its batch), against none of four without: ``order`` hands the stack's files out longest first. The other
files follow, longest first (longest-processing-time-first), so the run does not end with one worker alone on a long
file.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.shared_stack import uses_shared_stack

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"
# CPU seconds per second from which a file counts as busy: half a core, as `make test` runs two workers per core
# (a file without a CPU figure counts as busy).
BUSY = 0.5


def _durations() -> dict:
    return json.loads(DURATIONS.read_text())


def file_seconds() -> dict[str, float]:
    """Measured seconds per test file (`tests/...py` -> seconds)."""
    return {path: float(s) for path, s in _durations()["seconds"].items()}


def file_cpu_seconds() -> dict[str, float]:
    """Measured CPU seconds per test file, for the files measured so far."""
    return {path: float(s) for path, s in _durations().get("cpu_seconds", {}).items()}


# A file that does not use the shared stack runs in the waiting lane (the Makefile's WAITING_LANE, its own pytest run
# beside the main one) when its measured CPU is under WAITING_CPU_PER_S seconds per second of its length over at least
# WAITING_MIN_S: in the main run such a file holds one of the workers while using little of the 2 cores, and the main
# run's files that do not use the shared stack come last (``order``), so the waiting ones made the run's last minute
# idle a core (measured 2026-12-06, fifteenth pass: ~30 core-seconds idle after the shared stacks stopped). Files of
# tests/unit (the unit lane, at a low priority: its seconds are stretched by the main run's load) and tests/reliability
# (the scale lane) are not ruled.
WAITING_CPU_PER_S = 0.15
WAITING_MIN_S = 3.0
RULED = ("tests/integration/", "tests/e2e/")


def make_list(name: str) -> list[str]:
    """A Makefile variable's words (``NAME := a b \\`` continued on the next lines)."""
    lines = iter(MAKEFILE.read_text().split(f"\n{name} :=", 1)[1].splitlines())
    text = next(lines)
    while text.endswith("\\"):
        text = text[:-1] + " " + next(lines)
    return text.split()


def waiting_lane() -> list[str]:
    """The Makefile's WAITING_LANE: the paths `make test` runs in the waiting lane."""
    return make_list("WAITING_LANE")


def measured_waiting(seconds: dict[str, float], cpu: dict[str, float]) -> set[str]:
    """The files whose measurement says they mostly wait (see WAITING_CPU_PER_S); a file without a CPU figure is not."""
    return {
        f
        for f, s in seconds.items()
        if f.startswith(RULED) and s >= WAITING_MIN_S and f in cpu and cpu[f] < WAITING_CPU_PER_S * s
    }


def misplaced_waiting_files(files: set[str], with_stack: set[str], lane: list[str], waiting: set[str]) -> list[str]:
    """The collected ``files`` that mostly wait (``waiting``: ``measured_waiting``), do not use the shared stack and
    are not in the waiting ``lane`` (a path of it, or under a folder of it)."""
    in_lane = {f for f in files for path in lane if f == path or f.startswith(path.rstrip("/") + "/")}
    return sorted(f for f in files if f in waiting and f not in with_stack and f not in in_lane)


def file_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


def stack_file_order(files: list[str], seconds: dict[str, float], cpu: dict[str, float]) -> list[str]:
    """The shared stack's files: the waiting and the busy group, each longest first, merged in proportion to their
    seconds (see the module's docstring)."""
    intensity = {f: cpu[f] / seconds[f] for f in files if f in cpu and seconds.get(f, 0.0) > 0}

    def longest(group: list[str]) -> list[str]:
        return sorted(group, key=lambda f: (-seconds.get(f, 0.0), f))

    waiting = longest([f for f in files if intensity.get(f, BUSY) < BUSY])
    busy = longest([f for f in files if intensity.get(f, BUSY) >= BUSY])
    # Merged in proportion to their seconds, so busy files stay in the mix to the end of the stack's files (there are
    # more waiting seconds than busy ones): the next file comes from the group that has handed out the smaller part
    # of its seconds so far, a waiting one on a tie.
    total_waiting = sum(seconds.get(f, 0.0) for f in waiting) or 1.0
    total_busy = sum(seconds.get(f, 0.0) for f in busy) or 1.0
    order: list[str] = []
    handed_waiting = handed_busy = 0.0
    w = b = 0
    while w < len(waiting) or b < len(busy):
        if b >= len(busy) or (w < len(waiting) and handed_waiting / total_waiting <= handed_busy / total_busy):
            order.append(waiting[w])
            handed_waiting += seconds.get(waiting[w], 0.0)
            w += 1
        else:
            order.append(busy[b])
            handed_busy += seconds.get(busy[b], 0.0)
            b += 1
    return order


def order(items) -> set[str]:
    """Sort the collected items: the shared stack's files first (``stack_file_order``), then the others longest first.
    Stable: a file stays together; a file not in the durations (the order test fails for it) runs last in its group.
    Returns the files that use the shared stack."""
    seconds = file_seconds()
    with_stack = {file_of(item) for item in items if uses_shared_stack(item)}
    # Longest first among the shared stack's files: the CPU figures are not used for the order (see the docstring).
    rank = {f: i for i, f in enumerate(stack_file_order(sorted(with_stack), seconds, {}))}
    items.sort(
        key=lambda item: (
            file_of(item) not in with_stack,
            rank.get(file_of(item), 0),
            -seconds.get(file_of(item), 0.0),
        )
    )
    return with_stack
