"""The published event schemas, docs/events/*.v1.schema.json: job-event (``omnireel.events.job_events.JobEvent``),
job-image-ready (``ImageReadyEvent``), job-queued (``QueuedEvent``) and batch-event
(``omnireel.events.batch_events.BatchEvent``).

They are the contract consumers validate against. They were generated from the pydantic models the events used to be;
since the events became msgspec structs (docs/decisions.md) the files are kept as they were, byte for byte, and edited
by hand when an event changes. ``shape_mismatches`` is what keeps them honest (tests/unit/events/test_event_schema.py):
every struct reachable from an event has exactly the schema's properties, the same required ones, the same defaults
and the same closed/open objects; and the tests validate the events the functions build against these files.

    .venv/bin/python scripts/event_schemas.py   # prints any mismatch (exit 1), else nothing
"""

from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "omnireel"))

from omnireel.events.batch_events import BatchEvent  # noqa: E402
from omnireel.events.job_events import ImageReadyEvent, JobEvent, QueuedEvent  # noqa: E402

SCHEMA_PATH = ROOT / "docs" / "events" / "job-event.v1.schema.json"
IMAGE_READY_SCHEMA_PATH = ROOT / "docs" / "events" / "job-image-ready.v1.schema.json"
BATCH_SCHEMA_PATH = ROOT / "docs" / "events" / "batch-event.v1.schema.json"
QUEUED_SCHEMA_PATH = ROOT / "docs" / "events" / "job-queued.v1.schema.json"
EVENTS: dict[Path, type[msgspec.Struct]] = {
    SCHEMA_PATH: JobEvent,
    IMAGE_READY_SCHEMA_PATH: ImageReadyEvent,
    QUEUED_SCHEMA_PATH: QueuedEvent,
    BATCH_SCHEMA_PATH: BatchEvent,
}


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def image_ready_schema() -> dict[str, Any]:
    return json.loads(IMAGE_READY_SCHEMA_PATH.read_text())


def batch_schema() -> dict[str, Any]:
    return json.loads(BATCH_SCHEMA_PATH.read_text())


def _structs_in(annotation: Any) -> list[type[msgspec.Struct]]:
    """The struct types a field's annotation names (through ``X | None``, ``list[X]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return [annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        return _structs_in(typing.get_args(annotation)[0])
    found = []
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, dict):
        for arg in typing.get_args(annotation):
            found += _structs_in(arg)
    return found


def _object_schemas(node: dict[str, Any], document: dict[str, Any]) -> list[dict[str, Any]]:
    """The object schemas a property's schema names (through ``$ref`` and ``anyOf``)."""
    if "$ref" in node:
        return [document["$defs"][node["$ref"].rsplit("/", 1)[1]]]
    return [found for option in node.get("anyOf", []) for found in _object_schemas(option, document)]


def shape_mismatches(
    struct: type[msgspec.Struct], node: dict[str, Any], document: dict[str, Any], where: str
) -> list[str]:
    """Differences between a struct and its object schema, recursively."""
    problems = []
    fields = {field.encode_name: field for field in msgspec.structs.fields(struct)}
    properties = node.get("properties", {})
    if set(fields) != set(properties):
        problems.append(f"{where}: fields {sorted(fields)} != schema properties {sorted(properties)}")
    required = {name for name, field in fields.items() if field.required}
    if required != set(node.get("required", [])):
        problems.append(f"{where}: required {sorted(required)} != schema {sorted(node.get('required', []))}")
    if struct.__struct_config__.forbid_unknown_fields != (node.get("additionalProperties") is False):
        problems.append(f"{where}: unknown fields forbidden in one and not the other")
    for name, field in fields.items():
        if name not in properties:
            continue
        prop = properties[name]
        if "default" in prop and not field.required:
            default = field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default
            if msgspec.to_builtins(default) != prop["default"]:
                problems.append(f"{where}.{name}: default {default!r} != schema {prop['default']!r}")
        nested = _structs_in(field.type)
        targets = _object_schemas(prop, document)
        if len(nested) != len(targets):
            problems.append(f"{where}.{name}: nested objects {nested} != schema {len(targets)}")
            continue
        for inner, target in zip(nested, targets, strict=True):
            problems += shape_mismatches(inner, target, document, f"{where}.{name}")
    return problems


def all_mismatches() -> list[str]:
    problems = []
    for path, struct in EVENTS.items():
        document = json.loads(path.read_text())
        problems += shape_mismatches(struct, document, document, path.name)
    return problems


if __name__ == "__main__":
    mismatches = all_mismatches()
    print("\n".join(mismatches))
    sys.exit(1 if mismatches else 0)
