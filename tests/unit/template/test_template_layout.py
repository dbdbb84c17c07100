"""template.yaml stays navigable: its contents comment, its parameter groups and its stack-wide checkov waivers.

A new parameter must be put in a console group, a new resource section must be listed in the contents comment, and a
waiver that holds for every resource of a type is written once (template ``Metadata.StackWideCheckovWaivers``), not
copied onto each resource.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from omnireel_template import TEMPLATE, load_template, placeholder_code, sam_transform
from scripts.checkov_template import apply_stack_wide_waivers, stack_wide_waivers

TEXT = TEMPLATE.read_text()


@pytest.fixture(scope="module")
def sam() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def cfn(sam: dict[str, Any]) -> dict[str, Any]:
    return sam_transform(placeholder_code(sam, "placeholder")[0], "omnireel-test")


def test_every_parameter_is_in_exactly_one_console_group(sam: dict[str, Any]) -> None:
    groups = sam["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    grouped = [name for group in groups for name in group["Parameters"]]
    assert all(group["Label"]["default"] for group in groups)
    assert sorted(grouped) == sorted(set(grouped)), "a parameter is in two groups"
    assert set(grouped) == set(sam["Parameters"]), {
        "not in a group": sorted(set(sam["Parameters"]) - set(grouped)),
        "not a parameter": sorted(set(grouped) - set(sam["Parameters"])),
    }


def _contents() -> tuple[list[str], list[str]]:
    """(top-level sections, resource sections) as the comment at the top of the file lists them."""
    header = TEXT[: TEXT.index("AWSTemplateFormatVersion")]
    top, resources, in_resources = [], [], False
    for line in header.splitlines():
        if found := re.match(r"^#   (\S[^ ]*(?: [^ ]+)*?)(?:\s{2,}|$)", line):
            top.append(found[1])
            in_resources = found[1] == "Resources"
        elif in_resources and (found := re.match(r"^#     (\S.*?)(?:\s{2,}|$)", line)):
            resources.append(found[1])
    return top, resources


def test_the_contents_comment_lists_the_top_level_sections_in_order() -> None:
    top, _ = _contents()
    actual = [m[1] for m in re.finditer(r"^([A-Z][A-Za-z]+):", TEXT, re.M) if m[1] != "AWSTemplateFormatVersion"]
    listed = [name.strip(",") for entry in top for name in entry.split()]
    assert [name for name in listed if name in actual] == [name for name in actual if name in listed]
    assert set(actual) - {"Transform", "Description"} <= set(listed), set(actual) - set(listed)


def test_the_contents_comment_lists_every_resource_section_in_order() -> None:
    _, listed = _contents()
    body = TEXT[TEXT.index("\nResources:") : TEXT.index("\nOutputs:")]
    markers = re.findall(r"^  # -{10,} (.+)$", body, re.M)
    mapped: list[str] = []
    for marker in markers:
        owner = [name for name in listed if marker.startswith(name)]
        assert owner, f"resource section {marker!r} is not in the contents comment at the top of template.yaml"
        if not mapped or mapped[-1] != owner[0]:
            mapped.append(owner[0])
    assert mapped == listed


def test_stack_wide_waivers_have_a_reason_and_something_to_waive(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    waivers = stack_wide_waivers(sam)
    assert waivers
    types = {resource["Type"] for resource in cfn["Resources"].values()}
    for waiver in waivers:
        assert re.fullmatch(r"CKV2?_AWS_\d+", waiver["id"])
        assert len(waiver["comment"]) > 20, f"{waiver['id']}: give a reason"
        assert set(waiver["types"]) <= types, f"{waiver['id']}: waives a resource type the stack does not create"


def test_no_resource_repeats_a_stack_wide_waiver(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    repeated = []
    for waiver in stack_wide_waivers(sam):
        for name, resource in cfn["Resources"].items():
            own = {s["id"] for s in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])}
            if resource["Type"] in waiver["types"] and waiver["id"] in own:
                repeated.append(f"{name}: {waiver['id']}")
    assert repeated == [], "remove these from the resources' Metadata (the stack-wide waiver covers them)"


def test_stack_wide_waivers_reach_every_resource_of_their_types(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    import copy

    waivers = stack_wide_waivers(sam)
    patched = copy.deepcopy(cfn)
    assert apply_stack_wide_waivers(patched, waivers) > 0
    for waiver in waivers:
        for name, resource in patched["Resources"].items():
            if resource["Type"] in waiver["types"]:
                skips = resource["Metadata"]["checkov"]["skip"]
                assert {"id": waiver["id"], "comment": waiver["comment"]} in skips, name
