"""The SageMaker async inference notification (the SNS message body on the success/error topics).

Powertools has no model for it. Parsed defensively: unknown keys ignored, optional keys tolerated;
``Expired`` (the request's TTL passed while it was queued) counts as a failure.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import msgspec


class InvocationStatus(StrEnum):
    COMPLETED = "Completed"
    FAILED = "Failed"
    EXPIRED = "Expired"


class RequestParameters(msgspec.Struct, kw_only=True):
    accept: str | None = None
    content_type: str | None = msgspec.field(default=None, name="contentType")
    endpoint_name: str | None = msgspec.field(default=None, name="endpointName")
    input_location: str | None = msgspec.field(default=None, name="inputLocation")


class ResponseParameters(msgspec.Struct, kw_only=True):
    content_type: str | None = msgspec.field(default=None, name="contentType")
    output_location: str | None = msgspec.field(default=None, name="outputLocation")
    failure_location: str | None = msgspec.field(default=None, name="failureLocation")


class AsyncInferenceNotification(msgspec.Struct, kw_only=True):
    """Fields are read from the notification's camelCase keys (``inferenceId``); unknown keys are ignored."""

    invocation_status: InvocationStatus = msgspec.field(name="invocationStatus")
    inference_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] = msgspec.field(name="inferenceId")
    event_time: str | None = msgspec.field(default=None, name="eventTime")
    received_time: str | None = msgspec.field(default=None, name="receivedTime")
    aws_region: str | None = msgspec.field(default=None, name="awsRegion")
    event_name: str | None = msgspec.field(default=None, name="eventName")
    request_parameters: RequestParameters = msgspec.field(default_factory=RequestParameters, name="requestParameters")
    response_parameters: ResponseParameters = msgspec.field(
        default_factory=ResponseParameters, name="responseParameters"
    )
    failure_reason: str | None = msgspec.field(default=None, name="failureReason")
    failure_location: str | None = msgspec.field(default=None, name="failureLocation")

    @property
    def succeeded(self) -> bool:
        return self.invocation_status is InvocationStatus.COMPLETED

    @property
    def output_location(self) -> str | None:
        return self.response_parameters.output_location

    @property
    def error_location(self) -> str | None:
        return self.failure_location or self.response_parameters.failure_location


def parse_notification(data: Any) -> AsyncInferenceNotification:
    """A notification from its decoded JSON (a dict) or its JSON text; raises ``ValueError`` (msgspec's
    ``ValidationError`` / ``DecodeError``) when it is not one."""
    if isinstance(data, str | bytes):
        data = msgspec.json.decode(data)
    if isinstance(data, dict):
        # Some captured notifications name it sagemakerOutputLocation.
        response = data.get("responseParameters")
        if isinstance(response, dict) and "outputLocation" not in response and response.get("sagemakerOutputLocation"):
            data = {**data, "responseParameters": {**response, "outputLocation": response["sagemakerOutputLocation"]}}
    return msgspec.convert(data, AsyncInferenceNotification)


def notifications_from_sns(event: dict[str, Any]) -> list[AsyncInferenceNotification]:
    """The notifications an SNS-to-Lambda event carries: each record's ``Sns.Message`` is one notification's JSON.

    Plain ``json`` + this model, not the Powertools parser (whose envelope stack costs ~50-80 ms of cold start). An
    event that is not SNS, or a message that is not a notification, raises: the invocation fails, so Lambda's retries
    and then the on-failure destination keep it.
    """
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list):
        raise ValueError("not an SNS event: no Records list")
    notifications = []
    for record in records:
        is_sns = isinstance(record, dict) and record.get("EventSource") == "aws:sns"
        message = record.get("Sns", {}).get("Message") if is_sns and isinstance(record.get("Sns"), dict) else None
        if not isinstance(message, str):
            raise ValueError("not an SNS record with a Message")
        notifications.append(parse_notification(message))
    return notifications
