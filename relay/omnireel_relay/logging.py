"""Structured JSON logs; every line inside a session carries its ``session_id``."""

from __future__ import annotations

import json
import logging
import sys
import time
from contextvars import ContextVar

session_id_var: ContextVar[str | None] = ContextVar("omnireel_relay_session_id", default=None)

_STD_ATTRS = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        sid = getattr(record, "session_id", None) or session_id_var.get()
        if sid:
            out["session_id"] = sid
        for key, value in record.__dict__.items():
            if key not in _STD_ATTRS and key != "session_id" and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
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
