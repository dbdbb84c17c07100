"""The executable reproductions of local/UPSTREAM.md still reproduce on plain moto (no omnireel patch imported): each
runs in its own Python process and must print the "actual" lines its section records. When moto fixes a bug, the
reproduction stops printing them and this test names the patch that can go (issue 29 item 1).

The processes are forked from one interpreter that has only imported what the reproductions import (their own
top-level imports, moto's module for each service they make a client of, and moto's state machine interpreter when
one runs state machines): each reproduction still starts from plain moto with no backend made and no patch applied,
in its own process and folder, without paying those imports again (0.5-1.5 CPU-s each; issue 35)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = ROOT / "local" / "UPSTREAM.md"
REPRO = re.compile(
    r"<!-- repro: (?P<number>\S+) -->\s*```python\n(?P<code>.*?)```.*?<!-- actual: (?P<actual>.*?) -->", re.S
)
CASES = {m["number"]: (m["code"], m["actual"].split(" | ")) for m in REPRO.finditer(UPSTREAM.read_text())}
CASE_TIMEOUT_S = 120


def preloaded_modules(codes: list[str]) -> list[str]:
    """What the reproductions import before their first call: their top-level imports, moto's module for each
    service they make a client of (``moto.backends``: importing it makes no backend), and moto's state machine
    interpreter (imported on the first execution) when they run state machines."""
    modules: set[str] = set()
    for code in codes:
        for node in ast.parse(code).body:
            if isinstance(node, ast.Import):
                modules.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module)
        modules.update(f"service:{name}" for name in re.findall(r'client\(\s*"([a-z0-9-]+)"', code))
        if "execute_state_machine" in code:
            modules.add("moto.stepfunctions.parser.models")
    return sorted(modules)


# argv: a folder holding <number>/repro.py for each case, the case timeout, the modules to import first. Each case
# runs in a child forked after the imports, in its folder, with its output in out.txt / err.txt there; the parent
# prints one JSON line per case with its exit code (None: killed at the timeout).
FORKING_RUNNER = r"""
import importlib, json, os, select, signal, sys, traceback

from moto.backends import get_backend

base, timeout_s = sys.argv[1], float(sys.argv[2])
for module in sys.argv[3:]:  # imported once, before the forks
    if module.startswith("service:"):
        get_backend(module.removeprefix("service:"))
    else:
        importlib.import_module(module)
assert not any(name.startswith("omnireel") for name in sys.modules), "the runner imported omnireel"
for number in sorted(os.listdir(base)):
    folder = os.path.join(base, number)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(folder)
            for fd, name in ((1, "out.txt"), (2, "err.txt")):
                target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(target, fd)
                os.close(target)
            sys.stdout = os.fdopen(1, "w", buffering=1)
            sys.stderr = os.fdopen(2, "w", buffering=1)
            path = os.path.join(folder, "repro.py")
            with open(path) as source:
                compiled = compile(source.read(), path, "exec")
            sys.argv = [path]
            try:
                exec(compiled, {"__name__": "__main__", "__file__": path})
                code = 0
            except SystemExit as stop:  # as the interpreter ends: an int is the status, anything else is printed
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
                if stop.code is not None and not isinstance(stop.code, int):
                    print(stop.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    exited = os.pidfd_open(pid)  # readable when the child has ended
    ended = select.select([exited], [], [], timeout_s)[0]
    os.close(exited)
    if not ended:
        os.kill(pid, signal.SIGKILL)
    raw = os.waitpid(pid, 0)[1]
    status = os.waitstatus_to_exitcode(raw) if ended else None
    print(json.dumps({"number": number, "code": status}), flush=True)
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Every reproduction run once: number -> {"code", "stdout", "stderr"}."""
    base = tmp_path_factory.mktemp("repros")
    for number, (code, _) in CASES.items():
        (base / number).mkdir()
        (base / number / "repro.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "-c", FORKING_RUNNER, str(base), str(CASE_TIMEOUT_S),
         *preloaded_modules([code for code, _ in CASES.values()])], cwd=base, capture_output=True,
        text=True, timeout=CASE_TIMEOUT_S * len(CASES) + 60,
        env={"PATH": "/usr/bin:/bin", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
             "AWS_DEFAULT_REGION": "us-east-1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, dict[str, object]] = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        folder = base / row["number"]
        found[row["number"]] = {
            "code": row["code"],
            "stdout": (folder / "out.txt").read_text(errors="replace"),
            "stderr": (folder / "err.txt").read_text(errors="replace"),
        }
    assert set(found) == set(CASES), done.stderr[-3000:]
    return found


def test_the_short_reproductions_are_found() -> None:
    assert set(CASES) >= {"2", "4", "6c", "7", "8", "13", "14b", "29"}


@pytest.mark.parametrize("number", sorted(CASES))
def test_the_reproduction_still_shows_the_bug(number: str, outcomes: dict[str, dict[str, object]]) -> None:
    outcome = outcomes[number]
    stdout, stderr = str(outcome["stdout"]), str(outcome["stderr"])
    assert outcome["code"] is not None, f"patch {number}: the reproduction ran past {CASE_TIMEOUT_S} s: {stdout!r}"
    assert "omnireel" not in stderr
    for line in CASES[number][1]:
        assert line in stdout, (
            f"patch {number}: moto no longer shows the bug (expected {line!r}; got {stdout!r} "
            f"{stderr[-500:]!r}) -- drop the patch after checking its card"
        )
