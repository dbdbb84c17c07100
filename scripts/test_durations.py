"""Writes tests/durations.json, the seconds each test file takes, from pytest JUnit reports, and the CPU seconds it
uses, from the test processes' CPU logs (tests/support/file_cpu.py) (`make test-durations`).

    python scripts/test_durations.py REPORT.xml... [CPU-LOG.jsonl...]
    python scripts/test_durations.py --estimate-new    (adds only the files it lacks, with an estimate by folder)

tests/conftest.py hands the files to the xdist workers longest first from these seconds. A file's figure is the sum of
its tests' times in the reports (JUnit family xunit1: each test names its file; a module fixture's set-up, e.g. a
local stack, counts in its first test). Files in no report keep their figure (or, new, get an estimate by folder);
files no longer on disk are dropped. Missing reports are skipped (`make test` with TEST_WORKERS=1 has no waiting lane).
CPU seconds likewise: a file in no log keeps its figure; a file never measured has none (the order counts it as busy).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DURATIONS = ROOT / "tests" / "durations.json"
# A new file's first estimate, until a measured run: seconds by the folder it is in.
ESTIMATES = {"tests/e2e/": 30.0, "tests/reliability/": 200.0, "tests/integration/": 5.0}
DEFAULT_ESTIMATE = 1.0


def test_files() -> list[str]:
    """Every test module on disk (pytest's default discovery: test_*.py and *_test.py under tests/)."""
    found = [*(ROOT / "tests").rglob("test_*.py"), *(ROOT / "tests").rglob("*_test.py")]
    return sorted({p.relative_to(ROOT).as_posix() for p in found})


def estimate(path: str) -> float:
    return next((s for folder, s in ESTIMATES.items() if path.startswith(folder)), DEFAULT_ESTIMATE)


def measured(reports: list[Path]) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for report in reports:
        for case in ET.parse(report).iter("testcase"):  # noqa: S314 - see the import
            file = case.get("file")
            if file:
                seconds[file] = seconds.get(file, 0.0) + float(case.get("time") or 0)
    return seconds


def measured_cpu(logs: list[Path]) -> dict[str, float]:
    """CPU seconds per file from the test processes' logs (tests/support/file_cpu.py: one ``{"file", "wall", "cpu"}``
    line per file a process ran; a file split between runs adds up)."""
    cpu: dict[str, float] = {}
    for log in logs:
        for line in log.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                cpu[record["file"]] = cpu.get(record["file"], 0.0) + float(record["cpu"])
    return cpu


def main() -> int:
    if sys.argv[1:] == ["--estimate-new"]:
        doc = json.loads(DURATIONS.read_text())
        new_files = [path for path in test_files() if path not in doc["seconds"]]
        doc["seconds"] = dict(sorted((doc["seconds"] | {path: estimate(path) for path in new_files}).items()))
        DURATIONS.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"tests/durations.json: estimates added for {new_files or 'no file'}")
        return 0
    reports = [Path(a) for a in sys.argv[1:] if Path(a).is_file() and not a.endswith(".jsonl")]
    cpu_logs = [Path(a) for a in sys.argv[1:] if Path(a).is_file() and a.endswith(".jsonl")]
    if not reports:
        print("test_durations: no JUnit report given (run `make test-durations`)", file=sys.stderr)
        return 2
    previous = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    old, old_cpu = previous.get("seconds", {}), previous.get("cpu_seconds", {})
    new = measured(reports)
    new_cpu = measured_cpu(cpu_logs)
    on_disk = test_files()
    # At least 0.1 s: a file that ran takes some time (and 0 would never be ordered).
    seconds = {path: max(0.1, round(new.get(path, old.get(path, estimate(path))), 1)) for path in on_disk}
    measured_once = [path for path in on_disk if path in new_cpu or path in old_cpu]  # never measured: no figure
    cpu = {path: max(0.1, round(new_cpu.get(path, old_cpu.get(path, 0.0)), 1)) for path in measured_once}
    doc = {
        "about": "Seconds and CPU seconds per test file in a real run, for the order of tests/support/run_order.py. "
        "Refresh: make test-durations (a new file may be added by hand with an estimate until then).",
        "measured": f"{datetime.now(UTC):%Y-%m-%d} from {', '.join(r.name for r in [*reports, *cpu_logs])}",
        "seconds": dict(sorted(seconds.items())),
        "cpu_seconds": dict(sorted(cpu.items())),
    }
    DURATIONS.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"tests/durations.json: {len(new)} files measured ({len(new_cpu)} with their CPU), {len(seconds)} in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
