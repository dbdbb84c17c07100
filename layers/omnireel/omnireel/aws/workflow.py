"""Step Functions: start one execution per job, and answer callback tasks."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from omnireel.aws.clients import client
from omnireel.core.errors import ExecutionNameTaken
from omnireel.runtime.observability import logger

# Answers that mean the callback was already resolved (duplicate delivery, or the task timed out).
_ALREADY_RESOLVED = {"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"}


class Workflow:
    def __init__(self, state_machine_arn: str):
        self.state_machine_arn = state_machine_arn
        self._sfn = client("stepfunctions")

    def execution_arn(self, name: str) -> str:
        return self.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"

    def start(self, job_id: str, name: str) -> str:
        """Start the job's execution ``name``; a replay of the same start is fine, a name taken by anything else is not.

        StartExecution answers a repeat of a *running* execution's name and input with that execution. It answers
        ``ExecutionAlreadyExists`` for a different input, and for any name whose execution has closed (AWS keeps names
        90 days). DescribeExecution tells the two apart: the same input is this job's own execution (a replay after it
        closed, whose end ``workflow_ended`` handles); anything else raises ``ExecutionNameTaken`` instead of passing
        for success - that silent success left a job ``accepted`` forever (issue 9, defect 2).
        """
        execution_input = {"job_id": job_id}
        try:
            response = self._sfn.start_execution(
                stateMachineArn=self.state_machine_arn, name=name, input=json.dumps(execution_input)
            )
            return response["executionArn"]
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ExecutionAlreadyExists":
                raise
        arn = self.execution_arn(name)
        existing = self._sfn.describe_execution(executionArn=arn)
        if _parsed(existing.get("input")) == execution_input:
            logger.info("execution already exists", extra={"job_id": job_id, "status": existing.get("status")})
            return arn
        raise ExecutionNameTaken(
            f"execution name {name} is taken by an execution with another input ({existing.get('status')})",
            job_id=job_id,
        )

    def stop(self, name: str, cause: str) -> bool:
        """Stop the execution ``name`` (error ``JobCancelled``); False if it does not exist or has already ended.

        Stopping ends the execution ``ABORTED``: a Lambda step already running finishes its invocation, and a
        SageMaker async request already queued still runs (it has no cancel).
        """
        try:
            self._sfn.stop_execution(executionArn=self.execution_arn(name), error="JobCancelled", cause=cause[:32768])
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("ExecutionDoesNotExist", "ExecutionNotRunning"):
                return False
            raise

    def running(self, name: str) -> bool:
        """Is the execution ``name`` still running (admission's healing: a slot or a wait of a dead execution)?"""
        try:
            return self._sfn.describe_execution(executionArn=self.execution_arn(name)).get("status") == "RUNNING"
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ExecutionDoesNotExist":
                return False
            raise

    def started(self, job_id: str, name: str) -> bool:
        """Did the job's execution ``name`` start (it exists, with this job's input)?"""
        try:
            existing = self._sfn.describe_execution(executionArn=self.execution_arn(name))
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ExecutionDoesNotExist":
                return False
            raise
        return _parsed(existing.get("input")) == {"job_id": job_id}


def _parsed(text: str | None) -> Any:
    try:
        return json.loads(text or "null")
    except ValueError:
        return None


class TaskCallbacks:
    def __init__(self):
        self._sfn = client("stepfunctions")

    def _send(self, operation: str, **kwargs: Any) -> bool:
        try:
            getattr(self._sfn, operation)(**kwargs)
            return True
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            if code in _ALREADY_RESOLVED:
                logger.info("callback already resolved", extra={"operation": operation, "code": code})
                return False
            raise

    def succeed(self, token: str, output: dict[str, Any]) -> bool:
        return self._send("send_task_success", taskToken=token, output=json.dumps(output))

    def fail(self, token: str, error: str, code: str, message: str) -> bool:
        cause = json.dumps({"code": code, "message": message[:30000]})
        return self._send("send_task_failure", taskToken=token, error=error[:256], cause=cause)

    def heartbeat(self, token: str) -> bool:
        return self._send("send_task_heartbeat", taskToken=token)
