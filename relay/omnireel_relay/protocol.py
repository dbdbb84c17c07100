"""vLLM-Omni streaming-TTS event protocol (``/v1/audio/speech/stream``): validation of client events.

The relay is protocol-transparent: it forwards client JSON text frames unchanged and upstream frames (JSON text
events and binary PCM) unchanged and in order. It only *inspects* events to enforce limits and to measure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum

from pydantic import BaseModel, ConfigDict, ValidationError

PATH = "/v1/audio/speech/stream"
SAMPLE_RATE = 24000
BYTES_PER_SAMPLE = 2

CLIENT_EVENTS = frozenset({"session.config", "input.text", "input.done", "session.close"})
SERVER_EVENTS = frozenset({"audio.start", "audio.chunk", "audio.done", "session.done", "error"})

# Client-supplied values are never echoed or logged whole (a 3 MB "type" came back as a 3 MB error event and log line).
ECHO_MAX_CHARS = 64  # of a client value quoted in an error message
ERROR_MESSAGE_MAX_CHARS = 1024  # of any relay-originated error message (upstream exception texts included)

# Subprotocol a browser offers next to ``omnireel.bearer.<token>``; the relay selects it.
SUBPROTOCOL = "omnireel.v1"
BEARER_SUBPROTOCOL_PREFIX = "omnireel.bearer."


class Close(IntEnum):
    """WebSocket close codes used by the relay."""

    NORMAL = 1000
    GOING_AWAY = 1001  # drain deadline reached (SIGTERM)
    UNSUPPORTED_DATA = 1003
    POLICY = 1008  # session time limit, client too slow
    TOO_BIG = 1009  # message larger than the limit
    INTERNAL = 1011  # upstream failure (connect refused, dropped, model stream error)
    TRY_AGAIN_LATER = 1013  # relay at its concurrent-session limit


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class _InputText(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str


class ProtocolError(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ClientEvent:
    type: str
    text: str | None = None  # for input.text


def parse_client_event(raw: str) -> ClientEvent:
    """Validate one client text frame; raises :class:`ProtocolError` with a short code and message."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ProtocolError("invalid_json", f"message is not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ProtocolError("invalid_json", "message is not valid JSON: nested too deeply") from None
    if not isinstance(obj, dict):
        raise ProtocolError("invalid_event", "message must be a JSON object")
    try:
        event = _Event.model_validate(obj)
    except ValidationError:
        raise ProtocolError("invalid_event", "message must have a string 'type'") from None
    if event.type not in CLIENT_EVENTS:
        raise ProtocolError("unknown_event", f"unknown event type {clip(event.type)}")
    if event.type == "input.text":
        try:
            return ClientEvent(event.type, _InputText.model_validate(obj).text)
        except ValidationError:
            raise ProtocolError("invalid_event", "input.text needs a string 'text'") from None
    return ClientEvent(event.type)


def clip(value: str, limit: int = ECHO_MAX_CHARS) -> str:
    """``repr`` of a client value, cut to ``limit`` characters with its full length stated: safe to echo and log."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def error_event(message: str, code: str | None = None) -> str:
    """An ``error`` event as the server sends it (``code`` is an extra key clients may ignore)."""
    if len(message) > ERROR_MESSAGE_MAX_CHARS:
        message = message[: ERROR_MESSAGE_MAX_CHARS - 30] + f"... ({len(message)} characters)"
    body: dict[str, object] = {"type": "error", "message": message}
    if code:
        body["code"] = code
    return json.dumps(body)


def server_event_type(raw: str) -> tuple[str | None, dict[str, object] | None]:
    """Best-effort type of an upstream text frame (for metrics only; never alters the frame)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return None, None
    if isinstance(obj, dict) and isinstance(obj.get("type"), str):
        return obj["type"], obj
    return None, None
