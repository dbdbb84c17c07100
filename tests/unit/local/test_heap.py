"""omnireel_local.heap.settle: what the local stack's long-lived processes (and the test processes) do once started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import gc, json, sys
sys.path.insert(0, "local")
import botocore.session  # a heap of some size, as a process has after its start
from omnireel_local import heap
before = {"frozen": gc.get_freeze_count(), "thresholds": gc.get_threshold()}
cycle = []; cycle.append(cycle)  # garbage made before settle(): collected, not frozen
del cycle
heap.settle(**{"default": {}, "keep": {"young_threshold": None}, "no-collect": {"collect": False}}[sys.argv[1]])
after = {"frozen": gc.get_freeze_count(), "thresholds": gc.get_threshold()}
made = []; made.append(made)  # a cycle made afterwards is still collected
del made
print(json.dumps({"before": before, "after": after, "collected": gc.collect(), "garbage": len(gc.garbage)}))
"""


def _probe(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_settle_freezes_the_start_heap_and_raises_the_young_threshold() -> None:
    from omnireel_local.heap import YOUNG_THRESHOLD

    seen = _probe("default")
    assert seen["before"]["frozen"] == 0 and seen["after"]["frozen"] > 10_000  # botocore's modules, frozen
    assert seen["after"]["thresholds"] == [YOUNG_THRESHOLD, *seen["before"]["thresholds"][1:]]
    assert seen["collected"] >= 1 and seen["garbage"] == 0  # the later cycle: collected as before


def test_settle_without_a_threshold_keeps_cpythons() -> None:
    seen = _probe("keep")
    assert seen["after"]["frozen"] > 10_000 and seen["after"]["thresholds"] == seen["before"]["thresholds"]


def test_settle_without_collecting_still_freezes_and_raises_the_threshold() -> None:
    from omnireel_local.heap import YOUNG_THRESHOLD

    collected, uncollected = _probe("default"), _probe("no-collect")
    assert uncollected["after"]["thresholds"][0] == YOUNG_THRESHOLD
    # the cycle made before settle() was not collected: it is frozen with the rest
    assert uncollected["after"]["frozen"] > collected["after"]["frozen"]
