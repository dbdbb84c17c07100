"""The Python of the local stack's Lambda workers and relay: the stack's own unless OMNIREEL_RUNTIME_PYTHON names one
(the tests name .venv-dev's while they measure coverage; docs/development.md, "Coverage")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from omnireel_local import runtime_python as rp


def test_the_stacks_own_interpreter_by_default(monkeypatch):
    monkeypatch.delenv(rp.ENV_VAR, raising=False)
    assert rp.runtime_python() == sys.executable


def test_an_explicit_interpreter_wins_and_must_be_an_executable_file(tmp_path: Path, monkeypatch):
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    monkeypatch.setenv(rp.ENV_VAR, str(python))
    assert rp.runtime_python() == str(python)
    python.chmod(0o644)
    with pytest.raises(rp.RuntimePythonMissing, match="not an executable file"):
        rp.runtime_python()
    monkeypatch.setenv(rp.ENV_VAR, str(tmp_path / "absent"))
    with pytest.raises(rp.RuntimePythonMissing, match="OMNIREEL_RUNTIME_PYTHON="):
        rp.runtime_python()


def test_only_coverages_own_variables_are_handed_on(monkeypatch):
    monkeypatch.setenv("COVERAGE_PROCESS_CONFIG", ":data:x")
    monkeypatch.delenv("COVERAGE_PROCESS_START", raising=False)
    monkeypatch.setenv("COVERAGE_FILE", "/elsewhere")
    assert rp.coverage_environment() == {"COVERAGE_PROCESS_CONFIG": ":data:x"}
    monkeypatch.delenv("COVERAGE_PROCESS_CONFIG")
    assert rp.coverage_environment() == {}


def test_a_worker_of_another_interpreter_keeps_only_the_stacks_path_entries():
    worker = ["/fn", "/py/lib", "/venv-dev/site-packages", "/venv-emulator/site-packages", "/venv/site-packages"]
    stack = ["/work", "/py/lib", "/venv/site-packages", "/elsewhere"]
    assert rp.restrict_path(worker, stack) == ["/fn", "/py/lib", "/venv/site-packages"]  # its own folder stays first
