"""The one price table: SageMaker hosting, on-demand, per instance type and hour (pure: no AWS here).

Every estimate in omnireel reads it: a job's ``usage.estimated_cost_usd`` (``omnireel.usage.metering``), GET /usage
and ``omnireel usage`` (sums of those), and the capacity model (``bench/capacity.py``). Change a price here and all of
them follow.

Source: the Amazon SageMaker AI pricing page (https://aws.amazon.com/sagemaker/ai/pricing/), "Real-Time Inference" /
"Asynchronous Inference" (hosting: the same per-hour price), region us-east-1, on-demand, USD per instance hour.
As of ``PRICES_AS_OF``, approximate: **check the page** for your region and date (Savings Plans and other regions
differ). An instance type that is not listed is reported unpriced (its cost is null), never guessed.
"""

from __future__ import annotations

from typing import Final

PRICES_AS_OF: Final = "2025"  # when the figures below were read (bench/capacity.py printed them as "2025; check")
PRICES_SOURCE: Final = (
    "Amazon SageMaker AI pricing page, real-time / asynchronous inference hosting, us-east-1, on-demand, USD per "
    f"instance hour, as of {PRICES_AS_OF} (approximate: check the page)"
)
PRICES_REGION: Final = "us-east-1"

# USD per instance hour: the template's default instance types (image and TTS pools in priority order: ml.g6.xlarge,
# ml.g6e.xlarge, ml.g5.xlarge, ml.g4dn.xlarge; video: ml.g6e.xlarge). docs/operations.md "Cost" shows the same figures
# (tests/unit/usage/test_prices.py keeps them equal).
ON_DEMAND_USD_PER_HOUR: Final[dict[str, float]] = {
    "ml.g6.xlarge": 1.01,
    "ml.g6e.xlarge": 2.33,
    "ml.g5.xlarge": 1.41,
    "ml.g4dn.xlarge": 0.74,
}


def price_per_hour(instance_type: str) -> float | None:
    """The on-demand hourly price of ``instance_type``; None when the table does not list it."""
    return ON_DEMAND_USD_PER_HOUR.get(instance_type)
