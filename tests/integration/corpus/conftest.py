"""One in-process pipeline deployment per corpus module (deploying per case would cost seconds each)."""

import pytest
from moto import mock_aws
from moto.awslambda.models import LambdaFunction

from tests.integration.pipeline.harness import Pipeline


@pytest.fixture(scope="module")
def corpus_pipeline():
    mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
    mock.start()
    with pytest.MonkeyPatch.context() as patch:
        pipeline = Pipeline()
        patch.setattr(LambdaFunction, "_invoke_lambda", pipeline.lambda_patch())
        pipeline.deploy()
        try:
            yield pipeline
        finally:
            pipeline.stop_executions()
            mock.stop()
