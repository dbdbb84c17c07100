"""Per-module coverage floors for the modules that decide outcomes (issue 35): fails naming each module under its floor.

    python scripts/coverage_floors.py COVERAGE.json

COVERAGE.json is coverage.py's JSON report of the combined data of a `make test` run (it writes
.aws-sam/coverage/coverage.json: the test processes, and the local stacks' Lambda workers and relay, which measure
themselves; docs/development.md, "Coverage"). A module with a floor covers at least that share of its lines, or this
exits 1 with one line per module under its floor: its path, its figure and its floor. A module with a floor that the
report lacks fails too (renamed or moved: its floor moves with it, here). The total has its own floor in the Makefile.

The modules: the ones whose lines decide what happens to a job, a batch or a webhook delivery, where a line no test
runs is an outcome no test checked. Cancellation, the batch reconciler, webhook delivery (the POST and its retry
schedule; the attempt and what it records) and admission (the gate's use cases, the pool's rules, expiry, and the
DynamoDB transactions that grant and release slots).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PACKAGE = "layers/omnireel/omnireel/"
# Each floor is the module's combined figure measured on 2026-12-05 minus 3 points or one line, whichever is more,
# rounded down. Measured: a whole idle `make test` (main run and waiting lane, their test processes and the local
# stacks' Lambda workers and relays; 94.5 % in total). Raise a floor when the module's tests grow; lower one only with a
# reason in the commit.
FLOORS: dict[str, float] = {
    PACKAGE + "admission/expiry.py": 78,  # measured 84.2 % of 19 lines
    PACKAGE + "admission/gate.py": 88,  # measured 91.3 % of 242
    PACKAGE + "admission/pool.py": 97,  # measured 100 % of 46
    PACKAGE + "aws/admission_store.py": 84,  # measured 87.0 % of 154
    PACKAGE + "batches/reconcile.py": 85,  # measured 88.4 % of 216
    PACKAGE + "jobs/cancellation.py": 91,  # measured 94.4 % of 36
    PACKAGE + "webhooks/delivery.py": 94,  # measured 97.1 % of 138
    PACKAGE + "webhooks/dispatch.py": 92,  # measured 95.0 % of 140
}


def figures(report: Mapping[str, Any]) -> dict[str, tuple[float, int, int]]:
    """Module path -> (percent covered, lines covered, lines), from a coverage.py JSON report."""
    return {
        path: (
            float(data["summary"]["percent_covered"]),
            int(data["summary"]["covered_lines"]),
            int(data["summary"]["num_statements"]),
        )
        for path, data in report["files"].items()
    }


def below_floors(report: Mapping[str, Any], floors: Mapping[str, float]) -> list[str]:
    """One message per module under its floor or missing from the report; none when every floor holds."""
    measured = figures(report)
    problems = []
    for path, floor in sorted(floors.items()):
        if path not in measured:
            problems.append(
                f"{path}: not in the coverage report, floor {floor:g} %: renamed or moved? Move its floor in "
                "scripts/coverage_floors.py along with it"
            )
            continue
        percent, covered, lines = measured[path]
        if percent < floor:
            problems.append(
                f"{path}: {percent:.1f} % covered ({covered} of {lines} lines), under its floor of {floor:g} %"
            )
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    report = json.loads(Path(argv[0]).read_text())
    problems = below_floors(report, FLOORS)
    measured = figures(report)
    if problems:
        print(f"coverage floors: {len(problems)} of {len(FLOORS)} modules under their floor", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        print("  (floors and how they were set: scripts/coverage_floors.py)", file=sys.stderr)
        return 1
    shown = ", ".join(f"{Path(p).parent.name}/{Path(p).stem} {measured[p][0]:.0f}" for p in sorted(FLOORS))
    print(f"coverage floors: all {len(FLOORS)} modules at or above their floor ({shown} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
