"""Patch 18b: a Step Functions task token takes one answer. A second SendTaskSuccess or SendTaskFailure is
TaskTimedOut, as AWS answers for a task that has its outcome (moto accepted every later answer). Admission's healer
answers a grant's token again when its answer may have been lost, and tells a delivered answer by this refusal."""

from __future__ import annotations

import pytest
from moto.core.exceptions import AWSError
from moto.stepfunctions.parser.asl.eval.callback.callback import (
    CallbackConsumerLeft,
    CallbackConsumerTimeout,
    CallbackOutcomeFailure,
    CallbackOutcomeSuccess,
    CallbackPoolManager,
)

from omnireel_local.patches.stepfunctions import patch_answered_once


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> CallbackPoolManager:
    patch_answered_once(monkeypatch.setattr)
    return CallbackPoolManager(activity_store={})


def test_a_second_answer_to_a_token_is_task_timed_out(pool: CallbackPoolManager) -> None:
    endpoint = pool.generate()
    token = endpoint.callback_id
    assert pool.notify(token, CallbackOutcomeSuccess(callback_id=token, output='{"admitted": true}'))
    for second in (
        CallbackOutcomeSuccess(callback_id=token, output='{"admitted": true}'),
        CallbackOutcomeFailure(callback_id=token, error="E", cause="c"),
    ):
        with pytest.raises(AWSError) as refused:
            pool.notify(token, second)
        assert (refused.value.error_type, refused.value.code) == ("TaskTimedOut", 400)
    assert endpoint.get_outcome().output == '{"admitted": true}'  # the first answer stands


def test_a_first_answer_and_an_unknown_token_are_as_before(pool: CallbackPoolManager) -> None:
    token = pool.generate().callback_id
    assert pool.notify(token, CallbackOutcomeFailure(callback_id=token, error="E", cause="c"))
    assert pool.notify("not-a-token", CallbackOutcomeSuccess(callback_id="not-a-token", output="{}")) is False


@pytest.mark.parametrize(
    ("gone", "error"), [(CallbackConsumerTimeout(), "TaskTimedOut"), (CallbackConsumerLeft(), "TaskDoesNotExist")]
)
def test_a_token_whose_wait_is_over_is_refused_with_aws_s_error(pool: CallbackPoolManager, gone, error) -> None:
    """moto meant TaskTimedOut / TaskDoesNotExist here, but raised its error classes without the message they require:
    the caller got a 500 instead of the error it handles."""
    endpoint = pool.generate()
    endpoint.report(gone)
    with pytest.raises(AWSError) as refused:
        pool.notify(endpoint.callback_id, CallbackOutcomeSuccess(callback_id=endpoint.callback_id, output="{}"))
    assert refused.value.error_type == error
