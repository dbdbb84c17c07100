"""The admission queue's CloudWatch metric, in one place: the healing schedule publishes it every minute and the
template's scaling alarms read it (tests/unit/template/test_admission_scaling.py checks they agree).

``WaitingJobs``: jobs waiting for a slot of one endpoint, per endpoint (dimension ``Endpoint`` = the endpoint's name).
SageMaker's own ``ApproximateBacklogSizePerInstance`` cannot see them (they wait here, not in its queue), so the
endpoints scale out, and the video endpoint scales from zero, on this metric too (docs/capacity.md, "Scaling").
"""

from __future__ import annotations

NAMESPACE = "omnireel/Admission"
WAITING_JOBS = "WaitingJobs"
SLOTS_IN_USE = "SlotsInUse"
# The age of the oldest job waiting for a slot of one endpoint (0 when none waits): the queue-age alarms read it.
OLDEST_WAIT_SECONDS = "OldestWaitSeconds"
DIMENSION = "Endpoint"
