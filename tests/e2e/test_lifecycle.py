"""`omnireel local up | status | env | down` on a stack of its own: nothing is left running afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnireel_local import home as homedir

from .conftest import start_stack, stop_stack

pytestmark = pytest.mark.e2e


def test_up_status_env_down_leaves_no_process(tmp_path: Path) -> None:
    stack = start_stack(tmp_path / "home")
    try:
        assert {"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "OMNIREEL_API_URL",
                "OMNIREEL_INBOX_BUCKET_NAME", "OMNIREEL_JOB_EVENTS_TOPIC_ARN"} <= set(stack.outputs)  # fmt: skip
        status = stack.cli("local", "status")
        assert status.returncode == 0 and "running" in status.stdout
        assert stack.cli("local", "env", check=True).stdout.count("=") >= 10
        again = stack.cli("local", "up", check=True)  # idempotent: finds the running stack
        assert "already running" in again.stderr
        pids = stack.pids()
        assert len(pids) >= 3  # supervisor + one emulator per SageMaker model
        assert all(homedir.pid_alive(p) for p in pids)
    finally:
        left = stop_stack(stack)
    assert left == []
    assert not any(homedir.pid_alive(p) for p in pids)
    assert stack.cli("local", "status").returncode == 3
    assert stack.cli("local", "env").returncode == 3
