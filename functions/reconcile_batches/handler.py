"""Safety net for batches on a schedule (omnireel.batches.reconcile): lines whose terminal event was lost are counted
from their job records (freeing their in-flight slots), intakes that stopped are ended, completions that were
claimed but never published are published, and lines that never got a record (their work item dead-lettered or
lost) are failed with the reason. The ``batch_repairs`` metric counts what it repaired (alarmed on).

An EventBridge schedule rule invokes this every few minutes (asynchronously: retries, then the on-failure queue). It
reads only the batches table's open-items index, so its cost follows the number of open lines, not of all batches.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws import adapters
from omnireel.batches.fanout import LineFailure
from omnireel.batches.progress import Progress
from omnireel.batches.reconcile import Reconciler
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, logger, metrics
from omnireel.runtime.settings import BatchReconcileSettings

settings = BatchReconcileSettings.from_env()
store = adapters.batch_store(settings, eager=True)
jobs = adapters.job_store(settings)
artifacts = adapters.artifact_store(settings)
publisher = adapters.event_publisher(settings)
reconciler = Reconciler(
    store=store,
    jobs=jobs,
    progress=Progress(store, artifacts, publisher, settings.presign_seconds),
    failure=LineFailure(store, jobs, artifacts, publisher, settings.presign_seconds),
    grace_s=settings.batch_reconcile_grace_seconds,
    dead_letter_queue=adapters.dead_letters(settings) if settings.batch_dead_letter_queue_url else None,
    inbox=adapters.inbox_store(),
    workflow=adapters.workflow(settings),
)


@lambda_handler()
def handler(event: dict, context: LambdaContext) -> dict:
    repairs = reconciler.run()
    # Always emitted (0 included), so the alarm sees a value every run.
    metrics.add_metric(name="batch_repairs", unit=MetricUnit.Count, value=repairs.total)
    if repairs.slots_freed:
        metrics.add_metric(name="batch_slots_freed", unit=MetricUnit.Count, value=repairs.slots_freed)
    if repairs.total:
        logger.warning("batch reconciler repaired", extra={"repairs": repairs.details[:50]})
    return repairs.counts()
