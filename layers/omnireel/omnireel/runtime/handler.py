"""What every handler in ``functions/`` shares: one decorator stack (``lambda_handler``), and for the state machine's
steps their input and the error mapping (domain errors become the state machine's step errors).

``@lambda_handler()`` is Powertools' Logger context (cleared per invocation) and the Metrics flush, in that order
(outermost first); ``@lambda_handler(stage="x")`` adds ``step_errors("x")`` innermost, so
a step's failure is logged and counted before it leaves as a step error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, cast

import msgspec

from omnireel.core.errors import OmnireelError, StepError, as_step_error
from omnireel.runtime.observability import MetricUnit, logger, metrics

F = TypeVar("F", bound=Callable[..., Any])


def lambda_handler(*, stage: str | None = None, correlation_id_path: str | None = None) -> Callable[[F], F]:
    """The decorator stack of every Lambda handler (see the module docstring). ``stage``: a state machine step's
    name (its failures become step errors and ``<stage>_failed`` metrics); ``correlation_id_path``: where the
    Logger finds the correlation id in the event (the API's request id)."""

    def decorate(func: F) -> F:
        wrapped: Any = step_errors(stage)(func) if stage else func
        wrapped = metrics.log_metrics(wrapped)
        wrapped = logger.inject_lambda_context(wrapped, correlation_id_path=correlation_id_path, clear_state=True)
        return cast(F, wrapped)

    return decorate


class StepInput(msgspec.Struct, kw_only=True):
    """What the state machine passes to a step: the job id (plus a task token for callback steps). Other keys of
    the state's input are ignored."""

    job_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    task_token: str | None = None
    kind: str | None = None  # WaitForImageSlot / WaitForVideoSlot: the endpoint kind the job waits for
    outcome: str | None = None
    error: dict[str, Any] | None = None
    # The finishing steps' ``$$.Execution.Name``: they act only on the record of their own execution (a record made
    # again for the same job id, after TTL deleted this one, belongs to another execution).
    execution: Annotated[str, msgspec.Meta(min_length=1, max_length=80)] | None = None


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
