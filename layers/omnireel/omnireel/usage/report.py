"""GET /usage: a caller's own usage per day, and what ``omnireel usage --all`` prints for every caller.

Days are UTC dates on which jobs ended (their terminal transition added them to the day: ``omnireel.aws.usage_store``).
The range is bounded (``MAX_RANGE_DAYS``), so one request reads at most that many items of one caller.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from omnireel.aws.usage_store import DAY_PREFIX, UsageStore
from omnireel.core.errors import InvalidRequest
from omnireel.usage.prices import PRICES_SOURCE

MAX_RANGE_DAYS = 366
DEFAULT_RANGE_DAYS = 30
STATUSES = ("succeeded", "failed", "cancelled", "expired")
LEAVES_OUT = (
    "instances idle or waiting between jobs (an endpoint is billed while it is in service, busy or not)",
    "the image and video requests' time outside the model call (Lambda, Step Functions, S3, SNS/SQS/EventBridge, "
    "DynamoDB)",
    "storage (artifacts, async outputs, logs) and data transfer",
    "Savings Plans, other regions' prices, taxes",
)


def parse_usage_query(query: dict[str, str] | None, today: date | None = None) -> tuple[date, date]:
    """``from`` and ``to`` (YYYY-MM-DD, UTC, both included; default: the last ``DEFAULT_RANGE_DAYS`` days to today)."""
    query = query or {}
    unknown = sorted(set(query) - {"from", "to"})
    if unknown:
        raise InvalidRequest(f"unknown query parameter(s): {', '.join(unknown)[:200]} (use from= and to=)")
    today = today or datetime.now(UTC).date()
    last = _day(query, "to") or today
    first = _day(query, "from") or last - timedelta(days=DEFAULT_RANGE_DAYS - 1)
    if first > last:
        raise InvalidRequest(f"from ({first}) is after to ({last})", code="InvalidRange")
    if (last - first).days + 1 > MAX_RANGE_DAYS:
        raise InvalidRequest(f"at most {MAX_RANGE_DAYS} days per request (from {first} to {last} is "
                             f"{(last - first).days + 1})", code="InvalidRange")  # fmt: skip
    return first, last


def _day(query: dict[str, str], name: str) -> date | None:
    text = query.get(name)
    if text is None:
        return None
    try:
        if len(text) != 10:
            raise ValueError
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(f"{name}: a UTC date as YYYY-MM-DD (got {text[:40]!r})", code="InvalidDate") from None


def day_row(item: dict[str, Any]) -> dict[str, Any]:
    """One day item as the API shows it: seconds and dollars."""
    return {
        "date": str(item["item"]).removeprefix(DAY_PREFIX),
        "jobs": int(item.get("jobs", 0)),
        **{status: int(item.get(status, 0)) for status in STATUSES},
        "queue_seconds": round(int(item.get("queue_ms", 0)) / 1000, 3),
        "image_seconds": round(int(item.get("image_ms", 0)) / 1000, 3),
        "video_seconds": round(int(item.get("video_ms", 0)) / 1000, 3),
        "estimated_cost_usd": round(int(item.get("cost_micro_usd", 0)) / 1e6, 6),
        "unpriced_jobs": int(item.get("unpriced_jobs", 0)),
    }


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    summed: dict[str, Any] = {}
    for key in ("jobs", *STATUSES, "queue_seconds", "image_seconds", "video_seconds", "estimated_cost_usd",
                "unpriced_jobs"):  # fmt: skip
        value = sum(row[key] for row in rows)
        summed[key] = round(value, 6) if isinstance(value, float) else value
    return summed


def usage_report(caller: str, first: date, last: date, *, store: UsageStore, limit: int) -> dict[str, Any]:
    """GET /usage's answer: the caller's days in the range (days without finished jobs are left out), their totals,
    the jobs pending now against the limit, and what the estimate leaves out."""
    rows = [day_row(item) for item in store.days(caller, first.isoformat(), last.isoformat())]
    return {
        "from": first.isoformat(),
        "to": last.isoformat(),
        "days": rows,
        "totals": totals(rows),
        "pending_jobs": store.pending(caller),
        "max_pending_jobs": limit,
        "estimate": {"prices": PRICES_SOURCE, "leaves_out": list(LEAVES_OUT)},
    }
