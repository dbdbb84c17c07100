"""A template for the local stack's container emulators: imports the emulator once, then forks one per SageMaker Model.

Each emulator used to be a new interpreter (``python -m omnireel_local.emulator``) that imported Starlette, uvicorn,
numpy, Pillow and PyAV from scratch: ~0.45 of its ~0.5 CPU-s of start, three times per stack (image, video, speech)
and again at every supervised restart; a ``make test`` starts a dozen stacks. The stack (``stack.py``) starts one
template per stack (``python -m omnireel_local.emulator_zygote FD`` with .venv-emulator's interpreter, the stack's
environment and working folder) and asks it for an emulator over the socket ``FD`` (``omnireel_local.zygote``'s
protocol): one JSON request ``{"args", "env", "cwd"}`` with one descriptor (the emulator's log, its stdout and stderr),
answered with the child's pidfd. The template reports each child's exit code on its stdout (``PID CODE`` lines), which
the stack reads, so a supervised emulator's death is logged and shown with its code as before.

What a forked emulator shares with the template, and why that is safe:
- Only modules are imported here: the emulator's configuration is read from the environment when ``main`` builds its
  app (``EmulatorConfig.from_env``), in the child, after the child's environment replaced the template's (its
  ``SM_VLLM_MODEL``, ``EMULATOR_CONCURRENCY``...). No emulator module reads the environment at import.
- Single-threaded: the template forks from a process with no other thread, and every thread an emulator runs (uvicorn's
  loop, its thread pool) starts in the child. Each child seeds its own randomness (Python reseeds ``random`` in a
  child; the emulator's pictures and faults use seeded generators).
- The child is what ``python -m omnireel_local.emulator ARGS`` in the same folder with the same environment would be:
  the same ``main``, its own process, its own port, its own log. ``OMNIREEL_EMULATOR_TEMPLATE=0`` starts an interpreter
  per emulator as before (also the fallback when the platform lacks pidfds or the template cannot fork).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from . import heap, zygote

TEMPLATE_SWITCH = "OMNIREEL_EMULATOR_TEMPLATE"
START_TIMEOUT_S = 60.0  # the first fork's answer waits for the template's imports


def enabled(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    return environ.get(TEMPLATE_SWITCH, "1") != "0" and zygote.supported()


# ---------------------------------------------------------------- the template's side (.venv-emulator's interpreter)
def preload() -> None:
    from .emulator import __main__  # noqa: F401 - the app, uvicorn and the media libraries


def _report(pid: int, code: int) -> None:
    with contextlib.suppress(OSError):  # the stack has gone: nobody to tell
        os.write(1, f"{pid} {code}\n".encode())


def _become_emulator(request: dict[str, Any]) -> int:
    (log_fd,) = request["fds"]
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (log_fd, 1), (log_fd, 2)):
        os.dup2(fd, target)
    for fd in {null, log_fd} - {0, 1, 2}:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.argv = ["omnireel_local.emulator", *request["args"]]
    from .emulator.__main__ import main as emulator_main

    return emulator_main(request["args"])


def main() -> int:
    control = socket.socket(fileno=int(sys.argv[1]))
    preload()
    heap.settle(young_threshold=None)  # emulators inherit a frozen template: their collections skip what it imported
    request = zygote.serve(control, 1, on_exit=_report)
    if request is None:
        return 0
    return _become_emulator(request)


# ---------------------------------------------------------------- the stack's side
class EmulatorTemplate(zygote.Template):
    """A running ``emulator_zygote``: ``fork`` gives a ``zygote.ForkedProcess`` per emulator, ``stop`` ends the
    template (the emulators it forked are the stack's to stop)."""

    def __init__(self, python: str, env: dict[str, str], cwd: Path, log_path: Path):
        super().__init__("omnireel_local.emulator_zygote", python, {**env, "PYTHONUNBUFFERED": "1"}, log_path,
                         start_timeout_s=START_TIMEOUT_S, cwd=cwd, stdout=subprocess.PIPE)  # fmt: skip
        self._codes: dict[int, int] = {}
        self._gone = False
        self._changed = threading.Condition()
        threading.Thread(target=self._read_exits, name="emulator-template-exits", daemon=True).start()

    def _read_exits(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                pid, code = (int(part) for part in line.split())
                with self._changed:
                    self._codes[pid] = code
                    self._changed.notify_all()
        with self._changed:
            self._gone = True
            self._changed.notify_all()

    def exit_code(self, pid: int, wait_s: float) -> int | None:
        """How the template's child ``pid`` ended (waiting up to ``wait_s`` for the report); None while unreported,
        ``ForkedProcess.EXITED`` when the template has gone without saying."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._codes or self._gone, timeout=wait_s)
            if pid in self._codes:
                return self._codes[pid]
            return zygote.ForkedProcess.EXITED if self._gone else None

    def fork(self, args: list[str], env: dict[str, str], log: BinaryIO) -> zygote.ForkedProcess:
        """An emulator, as ``python -m omnireel_local.emulator ARGS`` with ``env``; OSError if the template cannot
        make one (the stack then starts an interpreter)."""
        request = {"args": args, "env": env, "cwd": str(self.cwd)}
        with self.lock:
            pid, pidfd = zygote.request_fork(self.socket, request, [log.fileno()])
        return zygote.ForkedProcess(pid, pidfd, exit_code=self.exit_code, name="emulator")


if __name__ == "__main__":
    sys.exit(main())
