"""The local stack's Lambda crash fault: ``first`` makes a short run sure to see a crash (the fault suite's
lambda_crash phase once saw none: its draws depend on job ids, which differ per stack)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from omnireel_local import fault_injection


@pytest.fixture
def faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    state = {"_home": None, "_config_path": None, "_base": {}, "_config": {}, "_mtime": None, "_seen": Counter()}
    for name, value in state.items():
        monkeypatch.setattr(fault_injection, name, value)  # restored after the test
    monkeypatch.delenv(fault_injection.ENV, raising=False)
    fault_injection.configure(tmp_path)
    stamp = iter(range(1_000_000_000, 2_000_000_000, 10))

    def write(config: dict) -> None:
        path = tmp_path / fault_injection.CONFIG_FILE
        path.write_text(json.dumps(config))
        seconds = next(stamp)
        os.utime(path, (seconds, seconds))  # a distinct mtime per write: the stack reloads on a change

    return write


def test_first_crashes_the_first_matching_invocation_then_the_rate_decides(faults) -> None:
    faults({"seed": 1, "lambda_crash": {"GenerateImage": {"rate": 0, "after_s": 0.2, "first": True}}})
    assert fault_injection.lambda_crash("omnireel-GenerateImageFunction-abc", '{"job_id": "j1"}') == 0.2
    assert fault_injection.lambda_crash("omnireel-GenerateImageFunction-abc", '{"job_id": "j2"}') is None
    assert fault_injection.lambda_crash("omnireel-AsyncResultFunction-abc", '{"job_id": "j3"}') is None

    faults({"seed": 2, "lambda_crash": {"GenerateImage": {"rate": 0, "after_s": 0.2, "first": True}}})
    assert fault_injection.lambda_crash("omnireel-GenerateImageFunction-abc", "{}") == 0.2  # a new config: again


def test_without_first_a_rate_of_zero_never_crashes(faults) -> None:
    faults({"seed": 1, "lambda_crash": {"GenerateImage": {"rate": 0}}})
    assert all(fault_injection.lambda_crash("omnireel-GenerateImageFunction", f"{i}") is None for i in range(20))
