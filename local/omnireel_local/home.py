"""Where the local stack keeps its state: ``$OMNIREEL_HOME`` or ``<repo>/.omnireel`` (pids, ports, logs).

``state.json`` is written with mode 0600: it holds the local relay's bearer token and the developer's access key.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

# The checkout (the same as omnireel_template.ROOT, which is not imported here: it loads YAML and the SAM translator's
# YAML helpers, ~30 ms of every CLI command).
ROOT = Path(__file__).resolve().parents[2]

STATE_FILE = "state.json"
EVENTS_LOG = "events.jsonl"  # the job events `omnireel events` has received (omnireel_cli/event_log.py)
REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
STACK_NAME = "omnireel-local"
# Placeholder keys for the stack process's own environment: the local AWS refuses them once IAM is enforced, so a
# client that falls back to the default credential chain fails loudly instead of acting as someone.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "unset-local-key", "AWS_SECRET_ACCESS_KEY": "unset-local-key"}


def developer_credentials(state: dict[str, Any]) -> dict[str, str]:
    """The developer identity's access key (IAM user ``omnireel-local``), as AWS_* variables."""
    developer = state.get("developer") or {}
    if not developer.get("access_key_id"):
        raise KeyError("the local stack's state has no developer credentials (started by an older omnireel?)")
    return {"AWS_ACCESS_KEY_ID": developer["access_key_id"], "AWS_SECRET_ACCESS_KEY": developer["secret_access_key"]}


def home() -> Path:
    return Path(os.environ.get("OMNIREEL_HOME") or ROOT / ".omnireel").resolve()


def state_path(base: Path | None = None) -> Path:
    return (base or home()) / STATE_FILE


def read_state(base: Path | None = None) -> dict[str, Any] | None:
    path = state_path(base)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_state(state: dict[str, Any], base: Path | None = None) -> None:
    path = state_path(base)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    # 0600: the state holds the relay's bearer token. Created with that mode (never world-readable in between).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)  # an older .tmp may have been created with a wider mode
        handle.write(json.dumps(state, indent=2))
    tmp.replace(path)


def free_port(host: str = "127.0.0.1") -> int:
    """A free TCP port on ``host``, reserved until a server binds it (for up to TIME_WAIT's 60 s).

    A port that was merely bound and closed goes straight back to the kernel's pool: another process's ``bind(0)``
    (a parallel test's stack choosing its ports) gets it in the seconds before our server starts, and that server
    dies with "Address already in use" (CI, stop 42). So the port is left in TIME_WAIT on the listening side: the
    kernel then hands it to no other ``bind(0)`` and to no outgoing connection, while a server that sets
    SO_REUSEADDR (http.server, werkzeug, uvicorn and asyncio's servers all do) can still bind and listen on it."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, 0))
        listener.listen(1)
        port = int(listener.getsockname()[1])
        with socket.create_connection((host, port), timeout=5):
            accepted, _ = listener.accept()
            accepted.close()  # the listening side closes first: its end (host:port) is the one in TIME_WAIT
    return port


# Fixed ports of the local stack (docs/local-stack.md), so URLs and `aws --endpoint-url` survive a restart.
# OMNIREEL_LOCAL_BASE_PORT moves the whole block. A port that is taken falls back to a free one (logged).
BASE_PORT = 4710
PORT_OFFSETS = {"aws": 0, "api": 1, "relay": 2, "emulator": 3}  # emulators: base+3, base+4, ... in template order


def base_port() -> int:
    return int(os.environ.get("OMNIREEL_LOCAL_BASE_PORT") or BASE_PORT)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Can a server listen on ``port``? (SO_REUSEADDR as the servers set it: a TIME_WAIT leftover does not count.)"""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


class PortPlan:
    """Which port each part of the stack listens on: the fixed default if it is free, else a free one.

    ``ephemeral``: every port is a free one (tests and parallel stacks, which must never collide)."""

    def __init__(self, ephemeral: bool = False, base: int | None = None):
        self.ephemeral = ephemeral
        self.base = base_port() if base is None else base
        self.fallbacks: dict[str, tuple[int, int]] = {}  # name -> (wanted, used)

    def port(self, name: str, index: int = 0) -> int:
        if self.ephemeral:
            return free_port()
        wanted = self.base + PORT_OFFSETS[name] + index
        if port_is_free(wanted):
            return wanted
        used = free_port()
        self.fallbacks[f"{name}{index or ''}"] = (wanted, used)
        logging.getLogger("omnireel_local.ports").warning("port %d (%s) is taken: using %d instead", wanted,
                                                          name, used)  # fmt: skip
        return used

    def moves(self) -> list[dict[str, object]]:
        """The documented ports that were taken, as ``{"name", "wanted", "used", "reason"}`` (state.json)."""
        return [
            {"name": name, "wanted": wanted, "used": used, "reason": "taken by another process (another local stack?)"}
            for name, (wanted, used) in self.fallbacks.items()
        ]


def port_move_lines(state: dict[str, Any]) -> list[str]:
    """What ``local up`` and ``local status`` say about moved ports: each move, and that ``local env`` is the truth."""
    moves = state.get("port_moves") or []
    if not moves:
        return []
    lines = [
        f"port {move['wanted']} ({move['name']}) was {move['reason']}: listening on {move['used']} instead"
        for move in moves
    ]
    truth = 'the documented ports do not apply to this stack: take its URLs from `eval "$(omnireel local env)"`'
    return [*lines, truth]


def reap(pids: list[int], grace_s: float = 10.0) -> list[int]:
    """Wait (bounded) for ``pids`` to exit, SIGKILL what is left; returns the pids that had to be killed."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.2)
    left = [p for p in pids if pid_alive(p)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def pid_alive(pid: int) -> bool:
    if pid <= 0:  # os.kill(0, ...) and negative pids signal process groups: no process of a state file
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) counts as gone.
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        return "\nState:\tZ" not in status
    except OSError:
        return True


def pid_is_ours(pid: int, marker: str) -> bool:
    """True if ``pid`` is alive and its command line mentions ``marker`` (guards against recycled pids)."""
    if not pid_alive(pid):
        return False
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return True  # no /proc (macOS): trust the recorded pid
