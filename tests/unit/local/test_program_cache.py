"""moto patch 22: a state machine's definition is parsed once, not once per execution; executions sharing the parsed
program keep their own state (their Retry counters live in their own environment)."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from omnireel_local.patches import speed
from omnireel_local.patches.speed import fix_heap_keys, patch_program_cache

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/sfn"
# A Parallel state whose only branch fails, retried twice: every execution makes exactly three attempts.
DEFINITION = json.dumps({
    "StartAt": "Try",
    "States": {
        "Try": {
            "Type": "Parallel",
            "Branches": [{"StartAt": "Boom", "States": {"Boom": {"Type": "Fail", "Error": "Boom", "Cause": "x"}}}],
            "Retry": [{"ErrorEquals": ["States.ALL"], "MaxAttempts": 2, "IntervalSeconds": 1, "BackoffRate": 1.0}],
            "End": True,
        }
    },
})  # fmt: skip


def parser() -> Any:
    """moto's ASL parser, imported when a test runs: its ANTLR tables take ~2 CPU-s to import, and every test process
    collects this module (only one runs it)."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    return AmazonStateLanguageParser


def heap_key_slots(program: Any) -> list[str | None]:
    """The private lazily-set heap key of every evaluation component in the tree."""
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent

    found: list[str | None] = []
    seen: set[int] = set()
    pending = [program]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, (list, tuple)):
            pending.extend(node)
        elif isinstance(node, dict):
            pending.extend(node.values())
        elif hasattr(node, "__dict__") and type(node).__module__.startswith("moto.stepfunctions.parser.asl"):
            if isinstance(node, EvalComponent):
                found.append(vars(node).get("_EvalComponent__heap_key"))
            pending.extend(vars(node).values())
    return found


def test_every_component_has_its_heap_key_before_the_program_is_shared() -> None:
    program, _ = parser().parse(DEFINITION)
    assert None in heap_key_slots(program)  # moto creates them lazily, at an execution's first Retry
    assert fix_heap_keys(program) > 5
    keys = heap_key_slots(program)
    assert None not in keys and len(set(keys)) == len(keys)


def test_concurrent_executions_share_one_parse_and_keep_their_own_retry_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    parses: list[str] = []
    real_parse = parser().parse
    monkeypatch.setattr(parser(), "parse", staticmethod(lambda d: parses.append(d) or real_parse(d)))
    speed._parsed_program.cache_clear()  # the cache is the process's: another test may have filled it
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        patch_program_cache(monkeypatch.setattr)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        arn = sfn.create_state_machine(name="retry", definition=DEFINITION, roleArn=ROLE)["stateMachineArn"]
        assert len(parses) == 1  # CreateStateMachine's validation is the parse the executions then share
        executions = [sfn.start_execution(stateMachineArn=arn, name=f"run-{i}")["executionArn"] for i in range(4)]
        deadline = time.monotonic() + 30
        statuses: dict[str, str] = {}
        while time.monotonic() < deadline and len(statuses) < len(executions):
            for execution in executions:
                status = sfn.describe_execution(executionArn=execution)["status"]
                if status != "RUNNING":
                    statuses[execution] = status
            time.sleep(0.1)
        assert sorted(statuses.values()) == ["FAILED"] * 4
        for execution in executions:
            events = sfn.get_execution_history(executionArn=execution, maxResults=1000)["events"]
            assert sum(e["type"] == "ParallelStateStarted" for e in events) == 3, execution
    assert len(parses) == 1, f"{len(parses)} parses for the creation and 4 executions of one definition"


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ('{"StartAt": "Nowhere", "States": {}}', "ASLParserException"),  # moto's parser refuses it
        (  # parses, but a component refuses its value (a ValueError): moto's generic message
            json.dumps(
                {
                    "StartAt": "A",
                    "States": {
                        "A": {
                            "Type": "Task",
                            "Resource": "arn:aws:lambda:us-east-1:123456789012:function:f",
                            "End": True,
                            "Retry": [{"ErrorEquals": ["States.ALL"], "MaxAttempts": 999999999}],
                        }
                    },
                }
            ),
            "Error=ValueError",
        ),
    ],
    ids=["asl-error", "other-error"],
)
def test_an_invalid_definition_is_refused_as_moto_refuses_it_every_time(
    monkeypatch: pytest.MonkeyPatch, definition: str, message: str
) -> None:
    """Nothing is kept for a definition that does not parse: a second CreateStateMachine is refused the same way."""
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):  # the parser backend validates
        sfn = boto3.client("stepfunctions", region_name=REGION)
        answers = []
        for patched in (False, True, True):
            if patched:
                patch_program_cache(monkeypatch.setattr)
            with pytest.raises(ClientError) as refused:  # moto 5.2.5 sends InvalidDefinition without its code
                sfn.create_state_machine(name="bad", definition=definition, roleArn=ROLE)
            answers.append((refused.value.response["Error"].get("Code"), refused.value.response["Error"]["Message"]))
        assert message in answers[0][1]
        assert answers[1] == answers[2] == answers[0]  # the patched validation answers as moto's own
