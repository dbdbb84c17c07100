"""A warm Lambda execution environment: one process per function instance, reused across invocations.

Started by ``omnireel_local.lambda_runner`` as
``python -m omnireel_local.lambda_worker --handler handler.handler --path CODE_DIR --path LAYER_DIR ...``, or forked
by a worker template (``omnireel_local.lambda_zygote``) that calls ``main`` with those arguments.

Protocol (one JSON object per line): the runner writes an invocation to stdin
``{"request_id", "payload", "deadline_ms", "function_arn"}`` and reads the answer from the *original* stdout
``{"ok": true, "result": "<json>"}`` or ``{"ok": false, "error": {"errorMessage", "errorType", "stackTrace"}}``.
The handler's own prints and logs go to the function's log file, as Lambda sends them to CloudWatch, each line
prefixed ``<UTC time>\t<request id>\tjob=<job id>\t`` (``init`` / ``-`` outside an invocation) so that
``omnireel logs`` can show and filter by job. The job id comes from the event (``job_id``, ``pathParameters``, an
SNS message's ``inferenceId``, an execution's input); when the event does not name it (POST /jobs, an S3 drop) the
invocation's lines are held until the handler returns and take the job id from its result (or its own log lines).
The first message is ``{"ready": true}`` or ``{"init_error": {...}}`` once the handler module is imported (the
init phase of a cold start).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import threading
import time
import traceback
from datetime import UTC, datetime
from typing import Any

from .runtime_python import STACK_SYS_PATH, restrict_path

_JOB_ID = re.compile(
    r'\\?"(?:job_id|inferenceId)\\?"\s*:\s*\\?"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})'
)
_SENTINEL = "\x00omnireel-log-drained\x00"
MAX_HELD_LINES = 2000  # an invocation whose job id is not known yet holds at most this many lines
# Packages in .venv that a deployed function does not have (neither the python3.13 runtime nor the domain layer ships
# them) are unimportable here, so a handler sees the same modules as on Lambda. awscrt is the relay's HTTP/2
# transport: present, botocore imports it at every cold start (~0.2 s of CPU per worker) and takes CRT code paths
# (signing, checksums) that the deployed functions never run.
NOT_ON_LAMBDA = ("awscrt",)


def job_ids(text: str) -> str | None:
    """The job id(s) a text names (``job_id`` / ``inferenceId`` keys, also inside JSON strings), comma-separated."""
    found = list(dict.fromkeys(_JOB_ID.findall(text)))
    return ",".join(found[:3]) + (",..." if len(found) > 3 else "") if found else None


class LogTap:
    """Everything written to fd 1/2 passes through a pipe and reaches the log file prefixed with time, request id
    and job id (see the module docstring)."""

    def __init__(self, log_fd: int):
        self.out = os.fdopen(log_fd, "w", buffering=1, errors="replace")
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self._lock = threading.Lock()
        self._drained = threading.Event()
        self.request, self.job = "init", "-"
        self._held: list[tuple[str, str]] | None = None  # lines waiting for their job id
        self._reader = threading.Thread(target=self._read, args=(read_fd,), name="log-tap", daemon=True)
        self._reader.start()

    def _read(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "r", errors="replace") as pipe:
            for line in pipe:
                if line.rstrip("\n") == _SENTINEL:
                    self._drained.set()
                    continue
                stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
                with self._lock:
                    if self._held is not None and len(self._held) < MAX_HELD_LINES:
                        self._held.append((stamp, line))
                    else:
                        self._write(stamp, line)

    def _write(self, stamp: str, line: str) -> None:
        text = line if line.endswith("\n") else line + "\n"
        self.out.write(f"{stamp}\t{self.request}\tjob={self.job}\t{text}")

    def begin(self, request_id: str, job: str | None) -> None:
        self.drain()
        with self._lock:
            self.request, self.job = request_id, job or "-"
            self._held = None if job else []

    def end(self, result_text: str) -> None:
        """After the invocation (END/REPORT written): release held lines with the job id now known."""
        self.drain()
        with self._lock:
            if self._held is not None:
                self.job = job_ids(result_text) or job_ids("".join(line for _, line in self._held)) or "-"
                for stamp, line in self._held:
                    self._write(stamp, line)
                self._held = None
            self.request, self.job = "-", "-"
            self.out.flush()

    def drain(self, timeout: float = 2.0) -> None:
        """Wait (bounded) until everything written so far has passed through the pipe."""
        self._drained.clear()
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(2, (_SENTINEL + "\n").encode())
        self._drained.wait(timeout)


class LambdaContext:
    """The attributes of the Python runtime's context object that handlers (and Powertools) use."""

    def __init__(self, request_id: str, deadline_ms: int, function_arn: str):
        self.aws_request_id = request_id
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.invoked_function_arn = function_arn
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def _error(exc: BaseException, error_type: str | None = None) -> dict[str, Any]:
    return {
        "errorMessage": str(exc),
        "errorType": error_type or type(exc).__name__,
        "requestId": "",
        "stackTrace": traceback.format_exception(exc)[1:],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--handler", required=True)
    parser.add_argument("--path", action="append", default=[])
    args = parser.parse_args(argv)

    # Keep the real stdout for the protocol; everything the handler prints goes to the log, through the tap.
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    tap = LogTap(os.dup(2))
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    stack_path = os.environ.pop(STACK_SYS_PATH, None)  # set when another interpreter than the stack's runs this one
    if stack_path is not None:
        sys.path[:] = restrict_path(sys.path, json.loads(stack_path))
    for path in reversed(args.path):
        sys.path.insert(0, path)
    for name in NOT_ON_LAMBDA:
        sys.modules[name] = None  # type: ignore[assignment]  # `import awscrt` raises ImportError, as on Lambda
    from . import local_dns

    local_dns.install()  # the local stack's resolver hook for `.test` names (local_dns.py); nothing else changes

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    module_name, _, function_name = args.handler.rpartition(".")
    started = time.monotonic()
    try:
        handler = getattr(importlib.import_module(module_name), function_name)
    except ImportError as exc:
        traceback.print_exc()
        tap.drain()
        send({"init_error": _error(exc, "Runtime.ImportModuleError")})
        return 1
    except Exception as exc:  # noqa: BLE001 - any init failure is reported like Lambda does
        traceback.print_exc()
        tap.drain()
        send({"init_error": _error(exc)})
        return 1
    init_ms = (time.monotonic() - started) * 1000
    send({"ready": True, "init_ms": init_ms})

    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        request_id = request["request_id"]
        tap.begin(request_id, job_ids(request.get("payload") or ""))
        print(f"START RequestId: {request_id} Version: $LATEST", file=sys.stderr, flush=True)
        begun = time.monotonic()
        context = LambdaContext(request_id, request["deadline_ms"], request.get("function_arn", ""))
        try:
            event = json.loads(request["payload"]) if request.get("payload") else {}
            result = handler(event, context)
            try:
                answer = {"ok": True, "result": json.dumps(result)}
            except (TypeError, ValueError) as exc:
                answer = {"ok": False, "error": _error(exc, "Runtime.MarshalError")}
        except Exception as exc:  # noqa: BLE001 - an unhandled exception is the function's error result
            error = _error(exc)
            error["requestId"] = request_id
            print(f"[ERROR] {error['errorType']}: {error['errorMessage']}", file=sys.stderr, flush=True)
            answer = {"ok": False, "error": error}
        duration = (time.monotonic() - begun) * 1000
        print(f"END RequestId: {request_id}", file=sys.stderr, flush=True)
        report = f"REPORT RequestId: {request_id}\tDuration: {duration:.2f} ms"
        if init_ms is not None:
            report += f"\tInit Duration: {init_ms:.2f} ms"
            init_ms = None
        print(report, file=sys.stderr, flush=True)
        tap.end(answer.get("result") or json.dumps(answer.get("error")))
        send(answer)
    tap.drain()
    return 0


if __name__ == "__main__":
    sys.exit(main())
