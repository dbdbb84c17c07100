"""Issue 34 item 9: `omnireel local up` gives each template model's emulator the per-instance concurrency the template
says its endpoint has (the container's own limit, emulator/capacity.py), derived from template.yaml."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from omnireel_local.emulator.config import EmulatorConfig, kinds_for_model
from omnireel_local.stack import EMULATOR_CONCURRENCY, emulator_concurrency
from omnireel_template import load_template


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _endpoint_configs(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Model logical id -> the properties of the endpoint config that serves it."""
    out = {}
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::SageMaker::EndpointConfig":
            (variant,) = resource["Properties"]["ProductionVariants"]
            out[variant["ModelName"]["Fn::GetAtt"][0]] = resource["Properties"]
    return out


def test_every_generating_model_gets_its_concurrency_from_a_template_parameter(template: dict[str, Any]) -> None:
    parameters = template["Parameters"]
    for model, config in _endpoint_configs(template).items():
        model_id = template["Resources"][model]["Properties"]["PrimaryContainer"]["Environment"]["SM_VLLM_MODEL"]
        kinds = kinds_for_model(parameters[model_id["Ref"]]["Default"])
        if not kinds & {"images", "videos"}:
            assert model not in EMULATOR_CONCURRENCY, model  # speech is not gated
            continue
        parameter = EMULATOR_CONCURRENCY[model]
        assert parameters[parameter]["Type"] == "Number" and parameters[parameter]["Default"] >= 1, parameter
        client = config.get("AsyncInferenceConfig", {}).get("ClientConfig")
        if client is not None:  # async: the container takes what SageMaker sends it per instance
            assert client["MaxConcurrentInvocationsPerInstance"] == {"Ref": parameter}, model
    assert set(EMULATOR_CONCURRENCY) <= set(_endpoint_configs(template))


def test_the_stack_passes_the_values_as_the_emulators_environment() -> None:
    provisioned = SimpleNamespace(
        physical={
            "ImageModel": {"Attrs": {"ModelName": "ImageModel-abc"}},
            "VideoModel": {"Attrs": {"ModelName": "VideoModel-def"}},
        },
        parameters={"ImageConcurrencyPerInstance": 2, "VideoMaxConcurrentInvocationsPerInstance": "3"},
    )
    env = emulator_concurrency(provisioned)
    assert env == {
        "ImageModel-abc": {"OMNIREEL_EMULATOR_CONCURRENCY_PER_INSTANCE": "2"},
        "VideoModel-def": {"OMNIREEL_EMULATOR_CONCURRENCY_PER_INSTANCE": "3"},
    }
    assert EmulatorConfig.from_env(env["VideoModel-def"]).concurrency_per_instance == 3
