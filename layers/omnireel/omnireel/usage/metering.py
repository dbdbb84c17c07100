"""What a job used: model time per stage, the instance types that served it, and an estimated cost (pure: no AWS).

The stages record what they measure on the job record (``Metering``, written with a write they make anyway):

- ``image_seconds``: GenerateImage's InvokeEndpoint call, from the request to the answer (the real-time endpoint
  holds one instance slot for exactly that long);
- ``video_seconds``: the async render. SageMaker's notification carries ``receivedTime`` (the request was accepted)
  and ``eventTime`` (the result was written): their difference when both are there; otherwise from
  InvokeEndpointAsync's acceptance (``video_invoked_at``) to the notification's arrival, or to the job's end for a job
  whose result never came (failed, cancelled, timed out). Either way it includes the request's wait in SageMaker's own
  queue, which is bounded by admission (``omnireel.admission``) but not zero;
- the instance types: what the stack's endpoint configs name (template ``ImageInstanceTypes`` / ``VideoInstanceType``,
  passed to the step functions). InvokeEndpoint does not say which instance served a call; with image instance pools
  every pool's type is listed, the first (priority 1, the pool SageMaker fills first) is the one priced.

At the terminal transition ``job_usage`` turns them into the job's ``usage`` (stored as whole milliseconds and
micro-dollars: DynamoDB numbers are written as integers here), and the same figures are added to the caller's day
(``omnireel.aws.usage_store``). ``estimated_cost_usd`` = model seconds x the on-demand hourly price of the type that
served (``omnireel.usage.prices``): an estimate that leaves out idle instances, storage, Lambda, Step Functions,
SNS/SQS/EventBridge, DynamoDB, data transfer and taxes (docs/operations.md, "Usage").
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from omnireel.usage.prices import PRICES_AS_OF, price_per_hour


class Metering(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the stages measured, on the job record (``metering``): milliseconds, as DynamoDB stores them here."""

    image_ms: int | None = None
    image_instance_types: list[str] | None = None
    video_invoked_at: str | None = None  # ISO: InvokeEndpointAsync accepted the request
    video_ms: int | None = None
    video_instance_type: str | None = None


class UsageRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A finished job's usage as stored on its record (``usage``) and added to its caller's day: integers only."""

    queue_ms: int | None = None
    image_ms: int | None = None
    video_ms: int | None = None
    image_instance_types: list[str] | None = None
    video_instance_type: str | None = None
    cost_micro_usd: int | None = None  # None: an instance type that served it is not in the price table
    unpriced: list[str] | None = None
    prices_as_of: str = PRICES_AS_OF


def _ms(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return max(0, round((end - start).total_seconds() * 1000))


def video_ms_from_notification(received: str | None, event: str | None) -> int | None:
    """SageMaker's own measure of the async request (accepted -> result written), when the notification has both."""
    try:
        start = datetime.fromisoformat(received.replace("Z", "+00:00")) if received else None
        end = datetime.fromisoformat(event.replace("Z", "+00:00")) if event else None
    except ValueError:
        return None
    return _ms(start, end)


def job_usage(
    *,
    created_at: datetime,
    first_stage_at: datetime | None,
    ended_at: datetime,
    metering: Metering | None,
) -> UsageRecord:
    """The job's usage once it ends at ``ended_at``. ``first_stage_at``: when it entered its first model stage
    (``generating_image``); queue time runs from acceptance to it (or to the end, for a job that never started)."""
    metering = metering or Metering()
    video_ms = metering.video_ms
    if video_ms is None and metering.video_invoked_at:  # the result never came: billed until we stopped waiting
        video_ms = _ms(datetime.fromisoformat(metering.video_invoked_at.replace("Z", "+00:00")), ended_at)
    cost = 0.0
    unpriced: list[str] = []
    image_types = metering.image_instance_types or []
    if metering.image_ms and image_types:
        price = price_per_hour(image_types[0])
        if price is None:
            unpriced.append(image_types[0])
        else:
            cost += metering.image_ms / 3_600_000 * price
    if video_ms and metering.video_instance_type:
        price = price_per_hour(metering.video_instance_type)
        if price is None:
            unpriced.append(metering.video_instance_type)
        else:
            cost += video_ms / 3_600_000 * price
    return UsageRecord(
        queue_ms=_ms(created_at, first_stage_at or ended_at),
        image_ms=metering.image_ms,
        video_ms=video_ms,
        image_instance_types=image_types or None,
        video_instance_type=metering.video_instance_type if video_ms is not None else None,
        cost_micro_usd=None if unpriced else round(cost * 1_000_000),
        unpriced=unpriced or None,
    )


def usage_view(record: UsageRecord | None) -> dict[str, object] | None:
    """A job's ``usage`` as GET /jobs/{id} and the terminal event show it (seconds and dollars)."""
    if record is None:
        return None
    instance_types: dict[str, list[str]] = {}
    if record.image_instance_types:
        instance_types["image"] = list(record.image_instance_types)
    if record.video_instance_type:
        instance_types["video"] = [record.video_instance_type]
    return {
        "queue_seconds": _seconds(record.queue_ms),
        "image_seconds": _seconds(record.image_ms),
        "video_seconds": _seconds(record.video_ms),
        "instance_types": instance_types,
        "estimated_cost_usd": None if record.cost_micro_usd is None else round(record.cost_micro_usd / 1e6, 6),
        "unpriced_instance_types": record.unpriced or [],
        "prices_as_of": record.prices_as_of,
        "estimate": True,
    }


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else round(ms / 1000, 3)
