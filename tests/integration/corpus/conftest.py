"""One in-process pipeline deployment per corpus module (deploying per case would cost seconds each)."""

import pytest
from moto import mock_aws
from moto.awslambda.models import LambdaFunction

from omnireel_local.patches.speed import (
    patch_condition_lex_cache,
    patch_json_path_cache,
    patch_program_cache,
    patch_sns_signing_key,
    patch_update_checks_once,
    patch_update_expression_cache,
    patch_update_traversal,
    patch_update_tree_copy,
)
from omnireel_local.patches.stepfunctions import patch_stop_execution
from tests.integration.pipeline.harness import Pipeline, serialize_metrics


@pytest.fixture(scope="module")
def corpus_pipeline():
    mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
    mock.start()
    with pytest.MonkeyPatch.context() as patch:
        patch_stop_execution(patch.setattr)  # the teardown's stop ends executions waiting for a video at once
        patch_sns_signing_key(patch.setattr)  # patch 20: one SNS signing key, not one per subscription
        patch_program_cache(patch.setattr)  # patch 22: one parse per definition (validation included)
        patch_update_traversal(patch.setattr)  # patch 33: UpdateItem's validation, as on the local stack
        patch_update_expression_cache(patch.setattr)  # patch 24: one parse per UpdateExpression, as on the stack
        patch_update_checks_once(patch.setattr)  # patch 36: its shape checks once per expression and names
        patch_update_tree_copy(patch.setattr)  # patch 37: its tree copied node by node
        patch_json_path_cache(patch.setattr)  # patch 34: one parse per JSONPath string, as on the local stack
        patch_condition_lex_cache(patch.setattr)  # patch 35: one lexing per condition expression, as on the stack
        serialize_metrics(patch.setattr)  # handlers on moto's threads share Powertools' metric set
        pipeline = Pipeline()
        patch.setattr(LambdaFunction, "_invoke_lambda", pipeline.lambda_patch())
        pipeline.deploy()
        try:
            yield pipeline
        finally:
            pipeline.stop_executions()
            mock.stop()
