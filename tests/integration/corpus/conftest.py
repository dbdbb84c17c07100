"""One in-process pipeline deployment per corpus module (deploying per case would cost seconds each)."""

import pytest
from moto import mock_aws
from moto.awslambda.models import LambdaFunction

from omnireel_local.patches.stepfunctions import patch_stop_execution
from tests.integration.pipeline.harness import Pipeline, serialize_metrics, speed_patches


@pytest.fixture(scope="module")
def corpus_pipeline():
    mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
    mock.start()
    with pytest.MonkeyPatch.context() as patch:
        patch_stop_execution(patch.setattr)  # the teardown's stop ends executions waiting for a video at once
        speed_patches(patch.setattr)  # the local stack's speed patches that apply in process (harness.py)
        serialize_metrics(patch.setattr)  # handlers on moto's threads share Powertools' metric set
        pipeline = Pipeline()
        patch.setattr(LambdaFunction, "_invoke_lambda", pipeline.lambda_patch())
        pipeline.deploy()
        try:
            yield pipeline
        finally:
            pipeline.stop_executions()
            mock.stop()
