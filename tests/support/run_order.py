"""The order in which `make test` hands test files to the xdist workers (tests/conftest.py's collection hook).

`make test` runs files in parallel (pytest-xdist --dist loadfile --no-loadscope-reorder): a worker takes the next
file when it is done with one. The longest files go first, so the run does not end with one worker alone on a
long file while the others are idle (longest-processing-time-first). The seconds are measured: tests/durations.json,
written from a real run's JUnit reports by `make test-durations`. Only the order depends on them, never what runs;
tests/unit/test_test_order.py checks that the file names every test file on disk and nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"


def file_seconds() -> dict[str, float]:
    """Measured seconds per test file (`tests/...py` -> seconds)."""
    return {path: float(s) for path, s in json.loads(DURATIONS.read_text())["seconds"].items()}


def longest_first(items) -> None:
    seconds = file_seconds()
    # stable: a file stays together; a file not in the list (the order test fails for it) runs last
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))
