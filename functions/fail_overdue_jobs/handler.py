"""Safety net on a schedule: a job no execution will end is failed, with its one job.failed event
(omnireel.jobs.deadline).

An EventBridge schedule rule invokes this every few minutes (asynchronously: retries, then the on-failure queue).
It reads only the jobs table's open-jobs index, so its cost follows the number of open jobs, not of all jobs.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws import adapters
from omnireel.jobs.deadline import sweep_open_jobs
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, metrics
from omnireel.runtime.settings import DeadlineSettings

settings = DeadlineSettings.from_env()
jobs = adapters.job_store(settings)
artifacts = adapters.artifact_store(settings)
publisher = adapters.event_publisher(settings)
workflow = adapters.workflow(settings)
usage = adapters.usage_store(settings)  # the pending counters' heal (omnireel.usage.heal)


@lambda_handler()
def handler(event: dict, context: LambdaContext) -> dict:
    sweep = sweep_open_jobs(
        deadline_seconds=settings.job_deadline_seconds,
        jobs=jobs,
        workflow=workflow,
        artifacts=artifacts,
        publisher=publisher,
        presign_seconds=settings.presign_seconds,
        usage=usage,
    )
    if sweep.failed:
        metrics.add_metric(name="jobs_failed_by_deadline", unit=MetricUnit.Count, value=len(sweep.failed))
    if sweep.pending_counters_healed:
        metrics.add_metric(
            name="pending_counters_healed", unit=MetricUnit.Count, value=len(sweep.pending_counters_healed)
        )
    return {"failed": sweep.failed, "pending_counters_healed": len(sweep.pending_counters_healed)}
