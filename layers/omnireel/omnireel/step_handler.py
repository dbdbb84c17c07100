"""The error mapping every step Lambda shares: domain errors become the state machine's step errors."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from omnireel.errors import OmnireelError, StepError, as_step_error
from omnireel.observability import MetricUnit, logger, metrics


class StepInput(msgspec.Struct, kw_only=True):
    """What the state machine passes to a step: the job id (plus a task token for callback steps). Other keys of
    the state's input are ignored."""

    job_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    task_token: str | None = None
    outcome: str | None = None
    error: dict[str, Any] | None = None


def parse_step_input(event: Any) -> StepInput:
    """The step's input; a malformed one raises ``msgspec.ValidationError`` (``step_errors``: InvalidStepInput)."""
    return msgspec.convert(event, StepInput)


def step_errors(stage: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Re-raise domain errors as ``StepError`` / ``RetryableStepError`` and count failures per stage."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except msgspec.ValidationError as exc:
                metrics.add_metric(name=f"{stage}_failed", unit=MetricUnit.Count, value=1)
                raise StepError("InvalidStepInput", str(exc)) from exc
            except OmnireelError as exc:
                metrics.add_metric(name=f"{stage}_failed", unit=MetricUnit.Count, value=1)
                logger.warning(
                    "step failed",
                    extra={"stage": stage, "code": exc.code, "retryable": exc.retryable, "error": exc.message},
                )
                raise as_step_error(exc) from exc

        return wrapper

    return decorate
