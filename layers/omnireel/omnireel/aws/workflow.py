"""Step Functions: start one execution per job, and answer callback tasks."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from omnireel.aws.clients import client
from omnireel.observability import logger

# Answers that mean the callback was already resolved (duplicate delivery, or the task timed out).
_ALREADY_RESOLVED = {"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"}


class Workflow:
    def __init__(self, state_machine_arn: str):
        self.state_machine_arn = state_machine_arn
        self._sfn = client("stepfunctions")

    def start(self, job_id: str) -> str:
        """Start the execution named after the job; an existing one with that name is fine."""
        name = job_id
        try:
            response = self._sfn.start_execution(
                stateMachineArn=self.state_machine_arn, name=name, input=json.dumps({"job_id": job_id})
            )
            return response["executionArn"]
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ExecutionAlreadyExists":
                raise
            logger.info("execution already exists", extra={"job_id": job_id})
            return self.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"


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
