import pytest
from moto import mock_aws
from moto.awslambda.models import LambdaFunction
from moto.core.responses import EmptyResult
from moto.stepfunctions.responses import StepFunctionResponse

from omnireel_local.patches.dynamodb import patch_dynamodb_atomic_requests
from omnireel_local.patches.stepfunctions import patch_answered_once, patch_early_callbacks, patch_stop_execution
from tests.integration.pipeline.harness import Pipeline, serialize_metrics, speed_patches


@pytest.fixture
def make_pipeline(monkeypatch):
    """Deploy the pipeline on moto (executing Step Functions) with optional parameter overrides."""
    mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
    mock.start()
    # As on AWS (and the local stack): a stopped execution ends ABORTED at once, also while its callback task waits
    # for the video; without it every execution left waiting kept the teardown below busy until its 10 s bound.
    patch_stop_execution(monkeypatch.setattr)
    created = []

    # moto 5.2.5 drops SendTaskFailure's `cause` (AWS passes it to Catch as $.error.Cause).
    def send_task_failure(self):
        self.stepfunction_backend.send_task_failure(
            self._get_param("taskToken"), error=self._get_param("error"), cause=self._get_param("cause")
        )
        return EmptyResult()

    monkeypatch.setattr(StepFunctionResponse, "send_task_failure", send_task_failure)
    # moto 5.2.5 misses a callback answered (or heartbeated) while the task's Lambda still runs: the local stack's
    # patch 18 (omnireel_local.patches.stepfunctions), applied here for this test only.
    patch_early_callbacks(monkeypatch.setattr)
    patch_answered_once(monkeypatch.setattr)  # patch 18b: a token takes one answer (another is TaskTimedOut)
    speed_patches(monkeypatch.setattr)  # the local stack's speed patches that apply in process (harness.py)
    # patch 26: a read answers from a consistent item (a GetItem serialising the job while a handler on another moto
    # thread updated it failed one CI run with "dictionary changed size during iteration")
    patch_dynamodb_atomic_requests(monkeypatch.setattr)
    serialize_metrics(monkeypatch.setattr)  # handlers on moto's threads share Powertools' metric set

    def make(**overrides: str) -> Pipeline:
        pipeline = Pipeline(suffix=f"p{len(created)}", **overrides)
        monkeypatch.setattr(LambdaFunction, "_invoke_lambda", pipeline.lambda_patch())
        created.append(pipeline.deploy())
        return created[-1]

    yield make
    for pipeline in created:  # stop what still runs before the mock goes away (bounded)
        pipeline.stop_executions()
    mock.stop()


@pytest.fixture
def pipeline(make_pipeline) -> Pipeline:
    return make_pipeline()
