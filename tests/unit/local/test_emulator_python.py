"""The container emulator runs with .venv-emulator's Python; .venv (the stack's) has no PyAV or numpy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from omnireel_local import emulator_python as ep

ROOT = Path(__file__).resolve().parents[3]


def _fake_venv(tmp_path: Path) -> Path:
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    return python


def test_the_emulator_venv_is_used_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.delenv(ep.ENV_VAR, raising=False)
    python = _fake_venv(tmp_path)
    assert ep.emulator_python(python.parents[1]) == str(python)


def test_an_explicit_interpreter_wins_and_must_exist(tmp_path, monkeypatch):
    python = _fake_venv(tmp_path)
    monkeypatch.setenv(ep.ENV_VAR, str(python))
    assert ep.emulator_python(tmp_path / "absent") == str(python)
    monkeypatch.setenv(ep.ENV_VAR, str(tmp_path / "nope"))
    with pytest.raises(ep.EmulatorPythonMissing, match="not an executable"):
        ep.emulator_python(python.parents[1])


def test_without_the_venv_this_interpreter_serves_if_it_has_the_media_libraries(tmp_path, monkeypatch):
    monkeypatch.delenv(ep.ENV_VAR, raising=False)
    assert ep.emulator_python(tmp_path / "absent") == sys.executable  # .venv-dev sees PyAV and numpy
    monkeypatch.setattr(ep.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ep.EmulatorPythonMissing, match="make emulator-venv"):
        ep.emulator_python(tmp_path / "absent")


# The stack's, the CLI's and the emulator config's modules, imported with PyAV and numpy made unimportable (as in
# .venv): the local stack imports emulator.config for its model -> kinds rule, and `omnireel demo`/`smoke` describe
# the MP4 (mp4_facts) without FFmpeg.
NO_MEDIA = """
import sys
sys.modules["av"] = None
sys.modules["numpy"] = None
import omnireel_local.stack, omnireel_local.lambda_worker, omnireel_local.sagemaker_hosting, omnireel_local.api_gateway
import omnireel_cli.main, omnireel_cli.smoke
from omnireel_local.emulator.config import kinds_for_model
assert kinds_for_model("Wan-AI/Wan2.1-VACE-1.3B-diffusers") == {"videos"}
print(omnireel_cli.main._video_facts(__import__("pathlib").Path(sys.argv[1])))
"""


def test_stack_and_cli_modules_need_no_pyav_or_numpy(tmp_path):
    import numpy as np

    from omnireel_local.emulator.videos import encode_mp4

    frames = (np.zeros((48, 64, 3), dtype=np.uint8) for _ in range(5))
    video = tmp_path / "video.mp4"
    video.write_bytes(encode_mp4(frames, 64, 48, 8))
    result = subprocess.run(
        [sys.executable, "-c", NO_MEDIA, str(video)], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "5 frames 64x48 h264"
