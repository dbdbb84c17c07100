"""Every function's environment in template.yaml supplies every required field of the settings model it reads.

A required field the template does not set fails the function's cold start on AWS and in the local stack alike; this
finds it at ``make test`` time. The model is the one ``functions/<name>/handler.py`` calls ``from_env()`` on.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

import omnireel.runtime.settings
from omnireel_template import (
    FUNCTIONS_DIR,
    function_environment,
    function_folder,
    function_folders,
    load_template,
    serverless_functions,
)

TEMPLATE = load_template()
LOGICAL_BY_FOLDER = {function_folder(fn): logical for logical, fn in serverless_functions(TEMPLATE).items()}


def settings_model(folder: str) -> type[Any]:
    source = (FUNCTIONS_DIR / folder / "handler.py").read_text()
    names = set(re.findall(r"\b(\w+Settings)\.from_env\(", source))
    assert len(names) == 1, f"functions/{folder}: expected one settings model read with from_env(), found {names}"
    return getattr(omnireel.runtime.settings, names.pop())


def test_every_function_folder_is_a_template_function() -> None:
    assert sorted(LOGICAL_BY_FOLDER) == function_folders()


@pytest.mark.parametrize("folder", function_folders())
def test_the_template_supplies_every_required_setting(folder: str) -> None:
    model = settings_model(folder)
    env = function_environment(TEMPLATE, LOGICAL_BY_FOLDER[folder])
    required = {field.name.upper() for field in msgspec.structs.fields(model) if field.required}
    assert required <= set(env), f"{LOGICAL_BY_FOLDER[folder]} lacks {sorted(required - set(env))}"
    model.from_env(env)  # and the parameter defaults are valid values


def test_the_check_finds_a_missing_variable() -> None:
    env = function_environment(TEMPLATE, LOGICAL_BY_FOLDER["fail_overdue_jobs"])
    del env["JOB_DEADLINE_SECONDS"]
    with pytest.raises(RuntimeError, match="JOB_DEADLINE_SECONDS"):
        settings_model("fail_overdue_jobs").from_env(env)
