"""DynamoDB values back to plain Python: boto3's resource layer returns every number as ``Decimal``."""

from decimal import Decimal
from typing import Any


def plain(value: Any) -> Any:
    """``value`` with each ``Decimal`` as an ``int`` (when whole) or ``float``, through dicts and lists."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
