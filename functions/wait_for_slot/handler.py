"""WaitForImageSlot / WaitForVideoSlot steps (``.waitForTaskToken``): park the job in admission's queue with this
task's token (the job becomes ``queued`` and ``job.queued`` is published when it waits for its first slot), then
dispatch once. Whoever frees a slot grants it to the next caller in turn and answers the token (omnireel.admission).
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.admission.gate import Gate, PoolConfig
from omnireel.admission.pool import Kind
from omnireel.aws import adapters
from omnireel.core.errors import StepError
from omnireel.runtime.handler import lambda_handler, parse_step_input
from omnireel.runtime.observability import logger, stage_duration
from omnireel.runtime.settings import AdmissionSettings

settings = AdmissionSettings.from_env()
jobs = adapters.job_store(settings)
publisher = adapters.event_publisher(settings)  # job.queued, only when a job waits
gate = Gate(
    store=adapters.admission_store(settings),
    jobs=jobs,
    callbacks=adapters.task_callbacks(),
    pools={
        "image": PoolConfig(settings.image_endpoint_name, settings.image_concurrency_per_instance),
        "video": PoolConfig(settings.video_endpoint_name, settings.video_max_concurrent_invocations_per_instance),
    },
    instances=adapters.endpoint_instances(),
)


@lambda_handler(stage="wait_for_slot")
def handler(event: dict, context: LambdaContext) -> dict:
    step = parse_step_input(event)
    kind: Kind = "video" if step.kind == "video" else "image"
    if not step.task_token or step.kind != kind:
        raise StepError("InvalidStepInput", "wait_for_slot needs a task_token and a kind (image | video)")
    logger.append_keys(job_id=step.job_id)
    with stage_duration("wait_for_slot"):
        outcome = gate.wait(step.job_id, kind, step.task_token, publisher=publisher)
    return {"job_id": step.job_id, "kind": step.kind, "outcome": outcome}
