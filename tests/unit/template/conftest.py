"""template.yaml as deployed, for the template's tests: ``sam``, the raw SAM template, and ``cfn``, its SAM-transformed
CloudFormation (what CloudFormation creates). Module scope: each test file transforms it once (a file may define its
own)."""

from __future__ import annotations

from typing import Any

import pytest

from omnireel_template import load_template, placeholder_code, sam_transform


@pytest.fixture(scope="module")
def sam() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def cfn(sam: dict[str, Any]) -> dict[str, Any]:
    return sam_transform(placeholder_code(sam, "placeholder")[0], "omnireel-test")
