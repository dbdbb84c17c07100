"""``omnireel usage``: the caller's own usage per day (GET /usage), or with ``--all`` every caller's, for operators.

``--all`` reads the stack's usage table (output ``UsageTableName``) with the operator's own AWS credentials: no API
route shows one caller another's usage, so the API's callers need no new permission and the operator needs only
``dynamodb:Scan`` on that one table (docs/operations.md, "Usage"). Costs are estimates from the one price table
(``omnireel.usage.prices``): they leave out idle instances, storage, Lambda, Step Functions and data transfer.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from .api import calling
from .errors import InfraError, UsageError
from .target import Target

MAX_RANGE_DAYS = 366  # as GET /usage (omnireel.usage.report)
COLUMNS = ("date", "jobs", "succeeded", "failed", "cancelled", "expired", "image_seconds", "video_seconds",
           "estimated_cost_usd")  # fmt: skip


def own_usage(target: Target, first: str | None, last: str | None) -> dict[str, Any]:
    with calling(target, "the usage could not be read"):
        return dict(target.api_client.usage(first, last))


def _range(first: str | None, last: str | None) -> tuple[date, date]:
    try:
        end = date.fromisoformat(last) if last else datetime.now(UTC).date()
        start = date.fromisoformat(first) if first else end - timedelta(days=29)
    except ValueError as exc:
        raise UsageError(f"--from/--to: a UTC date as YYYY-MM-DD ({exc})") from None
    if start > end or (end - start).days + 1 > MAX_RANGE_DAYS:
        raise UsageError(f"--from {start} --to {end}: from must not be after to, at most {MAX_RANGE_DAYS} days")
    return start, end


def all_usage(target: Target, first: str | None, last: str | None) -> dict[str, Any]:
    """Every caller's days in the range, read from the usage table (operator credentials)."""
    from omnireel.aws.usage_store import day_key
    from omnireel.usage.report import day_row, totals

    start, end = _range(first, last)
    table = target.output("UsageTableName")
    ddb = target.client("dynamodb")
    kwargs: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "#item BETWEEN :first AND :last",
        "ExpressionAttributeNames": {"#item": "item"},
        "ExpressionAttributeValues": {
            ":first": {"S": day_key(start.isoformat())},
            ":last": {"S": day_key(end.isoformat())},
        },
    }
    callers: dict[str, list[dict[str, Any]]] = {}
    try:
        while True:
            page = ddb.scan(**kwargs)
            for item in page.get("Items", []):
                plain = {k: next(iter(v.values())) for k, v in item.items()}
                plain = {k: (int(v) if k not in ("caller", "item") and str(v).lstrip("-").isdigit() else v)
                         for k, v in plain.items()}  # fmt: skip
                callers.setdefault(str(plain["caller"]), []).append(day_row(plain))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    except Exception as exc:  # noqa: BLE001 - botocore's errors: say which table and why, exit 3
        raise InfraError(f"cannot read the usage table {table}: {exc}") from None
    return {
        "from": start.isoformat(),
        "to": end.isoformat(),
        "callers": [
            {"caller": caller, "days": sorted(rows, key=lambda r: r["date"]), "totals": totals(rows)}
            for caller, rows in sorted(callers.items())
        ],
    }


def describe(report: dict[str, Any]) -> list[str]:
    """A report as table lines (one per day; with --all one block per caller)."""
    lines: list[str] = []
    blocks = report.get("callers") or [{"caller": None, "days": report.get("days", []), "totals": report.get("totals")}]
    for block in blocks:
        if block["caller"] is not None:
            lines.append(f"caller {block['caller']}")
        lines.append("  ".join(f"{c:>12}" for c in COLUMNS))
        for row in [*block["days"], {**(block["totals"] or {}), "date": "total"}]:
            lines.append("  ".join(f"{row.get(c, 0)!s:>12}" for c in COLUMNS))
    if "pending_jobs" in report:
        lines.append(
            f"pending jobs now: {report['pending_jobs']} of {report['max_pending_jobs']} (CallerMaxPendingJobs)"
        )
    lines.append("costs are estimates: model seconds x on-demand price (no idle instances, storage, Lambda, ...)")
    return lines
