"""PublishSucceeded / RecordFailure / RecordExpired steps: terminal transition + exactly one job event (SNS +
EventBridge); the job then leaves admission (its waiting entry, any slot it still holds)."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.admission.expiry import expire_job
from omnireel.admission.gate import Gate
from omnireel.aws import adapters
from omnireel.core.errors import StepError
from omnireel.jobs.job import JobStatus
from omnireel.jobs.outcome import finish_and_leave
from omnireel.runtime.handler import lambda_handler, parse_step_input
from omnireel.runtime.observability import MetricUnit, logger, metrics
from omnireel.runtime.settings import PublishSettings

settings = PublishSettings.from_env()
jobs = adapters.job_store(settings)
artifacts = adapters.artifact_store(settings)
publisher = adapters.event_publisher(settings, eager=True)  # every call publishes
gate = Gate(store=adapters.admission_store(settings), jobs=jobs, callbacks=adapters.task_callbacks())
OUTCOMES = {"succeeded": JobStatus.SUCCEEDED, "failed": JobStatus.FAILED, "expired": JobStatus.EXPIRED}


@lambda_handler(stage="publish_event")
def handler(event: dict, context: LambdaContext) -> dict:
    step = parse_step_input(event)
    if step.outcome not in OUTCOMES:
        raise StepError("InvalidStepInput", f"outcome must be one of {sorted(OUTCOMES)}, got {step.outcome!r}")
    logger.append_keys(job_id=step.job_id)
    if step.outcome == "expired":
        published = expire_job(
            step.job_id,
            execution=step.execution,
            gate=gate,
            jobs=jobs,
            artifacts=artifacts,
            publisher=publisher,
            presign_seconds=settings.presign_seconds,
        )
    else:
        published = finish_and_leave(
            step.job_id,
            OUTCOMES[step.outcome],
            execution=step.execution,
            step_error=step.error,
            gate=gate,
            jobs=jobs,
            artifacts=artifacts,
            publisher=publisher,
            presign_seconds=settings.presign_seconds,
        )
    if published is not None:
        metrics.add_metric(name=f"jobs_{published.status}", unit=MetricUnit.Count, value=1)
        if published.timings.total_s is not None:
            metrics.add_metric(name="job_total_duration", unit=MetricUnit.Seconds, value=published.timings.total_s)
    return {"job_id": step.job_id, "published": published is not None}
