"""Admission's healing schedule (every minute): capacity from DescribeEndpoint, slots of jobs that ended or whose
execution is gone released (a crash after a grant, a lost release), a grant whose answer was lost answered again (the
dispatcher died before SendTaskSuccess), queue entries of such jobs dropped, the pool's
counts re-derived from its items, then dispatch; publishes ``omnireel/Admission`` ``WaitingJobs`` and ``SlotsInUse``
per ``Endpoint`` (autoscaling reads WaitingJobs). omnireel.admission.gate.Gate.heal.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.admission.gate import Gate, PoolConfig
from omnireel.aws import adapters
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, metrics
from omnireel.runtime.settings import AdmissionHealSettings

settings = AdmissionHealSettings.from_env()
jobs = adapters.job_store(settings)
workflow = adapters.workflow(settings)
gate = Gate(
    store=adapters.admission_store(settings),
    jobs=jobs,
    callbacks=adapters.task_callbacks(),
    pools={
        "image": PoolConfig(settings.image_endpoint_name, settings.image_concurrency_per_instance),
        "video": PoolConfig(settings.video_endpoint_name, settings.video_max_concurrent_invocations_per_instance),
    },
    instances=adapters.endpoint_instances(),
    grace_s=settings.admission_heal_grace_seconds,
)
queue_metrics = adapters.admission_metrics()


@lambda_handler()
def handler(event: dict, context: LambdaContext) -> dict:
    report = gate.heal(workflow=workflow, metrics=queue_metrics)
    repaired = sum(kind["released"] + kind["resumed"] + kind["dropped"] for kind in report.values())
    if repaired:
        metrics.add_metric(name="admission_repairs", unit=MetricUnit.Count, value=repaired)
    return report
