"""The local stack's SAM transform is kept by digest (``provision.cached_sam_transform``): a kept result is used only
for the same SAM template, stack name, region and translator, and a cache that cannot be written changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from omnireel_local import provision


@pytest.fixture(scope="module")
def sam() -> dict[str, Any]:
    return provision.placeholder_code(provision.load_template(), provision.CODE_BUCKET)[0]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    real = provision.sam_transform

    def counted(template: dict[str, Any], stack_name: str, region: str) -> dict[str, Any]:
        calls.append((stack_name, region))
        return real(template, stack_name, region)

    monkeypatch.setattr(provision, "sam_transform", counted)
    return calls


def test_the_same_inputs_are_translated_once_and_give_the_same_template(
    sam: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    first = provision.cached_sam_transform(sam, "omnireel-local", "us-east-1", tmp_path)
    again = provision.cached_sam_transform(sam, "omnireel-local", "us-east-1", tmp_path)
    assert calls == [("omnireel-local", "us-east-1")]
    assert again == first == provision.sam_transform(sam, "omnireel-local", "us-east-1")
    assert "AWS::Serverless::Function" not in {r["Type"] for r in again["Resources"].values()}  # translated
    assert [p.suffix for p in tmp_path.iterdir()] == [".json"]  # no partial file left


def test_another_template_stack_name_or_region_is_translated_again(
    sam: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    provision.cached_sam_transform(sam, "omnireel-local", "us-east-1", tmp_path)
    changed = {**sam, "Description": f"{sam.get('Description', '')} (changed)"}
    assert provision.cached_sam_transform(changed, "omnireel-local", "us-east-1", tmp_path)["Description"].endswith(
        "(changed)"
    )
    provision.cached_sam_transform(sam, "other-stack", "us-east-1", tmp_path)
    provision.cached_sam_transform(sam, "omnireel-local", "eu-west-1", tmp_path)
    assert len(calls) == 4 and len(list(tmp_path.iterdir())) == 4


def test_a_cache_that_cannot_be_written_is_skipped(
    sam: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = provision.sam_transform(sam, "omnireel-local", "us-east-1")
    calls = _counting(monkeypatch)
    blocked = tmp_path / "a-file-not-a-folder"
    blocked.write_text("")
    assert provision.cached_sam_transform(sam, "omnireel-local", "us-east-1", blocked) == expected
    assert provision.cached_sam_transform(sam, "omnireel-local", "us-east-1", blocked) == expected
    assert len(calls) == 2  # translated each time, nothing kept, no error
