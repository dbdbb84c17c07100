"""Safety net on a schedule: a job no execution will end is failed, with its one job.failed event (omnireel.deadline).

An EventBridge schedule rule invokes this every few minutes (asynchronously: retries, then the on-failure queue).
It reads only the jobs table's open-jobs index, so its cost follows the number of open jobs, not of all jobs.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import Workflow
from omnireel.deadline import fail_overdue_jobs
from omnireel.observability import MetricUnit, logger, metrics, tracer
from omnireel.settings import DeadlineSettings

settings = DeadlineSettings.from_env()
jobs = JobStore(settings.jobs_table, settings.job_ttl_days)
artifacts = ArtifactStore(settings.artifacts_bucket)
publisher = EventPublisher(settings.job_events_topic_arn, settings.event_bus_name)
workflow = Workflow(settings.state_machine_arn)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    failed = fail_overdue_jobs(
        deadline_seconds=settings.job_deadline_seconds,
        jobs=jobs,
        workflow=workflow,
        artifacts=artifacts,
        publisher=publisher,
        presign_seconds=settings.presign_seconds,
    )
    if failed:
        metrics.add_metric(name="jobs_failed_by_deadline", unit=MetricUnit.Count, value=len(failed))
    return {"failed": failed}
