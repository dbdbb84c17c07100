"""The container emulator and the relay as real subprocesses on free loopback ports (bounded start, sure stop)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from omnireel_local.home import free_port
from tests.support.processes import stop_process
from tests.support.relay.relay_harness import TOKEN

REPO = Path(__file__).resolve().parents[3]


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - loopback http:// URLs built here
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


@dataclass
class Stack:
    emulator_port: int
    relay_port: int

    @property
    def relay_ws(self) -> str:
        return f"ws://127.0.0.1:{self.relay_port}/v1/audio/speech/stream"

    @property
    def relay_http(self) -> str:
        return f"http://127.0.0.1:{self.relay_port}"


def _start(cmd: list[str], env: dict[str, str], ready_url: str, timeout: float, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    out.close()
    deadline = time.monotonic() + timeout
    while http_status(ready_url) != 200:
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            raise RuntimeError(f"{cmd[2]} did not become ready at {ready_url}:\n{log.read_text()[-4000:]}")
        time.sleep(0.05)
    return proc


def _base_env() -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMNIREEL_RELAY_", "OMNIREEL_EMULATOR_"))}
    base.pop("SM_VLLM_MODEL", None)
    base["PYTHONPATH"] = os.pathsep.join(str(REPO / p) for p in ("relay", "local", "layers/omnireel", "."))
    return base


def start_emulator(tmp: Path, port: int, realtime_factor: float, *extra: str) -> subprocess.Popen[bytes]:
    """The container emulator (uvicorn, speech only) as a process; ready when /health answers 200."""
    argv = [sys.executable, "-m", "omnireel_local.emulator", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--routes", "speech", "--speech-realtime-factor", str(realtime_factor), "--log-level", "warning", *extra]
    return _start(argv, _base_env(), f"http://127.0.0.1:{port}/health", 30, tmp / "emulator.log")


@contextlib.contextmanager
def emulator(tmp: Path, realtime_factor: float = 4.0, *extra: str) -> Iterator[str]:
    """Just the emulator; yields its WebSocket URL (for an in-process relay)."""
    port = free_port()
    proc = start_emulator(tmp, port, realtime_factor, *extra)
    try:
        yield f"ws://127.0.0.1:{port}/v1/audio/speech/stream"
    finally:
        stop_process(proc)


@contextlib.contextmanager
def emulator_and_relay(tmp: Path, realtime_factor: float = 4.0) -> Iterator[Stack]:
    """``python -m omnireel_local.emulator`` (speech only) and ``python -m omnireel_relay`` in front of it."""
    base = _base_env()
    emulator_port, relay_port = free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_emulator(tmp, emulator_port, realtime_factor))
        relay_env = {
            **base,
            "OMNIREEL_RELAY_TOKEN": TOKEN,
            "OMNIREEL_RELAY_HOST": "127.0.0.1",
            "OMNIREEL_RELAY_PORT": str(relay_port),
            "OMNIREEL_RELAY_UPSTREAM_URL": f"ws://127.0.0.1:{emulator_port}/v1/audio/speech/stream",
            "OMNIREEL_RELAY_DRAIN_SECONDS": "1",
        }
        procs.append(
            _start(
                [sys.executable, "-m", "omnireel_relay"],
                relay_env,
                f"http://127.0.0.1:{relay_port}/healthz",
                20,
                tmp / "relay.log",
            )
        )
        yield Stack(emulator_port, relay_port)
    finally:
        for proc in reversed(procs):
            stop_process(proc)
