"""Step Functions (moto's executing interpreter): execution names as AWS takes them, a callback failure's cause, the
state machine's role for its service calls, StopExecution that stops, tokens valid from the task's start, and a token
that takes one answer."""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from .. import fault_injection
from .cards import MOTO_BUG, Context, Patch, rebind_everywhere

_INVALID_EXECUTION_NAME = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]")


def install_execution_names(ctx: Context) -> None:
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original_start = StepFunctionsParserBackend.start_execution

    def start_execution(self: Any, state_machine_arn: str, name: Any = None, *args: Any, **kwargs: Any) -> Any:
        from moto.core.exceptions import AWSError

        name = name or str(uuid.uuid4())
        if len(name) > 80 or _INVALID_EXECUTION_NAME.search(name):
            raise AWSError(f"Invalid Name: '{name}'", exception_type="InvalidName", status=400)
        if fault_injection.start_execution_failure(name):
            raise AWSError("Rate exceeded (injected)", exception_type="ThrottlingException", status=400)
        return original_start(self, state_machine_arn, name, *args, **kwargs)

    StepFunctionsParserBackend.start_execution = start_execution


def install_task_failure_cause(ctx: Context) -> None:
    from moto.core.responses import EmptyResult
    from moto.stepfunctions.responses import StepFunctionResponse

    def send_task_failure(self: Any) -> Any:
        backend = self.stepfunction_backend
        kwargs = {"error": self._get_param("error")}
        if "cause" in inspect.signature(backend.send_task_failure).parameters:  # the executing backend takes it
            kwargs["cause"] = self._get_param("cause")
        backend.send_task_failure(self._get_param("taskToken"), **kwargs)
        return EmptyResult()

    StepFunctionResponse.send_task_failure = send_task_failure


def install_stop_execution(ctx: Context) -> None:
    patch_stop_execution()


def install_early_callbacks(ctx: Context) -> None:
    patch_early_callbacks()


def install_role_clients(ctx: Context) -> None:
    from moto import settings as moto_settings
    from moto.stepfunctions.parser.asl.utils import boto_client as sfn_boto_client

    service_credentials = ctx.service_credentials

    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        role_arn = getattr(state_credentials, "role_arn", None)
        if not role_arn:
            raise PermissionError("a Step Functions task has no role to call AWS with")
        return new_client(region, service, service_credentials.get(role_arn, "states.amazonaws.com",
                                                                   "omnireel-local-states"))  # fmt: skip

    @lru_cache(maxsize=64)
    def new_client(region: str, service: str, credentials: Any) -> Any:
        import boto3
        from botocore.config import Config
        from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import TimeoutSeconds

        return boto3.client(
            service,
            region_name=region,
            endpoint_url=f"http://localhost:{moto_settings.moto_server_port()}",
            config=Config(parameter_validation=False, retries={"max_attempts": 0, "total_max_attempts": 1},
                          max_pool_connections=64, connect_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
                          read_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS),
            **credentials.boto(),
        )  # fmt: skip

    rebind_everywhere("boto_client_for", sfn_boto_client.boto_client_for, boto_client_for)


def patch_stop_execution(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 17 (see ``apply``): a stopped execution ends ABORTED at once, also while a callback task waits.
    ``set_attribute``: as in ``patch_early_callbacks`` (the in-process integration tests undo it after each test)."""
    from moto.stepfunctions.parser.backend.execution import Execution as ParserExecution

    original_stop = ParserExecution.stop

    def stop(self: Any, stop_date: Any, error: Any, cause: Any) -> Any:
        result = original_stop(self, stop_date=stop_date, error=error, cause=cause)
        env = getattr(self.exec_worker, "env", None)
        pool = getattr(getattr(env, "callback_pool_manager", None), "_pool", {}) or {}
        for endpoint in list(pool.values()):
            endpoint.interrupt_all()
        return result

    set_attribute(ParserExecution, "stop", stop)

    # The interrupted wait then ends in an error, and moto's set_error / set_timed_out overwrite the stopped state
    # (the execution would end FAILED and run its Catch): in AWS a stopped execution stays ABORTED.
    from moto.stepfunctions.parser.asl.eval.environment import Environment as AslEnvironment
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    for name in ("set_error", "set_timed_out"):
        original = getattr(AslEnvironment, name)

        def unless_stopped(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if isinstance(self._program_state, ProgramStopped):
                return None
            return _original(self, *args, **kwargs)

        set_attribute(AslEnvironment, name, unless_stopped)


def patch_early_callbacks(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 18 (see ``apply``); ``set_attribute`` lets the in-process integration tests apply it with pytest's
    ``monkeypatch.setattr`` (undone after each test)."""
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint

    original_setup = CallbackEndpoint.setup_heartbeat_endpoint

    def setup_heartbeat_endpoint(self: Any, heartbeat_seconds: int) -> Any:
        endpoint = original_setup(self, heartbeat_seconds=heartbeat_seconds)
        if self.get_outcome() is not None or getattr(self, "_omnireel_early_heartbeat", False):
            endpoint.notify()  # the answer (or a heartbeat) came while the task's Lambda was still running
        return endpoint

    def notify_heartbeat(self: Any) -> bool:
        endpoint = self._heartbeat_endpoint
        if endpoint is None:
            self._omnireel_early_heartbeat = True
            return True
        endpoint.notify()
        return True

    set_attribute(CallbackEndpoint, "setup_heartbeat_endpoint", setup_heartbeat_endpoint)
    set_attribute(CallbackEndpoint, "notify_heartbeat", notify_heartbeat)


def install_answered_once(ctx: Context) -> None:
    patch_answered_once()


def patch_answered_once(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 18b (see ``apply``): a task's token takes one answer; another SendTaskSuccess or SendTaskFailure is
    TaskTimedOut, as on AWS for a task that has its outcome. A token whose wait timed out is TaskTimedOut and one whose
    execution ended TaskDoesNotExist, as moto meant (its own raise lacks the message its error class requires: a 500).
    ``set_attribute``: as in ``patch_early_callbacks``."""
    from moto.core.exceptions import AWSError
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackConsumerTimeout, CallbackPoolManager

    original_notify = CallbackPoolManager.notify

    def notify(self: Any, callback_id: Any, outcome: Any) -> bool:
        endpoint = self.get(callback_id)
        if endpoint is not None:
            if endpoint.get_outcome() is not None or isinstance(endpoint.consumer_error, CallbackConsumerTimeout):
                raise AWSError("Task Timed Out: 'Provided task does not exist anymore'", "TaskTimedOut", 400)
            if endpoint.consumer_error is not None:
                raise AWSError("Provided task does not exist anymore", "TaskDoesNotExist", 400)
        return original_notify(self, callback_id=callback_id, outcome=outcome)

    set_attribute(CallbackPoolManager, "notify", notify)


CARDS = [
    Patch(
        "2",
        "Execution names: a UUID when none is given, AWS's name rules",
        aws="StartExecution without a name gets a UUID; a name over 80 characters or with whitespace, brackets, "
        'wildcards, control characters or " # % \\ ^ | ~ ` $ & , ; : / is InvalidName.',
        moto='An unnamed execution is literally named "None" (a second one then fails); names are not validated.',
        test="tests/e2e/test_execution_names.py::test_step_functions_execution_names_stay_taken_after_the_execution_closes",
        upstream=MOTO_BUG,
        installs=install_execution_names,
    ),
    Patch(
        "8",
        "SendTaskFailure keeps its cause",
        aws='A callback task\'s failure reaches Catch/ResultPath as {"Error", "Cause"} with the cause sent.',
        moto="StepFunctionResponse.send_task_failure drops the cause parameter: Cause is null.",
        test="tests/e2e/test_pipeline.py::test_video_endpoint_failure_reaches_the_job_through_the_error_topic",
        upstream=MOTO_BUG,
        installs=install_task_failure_cause,
    ),
    Patch(
        "12",
        "Step Functions calls services as the state machine's role",
        aws="Tasks call Lambda and other services with the state machine's role: its policies authorise each task.",
        moto='boto_client_for signs every task\'s call with the fixed key "ak"/"sk".',
        test="tests/e2e/test_iam.py::test_the_state_machine_invokes_tasks_as_its_own_role",
        upstream=MOTO_BUG,
        installs=install_role_clients,
    ),
    Patch(
        "17",
        "StopExecution stops a waiting callback task",
        aws="A stopped execution ends at once (ABORTED), a .waitForTaskToken task included.",
        moto="The program is marked stopped but a callback task keeps waiting for its token or heartbeat (minutes).",
        test="tests/e2e/test_consumers.py::test_cancel_mid_render_stops_the_job_with_one_event_and_ignores_the_late_render",
        upstream=MOTO_BUG,
        installs=install_stop_execution,
    ),
    Patch(
        "18",
        "A task's token is valid from the moment the task starts",
        aws="SendTaskHeartbeat/Success/Failure are accepted from the task's start, also while its Lambda still runs.",
        moto="The heartbeat wait is set up only after the task's Lambda returns: a heartbeat from that Lambda is "
        "InvalidToken and an early answer is missed (the task then fails States.HeartbeatTimeout).",
        test="tests/integration/pipeline/test_state_machine.py::test_callback_timeout_is_reconciled_from_s3",
        upstream=MOTO_BUG,
        installs=install_early_callbacks,
    ),
    Patch(
        "18b",
        "A task's token takes one answer",
        aws="SendTaskSuccess or SendTaskFailure with a token whose task already has its outcome is TaskTimedOut.",
        moto="The callback stays in the pool after its answer: every later answer is accepted (HTTP 200) and "
        "overwrites an outcome nobody reads. Admission's healer answers a grant's token again when the answer may "
        "have been lost and relies on the refusal to tell a lost answer from a delivered one.",
        test="tests/unit/local/test_callback_answered_once.py::test_a_second_answer_to_a_token_is_task_timed_out",
        upstream=MOTO_BUG,
        installs=install_answered_once,
    ),
]
