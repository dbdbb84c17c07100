"""Loading the bad-input corpus: each surface keeps its cases as data in ``tests/corpus/<surface>/cases.json``.

Conventions shared by every surface:
- ``id``: the pytest id (unique per surface); ``why``: what the case probes (free text, for people);
- ``known_bug``: the expectation is the *correct* behaviour and the code does not meet it yet; the case runs as a
  strict xfail (it fails the suite the day the bug is fixed, so the marker gets removed);
- strings may contain ``${TEXT*N}`` — TEXT repeated N times — so large inputs are generated, not committed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
_REPEAT = re.compile(r"\$\{(.+?)\*(\d+)\}", re.DOTALL)


def expand(text: str) -> str:
    """Expand ``${TEXT*N}`` into TEXT repeated N times."""
    return _REPEAT.sub(lambda m: m[1] * int(m[2]), text)


def load_cases(surface: str) -> list[dict[str, Any]]:
    cases = json.loads((CORPUS / surface / "cases.json").read_text(encoding="utf-8"))["cases"]
    ids = [case["id"] for case in cases]
    duplicates = {i for i in ids if ids.count(i) > 1}
    assert not duplicates, f"duplicate case ids in {surface}: {duplicates}"
    return cases


def params(surface: str) -> list[Any]:
    """One ``pytest.param`` per case, with a strict xfail for ``known_bug`` cases."""
    out = []
    for case in load_cases(surface):
        marks = [pytest.mark.xfail(reason=case["known_bug"], strict=True)] if case.get("known_bug") else []
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out
