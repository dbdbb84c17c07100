"""DynamoDB attribute values to plain Python and back, for the low-level client (``{"S": "..."}``, ``{"N": "3"}``).

The stores use the low-level DynamoDB client, not a boto3 ``Table`` resource, and the functions create their clients
with botocore, not boto3 (``omnireel.aws.clients``): boto3's ``TypeSerializer`` / ``TypeDeserializer`` cannot be
imported without importing boto3 itself, so these few lines do what they do for the values the stores write - str,
int, bool, None, dict, list (a float is refused, as boto3 refuses it) - and read numbers back as ``int`` (whole) or
``float``, as the records expect. ``tests/unit/aws/test_dynamodb_values.py`` compares them with boto3's.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any


def _attribute(value: Any) -> dict[str, Any]:
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | Decimal):
        return {"N": str(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bytes | bytearray):
        return {"B": bytes(value)}
    if isinstance(value, dict):
        return {"M": {str(k): _attribute(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {"L": [_attribute(v) for v in value]}
    raise TypeError(f"unsupported type {type(value).__name__} for a DynamoDB value (floats: use Decimal or int)")


def _number(text: str) -> int | float:
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else float(number)


def _value(attribute: dict[str, Any]) -> Any:
    ((kind, value),) = attribute.items()
    if kind == "S":
        return value
    if kind == "N":
        return _number(value)
    if kind == "BOOL":
        return value
    if kind == "NULL":
        return None
    if kind == "M":
        return {k: _value(v) for k, v in value.items()}
    if kind == "L":
        return [_value(v) for v in value]
    if kind == "B":
        return bytes(value)
    if kind == "SS" or kind == "BS":
        return set(value)
    if kind == "NS":
        return {_number(v) for v in value}
    raise TypeError(f"unknown DynamoDB type {kind}")


def to_attributes(values: dict[str, Any]) -> dict[str, Any]:
    """Plain values (str, int, bool, None, dict, list; no float) as DynamoDB attribute values."""
    return {name: _attribute(value) for name, value in values.items()}


def from_attributes(item: dict[str, Any]) -> dict[str, Any]:
    """An item (or key) as plain values: numbers as int or float, as the stores' records expect them."""
    return {name: _value(value) for name, value in item.items()}
