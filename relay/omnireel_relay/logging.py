"""Structured JSON logs; every line inside a session carries its ``session_id``."""

from __future__ import annotations

import json
import logging
import sys
import time
from contextvars import ContextVar

session_id_var: ContextVar[str | None] = ContextVar("omnireel_relay_session_id", default=None)

_STD_ATTRS = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
LOG_VALUE_MAX_CHARS = 2048  # per string in a log line: client- or upstream-supplied text never floods the logs


LOG_LIST_MAX_ITEMS = 100


def _cap(value: object) -> object:
    if isinstance(value, str):
        if len(value) > LOG_VALUE_MAX_CHARS:
            return value[:LOG_VALUE_MAX_CHARS] + f"... ({len(value)} characters)"
        return value
    if isinstance(value, (list, tuple)):
        items = [_cap(v) for v in value[:LOG_LIST_MAX_ITEMS]]
        return [*items, f"... ({len(value)} items)"] if len(value) > LOG_LIST_MAX_ITEMS else items
    if isinstance(value, (int, float, bool, type(None))):
        return value
    return _cap(str(value))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": _cap(record.getMessage()),
        }
        sid = getattr(record, "session_id", None) or session_id_var.get()
        if sid:
            out["session_id"] = sid
        for key, value in record.__dict__.items():
            if key not in _STD_ATTRS and key != "session_id" and not key.startswith("_"):
                try:
                    out[key] = _cap(value)
                except ReferenceError:  # a weak proxy (websockets' "websocket" extra) whose object is gone
                    out[key] = "<gone>"
        if record.exc_info:
            out["exc"] = _cap(self.formatException(record.exc_info))
        return json.dumps(out, default=str)


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # websockets logs every failed/plain-HTTP handshake (health checks) at INFO/ERROR: keep it quiet.
    logging.getLogger("websockets").setLevel(logging.CRITICAL)


def emit_raw(obj: dict[str, object]) -> None:
    """Print one JSON object as its own log line (used for CloudWatch EMF)."""
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def now_ms() -> int:
    return int(time.time() * 1000)
