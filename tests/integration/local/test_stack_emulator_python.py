"""`omnireel local up` without an interpreter for the container emulator: a clear error naming the fix, at once
(before the local AWS starts), and nothing left running."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from omnireel_local import home as homedir
from tests.support.omnireel_command import omnireel_command

ROOT = Path(__file__).resolve().parents[3]


def test_local_up_names_the_fix_when_the_emulator_python_is_missing(tmp_path: Path) -> None:
    env = {**os.environ, "OMNIREEL_HOME": str(tmp_path / "home"), "OMNIREEL_EMULATOR_PYTHON": str(tmp_path / "nope")}
    result = subprocess.run(
        [*omnireel_command(), "local", "up", "--ephemeral-ports"], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert f"OMNIREEL_EMULATOR_PYTHON={tmp_path / 'nope'} is not an executable file" in result.stderr, result.stderr
    state = json.loads((tmp_path / "home" / "state.json").read_text())
    assert state["phase"] in {"failed", "stopped"} and "EmulatorPythonMissing" in state["error"]
    assert not homedir.pid_alive(int(state["pid"]))
    assert "starting the local AWS" not in (tmp_path / "home" / "logs" / "stack.log").read_text()  # failed first
