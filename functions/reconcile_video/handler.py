"""ReconcileVideo step: after the callback timed out, look in S3 for the async output or failure."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws import adapters
from omnireel.jobs.steps import reconcile_video
from omnireel.runtime.handler import lambda_handler, parse_step_input
from omnireel.runtime.observability import logger, stage_duration
from omnireel.runtime.settings import ResultSettings

settings = ResultSettings.from_env()
jobs = adapters.job_store(settings)
artifacts = adapters.artifact_store(settings)


@lambda_handler(stage="reconcile_video")
def handler(event: dict, context: LambdaContext) -> dict:
    step = parse_step_input(event)
    logger.append_keys(job_id=step.job_id)
    with stage_duration("reconcile_video"):
        uri = reconcile_video(step.job_id, jobs=jobs, artifacts=artifacts)
    return {"job_id": step.job_id, "video": uri}
