"""The SageMaker async inference notification (the SNS message body on the success/error topics).

Powertools has no model for it. Parsed defensively: unknown keys ignored, optional keys tolerated;
``Expired`` (the request's TTL passed while it was queued) counts as a failure.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class InvocationStatus(StrEnum):
    COMPLETED = "Completed"
    FAILED = "Failed"
    EXPIRED = "Expired"


class RequestParameters(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    accept: str | None = None
    content_type: str | None = Field(default=None, alias="contentType")
    endpoint_name: str | None = Field(default=None, alias="endpointName")
    input_location: str | None = Field(default=None, alias="inputLocation")


class ResponseParameters(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    content_type: str | None = Field(default=None, alias="contentType")
    output_location: str | None = Field(default=None, alias="outputLocation")
    failure_location: str | None = Field(default=None, alias="failureLocation")


class AsyncInferenceNotification(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    invocation_status: InvocationStatus = Field(alias="invocationStatus")
    inference_id: str = Field(alias="inferenceId", min_length=1, max_length=64)
    event_time: str | None = Field(default=None, alias="eventTime")
    received_time: str | None = Field(default=None, alias="receivedTime")
    aws_region: str | None = Field(default=None, alias="awsRegion")
    event_name: str | None = Field(default=None, alias="eventName")
    request_parameters: RequestParameters = Field(default_factory=RequestParameters, alias="requestParameters")
    response_parameters: ResponseParameters = Field(default_factory=ResponseParameters, alias="responseParameters")
    failure_reason: str | None = Field(default=None, alias="failureReason")
    failure_location: str | None = Field(default=None, alias="failureLocation")

    @model_validator(mode="before")
    @classmethod
    def _legacy_output_field(cls, data: object) -> object:
        # Some captured notifications name it sagemakerOutputLocation.
        if isinstance(data, dict):
            response = data.get("responseParameters")
            if (
                isinstance(response, dict)
                and "outputLocation" not in response
                and response.get("sagemakerOutputLocation")
            ):
                data = {
                    **data,
                    "responseParameters": {**response, "outputLocation": response["sagemakerOutputLocation"]},
                }
        return data

    @property
    def succeeded(self) -> bool:
        return self.invocation_status is InvocationStatus.COMPLETED

    @property
    def output_location(self) -> str | None:
        return self.response_parameters.output_location

    @property
    def error_location(self) -> str | None:
        return self.failure_location or self.response_parameters.failure_location


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
        notifications.append(AsyncInferenceNotification.model_validate_json(message))
    return notifications
