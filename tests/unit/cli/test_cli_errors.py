"""Issue 37 item 5: what the ``omnireel`` command says when it is called wrongly, run as a user runs it (the console
script, no stack needed: every refusal here comes before any call)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from omnireel.jobs.request import numeric_bounds
from omnireel_cli import job_options
from omnireel_cli.errors import EXIT_INFRA
from omnireel_local import home as homedir
from tests.support.omnireel_command import ROOT, omnireel_command


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*omnireel_command(), *argv], cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("argv", "usage", "suggestion"),
    [
        (("submit", "a prompt", "--widht", "480"), "usage: omnireel submit ", "did you mean: --width"),
        (("local", "up", "--paramter", "X=1"), "usage: omnireel local up ", "did you mean: --parameter?"),
    ],
)
def test_an_unknown_option_shows_its_subcommands_usage_with_the_suggestion(
    argv: tuple[str, ...], usage: str, suggestion: str
) -> None:
    done = _run(*argv)
    assert done.returncode == 2
    assert done.stderr.startswith(usage)  # not the top-level `usage: omnireel [-h] [--version] COMMAND ...`
    assert suggestion in done.stderr
    assert f"{usage.removeprefix('usage: ').strip()}: error: unrecognized arguments" in done.stderr


def test_help_shows_the_flags_own_names_as_metavars() -> None:
    helped = _run("submit", "--help").stdout
    assert "--frames FRAMES" in helped and "--seed SEED" in helped and "--width WIDTH" in helped
    assert not re.search(r"\bJOB_[A-Z_]+", helped)  # internal dest names (JOB_SEED, JOB_FRAMES) never show


def test_an_out_of_bounds_number_names_every_bound_before_any_call() -> None:
    done = _run("submit", "a prompt", "--width", "100")
    assert done.returncode == 2
    assert "argument --width: 100 is out of bounds: it must be at least 128, at most 1280 and a multiple of 16" in (
        done.stderr
    )
    assert "local stack" not in done.stderr  # refused while parsing, before looking for a stack


def test_every_numeric_flag_checks_the_bounds_the_api_applies() -> None:
    """Derived from the flags and the domain's rules: a new numeric field cannot skip the check."""
    numeric = [f for f in job_options.JOB_FIELDS if f.type in (int, float)]
    assert numeric
    for field in numeric:
        bounds = numeric_bounds(field.path)
        assert bounds is not None, field.flag
        low, high, _ = bounds
        parse = job_options._bounded(field)
        for bad in (low - 1 if low is not None else None, high + 1 if high is not None else None):
            if bad is not None:
                with pytest.raises(Exception, match="out of bounds"):
                    parse(str(int(bad)))


def test_a_hint_names_the_command_as_it_can_be_typed_here(tmp_path, monkeypatch) -> None:
    """Issue 37 item 6: `make demo` runs .venv/bin/omnireel, which is not on PATH: hints quote that path."""
    from omnireel_cli.invocation import command_name

    script = tmp_path / "venv" / "bin" / "omnireel"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command_name(str(script)) == "venv/bin/omnireel"
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert command_name(str(script)) == "omnireel"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command_name(str(script)) == str(script)  # from elsewhere: the absolute path


def _with_state(tmp_path: Path, state: dict[str, object], *argv: str) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "state.json").write_text(json.dumps(state))
    env = {**os.environ, "OMNIREEL_HOME": str(home)}
    return subprocess.run([*omnireel_command(), *argv], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("argv", [("local", "env"), ("jobs",)])
def test_a_state_file_without_the_endpoint_says_so_instead_of_a_traceback(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """A state file another omnireel version wrote (no ``endpoint_url``), its stack's pid alive (this test's)."""
    done = _with_state(
        tmp_path, {"ready": True, "pid": os.getpid(), "api_url": "http://127.0.0.1:9", "region": "us-east-1"}, *argv
    )
    assert done.returncode == EXIT_INFRA, done.stderr
    assert "Traceback" not in done.stderr
    assert "has no endpoint_url" in done.stderr and "local down" in done.stderr and "local up" in done.stderr


def test_a_state_file_without_a_pid_is_a_stack_that_is_not_running(tmp_path: Path) -> None:
    """``pid_alive(0)`` was true (``kill(0, 0)`` signals the caller's own process group)."""
    done = _with_state(tmp_path, {"ready": True, "api_url": "http://127.0.0.1:9", "region": "us-east-1"}, "jobs")
    assert done.returncode == EXIT_INFRA, done.stderr
    assert "the local stack is not running" in done.stderr and "Traceback" not in done.stderr
    assert not homedir.pid_alive(0) and not homedir.pid_alive(-1)
