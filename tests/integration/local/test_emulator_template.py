"""The local stack's emulator template (``omnireel_local.emulator_zygote``): one process imports the container emulator
once and forks one emulator per SageMaker Model, each with its own environment, port and log, each watched through its
pidfd with the exit code the template reports (the supervisor logs and shows it, ``local status`` says "exited with
code -9"). The stack's use of it (restarts, a template that died) is in tests/e2e/test_supervisor.py."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from omnireel_local import emulator_zygote, zygote
from omnireel_local import home as homedir
from omnireel_local.emulator.config import EmulatorConfig
from omnireel_local.emulator_python import emulator_python
from omnireel_template import ROOT, load_template
from tests.support.import_env import import_time_env_reads
from tests.support.loopback import http
from tests.support.processes import answers_ping, wait_until_serving
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(not zygote.supported(), reason="process templates need pidfds (Linux 5.3+)")


@pytest.fixture
def template(tmp_path: Path) -> Iterator[emulator_zygote.EmulatorTemplate]:
    started = emulator_zygote.EmulatorTemplate(emulator_python(), dict(os.environ), ROOT, tmp_path / "template.log")
    children: list[zygote.ForkedProcess] = []
    started.children = children  # type: ignore[attr-defined]  # what the test forked: stopped below
    try:
        yield started
    finally:
        for child in children:
            child.kill()
            zygote.wait_or_kill(child, 5)
        started.stop()


def _fork(template: emulator_zygote.EmulatorTemplate, tmp_path: Path, model: str) -> tuple[zygote.ForkedProcess, str]:
    port = homedir.free_port()
    with open(tmp_path / f"emulator-{port}.log", "ab") as log:
        env = {**os.environ, "SM_VLLM_MODEL": model, "PYTHONUNBUFFERED": "1"}
        child = template.fork(["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"], env, log)
    template.children.append(child)  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(child, url, 60, str(tmp_path / f"emulator-{port}.log"))
    return child, url


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_one_template_forks_emulators_that_each_serve_their_own_model(template, tmp_path: Path) -> None:
    image, image_url = _fork(template, tmp_path, "black-forest-labs/FLUX.2-klein-4B")
    video, video_url = _fork(template, tmp_path, "Wan-AI/Wan2.1-VACE-1.3B-diffusers")
    assert image.pid != video.pid and _parent(image.pid) == _parent(video.pid) == template.pid
    # The model each one serves is its own environment's (read in the child, after the fork), not the template's.
    assert http().get(f"{image_url}/_emulator/config").json()["model"] == "black-forest-labs/FLUX.2-klein-4B"
    assert http().get(f"{video_url}/_emulator/config").json()["model"] == "Wan-AI/Wan2.1-VACE-1.3B-diffusers"
    picture = http().post(f"{image_url}/v1/images/generations", json={"prompt": "a paper boat", "size": "64x64"})
    assert picture.status_code == 200, picture.text


def test_a_killed_or_stopped_emulator_reports_the_signal_that_ended_it(template, tmp_path: Path) -> None:
    killed, _ = _fork(template, tmp_path, "black-forest-labs/FLUX.2-klein-4B")
    stopped, _ = _fork(template, tmp_path, "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice")
    survivor, survivor_url = _fork(template, tmp_path, "Wan-AI/Wan2.1-VACE-1.3B-diffusers")
    os.kill(killed.pid, signal.SIGKILL)
    assert wait_for(killed.poll, 10, "the killed emulator's exit code") == -signal.SIGKILL  # as Popen says it
    stopped.terminate()  # as `omnireel local down` asks: uvicorn shuts down, then ends by the signal it caught
    assert stopped.wait(timeout=10) == -signal.SIGTERM  # what Popen says of an emulator started as an interpreter
    assert survivor.poll() is None and answers_ping(survivor_url)


def test_a_template_that_has_gone_forks_nothing_and_its_children_still_end(template, tmp_path: Path) -> None:
    orphan, _ = _fork(template, tmp_path, "black-forest-labs/FLUX.2-klein-4B")
    template.proc.kill()
    template.proc.wait(timeout=10)
    with pytest.raises(OSError):  # the stack then starts another template, or an interpreter (stack._fork_emulator)
        _fork(template, tmp_path, "Wan-AI/Wan2.1-VACE-1.3B-diffusers")
    assert orphan.poll() is None  # a child outlives its template, as a Lambda worker does
    orphan.kill()
    assert orphan.wait(timeout=10) == zygote.ForkedProcess.EXITED  # ended; the code died with the template


def test_the_preloaded_modules_read_nothing_at_import_that_differs_between_emulators() -> None:
    """The rule behind forking: what the template's modules read at import is the template's value in every emulator,
    so none may be a variable the stack sets per emulator: a Model's container Environment in template.yaml, the
    emulator's own settings (everything ``EmulatorConfig.from_env`` reads), and what the stack adds."""
    per_emulator = {"PYTHONUNBUFFERED", "OMNIREEL_EMULATOR_CONCURRENCY_PER_INSTANCE"}
    for resource in load_template()["Resources"].values():
        if resource["Type"] == "AWS::SageMaker::Model":
            per_emulator |= set(resource["Properties"]["PrimaryContainer"].get("Environment", {}))

    class Recording(dict):
        def get(self, key, default=None):  # type: ignore[no-untyped-def]
            per_emulator.add(key)
            return default

        def __getitem__(self, key):  # type: ignore[no-untyped-def]
            per_emulator.add(key)
            raise KeyError(key)

        def __contains__(self, key):  # type: ignore[no-untyped-def]
            per_emulator.add(key)
            return False

    EmulatorConfig.from_env(Recording())
    assert "SM_VLLM_MODEL" in per_emulator and len(per_emulator) > 3, per_emulator
    reads = import_time_env_reads("omnireel_local.emulator_zygote:preload", emulator_python())
    assert reads, "the scan found no module-level read at all: it no longer sees them"
    assert not set(reads) & per_emulator, reads


def test_the_switch_turns_the_template_off() -> None:
    assert not emulator_zygote.enabled({emulator_zygote.TEMPLATE_SWITCH: "0"})
    assert emulator_zygote.enabled({}) == zygote.supported()
