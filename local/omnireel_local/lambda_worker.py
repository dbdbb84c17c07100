"""A warm Lambda execution environment: one process per function instance, reused across invocations.

Started by ``omnireel_local.lambda_runner`` as
``python -m omnireel_local.lambda_worker --handler handler.handler --path CODE_DIR --path LAYER_DIR ...``.

Protocol (one JSON object per line): the runner writes an invocation to stdin
``{"request_id", "payload", "deadline_ms", "function_arn"}`` and reads the answer from the *original* stdout
``{"ok": true, "result": "<json>"}`` or ``{"ok": false, "error": {"errorMessage", "errorType", "stackTrace"}}``.
The handler's own prints and logs go to stderr (the function's log file), as Lambda sends them to CloudWatch.
The first message is ``{"ready": true}`` or ``{"init_error": {...}}`` once the handler module is imported (the
init phase of a cold start).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from typing import Any


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--handler", required=True)
    parser.add_argument("--path", action="append", default=[])
    args = parser.parse_args()

    # Keep the real stdout for the protocol; everything the handler prints goes to stderr (the log).
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    for path in reversed(args.path):
        sys.path.insert(0, path)

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    module_name, _, function_name = args.handler.rpartition(".")
    started = time.monotonic()
    try:
        handler = getattr(importlib.import_module(module_name), function_name)
    except ImportError as exc:
        send({"init_error": _error(exc, "Runtime.ImportModuleError")})
        return 1
    except Exception as exc:  # noqa: BLE001 - any init failure is reported like Lambda does
        send({"init_error": _error(exc)})
        return 1
    init_ms = (time.monotonic() - started) * 1000
    send({"ready": True, "init_ms": init_ms})

    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        request_id = request["request_id"]
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
        send(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
