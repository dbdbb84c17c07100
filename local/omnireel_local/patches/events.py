"""EventBridge: a schedule rule fires on its schedule only."""

from __future__ import annotations

from typing import Any

from .cards import MOTO_BUG, Context, Patch


def install_schedule_rules(ctx: Context) -> None:
    from moto.events.models import Rule

    original_send_to_targets = Rule.send_to_targets

    def send_to_targets(self: Any, event: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "scheduled_expression", None) and not self.event_pattern.get_pattern():
            return None
        return original_send_to_targets(self, event, *args, **kwargs)

    Rule.send_to_targets = send_to_targets


CARDS = [
    Patch(
        "13",
        "A schedule rule fires on its schedule only",
        aws="A rule with a ScheduleExpression and no event pattern never matches PutEvents.",
        moto="A rule without an event pattern matches every event: each PutEvents reached the schedule rule's Lambda "
        "target and failed with a 500, so the publisher retried and the job event went out twice.",
        test="tests/e2e/test_executions.py::test_a_job_whose_execution_never_started_gets_exactly_one_job_failed",
        upstream=MOTO_BUG,
        installs=install_schedule_rules,
    ),
]
