"""template.yaml's parameters and how it is loaded and deployed: a parameter reaches the functions that read it, the
samconfig.toml profiles name known parameters, ``make test`` never destroys or smoke-tests a stack, and the loader
refuses a key given twice."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest

from omnireel_template import ROOT, load_template
from tests.unit.template.helpers import props


def test_default_video_steps_reaches_the_entry_points(cfn: dict[str, Any]) -> None:
    assert cfn["Parameters"]["DefaultVideoSteps"]["Default"] == 30
    for name in ("ApiFunction", "InboxFunction"):
        env = props(cfn, name)["Environment"]["Variables"]
        assert env["DEFAULT_VIDEO_STEPS"] == {"Ref": "DefaultVideoSteps"}, name


# ---------------------------------------------------------------- 4. profiles
def test_samconfig_profiles() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())

    def overrides(env: str) -> dict[str, str]:
        return dict(item.split("=", 1) for item in config[env]["deploy"]["parameters"]["parameter_overrides"])

    for env in ("dev", "prod"):
        deploy = config[env]["deploy"]["parameters"]
        assert deploy["capabilities"] == "CAPABILITY_IAM"
        assert deploy["resolve_s3"] is True
        assert deploy["stack_name"] == deploy["stack_name"].lower()
        names = set(load_template()["Parameters"])
        assert set(overrides(env)) <= names, f"{env}: unknown parameter"
    dev, prod = overrides("dev"), overrides("prod")
    assert (dev["DefaultVideoSteps"], dev["VideoMinCapacity"], dev["EnableAlarms"]) == ("4", "0", "false")
    assert (prod["DefaultVideoSteps"], prod["EnableAlarms"]) == ("30", "true")
    assert int(dev["LogRetentionDays"]) < int(prod["LogRetentionDays"])


def test_destroy_is_not_part_of_make_test() -> None:
    makefile = (ROOT / "Makefile").read_text()
    graph = {m[1]: m[2].split() for m in re.finditer(r"^([a-z-]+):([^=\n#]*)", makefile, re.M)}
    # ... and the targets a recipe runs through a sub-make (`make test` runs the lint gate as `$(MAKE) ... lint &`)
    for rule in re.finditer(r"^([a-z-]+):(?!=)[^\n]*\n((?:\t.*\n?)*)", makefile, re.M):
        for call in re.finditer(r"\$\(MAKE\)([^;&|>]*)", rule[2]):
            graph[rule[1]] += [word for word in call[1].split() if not word.startswith("-")]
    seen, todo = set(), ["test"]
    while todo:
        target = todo.pop()
        if target in seen:
            continue
        seen.add(target)
        todo += [d for d in graph.get(target, []) if d in graph]
    assert "checkov" in seen
    assert "destroy" not in seen and "smoke" not in seen


def test_a_key_given_twice_in_one_mapping_is_refused(tmp_path) -> None:
    """A route pasted twice (SubmitBatchUpload, issue 33) passed every local check: PyYAML keeps the last key."""
    import yaml

    from omnireel_template import load_template

    path = tmp_path / "template.yaml"
    path.write_text("Resources:\n  A:\n    Type: X\n  A:\n    Type: Y\n")
    with pytest.raises(yaml.constructor.ConstructorError, match="found duplicate key 'A'"):
        load_template(path)
    path.write_text("Resources:\n  A: {Type: X}\n  B: {Type: !Ref A}\n")
    assert set(load_template(path)["Resources"]) == {"A", "B"}
