"""``omnireel.aws.dynamodb_values`` against boto3's TypeSerializer / TypeDeserializer, which the stores used until the
functions stopped importing boto3 (``omnireel.aws.clients``): the same attribute values out, the same plain values
back (numbers as int when whole, else float, as the records read them)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from omnireel.aws.dynamodb_values import from_attributes, to_attributes

VALUES = [
    "", "text", "猫 é", 0, 1, -1, 2**53 + 1, 10**30, True, False, None, [], {}, Decimal("1.5"), Decimal("3.0"),
    [1, "a", None, True, {"k": [2, {"deep": "x"}]}], {"attempts": 3, "last_status": None, "refused": False},
    {"stage_times": {"accepted": "2026-12-01T00:00:00.000Z"}, "artifacts": {"image": "s3://b/k"}},
    b"\x00\x01",
]  # fmt: skip


def _plain(value):
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and type(value).__name__ == "Binary":
        return value.value
    return value


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_same_attribute_values_as_boto3(value):
    assert to_attributes({"v": value}) == {"v": TypeSerializer().serialize(value)}


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_same_values_back_as_boto3_then_plain(value):
    attributes = {"v": TypeSerializer().serialize(value)}
    assert from_attributes(attributes) == {"v": _plain(TypeDeserializer().deserialize(attributes["v"]))}


def test_sets_read_back_as_boto3_reads_them():
    for attribute in ({"SS": ["a", "b"]}, {"NS": ["1", "2.5"]}):
        assert from_attributes({"v": attribute})["v"] == {_plain(v) for v in TypeDeserializer().deserialize(attribute)}


def test_a_float_is_refused_as_boto3_refuses_it():
    with pytest.raises(TypeError):
        TypeSerializer().serialize(1.5)
    with pytest.raises(TypeError, match="float"):
        to_attributes({"v": 1.5})
