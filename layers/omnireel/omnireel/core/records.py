"""Structs as plain values: what the records, events and views share (msgspec, no pydantic on the cold path).

The records and events are ``msgspec.Struct`` types. ``to_dict`` is what ``model_dump`` was (``omit_none``: what
``exclude_none`` was, through nested structs), ``to_json`` what ``model_dump_json`` was: compact, fields in order,
nulls kept.
"""

from __future__ import annotations

from typing import Any

import msgspec


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def to_dict(struct: msgspec.Struct, *, omit_none: bool = False) -> dict[str, Any]:
    """The struct as JSON-ready builtins (enums as their values); ``omit_none`` drops null fields at every depth."""
    data: dict[str, Any] = msgspec.to_builtins(struct)
    return _without_none(data) if omit_none else data


def to_json(struct: msgspec.Struct) -> str:
    return msgspec.json.encode(struct).decode()
