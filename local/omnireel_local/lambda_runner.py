"""Runs Lambda functions without Docker: warm worker processes per function, reused like execution environments.

Each function gets a small pool of ``lambda_worker`` processes. An invocation takes an idle worker (a *warm*
start) or starts a new one (a *cold* start: the handler module is imported, which runs the function's init code);
a worker serves one invocation at a time. A configuration change (environment, handler, code path) retires the
old workers, as Lambda does. So does a change of the code itself (hot reload, like ``sam sync --watch``): every
invocation compares the size and mtime of the files under the function's CodeUri and layer folders with those its
warm workers were started with, and on a difference retires them (logged with the changed file) so the invocation
runs the new code in a fresh worker. An invocation that exceeds the function's Timeout kills its worker and fails with
``Sandbox.Timedout``, like Lambda. Unhandled exceptions come back as ``{"errorMessage", "errorType",
"stackTrace"}`` with the function-error flag set, so Step Functions Retry/Catch match on the exception class name.

Each execution environment runs with credentials of the function's own role (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` of a role session named after the function, as Lambda provides
them); a warm worker whose session would expire before its invocation could end is retired and a new one starts with
a fresh session, so no worker ever calls AWS with dead credentials.

The code that runs is the code ``sam build`` packages: the function's CodeUri folder plus its layers' folders,
with the interpreter's site-packages standing in for the layer's pinned requirements.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from . import fault_injection, local_dns, zygote
from .iam.identities import Credentials
from .lambda_zygote import IMPORT_TIME_ENV
from .runtime_python import COVERAGE_VARS, STACK_SYS_PATH, coverage_environment, runtime_python

log = logging.getLogger("omnireel_local.lambda")

# Environment variables passed through from the stack process to workers (nothing else leaks in).
_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "SYSTEMROOT", "VIRTUAL_ENV")
_START_TIMEOUT_S = 60.0
_CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
# What a worker template (lambda_zygote) is started with, of its workers' environment: the interpreter's settings,
# coverage's variables, the import path and what the preloaded modules read at import.
_TEMPLATE_INHERITS = frozenset(
    (*_PASSTHROUGH, *COVERAGE_VARS, *IMPORT_TIME_ENV, STACK_SYS_PATH, "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")
)
# OMNIREEL_LAMBDA_TEMPLATE=0: every cold start is a new interpreter (the way before lambda_zygote; for comparisons).
TEMPLATE_SWITCH = "OMNIREEL_LAMBDA_TEMPLATE"


def templates_enabled() -> bool:
    """Worker templates need Linux's pidfds (5.3+) and descriptor passing; OMNIREEL_LAMBDA_TEMPLATE=0 turns them off."""
    return zygote.supported() and os.environ.get(TEMPLATE_SWITCH, "1") != "0"


# A worker is reused only if its role session outlives the invocation's timeout by this much.
CREDENTIAL_MARGIN_S = 60.0
# A worker told to exit (end of its input) that is still running after its grace is killed. While coverage measures
# the workers (tests, local/omnireel_local/runtime_python.py) each writes its data file as it exits and a killed one
# writes nothing: a stack's few dozen warm workers exiting at once took 2-5 s on 2 busy cores, so they get this long.
MEASURED_EXIT_GRACE_S = 10.0


@dataclass(frozen=True)
class FunctionCode:
    """Where a function's code lives on disk (from the template's CodeUri / layer ContentUri)."""

    code_dir: Path
    layer_dirs: tuple[Path, ...] = ()


@dataclass
class Invocation:
    """What the moto patch hands over: the function's live configuration and the event."""

    function_name: str
    function_arn: str
    handler: str
    runtime: str
    timeout_s: float
    memory_mb: int
    environment: dict[str, str]
    payload: str
    log_group: str | None = None
    role_arn: str = ""


@dataclass
class InvokeResult:
    payload: str
    errored: bool
    cold: bool = False
    duration_s: float = 0.0


class _Template(zygote.Template):
    """A ``lambda_zygote`` process: forks a worker per cold start, its libraries already imported."""

    def __init__(self, python: str, env: dict[str, str], log_path: Path):
        super().__init__("omnireel_local.lambda_zygote", python, env, log_path, start_timeout_s=_START_TIMEOUT_S)

    def fork(
        self, handler: str, paths: list[str], env: dict[str, str], cwd: Path, log: BinaryIO
    ) -> zygote.ForkedProcess:
        """A new worker, as ``python -m omnireel_local.lambda_worker --handler ... --path ...`` in ``cwd`` with
        ``env``; OSError if the template cannot make one (the runner then starts an interpreter)."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        request = {"handler": handler, "paths": paths, "env": env, "cwd": str(cwd)}
        try:
            with self.lock:
                pid, pidfd = zygote.request_fork(self.socket, request, [in_r, out_w, log.fileno()])
        except BaseException:
            os.close(in_w)
            os.close(out_r)
            raise
        finally:
            os.close(in_r)
            os.close(out_w)
        return zygote.ForkedProcess(pid, pidfd, stdin_fd=in_w, stdout_fd=out_r, name="lambda_worker")


class _Worker:
    def __init__(self, start: Callable[[BinaryIO], Any], log_path: Path, name: str):
        """``start(log)``: the worker's process (``Popen``, or a ``zygote.ForkedProcess``), its stderr going to ``log``;
        called by ``launch``, outside the runner's lock (a template's first fork waits for its imports)."""
        self.name = name
        self.log_file = open(log_path, "ab")  # noqa: SIM115 - lives as long as the worker
        self._start = start
        self.proc: Any = None  # until launch()
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.ready = False
        self.invocations = 0
        self.signature = ""
        self.generation = 0
        self.expires_at: float | None = None  # when the worker's role session expires

    def launch(self) -> None:
        self.proc = self._start(self.log_file)
        threading.Thread(target=self._read, name=f"lambda-{self.name}-{self.proc.pid}", daemon=True).start()

    @property
    def launched(self) -> bool:
        return self.proc is not None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next protocol message, or None on timeout / worker exit."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                return None
            if line is None:
                return None
            line = line.strip()
            if line:
                return json.loads(line)

    def send(self, message: dict[str, Any]) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def alive(self) -> bool:
        return self.launched and self.proc.poll() is None

    def close_input(self) -> None:
        """Ask the worker to exit (end of its input); ``stop`` then waits for it."""
        try:
            if self.launched and self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except OSError:
            pass

    def stop(self, grace: float = 2.0) -> None:
        if self.alive():
            self.close_input()
            zygote.wait_or_kill(self.proc, grace)
        self.log_file.close()


@dataclass
class _Pool:
    signature: str
    idle: list[_Worker] = field(default_factory=list)
    busy: set[_Worker] = field(default_factory=set)
    generation: int = 0  # a new pool per configuration or code change: workers of an older one are never reused
    code_state: dict[str, tuple[int, int]] = field(default_factory=dict)  # file -> (mtime_ns, size) at start


_SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


def code_fingerprint(roots: tuple[Path, ...]) -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of every file under ``roots`` (caches skipped): cheap enough per invocation (~100 stats)."""
    state: dict[str, tuple[int, int]] = {}
    stack = [str(root) for root in roots]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIPPED_DIRS:
                    stack.append(entry.path)
            elif not entry.name.endswith((".pyc", ".pyo")):
                try:
                    info = entry.stat()
                except OSError:
                    continue
                state[entry.path] = (info.st_mtime_ns, info.st_size)
    return state


def _changed_files(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


class LambdaRunner:
    def __init__(
        self,
        moto_endpoint: str,
        region: str,
        log_dir: Path,
        max_workers_per_function: int = 4,
        credentials: Callable[[str, str, float], Credentials] | None = None,
        faults_file: Path | None = None,
    ):
        """``credentials(function_name, role_arn, valid_for_s)``: a session of the function's role. ``faults_file``:
        the stack's fault-injection config, for the workers' resolver hook (``local_dns``)."""
        self.faults_file = faults_file
        self.moto_endpoint = moto_endpoint
        self.credentials = credentials
        self.region = region
        self.log_dir = log_dir
        self.max_workers = max_workers_per_function
        self.python = runtime_python()  # the stack's own, or OMNIREEL_RUNTIME_PYTHON (tests measuring coverage)
        # Another interpreter's workers import only from this one's path (runtime_python.STACK_SYS_PATH).
        self._stack_path = {STACK_SYS_PATH: json.dumps(sys.path)} if self.python != sys.executable else {}
        self.measured = bool(coverage_environment())
        self._code: dict[str, FunctionCode] = {}
        self._pools: dict[str, _Pool] = {}
        # Worker templates (lambda_zygote) by the environment they were started with; None: they are off or failed
        self._templates: dict[str, _Template] | None = {} if templates_enabled() else None
        self._templates_lock = threading.Lock()
        self._lock = threading.Condition()
        self._closed = False
        self._generation = 0
        log_dir.mkdir(parents=True, exist_ok=True)

    # ---------------------------------------------------------------- registry
    def register(self, function_name: str, code: FunctionCode) -> None:
        self._code[function_name] = code

    def knows(self, function_name: str) -> bool:
        return function_name in self._code

    def pids(self) -> list[int]:
        with self._lock:
            return [w.pid for pool in self._pools.values() for w in (*pool.idle, *pool.busy) if w.launched]

    def template_pids(self) -> list[int]:
        with self._templates_lock:
            return [t.pid for t in (self._templates or {}).values()]

    # ---------------------------------------------------------------- invocation
    def invoke(self, inv: Invocation) -> InvokeResult:
        code = self._code.get(inv.function_name)
        if code is None:
            return self._failure(
                "Runtime.InvalidEntrypoint",
                f"function {inv.function_name} was not provisioned from template.yaml; the local runner only runs "
                "functions whose code it knows (CodeUri)",
            )
        env = self._environment(inv, code)
        try:
            session = self._session(inv)
        except Exception as exc:  # noqa: BLE001 - Lambda reports a role it cannot assume as the invocation's error
            log.error("lambda %s: cannot assume its role %s: %s", inv.function_name, inv.role_arn, exc)
            return self._failure(
                "AccessDeniedException", f"The role defined for the function cannot be assumed by Lambda: {exc}"
            )
        argv = [self.python, "-m", "omnireel_local.lambda_worker", "--handler", inv.handler]
        for path in (code.code_dir, *code.layer_dirs):
            argv += ["--path", str(path)]
        # The session is not part of the configuration: a refreshed session does not retire healthy workers.
        signature = hashlib.sha256(json.dumps([argv, sorted(env.items())]).encode()).hexdigest()
        code_state = code_fingerprint((code.code_dir, *code.layer_dirs))
        if session is not None:
            env = {**env, **session.environment()}
        started = time.monotonic()
        worker, cold = self._acquire(
            inv.function_name,
            signature,
            lambda log_file: self._start(inv, code, argv, env, log_file),
            inv.timeout_s,
            session.expires_at if session else None,
            code_state,
        )
        if worker is None:
            return self._failure(
                "Lambda.TooManyRequestsException", f"no free execution environment for {inv.function_name}"
            )
        keep = False
        try:
            if cold:
                message = worker.receive(_START_TIMEOUT_S)
                if message is None or "init_error" in message:
                    error = (message or {}).get("init_error") or {
                        "errorMessage": f"the execution environment of {inv.function_name} exited during init",
                        "errorType": "Runtime.ExitError",
                    }
                    log.error("lambda %s: init failed: %s", inv.function_name, error.get("errorMessage"))
                    return InvokeResult(json.dumps(error), True, cold, time.monotonic() - started)
            request_id = str(uuid.uuid4())
            deadline_ms = int(time.time() * 1000 + inv.timeout_s * 1000)
            log.info(
                "lambda %s: %s (worker pid %d, request %s)",
                inv.function_name,
                "cold start" if cold else "warm",
                worker.pid,
                request_id,
            )
            if not worker.send(
                {
                    "request_id": request_id,
                    "payload": inv.payload,
                    "deadline_ms": deadline_ms,
                    "function_arn": inv.function_arn,
                }
            ):
                return self._failure("Runtime.ExitError", f"the execution environment of {inv.function_name} exited")
            crash_after = fault_injection.lambda_crash(inv.function_name, inv.payload)  # off by default
            if crash_after is not None:
                worker.receive(min(crash_after, inv.timeout_s))
                worker.proc.kill()
                return self._failure(
                    "Runtime.ExitError",
                    f"RequestId: {request_id} Error: Runtime exited with error: signal: killed (injected fault)",
                )
            answer = worker.receive(inv.timeout_s)
            elapsed = time.monotonic() - started
            if answer is None:
                if worker.alive():
                    log.warning(
                        "lambda %s: timed out after %.0f s, killing worker %d",
                        inv.function_name,
                        inv.timeout_s,
                        worker.pid,
                    )
                    return InvokeResult(
                        json.dumps(
                            {
                                "errorMessage": (
                                    f"RequestId: {request_id} Error: Task timed out after {inv.timeout_s:.2f} seconds"
                                ),
                                "errorType": "Sandbox.Timedout",
                            }
                        ),
                        True,
                        cold,
                        elapsed,
                    )
                return InvokeResult(
                    json.dumps(
                        {
                            "errorMessage": f"RequestId: {request_id} Error: Runtime exited without providing a reason",
                            "errorType": "Runtime.ExitError",
                        }
                    ),
                    True,
                    cold,
                    elapsed,
                )
            keep = True
            worker.invocations += 1
            if answer.get("ok"):
                return InvokeResult(answer["result"], False, cold, elapsed)
            return InvokeResult(json.dumps(answer["error"]), True, cold, elapsed)
        finally:
            self._release(inv.function_name, worker, keep)

    def _exit_grace(self, seconds: float) -> float:
        return max(seconds, MEASURED_EXIT_GRACE_S) if self.measured else seconds

    @staticmethod
    def _failure(error_type: str, message: str) -> InvokeResult:
        return InvokeResult(json.dumps({"errorMessage": message, "errorType": error_type}), True)

    def _session(self, inv: Invocation) -> Credentials | None:
        if self.credentials is None:
            return None
        return self.credentials(inv.function_name, inv.role_arn, inv.timeout_s + CREDENTIAL_MARGIN_S)

    def _environment(self, inv: Invocation, code: FunctionCode) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in _PASSTHROUGH}
        env.update({**coverage_environment(), **self._stack_path})  # both empty unless the tests measure coverage
        env.update({k: str(v) for k, v in inv.environment.items()})
        env.update(
            {
                "AWS_ENDPOINT_URL": self.moto_endpoint,
                "AWS_REGION": self.region,
                "AWS_DEFAULT_REGION": self.region,
                "AWS_LAMBDA_FUNCTION_NAME": inv.function_name,
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(inv.memory_mb),
                "AWS_LAMBDA_FUNCTION_TIMEOUT": str(int(inv.timeout_s)),
                "AWS_LAMBDA_LOG_GROUP_NAME": inv.log_group or f"/aws/lambda/{inv.function_name}",
                "AWS_LAMBDA_LOG_STREAM_NAME": f"local/{inv.function_name}",
                "AWS_EXECUTION_ENV": f"AWS_Lambda_{inv.runtime}",
                "LAMBDA_TASK_ROOT": str(code.code_dir),
                "_HANDLER": inv.handler,
                "POWERTOOLS_TRACE_DISABLED": "true",
                **({local_dns.ENV: str(self.faults_file)} if self.faults_file else {}),
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        return env

    def _start(
        self, inv: Invocation, code: FunctionCode, argv: list[str], env: dict[str, str], log_file: BinaryIO
    ) -> Any:
        """A new execution environment: forked from its runtime's template, or (templates off or failing) a new
        interpreter running ``argv``."""
        template = self._template(env)
        if template is not None:
            paths = [str(path) for path in (code.code_dir, *code.layer_dirs)]
            try:
                return template.fork(inv.handler, paths, env, code.code_dir, log_file)
            except OSError as exc:
                log.warning(
                    "lambda %s: the worker template failed (%s); workers start an interpreter each from now on",
                    inv.function_name,
                    exc,
                )
                self._drop_templates()
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            cwd=code.code_dir,
            env=env,
            text=True,
            bufsize=1,
        )

    def _template(self, env: dict[str, str]) -> _Template | None:
        """The template for workers with ``env``: keyed on what it passes on (the interpreter's settings, coverage,
        the import path) and what its preloaded modules read at import (``lambda_zygote.IMPORT_TIME_ENV``)."""
        inherited = {k: v for k, v in env.items() if k in _TEMPLATE_INHERITS}
        key = json.dumps(sorted(inherited.items()))
        with self._templates_lock:
            if self._templates is None or self._closed:
                return None
            template = self._templates.get(key)
            if template is not None and template.alive():
                return template
            try:
                template = _Template(self.python, inherited, self.log_dir / "lambda-template.log")
                self._templates[key] = template
            except OSError as exc:
                log.warning("lambda: cannot start a worker template (%s); workers start an interpreter each", exc)
                self._templates = None
                return None
            return template

    def _drop_templates(self) -> None:
        with self._templates_lock:
            templates, self._templates = list((self._templates or {}).values()), None
        for template in templates:
            template.stop()

    def _acquire(
        self,
        name: str,
        signature: str,
        start: Callable[[BinaryIO], Any],
        timeout_s: float,
        expires_at: float | None = None,
        code_state: dict[str, tuple[int, int]] | None = None,
    ) -> tuple[_Worker | None, bool]:
        deadline = time.monotonic() + max(timeout_s, 30.0)
        retired: list[_Worker] = []
        code_state = code_state or {}
        with self._lock:
            pool = self._pools.get(name)
            changed = None if pool is None else _changed_files(pool.code_state, code_state)
            if pool is None or pool.signature != signature or changed:
                if pool is not None and changed:
                    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
                    log.info("lambda %s: code changed (%s), retiring %d warm worker(s): the next start loads it",
                             name, shown, len(pool.idle) + len(pool.busy))  # fmt: skip
                    retired = pool.idle
                elif pool is not None:
                    log.info("lambda %s: configuration changed, retiring %d warm worker(s)", name, len(pool.idle))
                    retired = pool.idle
                self._generation += 1
                new_pool = _Pool(signature, generation=self._generation, code_state=code_state)
                if pool is not None:
                    new_pool.busy = pool.busy  # they finish their invocation, then stop (signature mismatch)
                pool = self._pools[name] = new_pool
            while True:
                if self._closed:
                    return None, False
                while pool.idle:
                    worker = pool.idle.pop()
                    fresh = (
                        worker.expires_at is None or worker.expires_at - time.time() > timeout_s + CREDENTIAL_MARGIN_S
                    )
                    if worker.alive() and fresh:
                        pool.busy.add(worker)
                        break
                    if not fresh:
                        log.info(
                            "lambda %s: worker %d's role session is about to expire, retiring it", name, worker.pid
                        )
                    retired.append(worker)
                else:
                    worker = None
                if worker is not None:
                    cold = False
                    break
                if len(pool.busy) < self.max_workers:
                    worker = _Worker(start, self.log_dir / f"lambda-{name}.log", name)
                    worker.signature = signature
                    worker.generation = pool.generation
                    worker.expires_at = expires_at
                    pool.busy.add(worker)
                    cold = True
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None, False
                self._lock.wait(timeout=remaining)
        for old in retired:
            old.stop(grace=self._exit_grace(2.0))
        if cold:
            try:
                worker.launch()  # its slot is held: outside the lock, other invocations go on meanwhile
            except BaseException:
                with self._lock:
                    current = self._pools.get(name)
                    if current is not None:
                        current.busy.discard(worker)
                    self._lock.notify_all()
                worker.log_file.close()
                raise
        return worker, cold

    def _release(self, name: str, worker: _Worker, keep: bool) -> None:
        with self._lock:
            pool = self._pools.get(name)
            if pool is not None:
                pool.busy.discard(worker)
            reusable = (
                keep
                and worker.alive()
                and pool is not None
                and pool.generation == worker.generation
                and not self._closed
            )
            if reusable and pool is not None:
                pool.idle.append(worker)
            self._lock.notify_all()
        if not reusable:
            # One that answered exits at the end of its input (measured, after writing its data); one that did not
            # (timed out, crashed) is killed as promptly as Lambda ends its sandbox, measured or not.
            grace = self._exit_grace(0.5) if keep else 0.5
            threading.Thread(target=worker.stop, kwargs={"grace": grace}, daemon=True).start()

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            workers = [w for pool in self._pools.values() for w in (*pool.idle, *pool.busy)]
            self._pools.clear()
            self._lock.notify_all()
        # Every worker is told at once and they exit in parallel (one by one, each interpreter's exit added up to
        # seconds for a stack with a few dozen warm workers); then each is waited for within a shared grace.
        for worker in workers:
            worker.close_input()
        deadline = time.monotonic() + self._exit_grace(1.0)
        for worker in workers:
            worker.stop(grace=max(0.1, deadline - time.monotonic()))
        self._drop_templates()
