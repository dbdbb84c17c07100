"""EventBridge schedule rules for the local stack: a timer per rule invokes its Lambda targets at the rule's rate.

moto stores rules but never fires them, so without this the template's scheduled functions (FailOverdueJobs, the job
deadline's safety net) would never run locally and nothing local could show that they work. Each enabled
``rate(...)`` rule gets a thread that sends EventBridge's "Scheduled Event" to each target through the local Lambda
service's asynchronous path (``patches.lambda_.AsyncInvoker``: retries, then the function's on-failure destination), as
EventBridge invokes Lambda targets asynchronously.

Local time is compressed: EventBridge's shortest rate is one minute (AWS and moto reject anything shorter, so a
template parameter cannot make it shorter), and a one-minute wait would make every safety-net test slow. A rule's
minute lasts ``LOCAL_SECONDS_PER_MINUTE`` seconds here, as ``provision.LOCAL_PARAMETERS`` turn hour-long timeouts into
minutes. ``cron(...)`` rules are not run locally (logged at startup).

Two seconds, not one: the ticks are not free. The admission healer's run was then a dozen AWS calls per pool (each
signed, authorised and served by the local AWS), so an idle stack spent about a sixth of a core on its schedules at
one second a minute (measured 2026-12-05: 10 CPU-s a minute, server and Lambda workers), on a laptop as in every test
stack; two seconds halve that and add at most a second to a healing (its grace is 10 s locally) and five to a
safety-net sweep. Since, an idle pool's healing costs four calls and the local AWS keeps its connections open: an idle
stack uses ~2.2 CPU-s a minute (4 % of a core).

Because a local minute lasts seconds, a run that lasts longer than it would overlap the next ones, which on AWS come a
real minute apart: a tick whose previous invocation of the same target has not ended yet is skipped (logged at debug
level), so a slow run (the admission healer with hundreds of waiting jobs) never piles up runs AWS would not make.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("omnireel_local.schedules")

LOCAL_SECONDS_PER_MINUTE = 2.0
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_MINUTES = {"minute": 1, "hour": 60, "day": 1440}


def local_period_s(expression: str) -> float | None:
    """Seconds between local runs of a ``rate(...)`` expression (None for cron or anything unknown)."""
    match = _RATE.match(expression.strip())
    if not match:
        return None
    minutes = int(match.group(1)) * _UNIT_MINUTES[match.group(2).rstrip("s")]
    return minutes * LOCAL_SECONDS_PER_MINUTE


def scheduled_event(rule_arn: str, account_id: str, region: str) -> dict[str, Any]:
    """The event EventBridge sends to a schedule rule's targets."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account_id,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }


class Scheduler:
    """One daemon thread per runnable rule; ``shutdown()`` stops them all (bounded join)."""

    def __init__(
        self,
        schedules: list[dict[str, Any]],
        invoke: Callable[[str, str], Any],
        account_id: str,
        region: str,
    ):
        self._schedules = schedules
        # (function ARN, payload JSON) -> a future that completes when the asynchronous invocation ended (or None)
        self._invoke = invoke
        self._account_id = account_id
        self._region = region
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for schedule in self._schedules:
            period = local_period_s(schedule["expression"])
            if period is None:
                log.warning("schedule %s (%s) is not run locally", schedule["rule_arn"], schedule["expression"])
                continue
            log.info("schedule %s: %s -> every %.1f s locally", schedule["rule_arn"], schedule["expression"], period)
            thread = threading.Thread(
                target=self._run, args=(schedule, period), name=f"schedule-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _run(self, schedule: dict[str, Any], period: float) -> None:
        running: dict[str, Any] = {}  # target -> the future of its last invocation
        while not self._stop.wait(period):  # like EventBridge, the first run comes one period after creation
            payload = json.dumps(scheduled_event(schedule["rule_arn"], self._account_id, self._region))
            for target in schedule["targets"]:
                previous = running.get(target)
                if previous is not None and not previous.done():
                    log.debug("schedule %s: %s still running, tick skipped", schedule["rule_arn"], target)
                    continue
                try:
                    running[target] = self._invoke(target, payload)
                except Exception:
                    log.exception("schedule %s could not invoke %s", schedule["rule_arn"], target)

    def shutdown(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
