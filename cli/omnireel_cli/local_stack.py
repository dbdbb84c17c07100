"""``omnireel local up | down | status | env``: the embedded local stack as a background process."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from omnireel_local import home as homedir
from omnireel_template import ROOT

from .errors import InfraError
from .progress import StatusDisplay
from .target import developer_credentials

MARKER = "omnireel"  # matches omnireel_local.* and omnireel_relay command lines


def running_state() -> dict[str, Any] | None:
    state = homedir.read_state()
    if state and state.get("pid") and homedir.pid_is_ours(int(state["pid"]), MARKER):
        return state
    return None


def up(
    *,
    moto_port: int | None = None,
    api_port: int | None = None,
    ephemeral_ports: bool = False,
    parameters: list[str] | None = None,
    timeout: float = 90.0,
    relay: bool | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Start the stack in the background (or find it running) and return its state once it is ready.

    ``relay``: None = start the TTS relay if the template has a TTS model (EnableVoice=true, the default);
    True = always (a dedicated speech emulator if there is no TTS model); False = no relay.
    """
    base = homedir.home()
    state = running_state()
    if state is not None:
        if state.get("ready"):
            if not quiet:
                print(f"local stack already running (pid {state['pid']}): API {state['api_url']}", file=sys.stderr)
            return state
        return _wait_ready(int(state["pid"]), base, timeout, None, quiet)
    logs = base / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    homedir.state_path(base).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "omnireel_local.stack", "--home", str(base)]
    if moto_port is not None:
        argv += ["--moto-port", str(moto_port)]
    if api_port is not None:
        argv += ["--api-port", str(api_port)]
    if ephemeral_ports:
        argv.append("--ephemeral-ports")
    for parameter in parameters or []:
        argv += ["--parameter", parameter]
    if relay is not None:
        argv.append("--relay" if relay else "--no-relay")
    log_path = logs / "stack.log"
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,  # detached: survives this CLI, owns a process group for `down`
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return _wait_ready(proc.pid, base, timeout, proc, quiet)


def _wait_ready(pid: int, base: Path, timeout: float, proc: subprocess.Popen[bytes] | None, quiet: bool
                ) -> dict[str, Any]:  # fmt: skip
    progress = StatusDisplay(enabled=not quiet)
    started = time.monotonic()
    deadline = started + timeout
    log_path = base / "logs" / "stack.log"
    try:
        while time.monotonic() < deadline:
            state = homedir.read_state(base)
            if state and state.get("pid") == pid:
                if state.get("ready"):
                    progress.done(f"local stack ready in {time.monotonic() - started:.1f} s: API {state['api_url']}")
                    for line in homedir.port_move_lines(state):
                        print(f"omnireel: {line}", file=sys.stderr)
                    return state
                if state.get("phase") == "failed":
                    break
                progress.update(f"starting local stack: {state.get('phase', 'starting')}")
            else:
                progress.update("starting local stack")
            exited = proc.poll() is not None if proc is not None else not homedir.pid_alive(pid)
            if exited:
                break
            time.sleep(0.2)
        else:
            progress.close()
            down(quiet=True)
            raise InfraError(f"the local stack did not become ready within {timeout:.0f} s; see {log_path}")
    finally:
        progress.close()
    state = homedir.read_state(base) or {}
    reason = state.get("error") or _last_error(log_path) or "it exited"
    down(quiet=True)
    raise InfraError(f"the local stack failed to start: {reason} (log: {log_path})")


def _last_error(log_path: Path) -> str | None:
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines[-200:]):
        if re.match(r"^\w*(Error|Exception)\b.*:", line.strip()):
            return line.strip()
    return None


def down(*, quiet: bool = False, timeout: float = 20.0) -> int:
    """Stop the stack and every process it started; return how many processes were stopped."""
    state = homedir.read_state()
    if not state or not state.get("pid"):
        if not quiet:
            print("local stack is not running", file=sys.stderr)
        return 0
    pid = int(state["pid"])
    pgid = int(state.get("pgid") or pid)
    children = [int(p) for p in (state.get("child_pids") or {}).values()]
    tracked = [p for p in [pid, *children] if homedir.pid_is_ours(p, MARKER)]
    if homedir.pid_is_ours(pid, MARKER):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and homedir.pid_alive(pid):
            time.sleep(0.1)
    leftovers = [p for p in tracked if homedir.pid_alive(p)]
    if leftovers or _group_alive(pgid):
        for p in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        if pgid == pid:  # the supervisor leads its own process group (started with a new session)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        time.sleep(0.3)
    still = [p for p in tracked if homedir.pid_alive(p)]
    if still:
        raise InfraError(f"could not stop processes {still}")
    state.update(ready=False, phase="stopped", stopped_at=time.time())
    homedir.write_state(state)
    if not quiet:
        print(f"local stack stopped ({len(tracked)} process(es))", file=sys.stderr)
    return len(tracked)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def env_lines(state: dict[str, Any]) -> list[str]:
    """``export KEY=VALUE`` lines (shell-quoted) for ``eval "$(omnireel local env)"``: the local endpoint, the developer
    identity's key (AWS_SESSION_TOKEN and AWS_PROFILE are unset so no real credentials mix in), the stack outputs."""
    lines = {
        "AWS_ENDPOINT_URL": state["endpoint_url"],
        "AWS_REGION": state["region"],
        "AWS_DEFAULT_REGION": state["region"],
        **developer_credentials(state),
        "OMNIREEL_API_URL": state["api_url"],
    }
    if state.get("events_queue_url"):
        lines["OMNIREEL_EVENTS_QUEUE_URL"] = state["events_queue_url"]
    for name, value in sorted((state.get("outputs") or {}).items()):
        if name == "ApiUrl":
            continue
        lines[shell_name("OMNIREEL_", name)] = value
    for model, url in sorted((state.get("emulators") or {}).items()):
        short = model.removeprefix(f"{state.get('stack_name', '')}-")
        name = shell_name("OMNIREEL_EMULATOR_", short, "_URL")
        while name in lines:  # two model names that differ only in case or punctuation: the later one gets a suffix
            name = name.removesuffix("_URL") + "_2_URL"
        lines[name] = url
    if state.get("webhook_secret"):
        lines["OMNIREEL_WEBHOOK_SECRET"] = state["webhook_secret"]
    relay = state.get("relay") or {}
    if relay:
        lines["OMNIREEL_RELAY_URL"] = relay["url"]
        lines["OMNIREEL_RELAY_TOKEN"] = relay["token"]
    unset = ["unset AWS_SESSION_TOKEN AWS_SECURITY_TOKEN AWS_PROFILE"]
    return unset + [f"export {k}={shlex.quote(str(v))}" for k, v in lines.items()]


def shell_name(prefix: str, name: str, suffix: str = "") -> str:
    """A variable name every POSIX shell accepts (``[A-Z0-9_]``, not starting with a digit: the prefix sees to that)
    for a CloudFormation output or a SageMaker model name: ``ImageModel`` -> ``IMAGE_MODEL``, and a model created
    outside the template, ``vllm-omni-media-image-model-1764...`` (the AWS sample's deploy.py), ->
    ``VLLM_OMNI_MEDIA_IMAGE_MODEL_1764...``: a hyphen made ``export`` fail, and ``eval`` under ``set -e`` stopped
    before the relay token and the webhook secret were exported."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return prefix + re.sub(r"[^A-Z0-9]+", "_", words.upper()).strip("_") + suffix


def parse_env_lines(text: str) -> dict[str, str]:
    """The variables of ``env_lines`` output (for scripts and tests that read ``omnireel local up``'s stdout)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(line) if line.startswith("export ") else []
        if len(words) == 2 and "=" in words[1]:
            key, value = words[1].split("=", 1)
            values[key] = value
    return values


def status_lines(state: dict[str, Any] | None) -> tuple[bool, list[str]]:
    if state is None:
        return False, ["local stack: not running"]
    alive = homedir.pid_alive(int(state["pid"]))
    ready = bool(state.get("ready")) and alive
    lines = [
        f"local stack: {'running' if ready else state.get('phase', 'unknown') if alive else 'not running'}",
        f"  pid {state['pid']}, home {homedir.home()}",
    ]
    if ready:
        uptime = time.time() - float(state.get("started_at", time.time()))
        lines += [f"  {line}" for line in homedir.port_move_lines(state)]
        lines += [
            f"  up {uptime:.0f} s",
            f"  AWS endpoint  {state['endpoint_url']}",
            f"  HTTP API      {state['api_url']}",
        ]
        for model, url in (state.get("emulators") or {}).items():
            lines.append(f"  emulator      {url}  ({model}{_child_health(state, f'emulator-{model}')})")
        relay = state.get("relay") or {}
        relay_pid = (state.get("child_pids") or {}).get("relay")
        lines.append(
            f"  TTS relay     {relay['url']}  (pid {relay_pid}{_child_health(state, 'relay')})"
            if relay
            else "  TTS relay     (not started)"
        )
        children = state.get("child_pids") or {}
        workers = sum(1 for name in children if name.startswith("lambda-worker"))
        lines.append(f"  processes     {len(children) + 1} ({workers} warm Lambda worker(s))")
        lines.append(f"  logs          {state.get('logs')}")
    return ready, lines


def _child_health(state: dict[str, Any], name: str) -> str:
    """The health suffix of a supervised child's status line (see omnireel_local.stack.Stack.supervise)."""
    supervision = state.get("supervision") or {}
    dead = (supervision.get("dead") or {}).get(name)
    if dead is not None:
        code, restarts = dead.get("exit_code"), dead.get("restarts")
        return f", DEAD: exited with code {code}, not restarted after {restarts} restart(s)"
    pid = (state.get("child_pids") or {}).get(name)
    if pid is None or not homedir.pid_alive(int(pid)):
        return ", DEAD: not running"
    restarts = (supervision.get("restarts") or {}).get(name, 0)
    return f", restarted {restarts} time(s)" if restarts else ""
