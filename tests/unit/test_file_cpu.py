"""`make test-durations` measures each test file's CPU with the local stacks its process started
(tests/support/file_cpu.py): a stand-in stack (a process named like one, whose home is in the base folder) burns CPU
in a child it reaps; the file it ran in is charged for it, also when the stack is stopped before the file ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import file_cpu
from tests.support.waiting import wait_for

# Burns ~0.3 CPU-s in a child it reaps (so the CPU is the stand-in's cutime), says so, then waits to be killed.
STAND_IN = """
import os, sys, time
child = os.fork()
if child == 0:
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    os._exit(0)
os.waitpid(child, 0)
print("burnt", flush=True)
time.sleep(60)
"""


def _stand_in(home: Path) -> tuple[int, subprocess.Popen[str]]:
    """Started as `omnireel local up` starts a stack: by a process that exits, so the stand-in is not this process's
    child (its CPU never reaches this process's own children's times). Returns its pid and the launcher (its pipe)."""
    argv = [sys.executable, "-c", STAND_IN, "omnireel_local.stack", "--home", str(home)]
    launch = f"import subprocess, sys; print(subprocess.Popen({argv!r}).pid, flush=True)"
    launcher = subprocess.Popen([sys.executable, "-c", launch], stdout=subprocess.PIPE, text=True)
    assert launcher.stdout is not None
    pid = int(launcher.stdout.readline())
    return pid, launcher


def _lines(log: Path) -> dict[str, dict]:
    return {line["file"]: line for line in map(json.loads, log.read_text().splitlines())}


def test_a_file_is_charged_for_the_stack_it_ran_with(tmp_path: Path) -> None:
    log, base = tmp_path / "cpu.jsonl", tmp_path / "base"
    measuring = file_cpu.FileCpu(log, base)
    measuring.boundary("tests/e2e/a.py")
    pid, launcher = _stand_in(base / "home")
    try:
        assert launcher.stdout is not None and launcher.stdout.readline() == "burnt\n"  # after its 0.3 CPU-s
        assert launcher.wait(10) == 0  # the launcher is gone; the stand-in runs on, orphaned like a stack
        assert pid in file_cpu.stack_trees(base)
        assert file_cpu.stack_trees(tmp_path / "elsewhere") == {}  # another process's base: not its stacks
        measuring.boundary("tests/e2e/b.py")
        measuring.note_stacks()  # as before_stop does
    finally:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: pid not in file_cpu.stack_trees(base), 10, "the stand-in stack to be gone")
    measuring.boundary(None)  # the stack is gone: b.py keeps what it used until the reading before its stop
    lines = _lines(log)
    assert lines["tests/e2e/a.py"]["cpu"] >= 0.25
    assert lines["tests/e2e/b.py"]["cpu"] < 0.25 and lines["tests/e2e/b.py"]["wall"] >= 0


def test_nothing_is_measured_unless_asked(tmp_path: Path) -> None:
    file_cpu.before_stop()  # no measurement active in a plain test process: a no-op
    assert file_cpu._active is None
