"""scripts/coverage_floors.py: the per-module coverage floors `make test` checks on the combined coverage report."""

from __future__ import annotations

import json
from pathlib import Path

from scripts import coverage_floors as cf

ROOT = Path(__file__).resolve().parents[2]
CANCELLATION = cf.PACKAGE + "jobs/cancellation.py"


def _report(percents: dict[str, float], lines: int = 200) -> dict:
    """A coverage.py JSON report (the part the script reads) with these modules at these figures."""
    files = {}
    for path, percent in percents.items():
        covered = round(lines * percent / 100)
        summary = {"percent_covered": percent, "covered_lines": covered, "num_statements": lines}
        files[path] = {"summary": summary}
    return {"files": files}


def test_every_module_at_its_floor_passes():
    assert cf.below_floors(_report(dict(cf.FLOORS)), cf.FLOORS) == []
    above = {path: min(100.0, floor + 5) for path, floor in cf.FLOORS.items()}
    assert cf.below_floors(_report({**above, "functions/api/handler.py": 10.0}), cf.FLOORS) == []  # no floor: any


def test_a_module_under_its_floor_is_named_with_its_figure_and_its_floor():
    percents = {**cf.FLOORS, CANCELLATION: cf.FLOORS[CANCELLATION] - 0.1}
    (problem,) = cf.below_floors(_report(percents), cf.FLOORS)
    assert problem.startswith(CANCELLATION + ": ")
    assert f"{cf.FLOORS[CANCELLATION] - 0.1:.1f} % covered" in problem
    assert f"floor of {cf.FLOORS[CANCELLATION]:g} %" in problem


def test_a_module_missing_from_the_report_fails():
    percents = {path: floor for path, floor in cf.FLOORS.items() if path != CANCELLATION}
    (problem,) = cf.below_floors(_report(percents), cf.FLOORS)
    assert problem.startswith(CANCELLATION + ": not in the coverage report")


def test_the_command_exits_1_naming_each_module_under_its_floor(tmp_path, capsys):
    report = tmp_path / "coverage.json"
    report.write_text(json.dumps(_report({**cf.FLOORS, CANCELLATION: 40.0}, lines=36)))
    assert cf.main([str(report)]) == 1
    err = capsys.readouterr().err
    assert "1 of" in err and f"{CANCELLATION}: 40.0 % covered (14 of 36 lines), under its floor of" in err
    report.write_text(json.dumps(_report(dict(cf.FLOORS))))
    assert cf.main([str(report)]) == 0
    assert f"all {len(cf.FLOORS)} modules at or above their floor" in capsys.readouterr().out
    assert cf.main([]) == 2


def test_every_floor_names_a_module_on_disk_and_a_share():
    """A floor on a path that no longer exists would fail every `make test` at its end: caught here first."""
    for path, floor in cf.FLOORS.items():
        assert (ROOT / path).is_file(), path
        assert 0 < floor <= 100, path
