"""Process templates ("zygotes"): a process that has imported what its children need, then forks one per request.

Two kinds use it: ``lambda_zygote`` (one per Lambda runtime: a worker per cold start) and ``emulator_zygote`` (one per
stack: a container emulator per SageMaker Model). Both sides of the protocol live here:

- The template (``serve``) reads requests on a ``SOCK_SEQPACKET`` socket: one JSON message with a fixed number of
  descriptors, answered ``{"pid"}`` with the child's pidfd (or ``{"error"}``). In the child, ``serve`` returns the
  request (with its descriptors under ``"fds"``); in the template it never returns until its parent closes the
  template's stdin (or exits): then the template stops, and the children it forked live on.
- The template reaps its children (every ``REAP_INTERVAL_S`` and after each request); ``on_exit`` hears each child's
  exit code, as ``subprocess`` reports one (``-N`` for a signal).
- The parent holds a ``ForkedProcess`` per child: the part of ``Popen``'s surface the runner and the stack use. It
  watches and signals the child through its pidfd, so a reused pid is never signalled. The exit code is the template's
  to know: ``exit_code`` (when given) looks it up, else ``returncode`` is ``EXITED`` once the child has exited.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

MAX_REQUEST_BYTES = 1 << 20
REAP_INTERVAL_S = 0.5
EXIT_CODE_WAIT_S = 2 * REAP_INTERVAL_S + 1  # how long a parent waits for the template to report an exit it saw


def supported() -> bool:
    """Templates need Linux's pidfds (5.3+) and descriptor passing."""
    return hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal") and hasattr(socket, "send_fds")


def reap(on_exit: Callable[[int, int], None] | None = None) -> None:
    """Collect every exited child; ``on_exit(pid, exit_code)`` for each."""
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if not pid:
                return
            if on_exit is not None:
                on_exit(pid, os.waitstatus_to_exitcode(status))


def serve(
    control: socket.socket, fd_count: int, on_exit: Callable[[int, int], None] | None = None
) -> dict[str, Any] | None:
    """Fork a child per request until the parent goes away; in a child, return its request (the child's own path)."""
    template_pid = os.getpid()
    while True:
        readable, _, _ = select.select([control, sys.stdin], [], [], REAP_INTERVAL_S)
        reap(on_exit)
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            return None  # the parent closed our stdin (or exited): stop; running children live on
        if control not in readable:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(control, MAX_REQUEST_BYTES, fd_count)
        except OSError:
            return None
        if not message:
            return None
        try:
            request = json.loads(message)
            if len(fds) != fd_count:
                raise ValueError(f"expected {fd_count} descriptors, got {len(fds)}")
            pid = os.fork()
            if pid == 0:
                control.close()
                request["fds"] = fds
                return dict(request)
            pidfd = os.pidfd_open(pid)
            try:
                socket.send_fds(control, [json.dumps({"pid": pid}).encode()], [pidfd])
            finally:
                os.close(pidfd)
        except (OSError, ValueError) as exc:
            with contextlib.suppress(OSError):
                control.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        finally:
            if os.getpid() == template_pid:  # the child keeps them
                for fd in fds:
                    os.close(fd)


def request_fork(control: socket.socket, request: dict[str, Any], fds: list[int]) -> tuple[int, int]:
    """The parent's side of one request: send it with ``fds``, return (pid, pidfd); OSError if no child was made."""
    socket.send_fds(control, [json.dumps(request).encode()], fds)
    message, answer_fds, _, _ = socket.recv_fds(control, 65536, 1)
    answer = json.loads(message) if message else {"error": "the template exited"}
    if "pid" not in answer or len(answer_fds) != 1:
        for fd in answer_fds:
            os.close(fd)
        raise OSError(f"the template did not fork: {answer.get('error', answer)}")
    return int(answer["pid"]), answer_fds[0]


class ForkedProcess:
    """A child forked by a template, with the part of ``Popen``'s surface its parent uses (see the module docstring)."""

    EXITED = -1

    def __init__(
        self,
        pid: int,
        pidfd: int,
        *,
        stdin_fd: int | None = None,
        stdout_fd: int | None = None,
        exit_code: Callable[[int, float], int | None] | None = None,
        name: str = "child",
    ):
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._exit_code = exit_code
        self._name = name
        weakref.finalize(self, os.close, pidfd)
        self.stdin: TextIO | None = None
        self.stdout: TextIO | None = None
        if stdin_fd is not None:
            self.stdin = open(stdin_fd, "w", buffering=1, encoding="utf-8")  # noqa: SIM115 - as Popen(text=True, bufsize=1)
        if stdout_fd is not None:
            self.stdout = open(stdout_fd, encoding="utf-8")  # noqa: SIM115 - read by the parent's reader thread

    def _exited(self, timeout: float | None) -> bool:
        return bool(select.select([self._pidfd], [], [], timeout)[0])

    def _settle(self, wait_s: float) -> int | None:
        """The exit code once the child has exited: the template's report (up to ``wait_s`` for it), else EXITED."""
        if self._exit_code is None:
            self.returncode = self.EXITED
        else:
            code = self._exit_code(self.pid, wait_s)
            if code is not None:
                self.returncode = code
            elif wait_s > 0:
                self.returncode = self.EXITED  # the template never said (it died): exited, code unknown
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None and self._exited(0):
            return self._settle(0)  # None until the template has reaped it and said how it ended
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._exited(timeout):
                raise subprocess.TimeoutExpired(self._name, timeout or 0)
            self._settle(EXIT_CODE_WAIT_S)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def wait_or_kill(proc: Any, grace: float) -> None:
    """Wait up to ``grace`` s for ``proc`` (a ``Popen`` or a ``ForkedProcess``) to exit, then kill it."""
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


class Template:
    """The parent's handle on a running template: ``python -m MODULE FD`` with ``env`` (and ``cwd``), its stderr in
    ``log_path``, its stdout ``stdout`` (DEVNULL, or PIPE for what it reports); ``fork`` with ``request_fork`` under
    ``lock`` (one request at a time); ``stop`` closes its stdin, and the template exits (its children do not)."""

    def __init__(
        self, module: str, python: str, env: dict[str, str], log_path: Path, *, start_timeout_s: float,
        cwd: Path | None = None, stdout: int = subprocess.DEVNULL,
    ):  # fmt: skip
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log_file = open(log_path, "ab")  # noqa: SIM115 - lives as long as the template
        try:
            self.proc = subprocess.Popen(
                [python, "-m", module, str(theirs.fileno())],
                stdin=subprocess.PIPE,
                stdout=stdout,
                stderr=self.log_file,
                env=env,
                cwd=cwd,
                pass_fds=[theirs.fileno()],
            )
        except BaseException:
            ours.close()
            self.log_file.close()
            raise
        finally:
            theirs.close()
        self.cwd = cwd
        self.socket = ours
        self.socket.settimeout(start_timeout_s)  # the first answer waits for the template's imports
        self.lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 2.0) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()
        self.socket.close()
        wait_or_kill(self.proc, grace)
        self.log_file.close()
