"""PublishSucceeded / RecordFailure steps: terminal transition + exactly one job event (SNS + EventBridge)."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.errors import StepError
from omnireel.job import JobStatus
from omnireel.observability import MetricUnit, logger, metrics, tracer
from omnireel.outcome import finish_job
from omnireel.settings import PublishSettings
from omnireel.step_handler import parse_step_input, step_errors

settings = PublishSettings.from_env()
jobs = JobStore(settings.jobs_table, settings.job_ttl_days)
artifacts = ArtifactStore(settings.artifacts_bucket)
publisher = EventPublisher(settings.job_events_topic_arn, settings.event_bus_name, eager=True)  # every call publishes
OUTCOMES = {"succeeded": JobStatus.SUCCEEDED, "failed": JobStatus.FAILED}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@step_errors("publish_event")
def handler(event: dict, context: LambdaContext) -> dict:
    step = parse_step_input(event)
    if step.outcome not in OUTCOMES:
        raise StepError("InvalidStepInput", f"outcome must be one of {sorted(OUTCOMES)}, got {step.outcome!r}")
    logger.append_keys(job_id=step.job_id)
    published = finish_job(
        step.job_id,
        OUTCOMES[step.outcome],
        step_error=step.error,
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
