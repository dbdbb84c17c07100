"""`omnireel local up | status | env | down` on a stack of its own: nothing is left running afterwards."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import httpx
import pytest

from omnireel_local import home as homedir
from tests.support.loopback import http
from tests.support.stack import LocalStack, cli_env, start_stack, stop_stack

pytestmark = pytest.mark.e2e


def test_up_status_env_down_leaves_no_process(tmp_path: Path) -> None:
    stack = start_stack(tmp_path / "home")
    try:
        assert {"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "OMNIREEL_API_URL",
                "OMNIREEL_INBOX_BUCKET_NAME", "OMNIREEL_JOB_EVENTS_TOPIC_ARN",
                "OMNIREEL_RELAY_URL", "OMNIREEL_RELAY_TOKEN"} <= set(stack.outputs)  # fmt: skip
        # The relay starts by default, on a free loopback port, with a token of its own; state.json (which holds
        # the token) is private to the user.
        relay = stack.state()["relay"]
        assert stack.outputs["OMNIREEL_RELAY_URL"] == relay["url"]
        assert re.fullmatch(r"ws://127\.0\.0\.1:\d+/v1/audio/speech/stream", relay["url"])
        assert stack.outputs["OMNIREEL_RELAY_TOKEN"] == relay["token"] and len(relay["token"]) >= 32
        assert stat.S_IMODE((stack.home / "state.json").stat().st_mode) == 0o600
        relay_pid = int(stack.state()["child_pids"]["relay"])
        assert homedir.pid_is_ours(relay_pid, "omnireel_relay")
        assert http().get(relay["health_url"], timeout=5).status_code == 200
        status = stack.cli("local", "status")
        assert status.returncode == 0 and "running" in status.stdout
        assert f"TTS relay     {relay['url']}" in status.stdout
        assert stack.cli("local", "env", check=True).stdout.count("=") >= 10
        again = stack.cli("local", "up", check=True)  # idempotent: finds the running stack
        assert "already running" in again.stderr
        pids = stack.pids()
        assert len(pids) >= 5  # supervisor + one emulator per SageMaker model (3) + the relay
        assert relay_pid in pids
        assert all(homedir.pid_alive(p) for p in pids)
    finally:
        left = stop_stack(stack)
    assert left == []
    assert not any(homedir.pid_alive(p) for p in pids)
    assert not homedir.pid_alive(relay_pid)
    with pytest.raises(httpx.TransportError):
        http().get(relay["health_url"], timeout=2)
    assert stack.cli("local", "status").returncode == 3
    assert stack.cli("local", "env").returncode == 3


def test_no_relay_stack_has_no_relay_and_smoke_skips_the_voice_check(tmp_path: Path) -> None:
    stack = start_stack(tmp_path / "home", "--no-relay")
    try:
        assert "OMNIREEL_RELAY_URL" not in stack.outputs and "OMNIREEL_RELAY_TOKEN" not in stack.outputs
        assert not stack.state().get("relay") and "relay" not in stack.state()["child_pids"]
        assert "TTS relay     (not started)" in stack.cli("local", "status").stdout
        speak = stack.cli("tts", "Hello.", "--out", str(tmp_path / "x.wav"))
        assert speak.returncode == 3 and "runs without the TTS relay" in speak.stderr
        smoke = stack.cli("smoke", "--out", str(tmp_path / "smoke"), "--skip", "video", timeout=150)
        assert smoke.returncode == 0, smoke.stdout + smoke.stderr
        assert re.search(r"^SKIP\s+tts\s+skipped: the local stack runs without the TTS relay", smoke.stdout, re.M)
        assert re.search(r"^SKIP\s+video\s+skipped \(--skip video\)", smoke.stdout, re.M)
        assert "smoke: PASS (2 passed, 0 failed, 2 skipped)" in smoke.stdout  # image and deploy
        assert not (tmp_path / "smoke" / "validation-output.wav").exists()
    finally:
        assert stop_stack(stack) == []


def test_up_refuses_a_parameter_the_template_does_not_have_and_names_the_closest(tmp_path: Path) -> None:
    """Issue 37 item 2: CloudFormation refuses ``Parameters: [X] do not exist in the template``; the local stack
    started anyway, with the misspelt parameter silently at its default. Nothing is left running."""
    stack = LocalStack(tmp_path / "home", cli_env(tmp_path / "home"), {})
    try:
        result = stack.cli(
            "local", "up", "--ephemeral-ports", "--parameter", "JobDeadlineSecond=5", "--parameter", "NoSuchParameter=1"
        )
        assert result.returncode != 0
        assert "Parameters: [JobDeadlineSecond, NoSuchParameter] do not exist in the template" in result.stderr
        assert "did you mean JobDeadlineSeconds?" in result.stderr
        assert stack.cli("local", "status").returncode == 3
    finally:
        assert stop_stack(stack) == []
