"""DynamoDB attribute values to plain Python and back, for the low-level client (``{"S": "..."}``, ``{"N": "3"}``).

The stores use the low-level DynamoDB client with boto3's own TypeSerializer/TypeDeserializer instead of a boto3
``Table`` resource: the same values, and a cold start without the resource model and its generated classes (the
resource cost ~0.03x of the cold-start yardstick on top of the client it wraps; docs/benchmarks.md).
"""

from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def plain(value: Any) -> Any:
    """``value`` with each ``Decimal`` as an ``int`` (when whole) or ``float``, through dicts and lists."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def to_attributes(values: dict[str, Any]) -> dict[str, Any]:
    """Plain values (str, int, bool, None, dict, list; no float) as DynamoDB attribute values."""
    return {name: _serializer.serialize(value) for name, value in values.items()}


def from_attributes(item: dict[str, Any]) -> dict[str, Any]:
    """An item (or key) as plain values: numbers as int or float, as the stores' records expect them."""
    return {name: plain(_deserializer.deserialize(value)) for name, value in item.items()}
