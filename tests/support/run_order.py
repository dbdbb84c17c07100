"""The order in which `make test` hands test files to the xdist workers (tests/conftest.py's collection hook).

`make test` runs files in parallel (pytest-xdist --dist loadfile --no-loadscope-reorder): a worker takes the next
file when it is done with one. The longest files go first, so the run does not end with one worker alone on a
long file while the others are idle (longest-processing-time-first). The seconds are measured: tests/durations.json,
written from a real run's JUnit reports by `make test-durations`. Only the order depends on them, never what runs;
tests/unit/test_test_order.py checks that the file names every test file on disk and nothing else.

The files that use the shared local stack go before the others (each group longest first), so that a process's stack
is stopped once, when its last file that uses it ends (tests/support/shared_stack.py), instead of idling beside the
unit tests until the end of the run.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.shared_stack import uses_shared_stack

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"


def file_seconds() -> dict[str, float]:
    """Measured seconds per test file (`tests/...py` -> seconds)."""
    return {path: float(s) for path, s in json.loads(DURATIONS.read_text())["seconds"].items()}


def file_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


def longest_first(items) -> set[str]:
    """The shared stack's files first, then the others; in each group the longest file first. Stable: a file stays
    together; a file not in the list (the order test fails for it) runs last in its group. Returns the files that use
    the shared stack."""
    seconds = file_seconds()
    with_stack = {file_of(item) for item in items if uses_shared_stack(item)}
    items.sort(key=lambda item: (file_of(item) not in with_stack, -seconds.get(file_of(item), 0.0)))
    return with_stack
