"""ReconcileVideo step: after the callback timed out, look in S3 for the async output or failure."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.job_store import JobStore
from omnireel.observability import logger, metrics, stage_duration, tracer
from omnireel.settings import ResultSettings
from omnireel.step_handler import parse_step_input, step_errors
from omnireel.steps import reconcile_video

settings = ResultSettings.from_env()
jobs = JobStore(settings.jobs_table, settings.job_ttl_days)
artifacts = ArtifactStore(settings.artifacts_bucket)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@step_errors("reconcile_video")
def handler(event: dict, context: LambdaContext) -> dict:
    step = parse_step_input(event)
    logger.append_keys(job_id=step.job_id)
    with stage_duration("reconcile_video"):
        uri = reconcile_video(step.job_id, jobs=jobs, artifacts=artifacts)
    return {"job_id": step.job_id, "video": uri}
