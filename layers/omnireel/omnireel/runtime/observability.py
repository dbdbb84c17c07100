"""The one observability module: Powertools Logger and Metrics shared by every function.

Service name and metrics namespace come from the standard Powertools variables
(POWERTOOLS_SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE) set in template.yaml. Tracing is Lambda's and Step Functions'
active tracing (template ``Tracing: Active``), with no tracing SDK in the functions (docs/decisions.md, 2026-12-03,
"Tracing after the X-Ray SDK").
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "omnireel"))
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "omnireel"))

__all__ = ["MetricUnit", "logger", "metrics", "stage_duration"]


@contextmanager
def stage_duration(stage: str) -> Iterator[None]:
    """Emit ``<stage>_duration`` (milliseconds) for the block, whether it succeeds or fails."""
    started = time.perf_counter()
    try:
        yield
    finally:
        elapsed_ms = (time.perf_counter() - started) * 1000
        metrics.add_metric(name=f"{stage}_duration", unit=MetricUnit.Milliseconds, value=elapsed_ms)
