"""Reading a template in the template's tests: its resources of one type, one resource's properties."""

from __future__ import annotations

from typing import Any


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def props(template: dict[str, Any], logical: str) -> dict[str, Any]:
    return template["Resources"][logical]["Properties"]
