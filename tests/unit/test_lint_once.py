"""scripts/lint-once: the template checks of the lint gate (sam validate --lint, checkov) run again whenever one of
their inputs changes, never when none did, and a failure is never remembered as a pass."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "lint-once"
INPUTS = ["template.yaml", "samconfig.toml", "Makefile", "scripts/checkov_template.py", "package.json",
          "package-lock.json", "requirements/lock/venv.txt", "requirements/lock/sam.txt",
          "requirements/lock/checkov.txt", "statemachine", "tooling/omnireel_template"]  # fmt: skip


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    for name in INPUTS:
        source, target = ROOT / name, root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    return root


def _run(root: Path, *command: str, force: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LINT_ONCE_ROOT": str(root), "LINT_ONCE": "0" if force else "1"}
    return subprocess.run([str(SCRIPT), "probe", *command], env=env, capture_output=True, text=True, timeout=30)


def test_a_check_runs_again_only_when_an_input_changed(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    count = tmp_path / "runs"
    check = ("bash", "-c", f"echo run >> {count}")
    runs = lambda: len(count.read_text().splitlines()) if count.exists() else 0  # noqa: E731

    assert _run(root, *check).returncode == 0 and runs() == 1
    again = _run(root, *check)
    assert again.returncode == 0 and runs() == 1 and "skipped" in again.stdout
    for changed in ("template.yaml", "statemachine/pipeline.asl.json", "tooling/omnireel_template/__init__.py",
                    "requirements/lock/checkov.txt"):  # fmt: skip
        before = runs()
        with (root / changed).open("a") as file:
            file.write("\n")
        assert _run(root, *check).returncode == 0 and runs() == before + 1, changed
        assert _run(root, *check).returncode == 0 and runs() == before + 1, changed
    assert _run(root, *check, force=True).returncode == 0 and runs() == 6  # LINT_ONCE=0


def test_a_failure_is_not_remembered(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    failed = _run(root, "bash", "-c", "echo the template is wrong >&2; exit 3")
    assert failed.returncode == 3 and "the template is wrong" in failed.stderr
    assert _run(root, "bash", "-c", "exit 4").returncode == 4  # ran again: nothing was marked as passed
    assert not list((root / ".aws-sam" / "lint-once").glob("probe.*"))
