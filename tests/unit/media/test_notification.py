import json

import pytest
from msgspec import ValidationError

from omnireel.media.notification import InvocationStatus, parse_notification

SUCCESS = {
    "awsRegion": "us-east-1",
    "eventTime": "2026-11-29T12:00:10.123Z",
    "receivedTime": "2026-11-29T12:00:00.001Z",
    "invocationStatus": "Completed",
    "requestParameters": {
        "accept": "video/mp4",
        "contentType": "multipart/form-data; boundary=x",
        "endpointName": "video",
        "inputLocation": "s3://b/jobs/j/video-request.multipart",
    },
    "responseParameters": {"contentType": "video/mp4", "outputLocation": "s3://b/async/outputs/u.out"},
    "inferenceId": "3f0b0c3e-1111-4222-8333-444455556666",
    "eventVersion": "1.0",
    "eventSource": "aws:sagemaker",
    "eventName": "InferenceResult",
}


def test_success_notification():
    note = parse_notification(SUCCESS)
    assert note.succeeded and note.output_location == "s3://b/async/outputs/u.out"
    assert note.request_parameters.input_location.endswith(".multipart")


def test_failure_with_location_at_top_level_or_in_response_parameters():
    top = {**SUCCESS, "invocationStatus": "Failed", "failureReason": "500", "failureLocation": "s3://b/f/1"}
    top.pop("responseParameters")
    nested = {**top, "responseParameters": {"failureLocation": "s3://b/f/2"}}
    nested.pop("failureLocation")
    assert parse_notification(top).error_location == "s3://b/f/1"
    assert parse_notification(nested).error_location == "s3://b/f/2"
    assert not parse_notification(top).succeeded


def test_expired_and_unknown_keys_are_tolerated():
    note = parse_notification(json.dumps({"invocationStatus": "Expired", "inferenceId": "j", "somethingNew": {"a": 1}}))
    assert note.invocation_status is InvocationStatus.EXPIRED and not note.succeeded


def test_legacy_output_field_name():
    legacy = {**SUCCESS, "responseParameters": {"sagemakerOutputLocation": "s3://b/o.out"}}
    assert parse_notification(legacy).output_location == "s3://b/o.out"


@pytest.mark.parametrize(
    "broken", [{"inferenceId": "j"}, {"invocationStatus": "Completed"}, {**SUCCESS, "invocationStatus": "Maybe"}]
)
def test_missing_status_or_id_is_rejected(broken):
    with pytest.raises(ValidationError):
        parse_notification(broken)


# ---------------------------------------------------------------- the SNS envelope (async_result, without Powertools)
def _sns_event(*messages: str) -> dict:
    return {
        "Records": [
            {"EventSource": "aws:sns", "EventVersion": "1.0", "Sns": {"Type": "Notification", "Message": m}}
            for m in messages
        ]
    }


def test_notifications_from_sns_parses_each_record() -> None:
    from omnireel.media.notification import notifications_from_sns

    failed = {**SUCCESS, "invocationStatus": "Failed", "inferenceId": "other"}
    notes = notifications_from_sns(_sns_event(json.dumps(SUCCESS), json.dumps(failed)))
    assert [(n.inference_id, n.succeeded) for n in notes] == [(SUCCESS["inferenceId"], True), ("other", False)]
    assert notifications_from_sns({"Records": []}) == []


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"Records": {"not": "a list"}},
        {"Records": ["text"]},
        {"Records": [{"EventSource": "aws:sqs", "Sns": {"Message": "{}"}}]},
        {"Records": [{"EventSource": "aws:sns", "Sns": {"Message": {"inferenceId": "x"}}}]},
        {"Records": [{"EventSource": "aws:sns"}]},
    ],
)
def test_notifications_from_sns_refuses_what_is_not_an_sns_event(event) -> None:
    from omnireel.media.notification import notifications_from_sns

    with pytest.raises(ValueError, match="SNS"):
        notifications_from_sns(event)


@pytest.mark.parametrize("message", ["not json", json.dumps({"invocationStatus": "Completed"}), json.dumps([1])])
def test_notifications_from_sns_refuses_a_message_that_is_not_a_notification(message: str) -> None:
    from omnireel.media.notification import notifications_from_sns

    with pytest.raises(ValueError):  # msgspec's DecodeError (not JSON) or ValidationError (not a notification)
        notifications_from_sns(_sns_event(message))
