"""The local stack's supervisor restarts a container emulator that died (bounded, logged), and `local status` says
when one stays dead (issue 10, item 5). The emulators are forked from a template (omnireel_local.emulator_zygote): one
restart here finds the template dead as well and forks from a new one."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from omnireel_local import home as homedir
from omnireel_local.stack import MAX_RESTARTS
from tests.support.processes import answers_ping
from tests.support.stack import start_stack, stop_stack

from .helpers import wait_for

pytestmark = pytest.mark.e2e

RESTART_TIMEOUT_S = 40.0


def test_killed_emulator_is_restarted_then_reported_dead_past_the_budget(tmp_path: Path) -> None:
    stack = start_stack(tmp_path / "home", "--no-relay")
    try:
        model, url = sorted(stack.state()["emulators"].items())[0]
        name = f"emulator-{model}"
        for restart in range(1, MAX_RESTARTS + 1):
            pid = int(stack.state()["child_pids"][name])
            template = stack.state()["child_pids"].get("emulator-template")  # the emulators' template (its forks)
            if restart == 2 and template:  # a template that died too: the restart forks from a new one
                os.kill(int(template), signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
            new_pid = wait_for(
                lambda pid=pid: (p := stack.state().get("child_pids", {}).get(name)) and int(p) != pid and int(p),
                RESTART_TIMEOUT_S,
                f"{name} restart {restart}",
            )
            assert homedir.pid_is_ours(int(new_pid), "omnireel_local.emulator")
            if restart == 2 and template:
                assert stack.state()["child_pids"]["emulator-template"] not in (None, template)
            wait_for(lambda: answers_ping(url), RESTART_TIMEOUT_S, f"{name} answering /ping on the same port")
            status = stack.cli("local", "status", check=True).stdout
            assert f"({model}, restarted {restart} time(s))" in status, status
        log = (stack.home / "logs" / "stack.log").read_text()
        assert f"restarting it ({MAX_RESTARTS}/{MAX_RESTARTS})" in log
        os.kill(int(stack.state()["child_pids"][name]), signal.SIGKILL)  # past the budget: stays dead
        wait_for(
            lambda: name in stack.state().get("supervision", {}).get("dead", {}),
            RESTART_TIMEOUT_S,
            f"{name} recorded dead",
        )
        status = stack.cli("local", "status", check=True).stdout
        assert f"({model}, DEAD: exited with code -9, not restarted after {MAX_RESTARTS} restart(s))" in status
        assert not answers_ping(url)
    finally:
        left = stop_stack(stack)
    assert left == []
